// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * vm.bpf.c - the memory-mapping syscalls of the tree: mmap, munmap, mremap,
 * brk, mprotect.  The entry hook stashes the arguments per thread, the exit
 * hook records the call only when it succeeded.
 *
 * An mmap or brk made while the thread is inside an allocator call is
 * marked MT_REC_ALLOCATOR: the allocator's memory, not the program's own
 * (docs/METRICS.md "Mapped memory").  The uprobe path knows that from its
 * per-thread call (alloc.bpf.h); the in-process library from its
 * per-thread depth word, which it told fast.bpf.c where to find.
 *
 * These are the BTF raw tracepoints sys_enter/sys_exit, not the per-syscall
 * tracefs events: those are perf events, and the kernel tears each one down
 * under a global mutex with a grace period of its own (~56 ms here, 8 events
 * = half a second at every exit), and they need tracefs mounted.  The raw
 * tracepoint runs for every syscall on the machine, so it first compares the
 * syscall number (a few instructions) before any map lookup.
 *
 * An executable file mapping may bring in an allocator (a DT_NEEDED
 * libjemalloc, a dlopen'd library): the process is parked with SIGSTOP until
 * userspace has looked at the file and attached what it needs, so not one of
 * its allocations is missed.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "bpf/common.bpf.h"
#include "bpf/alloc.bpf.h"
#include "bpf/syscalls.bpf.h"
#include "bpf/unwind.bpf.h"
#include "bpf/python.bpf.h"


struct sys_args {
	__u64 a[6];   /* the syscall's arguments */
	__u32 nr;     /* enum mt_type it will produce */
	__u32 rec_fn; /* the record's fn: MT_REC_ALLOCATOR or 0 */
	__u64 stack;  /* mmap: the caller's stack id (--stacks), 0: none */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	/* creating a preallocated map costs ~10 ms at start */
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, MT_MAX_INFLIGHT);
	__type(key, __u32);
	__type(value, struct sys_args);
} sys_inflight SEC(".maps");

/* alloc.bpf.c's: the thread's outermost allocator call (by tid) */
extern struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, MT_MAX_INFLIGHT);
	__type(key, __u32);
	__type(value, struct call_args);
} inflight SEC(".maps");

/*
 * Whether the thread making a syscall with user stack pointer @sp is inside
 * an allocator call.  The uprobes: its outermost call's entry lies above
 * (one whose entry is not above is stale, alloc.bpf.c outer_call).  The
 * in-process library (MT_PROC_FAST): its depth word, at the offset the
 * marker gave from the thread pointer, is nonzero.  That word is the
 * process's claim about itself: a lie misattributes its own memory only.
 */
static __always_inline bool in_allocator(__u32 tgid, __u32 tid, __u64 sp)
{
	struct call_args *c = bpf_map_lookup_elem(&inflight, &tid);
	struct tracked_proc *tp;
	struct task_struct *task;
	__u32 depth = 0;
	__u64 at;

	if (c && sp < c->sp)
		return true;
	tp = bpf_map_lookup_elem(&tracked, &tgid);
	if (!tp || !(tp->flags & MT_PROC_FAST) || !tp->fast_depth_off)
		return false;
	task = (struct task_struct *)bpf_get_current_task();
	at = TASK_THREAD_POINTER(task) + tp->fast_depth_off;
	if (bpf_probe_read_user(&depth, sizeof(depth), (void *)at))
		return false;
	return depth != 0;
}

static __always_inline __u32 type_of_syscall(long id)
{
	switch (id) {
	case NR_mmap: return MT_MMAP;
	case NR_munmap: return MT_MUNMAP;
	case NR_mremap: return MT_MREMAP;
	case NR_brk: return MT_BRK;
	case NR_mprotect: return MT_MPROTECT;
	default: return 0;
	}
}

SEC("tp_btf/sys_enter")
int BPF_PROG(handle_sys_enter, struct pt_regs *regs, long id)
{
	__u32 type = type_of_syscall(id);
	__u64 pid_tgid;
	__u32 tid;
	struct sys_args args = {};

	if (!type)
		return 0;
	pid_tgid = bpf_get_current_pid_tgid();
	if (!is_tracked(pid_tgid >> 32))
		return 0;
	tid = (__u32)pid_tgid;
	args.nr = type;
	args.a[0] = PT_REGS_PARM1_CORE_SYSCALL(regs);
	args.a[1] = PT_REGS_PARM2_CORE_SYSCALL(regs);
	args.a[2] = PT_REGS_PARM3_CORE_SYSCALL(regs);
	args.a[3] = PT_REGS_PARM4_CORE_SYSCALL(regs);
	args.a[4] = PT_REGS_PARM5_CORE_SYSCALL(regs);
	args.a[5] = SYSCALL_PARM6(regs);
	if (type == MT_MMAP)
		args.stack = take_stack(USER_PC(regs), USER_SP(regs), USER_FP(regs), USER_LR(regs),
					true);
	if ((type == MT_MMAP || type == MT_BRK) && in_allocator(pid_tgid >> 32, tid, USER_SP(regs)))
		args.rec_fn = MT_REC_ALLOCATOR;
	bpf_map_update_elem(&sys_inflight, &tid, &args, BPF_ANY);
	return 0;
}

