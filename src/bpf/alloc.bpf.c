// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * alloc.bpf.c - uprobes on the allocator entry points (malloc, calloc,
 * realloc, reallocarray, the aligned family, free).
 *
 * Userspace attaches these per process of the tree (never for pid -1), so
 * processes outside the tree never trap.  An entry probe stashes the
 * arguments per thread; the return probe emits one record with the result.
 * A call made by one allocator function through another (realloc(NULL, n)
 * calling malloc, reallocarray calling realloc) only bumps the depth of the
 * outer call's slot, so the program's call is recorded once, as itself.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "bpf/common.bpf.h"
#include "bpf/alloc.bpf.h"
#include "bpf/unwind.bpf.h"
#include "bpf/python.bpf.h"
#include "sample.h"

/* the thread's outermost allocator call (vm.bpf.c reads it too) */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	/* creating a preallocated map costs ~10 ms at start */
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, MT_MAX_INFLIGHT);
	__type(key, __u32);
	__type(value, struct call_args);
} inflight SEC(".maps");

/*
 * --sample-bytes (sample.h).  Userspace sizes these three to 1 entry
 * without it.  A thread's distance to its next sample point: an evicted
 * one is drawn afresh, which the memoryless draw allows.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MT_MAX_INFLIGHT);
	__type(key, __u32);
	__type(value, __s64);
} sample_left SEC(".maps");

/* The sampled blocks live: only their frees are recorded. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, MT_MAX_SAMPLED);
	__type(key, struct mt_sampled_key);
	__type(value, __u64);
} sampled_blocks SEC(".maps");

/* Every process's exact totals (bpf_abi.h), read at the end by userspace. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, MT_MAX_TRACKED);
	__type(key, __u32);
	__type(value, struct mt_heap_counts);
} heap_counts SEC(".maps");

/*
 * Whether this thread's allocation of @size bytes is recorded (always
 * without sampling).  A global function: the verifier checks it once, not
 * at each of call_enter's inlined sites (it was 150 ms of the load).
 */
__noinline int sample_take(__u64 size)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__s64 *left, first;

	if (!sample_bytes)
		return true;
	left = bpf_map_lookup_elem(&sample_left, &tid);
	if (!left) {
		first = mt_sample_interval(bpf_get_prandom_u32(), sample_bytes);
		bpf_map_update_elem(&sample_left, &tid, &first, BPF_ANY);
		left = bpf_map_lookup_elem(&sample_left, &tid);
		if (!left)
			return false;
	}
	return mt_sample_take(left, size, bpf_get_prandom_u32(), sample_bytes);
}

static __always_inline struct mt_heap_counts *counts_of(__u32 tgid)
{
	struct mt_heap_counts *c = bpf_map_lookup_elem(&heap_counts, &tgid), zero = {};

	if (c)
		return c;
	bpf_map_update_elem(&heap_counts, &tgid, &zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(&heap_counts, &tgid);
}

/*
 * Whether the block at @addr was sampled (and is no longer: its free is
 * recorded).  Counts the free.
 */
static __always_inline bool sampled_free(struct mt_heap_counts *c, __u32 tgid, __u64 addr)
{
	struct mt_sampled_key k = { .addr = addr, .tgid = tgid };

	if (c)
		__sync_fetch_and_add(&c->frees, 1);
	return bpf_map_delete_elem(&sampled_blocks, &k) == 0;
}

/*
 * Counts an allocation of @size at @addr; when @sampled, remembers the block
 * (its free is recorded) and returns whether it is recorded.
 */
static __always_inline bool sampled_alloc(struct mt_heap_counts *c, __u32 tgid, __u64 addr,
					  __u64 size, bool sampled)
{
	struct mt_sampled_key k = { .addr = addr, .tgid = tgid };
	__u64 one = 1;

	if (c) {
		__sync_fetch_and_add(&c->allocs, 1);
		__sync_fetch_and_add(&c->alloc_bytes, size);
	}
	if (!sampled)
		return false;
	if (bpf_map_update_elem(&sampled_blocks, &k, &one, BPF_ANY)) {
		if (c)
			__sync_fetch_and_add(&c->unmatched, 1);
		return false;
	}
	if (c)
		__sync_fetch_and_add(&c->sampled, 1);
	return true;
}

/*
 * The thread's outermost allocator call, or NULL.  A call whose entry is
 * found at a lower stack address (or the same one: a tail call such as
 * operator delete(void*, size_t) jumping to operator delete(void*)) runs
 * inside it.  An entry left by a call that never returned (an exception
 * thrown by operator new) sits below the new call's stack pointer: stale,
 * it is dropped so it cannot swallow the thread's later calls.
 */
static __always_inline struct call_args *outer_call(__u32 tid, __u64 sp, bool has_ret)
{
	struct call_args *cur = bpf_map_lookup_elem(&inflight, &tid);

	/*
	 * A call without a return probe (operator new) hands its result to a
	 * call it makes, never to one it jumps to: a call with a return probe
	 * at its very stack level finds it stale (it returned without one).
	 */
	if (cur && (sp > cur->sp || (has_ret && cur->noret && sp == cur->sp))) {
		bpf_map_delete_elem(&inflight, &tid);
		return NULL;
	}
	return cur;
}

/*
 * @noret: the site has no return probe (operator new: a return probe moves
 * the return address to the kernel's trampoline, which the C++ unwinder
 * cannot step through, so a bad_alloc thrown through it terminates the
 * program).  Such a call takes its result from the first allocator call
 * nested in it that returns (libstdc++'s operator new calls malloc).
 */
static __always_inline int call_enter(__u32 fn, __u32 kind, bool noret, __u64 sp, __u64 size,
				      __u64 arg, __u64 memptr)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct call_args *cur, args = {};

	if (!heap_tracked(id >> 32))
		return 0;
	cur = outer_call(tid, sp, !noret);
	if (cur) {
		if (!noret)
			cur->depth++;
		return 0;
	}
	args.size = size;
	args.arg = arg;
	args.memptr = memptr;
	args.sp = sp;
	args.fn = fn;
	args.kind = kind;
	args.noret = noret;
	/* the decision comes first: an unsampled call takes no stack */
	args.sampled = sample_take(size);
	bpf_map_update_elem(&inflight, &tid, &args, BPF_ANY);
	return 1;
}

