/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * unwind.bpf.h - the user call stack at an allocator's entry (or at an
 * mmap syscall), unwound in the kernel from .eh_frame rows and written once
 * per distinct stack as a STACK record (--stacks).
 *
 * Userspace loads, before the process runs code in a new object (it is
 * parked then), the object's rows into `unwind_rows` (chunked: bpf_abi.h) and the process's
 * executable mappings into `proc_maps` (src/record/stacks.c).  Each frame is
 * a binary search in the mappings and one in the object's rows; the CFA is
 * rsp+N, rbp+N or *(rbp+N), the return address is at CFA-8 (x86-64), rbp
 * is restored from CFA+N where the row says so.  A stack is hashed over its
 * (object, address) frames, so the id does not depend on ASLR; an LRU set
 * remembers which ids were written.  Maps are defined in ring.bpf.c.
 */
#ifndef MEMTRACK_UNWIND_BPF_H
#define MEMTRACK_UNWIND_BPF_H

#include "bpf/common.bpf.h"

extern const volatile __u32 stacks_on; /* --stacks */

struct unwind_rows_chunk {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, MT_UNWIND_CHUNK_ROWS);
	__type(key, __u32);
	__uint(value_size,
	       sizeof(struct mt_unwind_row)); /* a size: BTF has the struct as a declaration here */
};

extern struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, MT_UNWIND_ROWS_DEFAULT / MT_UNWIND_CHUNK_ROWS);
	__type(key, __u32);
	__array(values, struct unwind_rows_chunk);
} unwind_rows SEC(".maps");

struct unwind_index_chunk {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, MT_UNWIND_CHUNK_INDEX);
	__type(key, __u32);
	__type(value, __u64);
};

extern struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, MT_UNWIND_ROWS_DEFAULT / 4 / MT_UNWIND_CHUNK_INDEX);
	__type(key, __u32);
	__array(values, struct unwind_index_chunk);
} unwind_index SEC(".maps");

extern struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, MT_MAX_MMS);
	__type(key, __u32);
	__type(value, struct mt_umaps);
} proc_maps SEC(".maps");

extern struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MT_STACKS_SEEN);
	__type(key, __u64);
	__type(value, __u8);
} stacks_seen SEC(".maps");

extern struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mt_rec_stack);
} stack_scratch SEC(".maps");

extern struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mt_unwind_state);
} unwind_state SEC(".maps");

enum { UNWIND_RUNNING = 0, UNWIND_COMPLETE = 1, UNWIND_TRUNCATED = 2 };

/*
 * bpf_loop's context: pointers only.  The values the unwinder branches on
 * are in *st, map memory, so that no kernel's verifier takes them for the
 * constants they are at the call (bpf_abi.h, struct mt_unwind_state).
 */
struct mt_unwind {
	struct mt_unwind_state *st; /* this CPU's unwind_state */
	struct mt_rec_stack *s;	    /* this CPU's stack_scratch: the frames */
	const struct mt_umaps *um;  /* the address space's mappings, or NULL */
};

/*
 * Binary searches are branch-free and run a fixed number of steps: with a
 * branch on the data per step (or an early exit) the verifier walks every
 * path, 2^steps states.  @a <= @b for user addresses (< 2^63) is the sign
 * of b - a.
 */
static __always_inline __u64 le_mask(__u64 a, __u64 b)
{
	return ((b - a) >> 63) - 1; /* all ones when a <= b, else 0 */
}

