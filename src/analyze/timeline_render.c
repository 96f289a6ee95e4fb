// SPDX-License-Identifier: MIT
/*
 * timeline_render.c - the timeline as SVG, and as the timeline section of
 * report --html's page (that SVG with hover values); see timeline.h.
 *
 * The plot is PLOT_W pixel columns wide; each series is drawn through every
 * column's min and max (timeline_columns), so no peak falls between pixels.
 * The stacked RSS areas (anon, file, shmem) use each column's last values;
 * the RSS line over them is the exact min/max envelope of their sum.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "format/json.h"
#include "analyze/timeline.h"

#define SVG_W 1200
#define SVG_H 620
#define PLOT_X 90   /* left edge of the plot area */
#define PLOT_W 1080 /* pixel columns */
#define PLOT_Y 60   /* top */
#define PLOT_H 460  /* height */
#define MAX_PROC_LINES 10

struct series_style {
	const char *name; /* legend and hover */
	const char *color;
};

static const struct series_style styles[TL_NSERIES] = {
	[TL_HEAP] = { "heap", "#d62728" },	 [TL_RSS] = { "RSS", "#08519c" },
	[TL_ANON] = { "RSS anon", "#9ecae1" },	 [TL_FILE] = { "RSS file", "#c7e9c0" },
	[TL_SHMEM] = { "RSS shmem", "#fdd0a2" }, [TL_PHYSICAL] = { "physical", "#2ca02c" },
	[TL_MEMORY] = { "memory", "#ff9896" },
};

static const char *const proc_colors[MAX_PROC_LINES] = {
	"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b",
	"#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#d62728",
};

struct plot {
	const struct timeline *tl;
	const struct timeline_meta *m;
	FILE *out;
	uint64_t span_ns;
	double ymax; /* bytes at the top of the plot */
	struct tl_column cols[PLOT_W];
};

static void fmt_bytes(double v, char *buf, size_t len)
{
	const char *unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	int i = 0;

	while (v >= 1024 && i < 4) {
		v /= 1024;
		i++;
	}
	snprintf(buf, len, i ? "%.1f %s" : "%.0f %s", v, unit[i]);
}

static double y_of(const struct plot *pl, double v)
{
	return PLOT_Y + PLOT_H - v / pl->ymax * PLOT_H;
}

static double x_of_ts(const struct plot *pl, uint64_t ts)
{
	uint64_t start = timeline_start_ns(pl->tl);
	double rel = ts > start ? (double)(ts - start) : 0;

	return PLOT_X + rel / (double)pl->span_ns * PLOT_W;
}

/* 1, 2 or 5 times a power of ten, at least @raw. */
static double nice_step(double raw)
{
	double p = pow(10, floor(log10(raw))), f = raw / p;

	return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
}

static void xml_text(FILE *out, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '&': fputs("&amp;", out); break;
		case '<': fputs("&lt;", out); break;
		case '>': fputs("&gt;", out); break;
		case '"': fputs("&quot;", out); break;
		default:
			if ((unsigned char)*s >= 0x20 || *s == '\t')
				fputc(*s, out);
		}
	}
}

static void draw_axes(struct plot *pl)
{
	const struct analysis *a = pl->m->a;
	double top = a->peak_live_bytes, unit = 1, step, span_s = pl->span_ns / 1e9;
	const char *units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	int k = 0;

	if (a->has_rss && a->peak_rss_bytes > top)
		top = a->peak_rss_bytes;
	if (pl->m->physical && a->peak_physical_bytes > top)
		top = a->peak_physical_bytes;
	if (a->peak_memory_bytes > top)
		top = a->peak_memory_bytes;
	if (top < 1024)
		top = 1024;
	while (top / unit >= 1024 && k < 4) {
		unit *= 1024;
		k++;
	}
	step = nice_step(top * 1.08 / unit / 5);
	pl->ymax = ceil(top * 1.08 / unit / step) * step * unit;
	fprintf(pl->out, "<g class=\"axes\" stroke=\"#ddd\">\n");
	for (int i = 0; i * step * unit <= pl->ymax * 1.0001; i++) {
		double v = i * step * unit;

		fprintf(pl->out,
			"<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\"/>"
			"<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" stroke=\"none\" fill=\"#444\">%g %s</text>\n",
			PLOT_X, PLOT_X + PLOT_W, y_of(pl, v), y_of(pl, v), PLOT_X - 6,
			y_of(pl, v) + 4, v / unit, units[k]);
	}
	step = nice_step(span_s / 8);
	for (int i = 0; i * step <= span_s * 1.0001; i++) {
		double t = i * step;
		double x = PLOT_X + t / span_s * PLOT_W;

		fprintf(pl->out,
			"<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\"/>"
			"<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" stroke=\"none\" fill=\"#444\">%g s</text>\n",
			x, x, PLOT_Y, PLOT_Y + PLOT_H, x, PLOT_Y + PLOT_H + 16, t);
	}
	fprintf(pl->out,
		"<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#888\"/>\n"
		"<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" stroke=\"none\" fill=\"#444\">time since start (s)</text>\n</g>\n",
		PLOT_X, PLOT_Y, PLOT_W, PLOT_H, PLOT_X + PLOT_W / 2, PLOT_Y + PLOT_H + 34);
}