static __always_inline bool failed(long ret)
{
	return (unsigned long)ret >= (unsigned long)-4095;
}

static __always_inline void mmap_exit(const struct sys_args *a, long ret)
{
	struct mt_rec *r;
	bool park;

	if (failed(ret))
		return;
	park = stop_on_spawn && (a->a[2] & PROT_EXEC) && (int)a->a[4] >= 0;
	if (park) {
		r = ctl_reserve(MT_MMAP, sizeof(r->h) + MMAP_NFIELDS * sizeof(__u64));
		if (!r)
			return;
		fill_hdr(r, MT_MMAP, a->rec_fn, MMAP_NFIELDS);
	} else {
		r = rec_reserve(MT_MMAP, a->rec_fn, MMAP_NFIELDS);
		if (!r)
			return;
	}
	r->f[MMAP_ADDR] = ret;
	r->f[MMAP_LEN] = a->a[1];
	r->f[MMAP_PROT] = a->a[2];
	r->f[MMAP_FLAGS] = a->a[3];
	r->f[MMAP_FD] = (__u64)(__s64)(int)a->a[4];
	r->f[MMAP_OFFSET] = a->a[5];
	r->f[MMAP_STACK] = a->stack;
	if (park && park_process(NULL, r->h.pid))
		r->h.fn |= MT_REC_PARKED;
	rec_submit(r, park);
}

static __always_inline void munmap_exit(const struct sys_args *a, long ret)
{
	struct mt_rec *r;

	if (ret != 0)
		return;
	r = rec_reserve(MT_MUNMAP, 0, MUNMAP_NFIELDS);
	if (!r)
		return;
	r->f[MUNMAP_ADDR] = a->a[0];
	r->f[MUNMAP_LEN] = a->a[1];
	rec_submit(r, false);
}

static __always_inline void mremap_exit(const struct sys_args *a, long ret)
{
	struct mt_rec *r;

	if (failed(ret))
		return;
	r = rec_reserve(MT_MREMAP, 0, MREMAP_NFIELDS);
	if (!r)
		return;
	r->f[MREMAP_NEW_ADDR] = ret;
	r->f[MREMAP_NEW_LEN] = a->a[2];
	r->f[MREMAP_OLD_ADDR] = a->a[0];
	r->f[MREMAP_OLD_LEN] = a->a[1];
	r->f[MREMAP_FLAGS] = a->a[3];
	rec_submit(r, false);
}

/*
 * brk returns the new break on success and the old one on failure.  brk(0)
 * asks for the current break: recorded too (ld.so asks at every start), so
 * the analysis knows the break a later change starts from.
 */
static __always_inline void brk_exit(const struct sys_args *a, long ret)
{
	struct mt_rec *r;

	if (a->a[0] && (__u64)ret != a->a[0])
		return;
	r = rec_reserve(MT_BRK, a->rec_fn, BRK_NFIELDS);
	if (!r)
		return;
	r->f[BRK_ADDR] = ret;
	rec_submit(r, false);
}

static __always_inline void mprotect_exit(const struct sys_args *a, long ret)
{
	struct mt_rec *r;

	if (ret != 0)
		return;
	r = rec_reserve(MT_MPROTECT, 0, MPROTECT_NFIELDS);
	if (!r)
		return;
	r->f[MPROTECT_ADDR] = a->a[0];
	r->f[MPROTECT_LEN] = a->a[1];
	r->f[MPROTECT_PROT] = a->a[2];
	rec_submit(r, false);
}

SEC("tp_btf/sys_exit")
int BPF_PROG(handle_sys_exit, struct pt_regs *regs, long ret)
{
	long id = SYSCALL_NR(regs);
	struct sys_args a, *cur;
	__u32 tid;

	if (!type_of_syscall(id))
		return 0;
	tid = (__u32)bpf_get_current_pid_tgid();
	cur = bpf_map_lookup_elem(&sys_inflight, &tid);
	if (!cur)
		return 0;
	a = *cur;
	bpf_map_delete_elem(&sys_inflight, &tid);
	switch (a.nr) {
	case MT_MMAP: mmap_exit(&a, ret); break;
	case MT_MUNMAP: munmap_exit(&a, ret); break;
	case MT_MREMAP: mremap_exit(&a, ret); break;
	case MT_BRK: brk_exit(&a, ret); break;
	case MT_MPROTECT: mprotect_exit(&a, ret); break;
	default: break;
	}
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
