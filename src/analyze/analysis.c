// SPDX-License-Identifier: MIT
/* analysis.c - aggregation of an event stream; see analysis.h and docs/METRICS.md. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "analyze/analysis.h"
#include "analyze/mix64.h"

struct live_slot {
	uint64_t addr;	/* 0: empty */
	uint64_t size;	/* bytes */
	uint64_t stack; /* call site: stack id, 0 = none */
	uint64_t ts;	/* when it was allocated (a leak's age at the end) */
	uint64_t count; /* blocks it stands for: 1, or sampled its weight */
};

void analysis_init(struct analysis *a)
{
	memset(a, 0, sizeof(*a));
}

void analysis_set_attached(struct analysis *a, bool attached)
{
	a->attached = attached;
}

void analysis_set_page_size(struct analysis *a, uint64_t bytes)
{
	if (bytes >= 4096 && bytes <= (1u << 20) && !(bytes & (bytes - 1)))
		a->page_size = bytes;
}

/* ---- live blocks of one process ----------------------------------------- */

/*
 * Linear probing without tombstones: a delete shifts the rest of its probe
 * chain back (Knuth 6.4, algorithm R), so chains stay as short as the load
 * (at most one half) makes them, however many blocks came and went.
 */
static uint64_t live_home(const struct live_table *t, uint64_t addr)
{
	return mix64(addr >> 4) & (t->nslots - 1);
}

static struct live_slot *live_find(const struct live_table *t, uint64_t addr)
{
	uint64_t mask = t->nslots - 1;

	if (!t->nslots)
		return NULL;
	for (uint64_t i = live_home(t, addr);; i = (i + 1) & mask) {
		struct live_slot *s = &t->slots[i];

		if (s->addr == addr)
			return s;
		if (!s->addr)
			return NULL;
	}
}

/* Inserts without growing; the caller made room.  @addr is not live. */
static void live_put(struct live_table *t, const struct live_slot *s)
{
	uint64_t mask = t->nslots - 1, i;

	for (i = live_home(t, s->addr); t->slots[i].addr; i = (i + 1) & mask)
		;
	t->slots[i] = *s;
	t->nlive++;
}

static void live_drop(struct live_table *t, struct live_slot *s)
{
	uint64_t mask = t->nslots - 1, i = (uint64_t)(s - t->slots), j = i;

	for (;;) {
		uint64_t k;

		j = (j + 1) & mask;
		if (!t->slots[j].addr)
			break;
		k = live_home(t, t->slots[j].addr);
		/* can slot j's entry move back to i?  Only if its home is not in (i, j] */
		if (i <= j ? (k <= i || k > j) : (k <= i && k > j)) {
			t->slots[i] = t->slots[j];
			i = j;
		}
	}
	t->slots[i].addr = 0;
	t->nlive--;
}

/* Doubles the table (64 slots at first). */
static int live_grow(struct live_table *t)
{
	struct live_table n = { .nslots = t->nslots ? t->nslots * 2 : 64, .nlive = 0 };

	n.slots = calloc(n.nslots, sizeof(*n.slots));
	if (!n.slots)
		return -ENOMEM;
	for (uint64_t i = 0; i < t->nslots; i++)
		if (t->slots[i].addr)
			live_put(&n, &t->slots[i]);
	free(t->slots);
	*t = n;
	return 0;
}

/* The slot holding @addr, or the empty one where it would go; the table has slots. */
static struct live_slot *live_slot_for(struct live_table *t, uint64_t addr)
{
	uint64_t mask = t->nslots - 1, i;

	for (i = live_home(t, addr); t->slots[i].addr && t->slots[i].addr != addr;
	     i = (i + 1) & mask)
		;
	return &t->slots[i];
}

static void live_release(struct live_table *t)
{
	free(t->slots);
	memset(t, 0, sizeof(*t));
}

/*
 * A mapping made at @stack gained or lost @bytes: its call site's memory.
 * Out of memory for a new site, the bytes go unattributed (the totals keep them).
 */
static void mapped_site_account(void *ctx, uint64_t stack, uint64_t bytes, bool add)
{
	struct analysis *a = ctx;
	struct site *s = site_get(&a->sites, stack);

	if (!s)
		return;
	if (add)
		site_mem_add(&a->sites, s, bytes);
	else
		site_mem_sub(&a->sites, s, bytes);
}

/* ---- processes ---------------------------------------------------------- */

static bool proc_has(const void *ctx, uint64_t pos, const void *pid)
{
	const struct analysis *a = ctx;

	return a->procs && a->procs[pos].pid == *(const uint32_t *)pid; /* non-NULL once indexed */
}