/* The index in @um->m of the mapping holding @pc, or MT_MAX_UMAPS: none. */
static __always_inline __u32 find_umap(const struct mt_umaps *um, __u64 pc)
{
	__u64 lo = 0, hi = um->n, mid, take;

	if (hi > MT_MAX_UMAPS)
		hi = MT_MAX_UMAPS;
	if (!hi)
		return MT_MAX_UMAPS;
	/* the last mapping starting at or below pc: a[lo] <= pc < a[hi] */
	for (int k = 0; k <= MT_UMAPS_LOG2; k++) {
		mid = ((lo + hi) / 2) & (MT_MAX_UMAPS - 1);
		take = le_mask(um->m[mid].start, pc);
		lo = (mid & take) | (lo & ~take);
		hi = (hi & take) | (mid & ~take);
	}
	lo &= MT_MAX_UMAPS - 1;
	if (pc < um->m[lo].start || pc >= um->m[lo].end)
		return MT_MAX_UMAPS;
	return (__u32)lo;
}

/* The mapping holding st->pc: the previous frame's (callers are often in it), or a search's. */
static __always_inline const struct mt_umap *frame_umap(const struct mt_umaps *um,
							struct mt_unwind_state *st)
{
	__u32 k = st->last;

	if (!um)
		return NULL;
	if (k >= MT_MAX_UMAPS || st->pc < um->m[k].start || st->pc >= um->m[k].end)
		k = find_umap(um, st->pc);
	st->last = k;
	return k < MT_MAX_UMAPS ? &um->m[k] : NULL;
}

/* unwind_index[idx] (a row of the object), or -1: its chunk, then the entry in it. */
static __always_inline __s64 bucket_row(__u32 idx)
{
	__u32 chunk = idx >> MT_UNWIND_CHUNK_INDEX_LOG2, at = idx & (MT_UNWIND_CHUNK_INDEX - 1);
	void *inner = bpf_map_lookup_elem(&unwind_index, &chunk);
	__u64 *v;

	if (!inner)
		return -1;
	v = bpf_map_lookup_elem(inner, &at);
	return v ? (__s64)(*v & 0xffffffffu) : -1;
}

/* Row @idx of the flat numbering (bpf_abi.h), or NULL: its chunk not created. */
static __always_inline const struct mt_unwind_row *row_at(__u32 idx)
{
	__u32 chunk = idx >> MT_UNWIND_CHUNK_LOG2, at = idx & (MT_UNWIND_CHUNK_ROWS - 1);
	void *inner = bpf_map_lookup_elem(&unwind_rows, &chunk);

	return inner ? bpf_map_lookup_elem(inner, &at) : NULL;
}

/*
 * Row @idx, through @inner (chunk @chunk, looked up once per search: a
 * bucket's rows are nearly always in one chunk) when it holds the row.
 */
static __always_inline const struct mt_unwind_row *row_in(void *inner, __u32 chunk, __u32 idx)
{
	__u32 at = idx & (MT_UNWIND_CHUNK_ROWS - 1);

	if (inner && idx >> MT_UNWIND_CHUNK_LOG2 == chunk)
		return bpf_map_lookup_elem(inner, &at);
	return row_at(idx);
}

/* One step of the search for the last row <= @addr in [*lo, *hi); false: no row. */
static __always_inline bool row_step(__u64 *lo, __u64 *hi, __u64 addr, void *inner, __u32 chunk)
{
	__u32 idx = (__u32)((*lo + *hi) / 2);
	const struct mt_unwind_row *row = row_in(inner, chunk, idx);
	__u64 take;

	if (!row)
		return false;
	take = le_mask(row->pc, addr);
	*lo = (idx & take) | (*lo & ~take);
	*hi = (*hi & take) | (idx & ~take);
	return true;
}

/*
 * The row of @m's object covering ELF address @addr, or NULL.  With the
 * object's index: the bucket's rows, MT_UNWIND_BUCKET_STEPS steps; without:
 * the whole slice, 21 steps (MT_UNWIND_OBJECT_ROWS_MAX rows).
 */
