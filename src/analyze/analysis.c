// SPDX-License-Identifier: MIT
/* analysis.c - aggregation of an event stream; see analysis.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "analysis.h"

struct live_slot {
	uint64_t addr;		/* 0: empty */
	uint64_t size;		/* UINT64_MAX marks a tombstone */
	uint32_t pid;
	uint32_t pad;
};

#define TOMBSTONE UINT64_MAX

void analysis_init(struct analysis *a)
{
	memset(a, 0, sizeof(*a));
}

static uint64_t slot_hash(uint32_t pid, uint64_t addr)
{
	uint64_t h = (addr >> 4) ^ ((uint64_t)pid << 40);

	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return h;
}

static struct live_slot *slot_find(struct analysis *a, uint32_t pid, uint64_t addr)
{
	if (!a->nslots)
		return NULL;
	for (uint64_t i = slot_hash(pid, addr) & (a->nslots - 1);; i = (i + 1) & (a->nslots - 1)) {
		struct live_slot *s = &a->slots[i];

		if (!s->addr)
			return NULL;
		if (s->addr == addr && s->pid == pid && s->size != TOMBSTONE)
			return s;
	}
}

static int slots_grow(struct analysis *a);

static int slot_insert(struct analysis *a, uint32_t pid, uint64_t addr, uint64_t size)
{
	struct live_slot *s;
	uint64_t i;

	if ((a->nused + 1) * 4 >= a->nslots * 3 && slots_grow(a))
		return -ENOMEM;
	for (i = slot_hash(pid, addr) & (a->nslots - 1);; i = (i + 1) & (a->nslots - 1)) {
		s = &a->slots[i];
		if (!s->addr || s->size == TOMBSTONE)
			break;
	}
	if (!s->addr)
		a->nused++;
	s->addr = addr;
	s->size = size;
	s->pid = pid;
	return 0;
}

/* Doubles the table and drops tombstones. */
static int slots_grow(struct analysis *a)
{
	struct live_slot *old = a->slots;
	uint64_t n = a->nslots;

	a->nslots = n ? n * 2 : 1024;
	a->slots = calloc(a->nslots, sizeof(*a->slots));
	if (!a->slots) {
		a->slots = old;
		a->nslots = n;
		return -ENOMEM;
	}
	a->nused = 0;
	for (uint64_t i = 0; i < n; i++)
		if (old[i].addr && old[i].size != TOMBSTONE)
			slot_insert(a, old[i].pid, old[i].addr, old[i].size);
	free(old);
	return 0;
}

static struct proc_summary *proc_get(struct analysis *a, uint32_t pid)
{
	struct proc_summary *grown;

	for (unsigned i = a->nprocs; i-- > 0;)
		if (a->procs[i].pid == pid)
			return &a->procs[i];
	grown = realloc(a->procs, (a->nprocs + 1) * sizeof(*grown));
	if (!grown)
		return NULL;
	a->procs = grown;
	memset(&a->procs[a->nprocs], 0, sizeof(*grown));
	a->procs[a->nprocs].pid = pid;
	return &a->procs[a->nprocs++];
}

static int heap_alloc(struct analysis *a, struct proc_summary *p, uint32_t pid, uint64_t addr,
		      uint64_t size)
{
	struct live_slot *s = slot_find(a, pid, addr);

	a->alloc_count++;
	a->total_allocated_bytes += size;
	p->allocs++;
	p->allocated_bytes += size;
	if (s) {		/* a free we never saw: forget the old block */
		a->live_bytes -= s->size;
		p->live_bytes -= s->size;
		s->size = TOMBSTONE;
	}
	a->live_bytes += size;
	if (a->live_bytes > a->peak_live_bytes)
		a->peak_live_bytes = a->live_bytes;
	p->live_bytes += size;
	if (p->live_bytes > p->peak_heap_bytes)
		p->peak_heap_bytes = p->live_bytes;
	return slot_insert(a, pid, addr, size);
}

static void heap_free(struct analysis *a, struct proc_summary *p, uint64_t addr)
{
	struct live_slot *s = slot_find(a, p->pid, addr);

	a->free_count++;
	if (!s)
		return;
	a->live_bytes -= s->size;
	p->live_bytes -= s->size;
	s->size = TOMBSTONE;
}