static uint64_t proc_hash(const void *ctx, uint64_t pos)
{
	const struct analysis *a = ctx;

	return mix64(a->procs[pos].pid);
}

const struct proc_summary *analysis_proc(const struct analysis *a, uint32_t pid)
{
	uint64_t at = hash_index_find(&a->pid_index, mix64(pid), proc_has, a, &pid);

	return at ? &a->procs[at - 1] : NULL;
}

/* The process @pid, added when new; NULL on -ENOMEM.  May move a->procs. */
static struct proc_summary *proc_get(struct analysis *a, uint32_t pid)
{
	struct proc_summary *p;
	uint64_t at;

	/* most events come in runs of one process: skip the hash for them */
	if (a->last_proc && a->procs && a->procs[a->last_proc - 1].pid == pid)
		return &a->procs[a->last_proc - 1];
	at = hash_index_find(&a->pid_index, mix64(pid), proc_has, a, &pid);
	if (at) {
		a->last_proc = (unsigned)at;
		return &a->procs[at - 1];
	}
	if (hash_index_reserve(&a->pid_index, 64, proc_hash, a))
		return NULL;
	if (a->nprocs == a->procs_cap) {
		unsigned cap = a->procs_cap ? a->procs_cap * 2 : 16;

		p = realloc(a->procs, cap * sizeof(*p));
		if (!p)
			return NULL;
		a->procs = p;
		a->procs_cap = cap;
	}
	p = &a->procs[a->nprocs];
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	p->mapped.account = mapped_site_account;
	p->mapped.ctx = a;
	hash_index_add(&a->pid_index, mix64(pid), a->nprocs++);
	return p;
}

/* ---- threads: the temporary test --------------------------------------- */

static bool thread_has(const void *ctx, uint64_t pos, const void *tid)
{
	const struct analysis *a = ctx;

	return a->threads[pos].tid == *(const uint32_t *)tid;
}

static uint64_t thread_hash(const void *ctx, uint64_t pos)
{
	const struct analysis *a = ctx;

	return mix64(a->threads[pos].tid);
}

/*
 * The last-allocation slot of the thread of @ev, added when new; NULL on
 * -ENOMEM.  A tid seen before in another process is a new thread (the
 * kernel reuses ids): it starts with no last allocation.
 */
static struct thread_last *thread_get(struct analysis *a, const struct mt_event *ev)
{
	uint32_t tid = ev->h.tid;
	struct thread_last *t;
	uint64_t at;

	if (a->last_thread && a->threads[a->last_thread - 1].tid == tid) {
		t = &a->threads[a->last_thread - 1];
	} else if ((at = hash_index_find(&a->tid_index, mix64(tid), thread_has, a, &tid))) {
		a->last_thread = at;
		t = &a->threads[at - 1];
	} else {
		if (hash_index_reserve(&a->tid_index, 64, thread_hash, a))
			return NULL;
		if (a->nthreads == a->threads_cap) {
			uint64_t cap = a->threads_cap ? a->threads_cap * 2 : 16;

			t = realloc(a->threads, cap * sizeof(*t));
			if (!t)
				return NULL;
			a->threads = t;
			a->threads_cap = cap;
		}
		t = &a->threads[a->nthreads];
		*t = (struct thread_last){ .tid = tid, .pid = ev->h.pid };
		hash_index_add(&a->tid_index, mix64(tid), a->nthreads++);
		a->last_thread = a->nthreads;
	}
	if (t->pid != ev->h.pid)
		*t = (struct thread_last){ .tid = tid, .pid = ev->h.pid };
	return t;
}

/* ---- heap --------------------------------------------------------------- */

/* The block @s leaves its call site's live bytes (freed, replaced or leaked). */
static struct site *site_release(struct analysis *a, const struct live_slot *s)
{
	struct site *site = site_get(&a->sites, s->stack);

	/* a new site is the only allocation here; it fails only out of memory */
	if (site)
		site_live_sub(&a->sites, site, s->size, s->count);
	return site;
}

/* Heap plus mapped memory: new peaks, the tree's and @p's. */
static void memory_peaks(struct analysis *a, struct proc_summary *p, uint64_t ts)
{
	uint64_t tree = a->live_bytes + a->mapped_bytes, mine = p->live_bytes + p->mapped.bytes;

	if (tree > a->peak_memory_bytes) {
		a->peak_memory_bytes = tree;
		a->peak_memory_ts = ts;
		site_table_new_memory_peak(&a->sites);
	}
	if (mine > p->peak_memory_bytes)
		p->peak_memory_bytes = mine;
}