static __always_inline const struct mt_unwind_row *find_row(const struct mt_umap *m, __u64 addr)
{
	__u64 lo = m->row_start, hi = (__u64)m->row_start + m->nrows, b;
	__s64 first, next;
	__u32 chunk;
	void *inner;

	if (!m->nrows || addr > 0xffffffffull || addr < m->text_lo)
		return NULL;
	if (m->nbuckets) {
		b = (addr - m->text_lo) >> (m->shift & 31);
		if (b >= m->nbuckets)
			b = m->nbuckets - 1;
		first = bucket_row(m->index_start + (__u32)b);
		next = b + 1 < m->nbuckets ? bucket_row(m->index_start + (__u32)b + 1)
					   : m->nrows - 1;
		if (first < 0 || next < first)
			return NULL;
		lo = m->row_start + (__u64)first;
		hi = m->row_start + (__u64)next + 1;
	}
	chunk = (__u32)lo >> MT_UNWIND_CHUNK_LOG2;
	inner = bpf_map_lookup_elem(&unwind_rows, &chunk);
	_Static_assert(1u << MT_UNWIND_BUCKET_STEPS == MT_UNWIND_BUCKET_ROWS, "bucket steps");
	for (int k = 0; k < MT_UNWIND_BUCKET_STEPS; k++)
		if (!row_step(&lo, &hi, addr, inner, chunk))
			return NULL;
	_Static_assert(MT_UNWIND_OBJECT_ROWS_MAX == 1u << 21, "find_row's steps");
	if (!m->nbuckets)
		for (int k = MT_UNWIND_BUCKET_STEPS; k < 21; k++)
			if (!row_step(&lo, &hi, addr, inner, chunk))
				return NULL;
	{
		const struct mt_unwind_row *row = row_in(inner, chunk, (__u32)lo);

		return row && row->pc <= addr ? row : NULL;
	}
}

static __always_inline void add_frame(const struct mt_unwind *u, __u32 object, __u64 addr)
{
	struct mt_unwind_state *st = u->st;
	struct mt_rec_stack *s = u->s;
	__u32 i = st->n;

	if (i >= MT_STACK_MAX)
		return;
	s->frames[i].object = object;
	s->frames[i].pad = 0;
	s->frames[i].addr = addr;
	st->n = i + 1;
	/* FNV-1a over 64-bit words */
	st->hash = (st->hash ^ object) * 0x100000001b3ull;
	st->hash = (st->hash ^ addr) * 0x100000001b3ull;
}

/* One frame: record where we are, then find the caller.  1 stops bpf_loop. */
static long unwind_step(__u64 i, void *ctx)
{
	const struct mt_unwind *u = ctx;
	struct mt_unwind_state *st = u->st;
	const struct mt_unwind_row *row;
	const struct mt_umap *m;
	__u64 addr, cfa, ra;

	if (!st->exact && st->n >= MT_STACK_MAX)
		goto truncated; /* more frames than a stack may hold */
	m = frame_umap(u->um, st);
	addr = m ? st->pc - m->bias : st->pc;
	if (!st->exact)
		add_frame(u, m ? m->object : 0, addr);
	if (!m)
		goto truncated;
	/* a return address may be the first byte after a noreturn call's function */
	row = find_row(m, st->exact ? addr : addr - 1);
	if (!row)
		goto truncated;
	switch (row->cfa) {
	case MT_CFA_END: st->status = UNWIND_COMPLETE; return 1;
	case MT_CFA_RSP: cfa = st->sp + row->cfa_off; break;
	case MT_CFA_RBP: cfa = st->bp + row->cfa_off; break;
	case MT_CFA_DEREF_RBP:
		if (bpf_probe_read_user(&cfa, sizeof(cfa), (void *)(st->bp + row->cfa_off)))
			goto truncated;
		break;
	default: goto truncated;
	}
	if (bpf_probe_read_user(&ra, sizeof(ra), (void *)(cfa - 8)))
		goto truncated;
	if (row->rbp == MT_RBP_AT_CFA) {
		if (bpf_probe_read_user(&st->bp, sizeof(st->bp), (void *)(cfa + row->rbp_off)))
			goto truncated;
	} else if (row->rbp == MT_RBP_LOST) {
		st->bp = 0;
	}
	if (!ra) { /* a zeroed return address ends some hand-written chains */
		st->status = UNWIND_COMPLETE;
		return 1;
	}
	st->sp = cfa;
	st->pc = ra;
	st->exact = 0;
	return 0;
truncated:
	st->status = UNWIND_TRUNCATED;
	return 1;
}

