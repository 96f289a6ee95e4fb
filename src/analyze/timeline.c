// SPDX-License-Identifier: MIT
/*
 * timeline.c - bucketed min/max series and their SVG/HTML picture; see
 * timeline.h.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "format/json.h"
#include "analyze/timeline.h"

struct tl_series {
	uint64_t lo[TL_BUCKETS];   /* bytes: least value held in the bucket */
	uint64_t hi[TL_BUCKETS];   /* most */
	uint64_t last[TL_BUCKETS]; /* value at the bucket's end */
	int first;		   /* first valid bucket, -1: no value yet */
	int filled;		   /* last valid bucket */
	bool closed;		   /* its process exited: nothing after filled */
	uint64_t cur;		   /* bytes now */
};

struct timeline {
	uint64_t start_ns; /* time 0 */
	uint64_t width_ns; /* one bucket */
	bool per_process;
	const struct analysis *a; /* borrowed: the analysis feeding us */
	struct tl_series tree[TL_NSERIES];
	struct tl_series *proc[TL_MAX_PROCS][2]; /* owned: heap, rss by procs index */
	struct tl_mark marks[TL_MAX_MARKS];
	unsigned nmarks;
	uint64_t marks_total; /* including those not kept */
};

static void series_start(struct tl_series *s, int b, uint64_t v)
{
	s->first = s->filled = b;
	s->lo[b] = s->hi[b] = s->last[b] = s->cur = v;
}

struct timeline *timeline__new(uint64_t start_ns, bool per_process)
{
	struct timeline *tl = calloc(1, sizeof(*tl));

	if (!tl)
		return NULL;
	tl->start_ns = start_ns;
	tl->width_ns = 1000;
	tl->per_process = per_process;
	for (int i = 0; i < TL_NSERIES; i++)
		series_start(&tl->tree[i], 0, 0);
	return tl;
}

void timeline__free(struct timeline *tl)
{
	if (!tl)
		return;
	for (int i = 0; i < TL_MAX_PROCS; i++) {
		free(tl->proc[i][0]);
		free(tl->proc[i][1]);
	}
	free(tl);
}

void timeline_attach(struct timeline *tl, struct analysis *a)
{
	tl->a = a;
	a->observer = timeline_observe;
	a->observer_ctx = tl;
}

/* Halves the resolution of @s: bucket i becomes buckets 2i and 2i+1. */
static void series_merge(struct tl_series *s)
{
	if (!s || s->first < 0)
		return;
	for (int i = 0; i < TL_BUCKETS / 2; i++) {
		int j = 2 * i, k = 2 * i + 1;
		bool vj = j >= s->first && j <= s->filled, vk = k >= s->first && k <= s->filled;

		if (!vj && !vk)
			continue;
		if (vj && vk) {
			s->lo[i] = s->lo[j] < s->lo[k] ? s->lo[j] : s->lo[k];
			s->hi[i] = s->hi[j] > s->hi[k] ? s->hi[j] : s->hi[k];
			s->last[i] = s->last[k];
		} else {
			s->lo[i] = s->lo[vj ? j : k];
			s->hi[i] = s->hi[vj ? j : k];
			s->last[i] = s->last[vj ? j : k];
		}
	}
	s->first /= 2;
	s->filled /= 2;
}

/* The bucket of @ts, doubling the bucket width until it fits. */
static int bucket_of(struct timeline *tl, uint64_t ts)
{
	uint64_t rel = ts > tl->start_ns ? ts - tl->start_ns : 0;

	while (rel / tl->width_ns >= TL_BUCKETS) {
		tl->width_ns *= 2;
		for (int i = 0; i < TL_NSERIES; i++)
			series_merge(&tl->tree[i]);
		for (int i = 0; i < TL_MAX_PROCS; i++) {
			series_merge(tl->proc[i][0]);
			series_merge(tl->proc[i][1]);
		}
	}
	return (int)(rel / tl->width_ns);
}

static void series_set(struct tl_series *s, int b, uint64_t v)
{
	if (s->closed)
		return;
	if (s->first < 0) {
		series_start(s, b, v);
		return;
	}
	if (b < s->filled) /* out of order by less than a bucket's worth: keep it */
		b = s->filled;
	while (s->filled < b) {
		int f = ++s->filled;

		s->lo[f] = s->hi[f] = s->last[f] = s->cur;
	}
	if (v < s->lo[b])
		s->lo[b] = v;
	if (v > s->hi[b])
		s->hi[b] = v;
	s->last[b] = v;
	s->cur = v;
}

static void add_mark(struct timeline *tl, const struct mt_event *ev)
{
	struct tl_mark *m;
	const char *base;

	tl->marks_total++;
	if (tl->nmarks == TL_MAX_MARKS)
		return;
	m = &tl->marks[tl->nmarks++];
	memset(m, 0, sizeof(*m));
	m->ts = ev->h.ts;
	m->pid = ev->h.pid;
	if (ev->h.type == MT_FORK) {
		m->kind = TL_FORK;
		m->other = ev->f[1];
	} else if (ev->h.type == MT_EXIT) {
		m->kind = TL_EXIT;
		m->code = (int64_t)ev->f[0];
		m->other = ev->f[1];
	} else {
		m->kind = TL_EXEC;
		base = strrchr(ev->str, '/');
		snprintf(m->path, sizeof(m->path), "%.63s", base ? base + 1 : ev->str);
	}
}