/*
 * Removes the block at @addr of @p; returns whether it was live.  @temporary:
 * it is freed before its thread allocated anything else (METRICS.md).
 */
static bool heap_release(struct analysis *a, struct proc_summary *p, uint64_t addr, bool temporary)
{
	struct live_slot *s = live_find(&p->live, addr);
	struct site *site;

	if (!s) {
		a->unknown_free_count++;
		return false;
	}
	site = site_release(a, s);
	if (temporary) {
		a->temporary_count++;
		p->temporary++;
		if (site)
			site->temporary++;
	}
	a->live_bytes -= s->size;
	p->live_bytes -= s->size;
	live_drop(&p->live, s);
	return true;
}

/*
 * --sample-bytes: what a sampled block of *@size bytes stands for, as
 * sample.h draws: 1 / (1 - exp(-s/N)) blocks (s at least 1), so *@size
 * becomes that many times its bytes, and *@count the blocks, rounded up or
 * down at random (a hash of the record, so a file reads the same every
 * time) with the fraction's odds: the sum stays unbiased.
 */
static void sample_weigh(const struct analysis *a, const struct mt_event *ev, uint64_t addr,
			 uint64_t *size, uint64_t *count)
{
	double s = *size ? (double)*size : 1.0, w, whole;
	uint64_t u = mix64(addr ^ mix64(ev->h.ts));

	if (!a->sample_period)
		return;
	w = 1.0 / -expm1(-s / (double)a->sample_period);
	whole = floor(w);
	*count = (uint64_t)whole + ((double)(u >> 11) * 0x1p-53 < w - whole);
	*size = *size * w >= 0x1p63 ? UINT64_MAX : (uint64_t)llround((double)*size * w);
}

static int heap_alloc(struct analysis *a, struct proc_summary *p, const struct mt_event *ev,
		      uint64_t addr, uint64_t size)
{
	struct live_table *t = &p->live;
	struct live_slot *s;
	struct site *site;
	uint64_t count = 1;

	struct thread_last *th = thread_get(a, ev);
	unsigned b = size_bucket(size);

	if (!th)
		return -ENOMEM;
	th->addr = addr; /* a free of @addr before the thread's next allocation: temporary */
	sample_weigh(a, ev, addr, &size, &count);
	a->alloc_count += count;
	a->total_allocated_bytes = sat_add(a->total_allocated_bytes, size);
	a->sizes.count[b] += count;
	a->sizes.bytes[b] = sat_add(a->sizes.bytes[b], size);
	p->allocs += count;
	p->allocated_bytes = sat_add(p->allocated_bytes, size);
	if ((t->nlive + 1) * 2 > t->nslots && live_grow(t))
		return -ENOMEM;
	/* one probe finds the block at @addr or the empty slot it goes to */
	s = live_slot_for(t, addr);
	if (s->addr) { /* a free we never saw: the old block is gone */
		site_release(a, s);
		a->live_bytes -= s->size;
		p->live_bytes -= s->size;
	} else {
		s->addr = addr;
		t->nlive++;
	}
	s->size = size;
	s->stack = ev->stack;
	s->ts = ev->h.ts;
	s->count = count;
	site = site_get(&a->sites, ev->stack);
	if (!site)
		return -ENOMEM;
	site->allocs += count;
	site->allocated_bytes = sat_add(site->allocated_bytes, size);
	site_live_add(&a->sites, site, size, count);
	a->live_bytes += size;
	if (a->live_bytes > a->peak_live_bytes) {
		a->peak_live_bytes = a->live_bytes;
		a->peak_live_ts = ev->h.ts;
		site_table_new_peak(&a->sites);
	}
	p->live_bytes += size;
	if (p->live_bytes > p->peak_heap_bytes)
		p->peak_heap_bytes = p->live_bytes;
	memory_peaks(a, p, ev->h.ts);
	return 0;
}

/* What @p, alive at the end of an attach, still holds: live at end, not leaked. */
static void sweep_alive(struct analysis *a, struct proc_summary *p, uint64_t end_ts)
{
	for (uint64_t i = 0; i < p->live.nslots; i++) {
		struct live_slot *s = &p->live.slots[i];
		struct site *site;

		if (!s->addr)
			continue;
		site = site_release(a, s);
		if (site)
			site_live_end(site, s->size, end_ts > s->ts ? end_ts - s->ts : 0);
		p->live_end_count++;
		p->live_end_bytes = sat_add(p->live_end_bytes, s->size);
		a->live_end_count++;
		a->live_end_bytes = sat_add(a->live_end_bytes, s->size);
		a->live_bytes -= s->size;
		p->live_bytes -= s->size;
	}
	a->live_end_procs += p->live_end_count != 0;
	live_release(&p->live);
}