/* One series as a line through every column's max, min and last value. */
static void draw_series(struct plot *pl, int proc, enum tl_series_id id, const char *name,
			const char *color, const char *dash, double width)
{
	bool pen = false;

	if (timeline_columns(pl->tl, proc, id, PLOT_W, pl->cols))
		return;
	fprintf(pl->out, "<path class=\"series\" data-series=\"");
	xml_text(pl->out, name);
	fprintf(pl->out, "\" fill=\"none\" stroke=\"%s\" stroke-width=\"%.1f\"%s%s%s d=\"", color,
		width, dash ? " stroke-dasharray=\"" : "", dash ? dash : "", dash ? "\"" : "");
	for (int c = 0; c < PLOT_W; c++) {
		const struct tl_column *col = &pl->cols[c];
		double x = PLOT_X + c + 0.5;

		if (!col->valid) {
			pen = false;
			continue;
		}
		fprintf(pl->out, "%c%.1f,%.1f", pen ? 'L' : 'M', x, y_of(pl, col->hi));
		if (col->lo != col->hi || col->last != col->hi)
			fprintf(pl->out, "L%.1f,%.1fL%.1f,%.1f", x, y_of(pl, col->lo), x,
				y_of(pl, col->last));
		pen = true;
	}
	fprintf(pl->out, "\"/>\n");
}

/* RSS anon, file and shmem stacked (last value of each column). */
static void draw_stack(struct plot *pl)
{
	static const enum tl_series_id ids[3] = { TL_ANON, TL_FILE, TL_SHMEM };
	double *below = calloc(PLOT_W, sizeof(*below)), *above = calloc(PLOT_W, sizeof(*above));

	for (int k = 0; below && above && k < 3; k++) {
		timeline_columns(pl->tl, -1, ids[k], PLOT_W, pl->cols);
		for (int c = 0; c < PLOT_W; c++)
			above[c] = below[c] + (pl->cols[c].valid ? (double)pl->cols[c].last : 0);
		fprintf(pl->out,
			"<path class=\"stack\" data-series=\"%s\" fill=\"%s\" stroke=\"none\" d=\"",
			styles[ids[k]].name, styles[ids[k]].color);
		for (int c = 0; c < PLOT_W; c++)
			fprintf(pl->out, "%c%.1f,%.1f", c ? 'L' : 'M', PLOT_X + c + 0.5,
				y_of(pl, above[c]));
		for (int c = PLOT_W; c-- > 0;)
			fprintf(pl->out, "L%.1f,%.1f", PLOT_X + c + 0.5, y_of(pl, below[c]));
		fprintf(pl->out, "Z\"/>\n");
		memcpy(below, above, PLOT_W * sizeof(*below));
	}
	free(below);
	free(above);
}