static void proc_series(struct timeline *tl, int b, const struct proc_summary *p, bool exited)
{
	long i = p - tl->a->procs;

	if (!tl->per_process || i < 0 || i >= TL_MAX_PROCS)
		return;
	for (int k = 0; k < 2; k++) {
		if (!tl->proc[i][k]) {
			tl->proc[i][k] = malloc(sizeof(struct tl_series));
			if (!tl->proc[i][k])
				return; /* that process is not drawn */
			tl->proc[i][k]->first = -1;
			tl->proc[i][k]->closed = false;
		}
		series_set(tl->proc[i][k], b, k ? p->rss_bytes : p->live_bytes);
		if (exited)
			tl->proc[i][k]->closed = true;
	}
}

void timeline_observe(void *ctx, const struct mt_event *ev, const struct proc_summary *p)
{
	struct timeline *tl = ctx;
	const struct analysis *a = tl->a;
	int b = bucket_of(tl, ev->h.ts);

	switch (ev->h.type) {
	case MT_PHYSICAL: series_set(&tl->tree[TL_PHYSICAL], b, a->physical_bytes); return;
	case MT_FORK:
		if (!(ev->f[2] & MT_FORK_THREAD))
			add_mark(tl, ev);
		return;
	case MT_EXEC:
	case MT_EXIT: add_mark(tl, ev); break;
	case MT_RSS:
	case MT_MALLOC:
	case MT_CALLOC:
	case MT_REALLOC:
	case MT_ALIGNED_ALLOC:
	case MT_FREE:
	case MT_MMAP:
	case MT_MUNMAP:
	case MT_MREMAP:
	case MT_MPROTECT:
	case MT_BRK: break;
	default: return;
	}
	series_set(&tl->tree[TL_HEAP], b, a->live_bytes);
	series_set(&tl->tree[TL_MEMORY], b, a->live_bytes + a->mapped_bytes);
	series_set(&tl->tree[TL_RSS], b, a->tree_rss_bytes);
	series_set(&tl->tree[TL_ANON], b, a->tree_anon);
	series_set(&tl->tree[TL_FILE], b, a->tree_file);
	series_set(&tl->tree[TL_SHMEM], b, a->tree_shmem);
	if (p)
		proc_series(tl, b, p, ev->h.type == MT_EXIT);
}

void timeline_finish(struct timeline *tl, uint64_t end_ns)
{
	int b = bucket_of(tl, end_ns);

	for (int i = 0; i < TL_NSERIES; i++)
		series_set(&tl->tree[i], b, tl->tree[i].cur);
	for (int i = 0; i < TL_MAX_PROCS; i++)
		for (int k = 0; k < 2; k++)
			if (tl->proc[i][k] && tl->proc[i][k]->first >= 0)
				series_set(tl->proc[i][k], b, tl->proc[i][k]->cur);
}

uint64_t timeline_start_ns(const struct timeline *tl)
{
	return tl->start_ns;
}

unsigned timeline_marks(const struct timeline *tl, const struct tl_mark **marks, uint64_t *total)
{
	*marks = tl->marks;
	*total = tl->marks_total;
	return tl->nmarks;
}

uint64_t timeline_span_ns(const struct timeline *tl)
{
	int end = tl->tree[TL_HEAP].filled;

	return (uint64_t)(end + 1) * tl->width_ns;
}

int timeline_columns(const struct timeline *tl, int proc, enum tl_series_id id, unsigned ncols,
		     struct tl_column *out)
{
	const struct tl_series *s;
	uint64_t nb = (uint64_t)tl->tree[TL_HEAP].filled + 1;

	if (proc < 0)
		s = &tl->tree[id];
	else if (proc < TL_MAX_PROCS && (id == TL_HEAP || id == TL_RSS) &&
		 tl->proc[proc][id == TL_RSS])
		s = tl->proc[proc][id == TL_RSS];
	else
		return -ENOENT;
	for (unsigned c = 0; c < ncols; c++) {
		/* every bucket that overlaps the column's time range, so the
		 * column of any time holds that time's bucket */
		uint64_t b0 = c * nb / ncols, b1 = ((c + 1) * nb + ncols - 1) / ncols;
		struct tl_column *col = &out[c];

		col->valid = false;
		for (uint64_t b = b0; b < b1; b++) {
			if ((int)b < s->first || (int)b > s->filled)
				continue;
			if (!col->valid || s->lo[b] < col->lo)
				col->lo = s->lo[b];
			if (!col->valid || s->hi[b] > col->hi)
				col->hi = s->hi[b];
			col->last = s->last[b];
			col->valid = true;
		}
	}
	return 0;
}