/* Everything @p still holds at @end_ts is leaked: its image is gone (exit, exec, end). */
static void sweep_proc(struct analysis *a, struct proc_summary *p, uint64_t end_ts)
{
	struct site *site;

	for (uint64_t i = 0; i < p->live.nslots; i++) {
		struct live_slot *s = &p->live.slots[i];

		if (!s->addr)
			continue;
		site = site_release(a, s);
		if (site) {
			site->leaked_count += s->count;
			site->leaked_bytes = sat_add(site->leaked_bytes, s->size);
			site_leak_age(site, end_ts > s->ts ? end_ts - s->ts : 0);
		}
		p->leaked_count += s->count;
		p->leaked_bytes = sat_add(p->leaked_bytes, s->size);
		a->leaked_count += s->count;
		a->leaked_bytes = sat_add(a->leaked_bytes, s->size);
		a->live_bytes -= s->size;
		p->live_bytes -= s->size;
	}
	live_release(&p->live);
}

/* ---- mapped memory ------------------------------------------------------ */

#define MAP_SHARED_BITS 0x03u /* MAP_SHARED, MAP_SHARED_VALIDATE */
#define MAP_PRIVATE_BIT 0x02u
#define MAP_ANONYMOUS_BIT 0x20u
#define PROT_ACCESS 0x07u /* PROT_READ | PROT_WRITE | PROT_EXEC */
#define MREMAP_DONTUNMAP 4u

static uint64_t page_up(const struct analysis *a, uint64_t x)
{
	uint64_t ps = a->page_size ? a->page_size : 4096;

	return x + (ps - 1) < x ? x & ~(ps - 1) : (x + ps - 1) & ~(ps - 1);
}

/* [start, start + len) in pages, clamped at the top of the address space. */
static uint64_t end_of(const struct analysis *a, uint64_t start, uint64_t len)
{
	uint64_t end = start + page_up(a, len);

	return end < start ? page_up(a, UINT64_MAX) : end;
}

/* An anonymous private mapping the program made itself (not an allocator call). */
static bool is_own_mapping(const struct mt_event *ev)
{
	uint64_t flags = ev->f[MMAP_FLAGS];

	return (flags & MAP_ANONYMOUS_BIT) && (flags & MAP_SHARED_BITS) == MAP_PRIVATE_BIT &&
	       !(ev->h.fn & MT_REC_ALLOCATOR);
}

/* The break moved to @addr: growth of the program's own is its mapped memory. */
static int brk_move(struct analysis *a, struct proc_summary *p, const struct mt_event *ev)
{
	uint64_t brk = page_up(a, ev->f[BRK_ADDR]);
	int err = 0;

	if (!p->brk_known) { /* the first break seen: where changes start from */
		p->brk_known = true;
		p->brk = brk;
		return 0;
	}
	if (brk > p->brk && !(ev->h.fn & MT_REC_ALLOCATOR))
		err = mapped_add(&p->mapped, p->brk, brk, true, 0);
	else if (brk < p->brk)
		err = mapped_cut(&p->mapped, brk, p->brk);
	p->brk = brk;
	return err;
}

static int mapped_change(struct analysis *a, struct proc_summary *p, const struct mt_event *ev)
{
	const __u64 *f = ev->f;

	switch (ev->h.type) {
	case MT_MMAP:
		if (!is_own_mapping(ev)) /* over pages of ours, it replaces them (MAP_FIXED) */
			return mapped_cut(&p->mapped, f[MMAP_ADDR],
					  end_of(a, f[MMAP_ADDR], f[MMAP_LEN]));
		p->mapped_count++;
		a->mapped_count++;
		return mapped_add(&p->mapped, f[MMAP_ADDR], end_of(a, f[MMAP_ADDR], f[MMAP_LEN]),
				  f[MMAP_PROT] & PROT_ACCESS, ev->stack);
	case MT_MUNMAP:
		return mapped_cut(&p->mapped, f[MUNMAP_ADDR],
				  end_of(a, f[MUNMAP_ADDR], f[MUNMAP_LEN]));
	case MT_MREMAP:
		return mapped_move(&p->mapped, f[MREMAP_OLD_ADDR], page_up(a, f[MREMAP_OLD_LEN]),
				   f[MREMAP_NEW_ADDR], page_up(a, f[MREMAP_NEW_LEN]),
				   f[MREMAP_FLAGS] & MREMAP_DONTUNMAP);
	case MT_MPROTECT:
		return mapped_protect(&p->mapped, f[MPROTECT_ADDR],
				      end_of(a, f[MPROTECT_ADDR], f[MPROTECT_LEN]),
				      f[MPROTECT_PROT] & PROT_ACCESS);
	default: return brk_move(a, p, ev);
	}
}