static void draw_marks(struct plot *pl)
{
	static const char *const kind[] = { "fork", "exec", "exit" };
	static const char *const color[] = { "#999999", "#9467bd", "#333333" };
	const struct tl_mark *m;
	uint64_t total;
	unsigned n = timeline_marks(pl->tl, &m, &total);

	fprintf(pl->out, "<g class=\"marks\">\n");
	for (unsigned i = 0; i < n; i++) {
		double x = x_of_ts(pl, m[i].ts);

		fprintf(pl->out, "<g class=\"mark\" data-kind=\"%s\"><title>%s: pid %" PRIu32,
			kind[m[i].kind], kind[m[i].kind], m[i].pid);
		if (m[i].kind == TL_FORK)
			fprintf(pl->out, " -> child %" PRIu32, m[i].other);
		else if (m[i].kind == TL_EXIT)
			fprintf(pl->out, " %s %" PRId64, m[i].other ? "killed by signal" : "code",
				m[i].other ? (int64_t)m[i].other : m[i].code);
		else {
			fputc(' ', pl->out);
			xml_text(pl->out, m[i].path);
		}
		fprintf(pl->out,
			" at %.6f s</title><line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" "
			"stroke=\"%s\" stroke-opacity=\"0.35\"/><path d=\"M%.1f,%dl-4,-7h8z\" fill=\"%s\"/></g>\n",
			(m[i].ts - timeline_start_ns(pl->tl)) / 1e9, x, x, PLOT_Y, PLOT_Y + PLOT_H,
			color[m[i].kind], x, PLOT_Y, color[m[i].kind]);
	}
	if (total > n)
		fprintf(pl->out,
			"<text x=\"%d\" y=\"%d\" text-anchor=\"end\" fill=\"#444\">%" PRIu64
			" more fork/exec/exit marks not drawn</text>\n",
			PLOT_X + PLOT_W, PLOT_Y - 12, total - n);
	fprintf(pl->out, "</g>\n");
}

/* The named marks of the control socket (ctl mark NAME): a line and the name at the bottom. */
static void draw_named_marks(struct plot *pl)
{
	const struct analysis *a = pl->m->a;
	uint64_t start = timeline_start_ns(pl->tl);

	fprintf(pl->out, "<g class=\"named-marks\">\n");
	for (unsigned i = 0; i < a->nmarks; i++) {
		double x = x_of_ts(pl, a->marks[i].ts);
		double s = a->marks[i].ts > start ? (a->marks[i].ts - start) / 1e9 : 0;

		fprintf(pl->out, "<g class=\"mark\" data-kind=\"mark\" data-name=\"");
		xml_text(pl->out, a->marks[i].name);
		fprintf(pl->out, "\"><title>mark ");
		xml_text(pl->out, a->marks[i].name);
		fprintf(pl->out,
			" (pid %u) at %.6f s</title><line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" "
			"stroke=\"#2ca02c\" stroke-dasharray=\"6 3\"/><text x=\"%.1f\" y=\"%d\" "
			"font-size=\"11\" fill=\"#1a6e1a\" transform=\"rotate(-90 %.1f %d)\">",
			a->marks[i].pid, s, x, x, PLOT_Y, PLOT_Y + PLOT_H, x + 12,
			PLOT_Y + PLOT_H - 4, x + 12, PLOT_Y + PLOT_H - 4);
		xml_text(pl->out, a->marks[i].name);
		fprintf(pl->out, "</text></g>\n");
	}
	fprintf(pl->out, "</g>\n");
}

/* The peak of a series: a dot and a label box with its value and time. */
static void draw_peak(struct plot *pl, const char *series, const char *label, const char *color,
		      uint64_t bytes, uint64_t ts, int *slot)
{
	char b[32], text[128];
	double x = x_of_ts(pl, ts), y = y_of(pl, bytes), w, lx, ly;
	uint64_t start = timeline_start_ns(pl->tl);

	fmt_bytes(bytes, b, sizeof(b));
	snprintf(text, sizeof(text), "peak %s %s at %.3f s", label, b,
		 ts > start ? (ts - start) / 1e9 : 0);
	w = strlen(text) * 7.0 + 12;
	lx = x + 8 + w > PLOT_X + PLOT_W ? x - 8 - w : x + 8;
	ly = PLOT_Y + 6 + 24 * (*slot)++;
	fprintf(pl->out,
		"<g class=\"peak-label\" data-series=\"%s\" data-bytes=\"%" PRIu64
		"\" data-ts-ns=\"%" PRIu64 "\">"
		"<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4.5\" fill=\"%s\" stroke=\"#000\"/>"
		"<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\" stroke-width=\"0.6\"/>"
		"<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"19\" rx=\"3\" fill=\"#ffe14d\" stroke=\"#000\"/>"
		"<text x=\"%.1f\" y=\"%.1f\" fill=\"#000\">%s</text></g>\n",
		series, bytes, ts > start ? ts - start : 0, x, y, color, x, y, lx < x ? lx + w : lx,
		ly + 10, lx, ly, w, lx + 6, ly + 14, text);
}