/* Everything @pid still holds is leaked: its image is gone (exit or exec). */
static void sweep_proc(struct analysis *a, struct proc_summary *p)
{
	for (uint64_t i = 0; i < a->nslots; i++) {
		struct live_slot *s = &a->slots[i];

		if (!s->addr || s->size == TOMBSTONE || s->pid != p->pid)
			continue;
		p->leaked_count++;
		p->leaked_bytes += s->size;
		a->leaked_count++;
		a->leaked_bytes += s->size;
		a->live_bytes -= s->size;
		p->live_bytes -= s->size;
		s->size = TOMBSTONE;
	}
}

static void rss_update(struct analysis *a, struct proc_summary *p, uint64_t rss)
{
	a->has_rss = true;
	a->tree_rss_bytes += rss - p->rss_bytes;
	p->rss_bytes = rss;
	if (rss > p->peak_rss_bytes)
		p->peak_rss_bytes = rss;
	if (a->tree_rss_bytes > a->peak_rss_bytes)
		a->peak_rss_bytes = a->tree_rss_bytes;
}

static void set_command(struct proc_summary *p, const char *path)
{
	const char *base = strrchr(path, '/');

	snprintf(p->command, sizeof(p->command), "%.63s", base ? base + 1 : path);
}

int analysis_add(struct analysis *a, const struct mt_event *ev)
{
	const __u64 *f = ev->f;
	struct proc_summary *p, *child;
	size_t pi;

	if (ev->h.type == 0 || ev->h.type >= MT_TYPE_MAX) {
		a->unknown_events++;
		return 0;
	}
	a->events[ev->h.type]++;
	if (!a->first_ts || ev->h.ts < a->first_ts)
		a->first_ts = ev->h.ts;
	if (ev->h.ts > a->last_ts)
		a->last_ts = ev->h.ts;
	if (ev->h.type == MT_PHYSICAL) {
		/* tree-wide: the pid is whoever freed or faulted the page */
		a->has_physical = true;
		a->physical_bytes = f[PHYSICAL_BYTES];
		if (f[PHYSICAL_BYTES] > a->peak_physical_bytes)
			a->peak_physical_bytes = f[PHYSICAL_BYTES];
		return 0;
	}
	p = proc_get(a, ev->h.pid);
	if (!p)
		return -ENOMEM;
	switch (ev->h.type) {
	case MT_MALLOC:
	case MT_CALLOC:
	case MT_ALIGNED_ALLOC:
		/* heap types share addr and size (event.h) */
		return heap_alloc(a, p, ev->h.pid, f[MALLOC_ADDR], f[MALLOC_SIZE]);
	case MT_REALLOC:
		heap_free(a, p, f[REALLOC_OLD_ADDR]);
		a->free_count--; /* the move is part of the realloc, not a free */
		return heap_alloc(a, p, ev->h.pid, f[REALLOC_ADDR], f[REALLOC_SIZE]);
	case MT_FREE:
		heap_free(a, p, f[FREE_ADDR]);
		break;
	case MT_FORK:
		if (f[FORK_FLAGS] & MT_FORK_THREAD)
			break;
		pi = p - a->procs;
		child = proc_get(a, f[FORK_CHILD]);
		if (!child)
			return -ENOMEM;
		p = &a->procs[pi]; /* proc_get may have moved the array */
		child->ppid = f[FORK_PARENT];
		memcpy(child->command, p->command, sizeof(child->command));
		break;
	case MT_EXEC:
		sweep_proc(a, p);
		set_command(p, ev->str);
		break;
	case MT_EXIT:
		sweep_proc(a, p);
		p->exited = true;
		p->exit_code = (int64_t)f[EXIT_CODE];
		p->exit_signal = f[EXIT_SIGNAL];
		a->tree_rss_bytes -= p->rss_bytes; /* a dead process holds no memory */
		p->rss_bytes = 0;
		break;
	case MT_RSS:
		if (!p->exited)
			rss_update(a, p, f[RSS_ANON] + f[RSS_FILE] + f[RSS_SHMEM]);
		break;
	default:
		break;
	}
	return 0;
}

void analysis_finish(struct analysis *a)
{
	for (unsigned i = 0; i < a->nprocs; i++)
		sweep_proc(a, &a->procs[i]);
}

void analysis_release(struct analysis *a)
{
	free(a->slots);
	free(a->procs);
	memset(a, 0, sizeof(*a));
}