/* Folds a mapping record of @p in, and the totals and peaks it moves. */
static int mapped_event(struct analysis *a, struct proc_summary *p, const struct mt_event *ev)
{
	uint64_t before = p->mapped.bytes;
	int err = mapped_change(a, p, ev);

	a->mapped_bytes = a->mapped_bytes - before + p->mapped.bytes;
	if (p->mapped.bytes > p->peak_mapped_bytes)
		p->peak_mapped_bytes = p->mapped.bytes;
	if (a->mapped_bytes > a->peak_mapped_bytes) {
		a->peak_mapped_bytes = a->mapped_bytes;
		a->peak_mapped_ts = ev->h.ts;
	}
	memory_peaks(a, p, ev->h.ts);
	return err;
}

/* What @p still has mapped is leaked: its image is gone (exit, exec, end). */
static void sweep_mapped(struct analysis *a, struct proc_summary *p)
{
	uint64_t bytes = mapped_clear(&p->mapped);

	a->mapped_bytes -= bytes;
	p->leaked_mapped_bytes = sat_add(p->leaked_mapped_bytes, bytes);
	a->leaked_mapped_bytes = sat_add(a->leaked_mapped_bytes, bytes);
	p->brk_known = false;
}

/* ---- RSS and physical --------------------------------------------------- */

static void rss_set(struct analysis *a, struct proc_summary *p, uint64_t ts, uint64_t anon,
		    uint64_t file, uint64_t shmem)
{
	uint64_t rss = sat_add(sat_add(anon, file), shmem);

	a->tree_anon += anon - p->rss_anon;
	a->tree_file += file - p->rss_file;
	a->tree_shmem += shmem - p->rss_shmem;
	a->tree_rss_bytes += rss - p->rss_bytes;
	p->rss_anon = anon;
	p->rss_file = file;
	p->rss_shmem = shmem;
	p->rss_bytes = rss;
	if (rss > p->peak_rss_bytes)
		p->peak_rss_bytes = rss;
	if (a->tree_rss_bytes > a->peak_rss_bytes) {
		a->peak_rss_bytes = a->tree_rss_bytes;
		a->peak_rss_ts = ts;
	}
}

static void physical_set(struct analysis *a, uint64_t ts, uint64_t bytes)
{
	a->has_physical = true;
	a->physical_bytes = bytes;
	if (bytes > a->peak_physical_bytes) {
		a->peak_physical_bytes = bytes;
		a->peak_physical_ts = ts;
	}
}

static void set_command(struct proc_summary *p, const char *path)
{
	const char *base = strrchr(path, '/');

	snprintf(p->command, sizeof(p->command), "%.63s", base ? base + 1 : path);
}

static int add_window(struct analysis *a, uint64_t start, uint64_t end)
{
	struct enabled_window *grown;

	grown = realloc(a->windows, (a->nwindows + 1) * sizeof(*grown));
	if (!grown)
		return -ENOMEM;
	a->windows = grown;
	a->windows[a->nwindows++] = (struct enabled_window){ start, end };
	return 0;
}