/* Indexes of the processes to draw, largest peak RSS (then heap) first. */
static int pick_procs(struct plot *pl, int *out)
{
	const struct analysis *a = pl->m->a;
	int n = 0;

	for (unsigned i = 0; i < a->nprocs && i < TL_MAX_PROCS; i++) {
		const struct proc_summary *p = &a->procs[i];
		int j;

		if (timeline_columns(pl->tl, (int)i, TL_RSS, 1, pl->cols))
			continue;
		j = n < MAX_PROC_LINES ? n++ : MAX_PROC_LINES;
		/* insertion into the sorted top list */
		while (j > 0 && (a->procs[out[j - 1]].peak_rss_bytes < p->peak_rss_bytes ||
				 (a->procs[out[j - 1]].peak_rss_bytes == p->peak_rss_bytes &&
				  a->procs[out[j - 1]].peak_heap_bytes < p->peak_heap_bytes))) {
			if (j < MAX_PROC_LINES)
				out[j] = out[j - 1];
			j--;
		}
		if (j < MAX_PROC_LINES)
			out[j] = (int)i;
	}
	return n;
}

static void legend_item(FILE *out, int *x, int *y, const char *color, const char *dash,
			const char *name)
{
	if (*x + 40 + (int)strlen(name) * 7 > SVG_W) { /* wrap */
		*x = PLOT_X;
		*y += 18;
	}
	fprintf(out,
		"<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"%d\"%s%s%s/>"
		"<text x=\"%d\" y=\"%d\" fill=\"#222\">",
		*x, *x + 22, *y - 4, *y - 4, color, dash ? 2 : 6,
		dash ? " stroke-dasharray=\"" : "", dash ? dash : "", dash ? "\"" : "", *x + 28,
		*y);
	xml_text(out, name);
	fprintf(out, "</text>\n");
	*x += 40 + (int)strlen(name) * 7;
}

static void draw_legend(struct plot *pl, const int *procs, int nprocs)
{
	const struct analysis *a = pl->m->a;
	int x = PLOT_X, y = PLOT_Y + PLOT_H + 58;
	char name[96];

	fprintf(pl->out, "<g class=\"legend\">\n");
	if (!pl->m->per_process) {
		for (int k = TL_ANON; a->has_rss && k <= TL_SHMEM; k++)
			legend_item(pl->out, &x, &y, styles[k].color, NULL, styles[k].name);
	}
	if (a->has_rss)
		legend_item(pl->out, &x, &y, styles[TL_RSS].color,
			    pl->m->per_process ? "1 3" : "5 0", "RSS (tree)");
	legend_item(pl->out, &x, &y, styles[TL_HEAP].color, "5 0", "heap (tree)");
	if (a->peak_mapped_bytes)
		legend_item(pl->out, &x, &y, styles[TL_MEMORY].color, "5 0",
			    "memory: heap + mapped (tree)");
	if (pl->m->physical)
		legend_item(pl->out, &x, &y, styles[TL_PHYSICAL].color, "5 0", "physical (tree)");
	if (nprocs) {
		x = PLOT_X;
		y += 18;
		fprintf(pl->out,
			"<text x=\"%d\" y=\"%d\" fill=\"#222\">per process: RSS solid, heap dashed</text>\n",
			x, y);
		x += 260;
	}
	for (int i = 0; i < nprocs; i++) {
		snprintf(name, sizeof(name), "%u %s", a->procs[procs[i]].pid,
			 a->procs[procs[i]].command);
		legend_item(pl->out, &x, &y, proc_colors[i], NULL, name);
	}
	fprintf(pl->out, "</g>\n");
}

