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
#include "common.bpf.h"

struct call_args {
	__u64 size;	/* bytes requested (nmemb * size for calloc) */
	__u64 arg;	/* realloc: old pointer; aligned: alignment */
	__u64 memptr;	/* posix_memalign: where the result is stored */
	__u32 fn;	/* enum mt_fn of the outermost call */
	__u32 depth;	/* allocator calls nested inside it */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC); /* creating a preallocated map costs ~10 ms at start */
	__uint(max_entries, MT_MAX_INFLIGHT);
	__type(key, __u32);
	__type(value, struct call_args);
} inflight SEC(".maps");

static __always_inline int call_enter(__u32 fn, __u64 size, __u64 arg, __u64 memptr)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct call_args *cur, args = {};

	if (!is_tracked(id >> 32))
		return 0;
	cur = bpf_map_lookup_elem(&inflight, &tid);
	if (cur) {
		cur->depth++;
		return 0;
	}
	args.size = size;
	args.arg = arg;
	args.memptr = memptr;
	args.fn = fn;
	bpf_map_update_elem(&inflight, &tid, &args, BPF_ANY);
	return 0;
}

/*
 * Pops the outermost call of this thread into @out.  Returns false for a
 * nested call (or when the entry probe was missed), which records nothing.
 */
static __always_inline bool call_exit(struct call_args *out)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct call_args *cur;

	cur = bpf_map_lookup_elem(&inflight, &tid);
	if (!cur)
		return false;
	if (cur->depth) {
		cur->depth--;
		return false;
	}
	*out = *cur;
	bpf_map_delete_elem(&inflight, &tid);
	return true;
}

static __always_inline void emit_heap(__u16 type, __u16 fn, __u64 addr, __u64 size, __u64 third)
{
	struct mt_rec *r;
	__u32 n = type == MT_FREE ? 1 : type == MT_MALLOC || type == MT_CALLOC ? 2 : 3;

	/* one reserve per record size keeps the verifier's size constant */
	if (n == 1)
		r = rec_reserve(type, fn, 1);
	else if (n == 2)
		r = rec_reserve(type, fn, 2);
	else
		r = rec_reserve(type, fn, 3);
	if (!r)
		return;
	r->f[0] = addr;
	if (n >= 2)
		r->f[1] = size;
	if (n >= 3)
		r->f[2] = third;
	rec_submit(r, false);
}

/*
 * free has no return probe.  A free made inside another allocator call
 * (realloc moving a block) belongs to that call and is not recorded.
 * Userspace may attach past free's own NULL check (see symbols.c), so
 * free(NULL) is usually not even trapped; it is filtered here as well.
 */
static __always_inline int free_enter(__u64 ptr)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;

	if (!ptr || !is_tracked(id >> 32))
		return 0;
	if (bpf_map_lookup_elem(&inflight, &tid))
		return 0;
	emit_heap(MT_FREE, MT_FN_FREE, ptr, 0, 0);
	return 0;
}

/*
 * One entry program serves every allocator function: userspace attaches it
 * with a uprobe-multi link whose per-site cookie is the enum mt_fn.
 */
SEC("uprobe")
int BPF_KPROBE(alloc_enter, __u64 a0, __u64 a1, __u64 a2)
{
	__u32 fn = bpf_get_attach_cookie(ctx);

	switch (fn) {
	case MT_FN_FREE:
		return free_enter(a0);
	case MT_FN_MALLOC:
		return call_enter(fn, a0, 0, 0);
	case MT_FN_CALLOC:
		return call_enter(fn, a0 * a1, 0, 0);
	case MT_FN_REALLOC:
		return call_enter(fn, a1, a0, 0);
	case MT_FN_REALLOCARRAY:
		return call_enter(fn, a1 * a2, a0, 0);
	case MT_FN_ALIGNED_ALLOC:
	case MT_FN_MEMALIGN:
		return call_enter(fn, a1, a0, 0);
	case MT_FN_POSIX_MEMALIGN:
		return call_enter(fn, a2, a1, a0);
	case MT_FN_VALLOC:
	case MT_FN_PVALLOC:
		return call_enter(fn, a0, 4096, 0);
	default:
		return 0;
	}
}

/*
 * One return probe serves every allocator: the stashed fn says what the
 * program called.
 */
SEC("uretprobe")
int BPF_KRETPROBE(alloc_exit, __u64 ret)
{
	struct call_args a;
	__u64 addr;

	if (!call_exit(&a))
		return 0;
	switch (a.fn) {
	case MT_FN_MALLOC:
		if (ret)
			emit_heap(MT_MALLOC, MT_FN_MALLOC, ret, a.size, 0);
		break;
	case MT_FN_CALLOC:
		if (ret)
			emit_heap(MT_CALLOC, MT_FN_CALLOC, ret, a.size, 0);
		break;
	case MT_FN_REALLOC:
	case MT_FN_REALLOCARRAY:
		if (!a.arg) {			/* realloc(NULL, n) allocates */
			if (ret)
				emit_heap(MT_MALLOC, a.fn, ret, a.size, 0);
		} else if (ret) {
			emit_heap(MT_REALLOC, a.fn, ret, a.size, a.arg);
		} else if (!a.size) {		/* realloc(p, 0) frees p */
			emit_heap(MT_FREE, a.fn, a.arg, 0, 0);
		}
		break;
	case MT_FN_POSIX_MEMALIGN:
		/* returns 0 or an errno; the pointer is in *memptr */
		if (ret || bpf_probe_read_user(&addr, sizeof(addr), (void *)a.memptr))
			break;
		emit_heap(MT_ALIGNED_ALLOC, a.fn, addr, a.size, a.arg);
		break;
	default:
		if (ret)
			emit_heap(MT_ALIGNED_ALLOC, a.fn, ret, a.size, a.arg);
		break;
	}
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