/* Marks and enable/disable: about the run, not about a process. */
static int control_add(struct analysis *a, const struct mt_event *ev)
{
	struct mark_event *grown;

	a->has_control = true;
	switch (ev->h.type) {
	case MT_MARK:
		grown = realloc(a->marks, (a->nmarks + 1) * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		a->marks = grown;
		grown += a->nmarks++;
		grown->ts = ev->h.ts;
		grown->pid = ev->h.pid;
		memcpy(grown->name, ev->str, sizeof(grown->name));
		return 0;
	case MT_ENABLE:
		if (a->heap_off)
			a->on_since = ev->h.ts;
		a->heap_off = false;
		return 0;
	default:
		if (a->heap_off)
			return 0;
		a->heap_off = true;
		return add_window(a, a->on_since, ev->h.ts);
	}
}

/* ---- events ------------------------------------------------------------- */

static int fork_child(struct analysis *a, uint32_t parent, const __u64 *f)
{
	struct proc_summary *child = proc_get(a, f[1]);
	const struct proc_summary *p;

	if (!child)
		return -ENOMEM;
	p = analysis_proc(a, parent); /* proc_get may have moved the array */
	child->ppid = f[0];
	if (p) {
		memcpy(child->command, p->command, sizeof(child->command));
		/* a copy of the parent's address space: its break too (not its pages: METRICS.md) */
		child->brk = p->brk;
		child->brk_known = p->brk_known;
	}
	return 0;
}

const char *proc_left_reason(const struct proc_summary *p)
{
	return p->left == MT_LEFT_DUMPABLE ? "undumpable" : "privileged exec";
}

const char *proc_unwinder(const struct proc_summary *p)
{
	if (!p->stacked_kernel && !p->stacked_inprocess)
		return p->stacked_mmap ? "kernel" : "none";
	return p->stacked_inprocess > p->stacked_kernel ? "in-process" : "kernel";
}

/*
 * Counts a heap record naming a stack (field @at) by the unwinder that took
 * it: the path of the process's current image (an MT_FAST record put it
 * in-process, an exec back on the uprobes).
 */
static void count_stacked(struct proc_summary *p, const struct mt_event *ev, unsigned at)
{
	if (ev->h.nfields <= at || !ev->f[at])
		return;
	if (p->fast_heap)
		p->stacked_inprocess++;
	else
		p->stacked_kernel++;
}

/* A free: temporary when it frees its thread's last allocation (heaptrack's test). */
static int heap_free(struct analysis *a, struct proc_summary *p, const struct mt_event *ev)
{
	struct thread_last *th = thread_get(a, ev);
	/* sampled, the thread's unsampled allocations between are unseen: none are told */
	bool temporary = th && ev->f[0] && th->addr == ev->f[0] && !a->sample_period;

	if (th)
		th->addr = 0;
	heap_release(a, p, ev->f[0], temporary);
	return th ? 0 : -ENOMEM;
}

/*
 * The OOM killer chose @p: what it held then, before its EXIT record (right
 * after) sweeps its blocks into the leaks.  Once per process.
 */
static void oom_event(struct analysis *a, struct proc_summary *p, const struct mt_event *ev)
{
	if (p->oom_killed)
		return;
	p->oom_killed = true;
	a->oom_procs++;
	p->oom_ts = ev->h.ts;
	p->oom_score_adj = (int64_t)ev->f[OOM_SCORE_ADJ];
	p->oom_live_bytes = p->live_bytes;
	/* blocks, not slots: a sampled block stands for count of them */
	for (uint64_t i = 0; i < p->live.nslots; i++)
		if (p->live.slots[i].addr)
			p->oom_live_count += p->live.slots[i].count;
}

static int proc_event(struct analysis *a, struct proc_summary *p, const struct mt_event *ev)
{
	const __u64 *f = ev->f;

	switch (ev->h.type) {
	case MT_MALLOC:
	case MT_CALLOC:
	case MT_ALIGNED_ALLOC:
		count_stacked(p, ev,
			      ev->h.type == MT_ALIGNED_ALLOC ? ALIGNED_ALLOC_STACK : MALLOC_STACK);
		return heap_alloc(a, p, ev, f[0], f[1]);
	case MT_REALLOC:
		count_stacked(p, ev, REALLOC_STACK);
		/* one allocation of the new size; the old block goes without a free
		 * (its contents live on: never a temporary allocation) */
		if (!heap_release(a, p, f[2], false) && a->sample_period)
			a->unknown_free_count--; /* sampled: an unsampled block it was */
		return heap_alloc(a, p, ev, f[0], f[1]);
	case MT_FREE:
		a->free_count++;
		p->frees++;
		return heap_free(a, p, ev);
	case MT_FORK: return f[2] & MT_FORK_THREAD ? 0 : fork_child(a, ev->h.pid, f);
	case MT_MMAP:
		p->stacked_mmap += ev->h.nfields > MMAP_STACK && f[MMAP_STACK];
		return mapped_event(a, p, ev);
	case MT_MUNMAP:
	case MT_MREMAP:
	case MT_MPROTECT:
	case MT_BRK: return mapped_event(a, p, ev);
	case MT_EXEC:
		sweep_proc(a, p, ev->h.ts);
		sweep_mapped(a, p);
		set_command(p, ev->str);
		p->fast_heap = false; /* a new image starts on the uprobes */
		p->fast_stacks = false;
		return 0;
	case MT_FAST:
		p->fast_heap = true;
		p->fast_stacks = f[FAST_STACKS] != 0; /* 0 in files from before the field */
		return 0;
	case MT_RUNNING:
		/* found at attach: named as an exec would have; its parent only if tracked too */
		set_command(p, ev->str);
		if (ev->h.nfields > RUNNING_PPID && analysis_proc(a, (uint32_t)ev->f[RUNNING_PPID]))
			p->ppid = ev->f[RUNNING_PPID];
		return 0;
	case MT_COUNTS:
		/* one per image's ring (in-process) and one of the uprobes': summed */
		p->has_counts = true;
		p->exact_allocs += f[COUNTS_ALLOCS];
		p->exact_alloc_bytes = sat_add(p->exact_alloc_bytes, f[COUNTS_ALLOC_BYTES]);
		p->exact_frees += f[COUNTS_FREES];
		p->sampled += f[COUNTS_SAMPLED];
		p->unmatched += f[COUNTS_UNMATCHED];
		return 0;
	case MT_OOM: oom_event(a, p, ev); return 0;
	case MT_REFUSED:
		a->bad_procs += !p->bad_records && f[0];
		p->bad_records += f[0];
		a->bad_records += f[0];
		/* a ring cut off: its process's later heap calls were never read */
		a->cut_rings += ev->h.nfields > REFUSED_CUT && f[REFUSED_CUT];
		return 0;
	case MT_EXIT:
		sweep_proc(a, p, ev->h.ts);
		sweep_mapped(a, p);
		p->exited = true;
		p->exit_code = (int64_t)f[0];
		p->exit_signal = f[1];
		rss_set(a, p, ev->h.ts, 0, 0, 0); /* a dead process holds no memory */
		return 0;
	case MT_LEFT:
		/*
		 * No longer observed.  After an exec the image whose blocks were
		 * live is gone (as at an exec); after the prctl they may live on,
		 * unseen, so they are still live at the end.
		 */
		a->left_procs += !p->left;
		p->left = ev->h.nfields > LEFT_REASON ? (uint32_t)f[LEFT_REASON] : MT_LEFT_EXEC;
		if (p->left == MT_LEFT_EXEC) {
			sweep_proc(a, p, ev->h.ts);
			sweep_mapped(a, p);
		}
		rss_set(a, p, ev->h.ts, 0, 0, 0); /* its memory is no longer the tree's to count */
		return 0;
	case MT_RSS:
		a->has_rss = true;
		if (!p->exited && !p->left)
			rss_set(a, p, ev->h.ts, f[0], f[1], f[2]);
		return 0;
	default: return 0;
	}
}

/* Notes an interpreter's verdict (report says which stacks lack Python frames). */
static void python_add(struct analysis *a, const struct mt_event *ev)
{
	const unsigned max = sizeof(a->python) / sizeof(a->python[0]);
	uint32_t v = (uint32_t)ev->f[PYTHON_VERSION], d = (uint32_t)ev->f[PYTHON_FRAMES];

	for (unsigned i = 0; i < a->npython; i++)
		if (a->python[i].version == v && a->python[i].verdict == d)
			return;
	if (a->npython < max) {
		a->python[a->npython].version = v;
		a->python[a->npython++].verdict = d;
	}
}

int analysis_add(struct analysis *a, const struct mt_event *ev)
{
	struct proc_summary *p = NULL;
	int err = 0;

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
		physical_set(a, ev->h.ts, ev->f[0]);
	} else if (ev->h.type == MT_SAMPLING) {
		/* about the run (pid 0), before any heap record */
		a->sample_period = ev->f[SAMPLING_PERIOD];
	} else if (ev->h.type == MT_MARK || ev->h.type == MT_ENABLE || ev->h.type == MT_DISABLE) {
		err = control_add(a, ev); /* about the run, not a process */
	} else if (ev->h.type == MT_PYTHON) {
		python_add(a, ev);
	} else if (ev->h.type == MT_OBJECT || ev->h.type == MT_MAPPING || ev->h.type == MT_STACK ||
		   ev->h.type == MT_PYCODE) {
		/* call-stack vocabulary (stacks.c reads it); an object's pid is 0 */
	} else if (a->filtered && ev->h.type == MT_FORK && !(ev->f[2] & MT_FORK_THREAD) &&
		   !analysis_proc(a, ev->h.pid)) {
		err = fork_child(a, ev->h.pid, ev->f); /* its parent is filtered out */
	} else {
		p = proc_get(a, ev->h.pid);
		if (!p)
			return -ENOMEM;
		err = proc_event(a, p, ev);
		if (ev->h.type == MT_FORK) /* the child may have moved procs */
			p = proc_get(a, ev->h.pid);
	}
	if (a->observer)
		a->observer(a->observer_ctx, ev, p);
	return err;
}