static void write_svg_body(struct plot *pl, bool standalone)
{
	const struct analysis *a = pl->m->a;
	int procs[MAX_PROC_LINES], nprocs = 0, slot = 0;
	char b[32], name[96];

	fprintf(pl->out,
		"<svg %sid=\"timeline\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
		"font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n",
		standalone ? "xmlns=\"http://www.w3.org/2000/svg\" " : "", SVG_W, SVG_H, SVG_W,
		SVG_H);
	fprintf(pl->out,
		"<text x=\"%d\" y=\"22\" font-size=\"15\" font-weight=\"bold\">memtrack: ", PLOT_X);
	xml_text(pl->out, pl->m->command);
	fmt_bytes(a->peak_live_bytes, b, sizeof(b));
	fprintf(pl->out,
		"</text>\n<text x=\"%d\" y=\"40\" fill=\"#444\">%u processes, %" PRIu64
		" allocations, %speak heap %s",
		PLOT_X, a->nprocs, a->alloc_count,
		a->sample_period ? "estimated (sampled, --sample-bytes) " : "", b);
	if (a->has_rss) {
		fmt_bytes(a->peak_rss_bytes, b, sizeof(b));
		fprintf(pl->out, ", peak RSS %s", b);
	}
	if (pl->m->physical) {
		fmt_bytes(a->peak_physical_bytes, b, sizeof(b));
		fprintf(pl->out, ", peak physical %s", b);
	}
	fprintf(pl->out, "</text>\n");
	draw_axes(pl);
	if (pl->m->per_process)
		nprocs = pick_procs(pl, procs);
	else if (a->has_rss)
		draw_stack(pl);
	draw_marks(pl);
	draw_named_marks(pl);
	if (a->has_rss)
		draw_series(pl, -1, TL_RSS, "RSS", styles[TL_RSS].color,
			    pl->m->per_process ? "1 3" : NULL, 1.5);
	for (int i = 0; i < nprocs; i++) {
		snprintf(name, sizeof(name), "%u %s RSS", a->procs[procs[i]].pid,
			 a->procs[procs[i]].command);
		draw_series(pl, procs[i], TL_RSS, name, proc_colors[i], NULL, 1.5);
		snprintf(name, sizeof(name), "%u %s heap", a->procs[procs[i]].pid,
			 a->procs[procs[i]].command);
		draw_series(pl, procs[i], TL_HEAP, name, proc_colors[i], "4 3", 1.2);
	}
	if (a->peak_mapped_bytes) /* stacked: mapped memory is the band above the heap */
		draw_series(pl, -1, TL_MEMORY, "memory", styles[TL_MEMORY].color, NULL, 1.5);
	draw_series(pl, -1, TL_HEAP, "heap", styles[TL_HEAP].color, NULL, 1.5);
	if (pl->m->physical)
		draw_series(pl, -1, TL_PHYSICAL, "physical", styles[TL_PHYSICAL].color, NULL, 1.5);
	draw_peak(pl, "heap", "heap", styles[TL_HEAP].color, a->peak_live_bytes, a->peak_live_ts,
		  &slot);
	if (a->has_rss)
		draw_peak(pl, "rss", "RSS", styles[TL_RSS].color, a->peak_rss_bytes, a->peak_rss_ts,
			  &slot);
	if (pl->m->physical)
		draw_peak(pl, "physical", "physical", styles[TL_PHYSICAL].color,
			  a->peak_physical_bytes, a->peak_physical_ts, &slot);
	if (a->peak_mapped_bytes)
		draw_peak(pl, "memory", "memory", styles[TL_MEMORY].color, a->peak_memory_bytes,
			  a->peak_memory_ts, &slot);
	draw_legend(pl, procs, nprocs);
	fprintf(pl->out,
		"<line id=\"hover-line\" x1=\"0\" x2=\"0\" y1=\"%d\" y2=\"%d\" stroke=\"#000\" "
		"stroke-width=\"0.7\" visibility=\"hidden\"/>\n</svg>\n",
		PLOT_Y, PLOT_Y + PLOT_H);
}

static struct plot *plot_new(const struct timeline *tl, const struct timeline_meta *m, FILE *out)
{
	struct plot *pl = calloc(1, sizeof(*pl));

	if (!pl)
		return NULL;
	pl->tl = tl;
	pl->m = m;
	pl->out = out;
	pl->span_ns = timeline_span_ns(tl);
	return pl;
}

