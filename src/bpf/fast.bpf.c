// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * fast.bpf.c - the BPF half of the in-process heap path (--fast).
 *
 * libmemtrack-fast.so, preloaded into the tree's processes, records their
 * heap calls itself once it has announced with the marker syscall
 * (MT_FAST_PRCTL, bpf_abi.h).  Here that syscall sets MT_PROC_FAST on the
 * tracked process, from which alloc.bpf.c ignores the sites the library
 * interposes, and emits a FAST record on the control ring, from which
 * userspace detaches those sites (probes_fast) and `report` knows the
 * process's path.  The syscall orders the two paths exactly: calls that
 * returned before it are BPF's, calls made after it the library's.

 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "bpf/common.bpf.h"
#include "bpf/syscalls.bpf.h"

SEC("tp_btf/sys_enter")
int BPF_PROG(handle_fast_marker, struct pt_regs *regs, long id)
{
	struct tracked_proc *tp;
	struct mt_rec *r;
	__u32 tgid;

	if (id != NR_prctl || !fast_path || SYSCALL_PARM1(regs) != MT_FAST_PRCTL)
		return 0;
	tgid = bpf_get_current_pid_tgid() >> 32;
	tp = bpf_map_lookup_elem(&tracked, &tgid);
	if (!tp)
		return 0;
	r = ctl_reserve(MT_FAST, sizeof(r->h) + FAST_NFIELDS * sizeof(__u64));
	if (!r)
		return 0; /* no record, no handover: the uprobes go on recording */
	tp->fast_depth_off = (__s64)PT_REGS_PARM3_CORE_SYSCALL(regs);
	__sync_fetch_and_or(&tp->flags, MT_PROC_FAST);
	fill_hdr(r, MT_FAST, 0, FAST_NFIELDS);
	/* the marker's 4th argument: whether the library unwinds (bpf_abi.h) */
	r->f[FAST_STACKS] = (PT_REGS_PARM4_CORE_SYSCALL(regs) & MT_FAST_UNWINDS) != 0;
	rec_submit(r, true);
	return 0;
}

/* A new image starts on the uprobes until its library announces again. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(handle_fast_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = p->tgid;
	struct tracked_proc *tp = bpf_map_lookup_elem(&tracked, &tgid);

	if (tp && (tp->flags & MT_PROC_FAST))
		__sync_fetch_and_and(&tp->flags, ~MT_PROC_FAST);
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