/*
 * --sample-bytes: the exact totals of the COUNTS records replace the
 * estimates, per process and for the tree, when every process that made
 * heap records has one (else the tree's stay estimates: counts_exact false).
 */
static void exact_totals(struct analysis *a)
{
	uint64_t allocs = 0, bytes = 0, frees = 0;
	bool all = true;

	for (unsigned i = 0; i < a->nprocs; i++) {
		struct proc_summary *p = &a->procs[i];

		if (!p->has_counts) {
			all &= !p->allocs && !p->frees;
			continue;
		}
		p->allocs = p->exact_allocs;
		p->allocated_bytes = p->exact_alloc_bytes;
		p->frees = p->exact_frees;
		allocs += p->exact_allocs;
		bytes = sat_add(bytes, p->exact_alloc_bytes);
		frees += p->exact_frees;
		a->sampled += p->sampled;
		a->unmatched += p->unmatched;
	}
	a->counts_exact = all;
	if (!all)
		return;
	a->alloc_count = allocs;
	a->total_allocated_bytes = bytes;
	a->free_count = frees;
}

void analysis_finish(struct analysis *a)
{
	for (unsigned i = 0; i < a->nprocs; i++) {
		if (a->attached && !a->procs[i].exited)
			sweep_alive(a, &a->procs[i], a->last_ts);
		else
			sweep_proc(a, &a->procs[i], a->last_ts);
		sweep_mapped(a, &a->procs[i]);
	}
	if (a->sample_period)
		exact_totals(a);
	site_table_settle(&a->sites);
	if (!a->heap_off && add_window(a, a->on_since, 0))
		a->heap_off = true; /* out of memory: the open window is left out */
}