int timeline_write_svg(const struct timeline *tl, const struct timeline_meta *m, FILE *out)
{
	struct plot *pl = plot_new(tl, m, out);

	if (!pl)
		return -ENOMEM;
	fprintf(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
	write_svg_body(pl, true);
	free(pl);
	return 0;
}

/* Hover data: each drawn series' min and max per column. */
static void write_hover_series(struct plot *pl, int proc, enum tl_series_id id, const char *name,
			       bool *first)
{
	if (timeline_columns(pl->tl, proc, id, PLOT_W, pl->cols))
		return;
	fprintf(pl->out, "%s{\"name\":", *first ? "" : ",\n");
	json_print_string_html(pl->out, name); /* a command's name: anyone's bytes */
	for (int k = 0; k < 2; k++) {
		fprintf(pl->out, k ? "],\"hi\":[" : ",\"lo\":[");
		for (int c = 0; c < PLOT_W; c++) {
			if (pl->cols[c].valid)
				fprintf(pl->out, c ? ",%" PRIu64 : "%" PRIu64,
					k ? pl->cols[c].hi : pl->cols[c].lo);
			else
				fprintf(pl->out, c ? ",null" : "null");
		}
	}
	fprintf(pl->out, "]}");
	*first = false;
}

static const char hover_js[] =
	"(function(){\n"
	"var svg=document.getElementById('timeline'),tip=document.getElementById('tip'),"
	"line=document.getElementById('hover-line');\n"
	"function fmt(v){var u=['B','KiB','MiB','GiB','TiB'],i=0;while(v>=1024&&i<4){v/=1024;i++;}"
	"return (i?v.toFixed(1):v.toFixed(0))+' '+u[i];}\n"
	"function hide(){tip.style.display='none';line.setAttribute('visibility','hidden');}\n"
	"function show(c,px,py){\n"
	" if(c<0||c>=MT.w){hide();return;}\n"
	" var s='t = '+((c+0.5)*MT.span_ns/MT.w/1e9).toFixed(4)+' s';\n"
	" MT.series.forEach(function(q){var lo=q.lo[c],hi=q.hi[c];if(hi===null)return;"
	"s+='\\n'+q.name+': '+(lo===hi?fmt(hi):fmt(lo)+' .. '+fmt(hi));});\n"
	" tip.textContent=s;tip.style.display='block';"
	"tip.style.left=(px+14)+'px';tip.style.top=(py+14)+'px';\n"
	" line.setAttribute('x1',MT.x0+c+0.5);line.setAttribute('x2',MT.x0+c+0.5);"
	"line.setAttribute('visibility','visible');\n"
	"}\n"
	"svg.addEventListener('mousemove',function(e){\n"
	" var r=svg.getBoundingClientRect(),x=(e.clientX-r.left)*MT.width/r.width;\n"
	" show(Math.floor(x-MT.x0),e.pageX,e.pageY);\n"
	"});\n"
	"svg.addEventListener('mouseleave',hide);\n"
	"/* page.html#t=SECONDS opens with the values at that time shown */\n"
	"var m=/^#t=([0-9.]+)$/.exec(location.hash);\n"
	"if(m)show(Math.floor(parseFloat(m[1])*1e9/MT.span_ns*MT.w),MT.x0+300,300);\n"
	"})();\n";

int timeline_write_html_section(const struct timeline *tl, const struct timeline_meta *m, FILE *out)
{
	struct plot *pl = plot_new(tl, m, out);
	const struct analysis *a = m->a;
	bool first = true;

	if (!pl)
		return -ENOMEM;
	write_svg_body(pl, false);
	fprintf(out,
		"<div id=\"tip\"></div>\n<script>\nvar MT={\"width\":%d,\"x0\":%d,\"w\":%d,"
		"\"span_ns\":%" PRIu64 ",\"series\":[\n",
		SVG_W, PLOT_X, PLOT_W, pl->span_ns);
	write_hover_series(pl, -1, TL_HEAP, "heap", &first);
	if (a->peak_mapped_bytes)
		write_hover_series(pl, -1, TL_MEMORY, "memory (heap + mapped)", &first);
	if (a->has_rss) {
		write_hover_series(pl, -1, TL_RSS, "RSS", &first);
		for (int k = TL_ANON; k <= TL_SHMEM; k++)
			write_hover_series(pl, -1, k, styles[k].name, &first);
	}
	if (m->physical)
		write_hover_series(pl, -1, TL_PHYSICAL, "physical", &first);
	if (m->per_process) {
		int procs[MAX_PROC_LINES], n = pick_procs(pl, procs);
		char name[96];

		for (int i = 0; i < n; i++) {
			snprintf(name, sizeof(name), "%u %s RSS", a->procs[procs[i]].pid,
				 a->procs[procs[i]].command);
			write_hover_series(pl, procs[i], TL_RSS, name, &first);
			snprintf(name, sizeof(name), "%u %s heap", a->procs[procs[i]].pid,
				 a->procs[procs[i]].command);
			write_hover_series(pl, procs[i], TL_HEAP, name, &first);
		}
	}
	fprintf(out, "]};\n%s</script>\n", hover_js);
	free(pl);
	return 0;
}