/*
 * At a return probe: pops the outermost call of this thread into @out when
 * this return completes it (its own return, or for a call without a return
 * probe the return of the first call nested in it).  Returns false for any
 * other nested return (or when the entry probe was missed): nothing to
 * record.
 */
static __always_inline bool call_exit(struct call_args *out)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct call_args *cur;

	cur = bpf_map_lookup_elem(&inflight, &tid);
	if (!cur)
		return false;
	if (cur->depth && !(cur->noret && cur->depth == 1)) {
		cur->depth--;
		return false;
	}
	*out = *cur;
	bpf_map_delete_elem(&inflight, &tid);
	return true;
}

static __always_inline void emit_raw(__u16 type, __u16 fn, __u64 addr, __u64 size, __u64 third,
				     __u64 stack)
{
	struct mt_rec *r;
	__u32 n = type == MT_FREE			   ? FREE_NFIELDS
		  : type == MT_MALLOC || type == MT_CALLOC ? MALLOC_NFIELDS
							   : REALLOC_NFIELDS;

	/* one reserve per record size keeps the verifier's size constant */
	if (n == FREE_NFIELDS)
		r = rec_reserve(type, fn, FREE_NFIELDS);
	else if (n == MALLOC_NFIELDS)
		r = rec_reserve(type, fn, MALLOC_NFIELDS);
	else
		r = rec_reserve(type, fn, REALLOC_NFIELDS);
	if (!r)
		return;
	/* heap types share their leading fields (asserted in event.h) */
	r->f[MALLOC_ADDR] = addr;
	if (n > MALLOC_SIZE)
		r->f[MALLOC_SIZE] = size;
	if (n == MALLOC_NFIELDS)
		r->f[MALLOC_STACK] = stack; /* or CALLOC_STACK */
	if (n == REALLOC_NFIELDS) {
		r->f[REALLOC_OLD_ADDR] = third; /* or ALIGNED_ALLOC_ALIGN */
		r->f[REALLOC_STACK] = stack;	/* or ALIGNED_ALLOC_STACK */
	}
	rec_submit(r, false);
}

/*
 * Emits a heap record of the program's call; with --sample-bytes it counts
 * the call and emits only what concerns sampled blocks (@sampled: the
 * call's draw): a sampled allocation, the free of a sampled block, a
 * realloc from or to one (to an unsampled block from a sampled one: the
 * free of the old).
 */