const char *analysis_sampling_note(const struct analysis *a, char *buf, size_t len)
{
	if (!a->sample_period)
		return NULL;
	snprintf(
		buf, len,
		"sampled (--sample-bytes %llu: one allocation recorded per %llu bytes on average): heap bytes, blocks, peaks, leaks and call sites are estimates, temporary allocations not counted; %s",
		(unsigned long long)a->sample_period, (unsigned long long)a->sample_period,
		a->counts_exact ? "the allocation and free totals are exact"
				: "the totals are estimates too (a process has no counts record)");
	return buf;
}

void analysis_sampling_json(const struct analysis *a, FILE *out)
{
	if (!a->sample_period)
		return;
	fprintf(out,
		",\"sampling\":{\"period_bytes\":%llu,\"estimated\":true,\"exact_counts\":%s,\"sampled\":%llu,\"unmatched\":%llu}",
		(unsigned long long)a->sample_period, a->counts_exact ? "true" : "false",
		(unsigned long long)a->sampled, (unsigned long long)a->unmatched);
}

void analysis_release(struct analysis *a)
{
	for (unsigned i = 0; i < a->nprocs; i++) {
		live_release(&a->procs[i].live);
		mapped_release(&a->procs[i].mapped);
	}
	hash_index_release(&a->pid_index);
	hash_index_release(&a->tid_index);
	free(a->threads);
	free(a->procs);
	free(a->marks);
	free(a->windows);
	site_table_release(&a->sites);
	memset(a, 0, sizeof(*a));
}

void section_init(struct section *s, const char *from, const char *to)
{
	memset(s, 0, sizeof(*s));
	s->from = from;
	s->to = to;
	analysis_init(&s->a);
}

/* The break @pid had before the section's first brk record of it: the whole run's. */
static int section_seed_brk(struct section *s, const struct mt_event *ev,
			    const struct analysis *whole)
{
	const struct proc_summary *w = analysis_proc(whole, ev->h.pid);
	struct proc_summary *p;

	if (!w || !w->brk_known)
		return 0;
	p = proc_get(&s->a, ev->h.pid);
	if (!p)
		return -ENOMEM;
	if (!p->brk_known) {
		p->brk_known = true;
		p->brk = w->brk;
	}
	return 0;
}

int section_add(struct section *s, const struct mt_event *ev, const struct analysis *whole)
{
	bool is_mark = ev->h.type == MT_MARK;

	if (s->state == SECTION_BEFORE && is_mark && !strcmp(ev->str, s->from)) {
		s->state = SECTION_INSIDE;
		s->start_ns = ev->h.ts;
		s->started_off = whole->heap_off;
		return 0;
	}
	if (s->state != SECTION_INSIDE)
		return 0;
	if (is_mark && !strcmp(ev->str, s->to)) {
		s->state = SECTION_DONE;
		s->end_ns = ev->h.ts;
		analysis_finish(&s->a); /* what is live now is the section's leak */
		return 0;
	}
	if (ev->h.type == MT_BRK && section_seed_brk(s, ev, whole))
		return -ENOMEM;
	s->a.sample_period = whole->sample_period; /* the run's, recorded before the section */
	return analysis_add(&s->a, ev);
}

bool section_complete(const struct section *s)
{
	return !s->started_off && !s->a.events[MT_DISABLE];
}

void section_release(struct section *s)
{
	analysis_release(&s->a);
}
