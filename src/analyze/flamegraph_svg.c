// SPDX-License-Identifier: MIT
/*
 * flamegraph_svg.c - the interactive SVG flame graph of a struct flame; see
 * flamegraph.h.  Every frame is a <g> carrying its position in metric units
 * (data-x, data-w, data-l: offset, width, level) and its name (data-n); the
 * page lays itself out from those on zoom, so the initial layout written
 * here is only what a viewer without script shows.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "analyze/flamegraph.h"

#define SVG_W 1200  /* px */
#define SVG_PAD 10  /* px left and right */
#define FRAME_H 16  /* px per level */
#define SVG_TOP 44  /* px above the deepest frame: title and buttons */
#define MIN_PX 0.1  /* narrower frames (and their children) are left out */
#define CHAR_PX 7.0 /* average glyph width of the 12px font */

static void xml_escape(FILE *out, const char *s, size_t max)
{
	for (size_t i = 0; i < max && s[i]; i++) {
		switch (s[i]) {
		case '<': fputs("&lt;", out); break;
		case '>': fputs("&gt;", out); break;
		case '&': fputs("&amp;", out); break;
		case '"': fputs("&quot;", out); break;
		default:
			/* control bytes are not XML: shown as '?' */
			fputc((unsigned char)s[i] < 0x20 ? '?' : s[i], out);
		}
	}
}

/* A warm colour from the name, so a function keeps its colour across graphs. */
static void colour(const char *name, int *r, int *g, int *b)
{
	uint32_t h = 2166136261u;

	for (; *name; name++)
		h = (h ^ (unsigned char)*name) * 16777619u;
	*r = 205 + (int)(h % 51);
	*g = 80 + (int)((h >> 8) % 150);
	*b = (int)((h >> 16) % 60);
}

static const char *unit_of(enum site_metric m)
{
	return m == SITE_ALLOCATIONS ? "allocations" : "bytes";
}

struct svg_ctx {
	const struct flame *f;
	FILE *out;
	uint32_t height; /* px */
	uint32_t levels; /* levels drawn (the root's included) */
	bool flame;	 /* root at the bottom (classic); else at the top (icicle) */
	double total;
};

static double level_y(const struct svg_ctx *c, uint32_t level)
{
	if (c->flame)
		return c->height - 20.0 - FRAME_H * (level + 1.0);
	return SVG_TOP + (double)FRAME_H * level;
}

/*
 * The levels node @n and the frames under it that are wide enough to draw
 * (MIN_PX) take, from @level: the picture is as tall as what it shows, not
 * as the deepest stack (a 200-frame recursion 1 px wide made it 3,600 px
 * tall, and the first screen empty).
 */
static uint32_t drawn_levels(const struct flame *f, uint32_t n, uint32_t level, double scale)
{
	uint32_t most = level + 1;

	if (f->nodes[n].value * scale < MIN_PX)
		return level;
	for (uint32_t k = f->nodes[n].first_child; k; k = f->nodes[k].next_sibling) {
		uint32_t d = drawn_levels(f, k, level + 1, scale);

		if (d > most)
			most = d;
	}
	return most;
}