static __always_inline void emit_heap(__u16 type, __u16 fn, __u64 addr, __u64 size, __u64 third,
				      __u64 stack, bool sampled)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct mt_heap_counts *c;
	bool old = false;

	if (!sample_bytes) {
		emit_raw(type, fn, addr, size, third, stack);
		return;
	}
	c = counts_of(tgid);
	if (type == MT_FREE) {
		if (sampled_free(c, tgid, addr))
			emit_raw(MT_FREE, fn, addr, 0, 0, 0);
		return;
	}
	if (type == MT_REALLOC)
		old = sampled_free(c, tgid, third);
	if (sampled_alloc(c, tgid, addr, size, sampled))
		emit_raw(type, fn, addr, size, third, stack);
	else if (old)
		emit_raw(MT_FREE, fn, third, 0, 0, 0);
}

/*
 * A free-kind function (free, operator delete, dallocx ...) is recorded at
 * its entry: it has nothing to return.  A free made inside another
 * allocator call (realloc moving a block, operator delete calling free, an
 * LD_PRELOAD wrapper's free calling libc's) belongs to that call and is not
 * recorded.  @guarded: this site also has a return probe (userspace adds one
 * to free-kind functions that may call another probed free), so its own
 * call is pushed as the outermost one and popped at return.  Unguarded free
 * sites may sit past free's NULL check (symbols.c), so free(NULL) is not
 * even trapped there; it is filtered here as well.
 */
static __always_inline int free_enter(__u32 fn, bool guarded, __u64 sp, __u64 ptr)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct call_args *cur, args = {};

	if (!heap_tracked(id >> 32))
		return 0;
	cur = outer_call(tid, sp, guarded);
	if (cur) {
		if (guarded)
			cur->depth++;
		return 0;
	}
	if (ptr)
		emit_heap(MT_FREE, fn, ptr, 0, 0, 0, false);
	if (guarded) {
		args.sp = sp;
		args.fn = fn;
		args.kind = MT_K_FREE;
		bpf_map_update_elem(&inflight, &tid, &args, BPF_ANY);
	}
	return 0;
}

/* Enters the call by its kind; 1 when it is the thread's outermost call. */
static __always_inline int enter_kind(__u32 fn, __u32 kind, __u64 cookie, bool noret, __u64 sp,
				      __u64 a0, __u64 a1, __u64 a2)
{
	switch (kind) {
	case MT_K_FREE: return free_enter(fn, cookie & MT_COOKIE_GUARDED, sp, a0);
	case MT_K_MALLOC:
	case MT_K_ZALLOC: return call_enter(fn, kind, noret, sp, a0, 0, 0);
	case MT_K_CALLOC: return call_enter(fn, kind, noret, sp, a0 * a1, 0, 0);
	case MT_K_REALLOC:
	case MT_K_XALLOCX: return call_enter(fn, kind, noret, sp, a1, a0, 0);
	case MT_K_REALLOCARRAY: return call_enter(fn, kind, noret, sp, a1 * a2, a0, 0);
	case MT_K_ALIGN_SIZE: return call_enter(fn, kind, noret, sp, a1, a0, 0);
	case MT_K_SIZE_ALIGN:
	case MT_K_MALLOCX: return call_enter(fn, kind, noret, sp, a0, a1, 0);
	case MT_K_POSIX_MEMALIGN: return call_enter(fn, kind, noret, sp, a2, a1, a0);
	case MT_K_PAGE_ALIGNED: return call_enter(fn, kind, noret, sp, a0, page_size, 0);
	default: return 0;
	}
}

/*
 * One entry program serves every allocator function: userspace attaches it
 * with a uprobe-multi link whose per-site cookie is the enum mt_fn, its
 * enum mt_fn_kind (MT_COOKIE_KIND) and MT_COOKIE_GUARDED.
 */
/* Whether a probe with @cookie is the current process's (MT_COOKIE_TGID). */
static __always_inline bool cookie_for_current(__u64 cookie)
{
	__u32 tgid = MT_COOKIE_TGID(cookie);

	return !tgid || tgid == bpf_get_current_pid_tgid() >> 32;
}