/* The tgid whose executable mappings describe the current task's mm. */
static __always_inline __u32 mm_owner_tgid(void)
{
	struct task_struct *t = bpf_get_current_task_btf();
	__u64 mm = (__u64)t->mm;
	struct mm_owner *o = bpf_map_lookup_elem(&mm_owners, &mm);

	return o ? o->tgid : (__u32)(bpf_get_current_pid_tgid() >> 32);
}

/*
 * Writes the unwound stack in stack_scratch as a STACK record unless its id
 * was written already.  Returns the id.
 */
static __always_inline __u64 emit_stack(const struct mt_unwind *u)
{
	const struct mt_unwind_state *st = u->st;
	struct mt_rec_stack *s = u->s;
	__u32 n = st->n;
	__u64 id, size;
	__u8 one = 1;

	if (!n || n > MT_STACK_MAX)
		return 0;
	id = (st->hash ^ (st->status == UNWIND_COMPLETE ? 0 : 0x9e3779b97f4a7c15ull)) | 1;
	if (bpf_map_lookup_elem(&stacks_seen, &id))
		return id;
	fill_hdr((struct mt_rec *)s, MT_STACK, 0, STACK_NFIELDS);
	s->f[STACK_ID] = id;
	s->f[STACK_TRUNCATED] = st->status != UNWIND_COMPLETE;
	s->nframes = n;
	s->pad = 0;
	size = __builtin_offsetof(struct mt_rec_stack, frames) + (__u64)n * sizeof(s->frames[0]);
	if (size > sizeof(*s))
		return 0;
	if (bpf_ringbuf_output(&events, s, size, BPF_RB_NO_WAKEUP)) {
		count_drop(MT_STACK);
		return id; /* the heap record still names it; a later call writes it */
	}
	bpf_map_update_elem(&stacks_seen, &id, &one, BPF_ANY);
	return id;
}

/*
 * The current task's user stack: at an allocator's entry (@exact false: @sp
 * points at the return address) or at a syscall (@exact: @pc is where the
 * task is).  Returns its stack id, 0 when none was taken.
 */
static __always_inline __u64 take_stack(__u64 pc, __u64 sp, __u64 bp, bool exact)
{
	struct mt_unwind_state *st;
	struct mt_unwind u;
	__u32 zero = 0, owner;

	if (!stacks_on)
		return 0;
	st = bpf_map_lookup_elem(&unwind_state, &zero);
	u.s = bpf_map_lookup_elem(&stack_scratch, &zero);
	if (!st || !u.s)
		return 0;
	u.st = st;
	owner = mm_owner_tgid();
	u.um = bpf_map_lookup_elem(&proc_maps, &owner);
	st->bp = bp;
	st->hash = 0xcbf29ce484222325ull;
	st->last = MT_MAX_UMAPS;
	st->n = 0;
	st->status = UNWIND_RUNNING;
	st->exact = exact;
	if (exact) {
		st->pc = pc;
		st->sp = sp;
	} else {
		if (bpf_probe_read_user(&st->pc, sizeof(st->pc), (void *)sp))
			return 0;
		st->sp = sp + 8;
	}
	bpf_loop(MT_STACK_MAX + 1, unwind_step, &u, 0);
	if (st->status == UNWIND_RUNNING)
		st->status = UNWIND_TRUNCATED;
	return emit_stack(&u);
}

#endif /* MEMTRACK_UNWIND_BPF_H */