/* Writes node @n at offset @x (metric units) and level @level, then its children. */
static void node_svg(const struct svg_ctx *c, uint32_t n, uint64_t x, uint32_t level)
{
	const struct flame_node *node = &c->f->nodes[n];
	double scale = (SVG_W - 2 * SVG_PAD) / c->total;
	double px = SVG_PAD + x * scale, pw = node->value * scale;
	double y = level_y(c, level);
	size_t fit = pw > 6 ? (size_t)((pw - 6) / CHAR_PX) : 0, len = strlen(node->name);
	int r, g, b;
	uint64_t cx = x;

	if (pw < MIN_PX)
		return;
	if (n)
		colour(node->name, &r, &g, &b);
	else
		r = g = b = 200;
	fprintf(c->out, "<g class=\"f\" data-x=\"%llu\" data-w=\"%llu\" data-l=\"%u\" data-n=\"",
		(unsigned long long)x, (unsigned long long)node->value, level);
	xml_escape(c->out, node->name, SIZE_MAX);
	fprintf(c->out, "\"><title>");
	xml_escape(c->out, node->name, SIZE_MAX);
	fprintf(c->out,
		" (%llu %s, %.2f%%)</title><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" fill=\"rgb(%d,%d,%d)\" rx=\"2\"/><text x=\"%.1f\" y=\"%.1f\">",
		(unsigned long long)node->value, unit_of(c->f->metric),
		100.0 * node->value / c->total, px, y, pw, FRAME_H - 1, r, g, b, px + 3, y + 11.5);
	if (fit >= 3)
		xml_escape(c->out, node->name, len <= fit ? len : fit - 2);
	if (fit >= 3 && len > fit)
		fputs("..", c->out);
	fputs("</text></g>\n", c->out);
	for (uint32_t k = node->first_child; k; k = c->f->nodes[k].next_sibling) {
		node_svg(c, k, cx, level + 1);
		cx += c->f->nodes[k].value;
	}
}

/*
 * The page's behaviour: zoom, search, reset; written for this file, no
 * library.  On zoom the picture takes the height of what it then shows
 * (and, root at the bottom, every frame moves with its bottom edge).
 */
static const char script[] =
	"var W=1200,PAD=10,TOP=44,FH=16,zx=0,zw=0,zl=0,frames=[],info,reset;\n"
	"function A(g,k){return g.getAttribute(k);}\n"
	"function init(){var s=document.documentElement;frames=[].slice.call(s.querySelectorAll('g.f'));\n"
	" info=document.getElementById('info');reset=document.getElementById('reset');\n"
	" zw=+A(frames[0],'data-w');\n"
	" frames.forEach(function(g){g.addEventListener('click',function(){zoom(g);});});\n"
	" reset.addEventListener('click',function(){zx=0;zw=+A(frames[0],'data-w');zl=0;layout();reset.style.display='none';});\n"
	" document.getElementById('search').addEventListener('click',ask);\n"
	" document.addEventListener('keydown',function(e){if((e.ctrlKey||e.metaKey)&&e.key=='f'||e.key=='F3'){e.preventDefault();ask();}});\n"
	" layout();}\n"
	"function label(g,t,w){var n=A(g,'data-n'),m=Math.floor((w-6)/7);\n"
	" t.textContent=m<3?'':(n.length<=m?n:n.slice(0,m-2)+'..');}\n"
	"function layout(){var shown=[],levels=1;\n"
	" frames.forEach(function(g){var x=+A(g,'data-x'),w=+A(g,'data-w'),l=+A(g,'data-l');\n"
	" var inside=x>=zx&&x+w<=zx+zw,anc=l<zl&&x<=zx&&x+w>=zx+zw;\n"
	" if(!inside&&!anc||(inside&&w/zw*(W-2*PAD)<0.1)){g.style.display='none';return;}\n"
	" g.style.display='';shown.push(g);if(l+1>levels)levels=l+1;var r=g.querySelector('rect'),t=g.querySelector('text');\n"
	" var px=anc?PAD:PAD+(x-zx)/zw*(W-2*PAD),pw=anc?W-2*PAD:w/zw*(W-2*PAD);\n"
	" r.setAttribute('x',px);r.setAttribute('width',pw);t.setAttribute('x',px+3);\n"
	" g.style.opacity=anc?0.6:1;label(g,t,pw);});\n"
	" var s=document.documentElement,h=TOP+FH*levels+20;\n"
	" s.setAttribute('height',h);s.setAttribute('viewBox','0 0 '+W+' '+h);\n"
	" document.getElementById('bg').setAttribute('height',h);info.setAttribute('y',h-5);\n"
	" shown.forEach(function(g){var l=+A(g,'data-l'),y=FLAME?h-20-FH*(l+1):TOP+FH*l;\n"
	"  g.querySelector('rect').setAttribute('y',y);g.querySelector('text').setAttribute('y',y+11.5);});}\n"
	"function zoom(g){zx=+A(g,'data-x');zw=+A(g,'data-w');zl=+A(g,'data-l');\n"
	" if(zw<=0)return;reset.style.display='';layout();}\n"
	"function ask(){var q=prompt('Search frames (regular expression)','');if(q!==null)search(q);}\n"
	"function search(q){var re;try{re=new RegExp(q);}catch(e){info.textContent='bad expression';return;}\n"
	" var hits=[];frames.forEach(function(g){var r=g.querySelector('rect');\n"
	"  if(!A(g,'data-c'))g.setAttribute('data-c',A(r,'fill'));\n"
	"  var m=q!==''&&A(g,'data-l')!='0'&&re.test(A(g,'data-n'));\n"
	"  r.setAttribute('fill',m?'rgb(230,0,230)':A(g,'data-c'));\n"
	"  if(m)hits.push([+A(g,'data-x'),+A(g,'data-x')+ +A(g,'data-w')]);});\n"
	" hits.sort(function(a,b){return a[0]-b[0]||b[1]-a[1];});\n"
	" var sum=0,end=-1;hits.forEach(function(h){if(h[0]>=end){sum+=h[1]-h[0];end=h[1];}\n"
	"  else if(h[1]>end){sum+=h[1]-end;end=h[1];}});\n"
	" var tot=+A(frames[0],'data-w');\n"
	" info.textContent=q===''?'':'Matched: '+(tot?(100*sum/tot).toFixed(2):'0')+'% ('+hits.length+' frames)';}\n";