SEC("uprobe")
int BPF_KPROBE(alloc_enter, __u64 a0, __u64 a1, __u64 a2)
{
	__u64 cookie = bpf_get_attach_cookie(ctx);
	__u32 fn = cookie & MT_COOKIE_FN_MASK;
	__u32 kind = MT_COOKIE_KIND(cookie);
	__u64 sp = PT_REGS_SP(ctx);
	bool noret = cookie & MT_COOKIE_NORET;
	int outer;

	if (!cookie_for_current(cookie))
		return 0;
	if (!heap_enabled) /* recording switched off (control socket) */
		return 0;
	if ((cookie & MT_COOKIE_INTERPOSED) && fast_records(bpf_get_current_pid_tgid() >> 32))
		return 0; /* libmemtrack-fast.so records it (fast.bpf.c) */
	outer = enter_kind(fn, kind, cookie, noret, sp, a0, a1, a2);
	/* the stack of the program's own call: one unwinder in the program */
	if (outer == 1 && stacks_on) {
		__u32 tid = (__u32)bpf_get_current_pid_tgid();
		struct call_args *cur = bpf_map_lookup_elem(&inflight, &tid);

		if (cur && cur->sampled)
			cur->stack =
				take_stack(0, sp, PT_REGS_FP(ctx), UNWIND_ENTRY_LR(ctx), false);
	}
	return 0;
}

/* realloc-like results: realloc(NULL, n) allocates, realloc(p, 0) frees p. */
static __always_inline void realloc_exit(const struct call_args *a, __u64 ret)
{
	if (!a->arg) {
		if (ret)
			emit_heap(MT_MALLOC, a->fn, ret, a->size, 0, a->stack, a->sampled);
	} else if (ret) {
		emit_heap(MT_REALLOC, a->fn, ret, a->size, a->arg, a->stack, a->sampled);
	} else if (!a->size) {
		emit_heap(MT_FREE, a->fn, a->arg, 0, 0, 0, false);
	}
}

/* jemalloc's mallocx flags: low 6 bits log2(alignment), 0x40 zeroed. */
static __always_inline void mallocx_exit(const struct call_args *a, __u64 ret)
{
	__u32 lg_align = a->arg & 0x3f;

	if (lg_align)
		emit_heap(MT_ALIGNED_ALLOC, a->fn, ret, a->size, 1ull << lg_align, a->stack,
			  a->sampled);
	else if (a->arg & 0x40)
		emit_heap(MT_CALLOC, a->fn, ret, a->size, 0, a->stack, a->sampled);
	else
		emit_heap(MT_MALLOC, a->fn, ret, a->size, 0, a->stack, a->sampled);
}

/* Records the outermost call @a, which returned @ret. */
static __always_inline void emit_result(const struct call_args *a, __u64 ret)
{
	__u64 addr;

	switch (a->kind) {
	case MT_K_FREE: /* recorded at entry */ break;
	case MT_K_MALLOC:
		if (ret)
			emit_heap(MT_MALLOC, a->fn, ret, a->size, 0, a->stack, a->sampled);
		break;
	case MT_K_CALLOC:
	case MT_K_ZALLOC:
		if (ret)
			emit_heap(MT_CALLOC, a->fn, ret, a->size, 0, a->stack, a->sampled);
		break;
	case MT_K_REALLOC:
	case MT_K_REALLOCARRAY: realloc_exit(a, ret); break;
	case MT_K_MALLOCX:
		if (ret)
			mallocx_exit(a, ret);
		break;
	case MT_K_XALLOCX:
		/* returns the block's new usable size; it never moves */
		if (ret >= a->size)
			emit_heap(MT_REALLOC, a->fn, a->arg, a->size, a->arg, a->stack, a->sampled);
		break;
	case MT_K_POSIX_MEMALIGN:
		/* returns 0 or an errno; the pointer is in *memptr */
		if (ret || bpf_probe_read_user(&addr, sizeof(addr), (void *)a->memptr))
			break;
		emit_heap(MT_ALIGNED_ALLOC, a->fn, addr, a->size, a->arg, a->stack, a->sampled);
		break;
	default:
		if (ret)
			emit_heap(MT_ALIGNED_ALLOC, a->fn, ret, a->size, a->arg, a->stack,
				  a->sampled);
		break;
	}
}

/*
 * One return probe serves every allocator: the stashed kind says what the
 * program's outermost call was.  When that call has no return probe of its
 * own, this is the return of the call it delegated to: the result is the
 * outer call's, unless the delegate returns no pointer (posix_memalign).
 */
SEC("uretprobe")
int BPF_KRETPROBE(alloc_exit, __u64 ret)
{
	struct call_args a;

	if (!cookie_for_current(bpf_get_attach_cookie(ctx)))
		return 0; /* another process's probe: its entry was not taken either */
	/* a call that returns after `disable` is not recorded either; its
	 * slot is popped all the same */
	if (!call_exit(&a) || !heap_enabled)
		return 0;
	if (a.noret && MT_COOKIE_KIND(bpf_get_attach_cookie(ctx)) == MT_K_POSIX_MEMALIGN)
		return 0;
	emit_result(&a, ret);
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