int flame_write_svg(const struct flame *f, const char *title, bool flame, FILE *out)
{
	struct svg_ctx c = {
		.f = f,
		.out = out,
		.flame = flame,
		.total = f->nodes[0].value ? (double)f->nodes[0].value : 1.0,
	};

	c.levels = f->nnodes ? drawn_levels(f, 0, 0, (SVG_W - 2 * SVG_PAD) / c.total) : 0;
	if (!c.levels)
		c.levels = 1;
	c.height = SVG_TOP + FRAME_H * c.levels + 20;
	fprintf(out,
		"<?xml version=\"1.0\" standalone=\"no\"?>\n"
		"<svg version=\"1.1\" width=\"%d\" height=\"%u\" viewBox=\"0 0 %d %u\" "
		"xmlns=\"http://www.w3.org/2000/svg\" onload=\"init()\">\n",
		SVG_W, c.height, SVG_W, c.height);
	fprintf(out, "<style>text{font:12px monospace;fill:#000;pointer-events:none}"
		     "g.f:hover rect{stroke:#000;stroke-width:0.5}g.f{cursor:pointer}"
		     ".b{font:12px sans-serif;fill:#036;cursor:pointer}"
		     "#title{font:17px sans-serif;text-anchor:middle}</style>\n");
	fprintf(out, "<script type=\"text/ecmascript\"><![CDATA[\nvar FLAME=%s;\n%s]]></script>\n",
		flame ? "true" : "false", script);
	fprintf(out,
		"<rect id=\"bg\" x=\"0\" y=\"0\" width=\"100%%\" height=\"%u\" fill=\"#f8f8f0\"/>\n",
		c.height);
	fprintf(out, "<text id=\"title\" x=\"%d\" y=\"22\">", SVG_W / 2);
	xml_escape(out, title, 100); /* the buttons share the line */
	fprintf(out,
		"</text>\n<text id=\"reset\" class=\"b\" x=\"%d\" y=\"22\" style=\"display:none\">Reset Zoom</text>\n"
		"<text id=\"search\" class=\"b\" x=\"%d\" y=\"22\">Search (Ctrl-F)</text>\n"
		"<text id=\"info\" x=\"%d\" y=\"%u\"></text>\n",
		SVG_PAD, SVG_W - SVG_PAD - 110, SVG_PAD, c.height - 5);
	if (f->nnodes)
		node_svg(&c, 0, 0, 0);
	fputs("</svg>\n", out);
	return ferror(out) ? -EIO : 0;
}
