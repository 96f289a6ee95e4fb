// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * proc.bpf.c - the process tree: fork/clone, exec and exit.
 *
 * Membership of the tree is the `tracked` map: the root is put there by
 * userspace before it runs, every child of a tracked process is added at
 * fork, whatever happens to its parent later (double-forking daemons stay
 * tracked).  A new address space (a fork child, an exec) has no uprobes of
 * ours yet, so it is parked with SIGSTOP before it runs one instruction;
 * userspace attaches the allocator probes for it and sends SIGCONT.  So is
 * a vfork child: it shares the parent's mm, but the parent's links do not
 * run for it.
 *
 * Every record of this file goes through the control ring (ctl_events):
 * few, and each one matters (a parked task waits for it, an exit releases
 * the process's probes), so they do not compete with heap records.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "bpf/common.bpf.h"
#include "bpf/syscalls.bpf.h"

#define PR_SET_DUMPABLE 4 /* include/uapi/linux/prctl.h */

extern struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, MT_MAX_TRACKED);
	__type(key, __u32);
	__type(value, struct fork_pending);
} fork_pending SEC(".maps");

/*
 * Emits the FORK record of @ctgid (a process; @ctid for a thread), made by
 * thread @ptid of @ptgid, parking the child first unless it is a thread.
 * @child is the child's task where this runs in the parent's context
 * (bpf_send_signal_task), NULL where it runs in the child's own.
 */
static __always_inline void fork_record(struct task_struct *child, __u32 ptgid, __u32 ptid,
					__u32 ctgid, __u32 ctid, __u32 flags, bool may_park)
{
	struct mt_rec *r;
	bool park = false;

	/*
	 * Reserve first: a parked child is only resumed by userspace reading
	 * this record, so without a record it must not be parked.
	 */
	r = ctl_reserve(MT_FORK, sizeof(r->h) + FORK_NFIELDS * sizeof(__u64));
	if (!r)
		return;
	fill_hdr(r, MT_FORK, 0, FORK_NFIELDS);
	r->h.pid = ptgid; /* the parent's record, whichever context emits it */
	r->h.tid = ptid;
	/*
	 * A vfork child (or any CLONE_VM process) shares its parent's mm but is
	 * a thread group of its own, and uprobe-multi links only run for the
	 * thread group they were made for: it needs links of its own before it
	 * runs (shells and posix_spawn allocate between vfork and execve).
	 */
	if (may_park && !(flags & MT_FORK_THREAD))
		park = park_process(child, ctgid);
	if (park)
		r->h.fn = MT_REC_PARKED;
	r->f[FORK_PARENT] = ptgid;
	r->f[FORK_CHILD] = flags & MT_FORK_THREAD ? ctid : ctgid;
	r->f[FORK_FLAGS] = flags;
	rec_submit(r, park);
}

/*
 * A tracked process forked: the child joins the tree.  Returns its
 * MT_FORK_* flags, or -1 if it is not recorded.
 */
static __always_inline int fork_join(struct task_struct *parent, struct task_struct *child)
{
	struct tracked_proc tp = {}, *ptp;
	__u32 ptgid = parent->tgid;
	__u32 ctgid = child->tgid;
	__u32 flags = 0;

	ptp = bpf_map_lookup_elem(&tracked, &ptgid);
	if (!ptp)
		return -1;
	if (ctgid == ptgid)
		flags = MT_FORK_THREAD | MT_FORK_VM;
	else if (ptp->flags & MT_PROC_NO_CHILDREN)
		return -1;
	/*
	 * Pointers are read with BPF_CORE_READ, not dereferenced: each direct
	 * load of a pointer field from a BTF-typed task makes the verifier
	 * search vmlinux's BTF linearly for "task_struct__safe_*" names
	 * (btf_nested_type_is_trusted(), several times per load and path),
	 * which was ~15-30 ms of every start here.  The mm is only compared
	 * and used as a key, never dereferenced.
	 */
	else if (BPF_CORE_READ(child, mm) == BPF_CORE_READ(parent, mm))
		flags = MT_FORK_VM;
	if (!(flags & MT_FORK_THREAD)) {
		tp.ppid = ptgid;
		bpf_map_update_elem(&tracked, &ctgid, &tp, BPF_ANY);
	}
	if (!(flags & MT_FORK_VM))
		mm_adopt(ctgid, BPF_CORE_READ(child, mm));
	return flags;
}

/* Parking by bpf_send_signal_task (Linux 6.13): the child is stopped from its parent's fork. */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(handle_fork, struct task_struct *parent, struct task_struct *child)
{
	int flags = fork_join(parent, child);

	if (flags >= 0)
		fork_record(child, parent->tgid, parent->pid, child->tgid, child->pid, flags, true);
	return 0;
}

/*
 * Parking without bpf_send_signal_task: a process can only be stopped from
 * its own context (bpf_send_signal), so a new process's record and stop
 * wait in fork_pending for its first return to user space
 * (handle_fork_return), before it runs one instruction.  A thread is never
 * parked: its record goes now.
 */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(handle_fork_deferred, struct task_struct *parent, struct task_struct *child)
{
	struct fork_pending fp = {};
	__u32 ctgid = child->tgid;
	int flags = fork_join(parent, child);

	if (flags < 0)
		return 0;
	if (flags & MT_FORK_THREAD || !stop_on_spawn) {
		fork_record(NULL, parent->tgid, parent->pid, ctgid, child->pid, flags, false);
		return 0;
	}
	fp.ptgid = parent->tgid;
	fp.ptid = parent->pid;
	fp.flags = flags;
	if (bpf_map_update_elem(&fork_pending, &ctgid, &fp, BPF_ANY))
		fork_record(NULL, fp.ptgid, fp.ptid, ctgid, ctgid, flags, false);
	return 0;
}

/*
 * Emits the pending FORK record of @tgid, if any; @park: stop it too (its
 * first return to user space), else it is dying unparked.
 */
static __always_inline void fork_flush(__u32 tgid, bool park)
{
	struct fork_pending *p = bpf_map_lookup_elem(&fork_pending, &tgid);
	struct fork_pending fp;

	if (!p)
		return;
	fp = *p;
	bpf_map_delete_elem(&fork_pending, &tgid);
	fork_record(NULL, fp.ptgid, fp.ptid, tgid, tgid, fp.flags, park);
}

/*
 * The new process's first return to user space: its fork's syscall exit,
 * in the child (ret_from_fork goes through the syscall exit path).
 */
SEC("tp_btf/sys_exit")
int BPF_PROG(handle_fork_return, struct pt_regs *regs, long ret)
{
	long id = SYSCALL_NR(regs);
	__u64 pid_tgid;

	if (ret != 0 || (id != NR_clone && id != NR_clone3 && id != NR_fork && id != NR_vfork))
		return 0;
	pid_tgid = bpf_get_current_pid_tgid();
	if ((__u32)pid_tgid != pid_tgid >> 32)
		return 0;
	fork_flush(pid_tgid >> 32, true);
	return 0;
}

/*
 * The same first return on arm64, where the child does not take the
 * syscall exit path (ret_from_fork goes straight to asm_exit_to_user_mode:
 * no sys_exit tracepoint): wake_up_new_task() flagged it for an rseq update
 * (rseq_migrate) when its parent had registered rseq, as glibc does by
 * default since 2.35, so this tracepoint runs in the child before its first
 * instruction, and the SIGSTOP fork_flush sends is taken in the same return
 * (do_notify_resume loops while work is flagged).  Loaded on arm64 only
 * (loader.c): it runs at every rseq update of every task.
 */
SEC("tp_btf/rseq_update")
int BPF_PROG(handle_fork_rseq, struct task_struct *t)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();

	if ((__u32)pid_tgid != pid_tgid >> 32)
		return 0;
	fork_flush(pid_tgid >> 32, true);
	return 0;
}

/*
 * The mm's flags word, wherever this kernel keeps it: an unsigned long
 * until Linux 6.18 made it a bitmap (mm_flags_t, commit "mm: convert
 * mm->flags to a bitmap type"; the dumpable bits stay bits 0-1 of word 0).
 */
struct mm_struct___flags_word {
	unsigned long flags;
} __attribute__((preserve_access_index));
struct mm_struct___flags_bitmap {
	struct {
		unsigned long __mm_flags[1];
	} flags;
} __attribute__((preserve_access_index));

#define MMF_DUMPABLE_MASK 3ul /* include/linux/sched/coredump.h */
#define SUID_DUMP_USER 1ul

static __always_inline bool mm_dumpable(void *mm)
{
	unsigned long flags;

	if (bpf_core_field_exists(((struct mm_struct___flags_word *)mm)->flags))
		flags = BPF_CORE_READ((struct mm_struct___flags_word *)mm, flags);
	else
		flags = BPF_CORE_READ((struct mm_struct___flags_bitmap *)mm, flags.__mm_flags[0]);
	return (flags & MMF_DUMPABLE_MASK) == SUID_DUMP_USER;
}

/*
 * The permitted capabilities of @c: a u64 val since Linux 6.3 (commit
 * "capability: just use a 'u64' instead of a 'u32[2]' array"), u32 cap[2]
 * before.
 */
struct cred___caps_array {
	struct {
		__u32 cap[2];
	} cap_permitted;
} __attribute__((preserve_access_index));

static __always_inline __u64 cred_caps(const struct cred *c)
{
	const struct cred___caps_array *o = (const void *)c;

	if (bpf_core_field_exists(o->cap_permitted.cap))
		return BPF_CORE_READ(o, cap_permitted.cap[0]) |
		       (__u64)BPF_CORE_READ(o, cap_permitted.cap[1]) << 32;
	return BPF_CORE_READ(c, cap_permitted.val);
}

/*
 * attach under sudo: whether @p is a process the invoking user could trace
 * themselves, by the rule src/inspect/authority.c applies at the attach
 * (the kernel's ptrace_may_access with PTRACE_MODE_ATTACH_REALCREDS): real,
 * effective and saved uid and gid the user's, no capabilities (but in a
 * user namespace the user owns) and a dumpable mm.  Read after an exec has
 * committed the new program's credentials.
 */
static __always_inline bool owner_may_trace(struct task_struct *p)
{
	const struct cred *c = BPF_CORE_READ(p, cred);
	/* a plain u64: a kernel_cap_t local would be read through a CO-RE
	 * relocation (vmlinux.h's preserve_access_index), poisoned on < 6.3 */
	__u64 caps;

	if (BPF_CORE_READ(c, uid.val) != owner_uid || BPF_CORE_READ(c, euid.val) != owner_uid ||
	    BPF_CORE_READ(c, suid.val) != owner_uid || BPF_CORE_READ(c, gid.val) != owner_gid ||
	    BPF_CORE_READ(c, egid.val) != owner_gid || BPF_CORE_READ(c, sgid.val) != owner_gid)
		return false;
	caps = cred_caps(c);
	if (caps && (BPF_CORE_READ(c, user_ns, level) == 0 ||
		     BPF_CORE_READ(c, user_ns, owner.val) != owner_uid))
		return false;
	return mm_dumpable(BPF_CORE_READ(p, mm));
}

/*
 * @tgid leaves the tree (attach under sudo: the user may no longer trace
 * it): untracked, so nothing of it is recorded from now on and its children
 * do not join, and a LEFT record tells userspace to drop its probes.  Only
 * the remover records, as for an exit.
 */
static __always_inline void owner_leave(__u32 tgid, __u32 reason)
{
	struct mt_rec *r;

	if (bpf_map_delete_elem(&tracked, &tgid))
		return;
	mm_forget(tgid);
	r = ctl_reserve(MT_LEFT, sizeof(r->h) + LEFT_NFIELDS * sizeof(__u64));
	if (!r)
		return;
	fill_hdr(r, MT_LEFT, 0, LEFT_NFIELDS);
	r->f[LEFT_REASON] = reason;
	rec_submit(r, true);
}

/*
 * The owner record of the current task's mm, if the current process owns
 * it: a vfork child execs on its parent's mm, which must stay reported.
 */
static __always_inline struct mm_owner *current_mm_owner(void)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u64 key = (__u64)BPF_CORE_READ(task, mm);
	struct mm_owner *o = bpf_map_lookup_elem(&mm_owners, &key);

	return o && o->tgid == task->tgid ? o : NULL;
}

/*
 * execve of a tracked process: stop reporting the RSS of the mm it is about
 * to drop (see rss.bpf.c).  Two compares for every other syscall.  Under an
 * attach made through sudo, a tracked process making itself undumpable
 * leaves the tree before the call (the user could not trace it after).
 */
SEC("tp_btf/sys_enter")
int BPF_PROG(handle_execve_enter, struct pt_regs *regs, long id)
{
	struct mm_owner *o;

	if (owner_only && id == NR_prctl && SYSCALL_PARM1(regs) == PR_SET_DUMPABLE &&
	    SYSCALL_PARM2(regs) == 0) {
		__u32 tgid = bpf_get_current_pid_tgid() >> 32;

		if (is_tracked(tgid))
			owner_leave(tgid, MT_LEFT_DUMPABLE);
		return 0;
	}
	if (id != NR_execve && id != NR_execveat)
		return 0;
	o = current_mm_owner();
	if (o)
		o->flags |= MM_EXEC_PENDING;
	return 0;
}

/* A failed execve keeps the old mm: report it again, from scratch. */
SEC("tp_btf/sys_exit")
int BPF_PROG(handle_execve_exit, struct pt_regs *regs, long ret)
{
	long id = SYSCALL_NR(regs);
	struct mm_owner *o;

	if ((id != NR_execve && id != NR_execveat) || ret >= 0)
		return 0;
	o = current_mm_owner();
	if (!o)
		return 0;
	o->flags &= ~MM_EXEC_PENDING;
	for (int i = 0; i < 4; i++)
		o->last[i] = 0;
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(handle_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	struct mt_rec_exec *r;
	bool park;

	if (!is_tracked(p->tgid))
		return 0;
	if (owner_only && !owner_may_trace(p)) {
		owner_leave(p->tgid, MT_LEFT_EXEC);
		return 0;
	}
	mm_adopt(p->tgid, BPF_CORE_READ(p, mm));
	r = ctl_reserve(MT_EXEC, sizeof(*r));
	if (!r)
		return 0;
	park = park_process(NULL, p->tgid);
	r->h.type = MT_EXEC;
	r->h.fn = park ? MT_REC_PARKED : 0;
	r->h.pid = p->tgid;
	r->h.tid = p->pid;
	r->h.nfields = EXEC_NFIELDS;
	r->h.ts = bpf_ktime_get_ns();
	r->f[EXEC_OLD_PID] = old_pid;
	bpf_probe_read_kernel_str(r->path, sizeof(r->path), BPF_CORE_READ(bprm, filename));
	rec_submit(r, park);
	return 0;
}

static long resume_one(struct bpf_map *map, __u32 *tgid, __u32 *val, void *ctx)
{
	struct task_struct *t = bpf_task_from_pid(*tgid);

	if (t) {
		signal_task(t, SIGCONT);
		bpf_task_release(t);
	}
	return 0;
}

/* memtrack is dying: park nothing from now on (see handle_exit). */
static __always_inline void parking_stop(void)
{
	__u32 zero = 0;
	struct session_state *s = bpf_map_lookup_elem(&session, &zero);

	if (s)
		__sync_fetch_and_or(&s->parking_off, 1);
}

/*
 * The OOM record of @p's process, when the kernel's OOM killer chose it:
 * mark_oom_victim() set signal->oom_mm (never cleared), in every kernel
 * memtrack runs on.  Written at its exit, not at the oom/mark_victim
 * tracepoint, whose arguments changed in 6.8 (6.1 gives a tid only): a
 * SIGKILLed victim runs none of its code in between, so its heap then is
 * its heap at its exit; its memory by then was unmapped (exit_mm, or the
 * oom_reaper earlier), so the RSS of the moment is the reader's, from the
 * rss records.  Before the EXIT record, which releases the process.
 */
static __always_inline void oom_record(struct task_struct *p)
{
	struct mt_rec *r;

	if (!BPF_CORE_READ(p, signal, oom_mm))
		return;
	r = ctl_reserve(MT_OOM, sizeof(r->h) + OOM_NFIELDS * sizeof(__u64));
	if (!r)
		return;
	fill_hdr(r, MT_OOM, 0, OOM_NFIELDS);
	r->f[OOM_SCORE_ADJ] = (__u64)(__s64)BPF_CORE_READ(p, signal, oom_score_adj);
	rec_submit(r, false);
}

/*
 * The EXIT record of a tracked process, and its entries' removal.  The
 * tracked entry goes first and only its remover records: where the kernel
 * does not say which thread is the last (see exit_group_dead), two may
 * think they are.
 */
static __always_inline void exit_record(struct task_struct *p, __u32 tgid)
{
	struct mt_rec *r;
	int code;

	if (bpf_map_delete_elem(&tracked, &tgid))
		return;
	/* a child killed before its first return to user space: its fork record first */
	fork_flush(tgid, false);
	oom_record(p);
	code = p->exit_code;
	r = ctl_reserve(MT_EXIT, sizeof(r->h) + EXIT_NFIELDS * sizeof(__u64));
	if (r) {
		fill_hdr(r, MT_EXIT, 0, EXIT_NFIELDS);
		/* exit_code is a wait status: signal in the low 7 bits, else code << 8 */
		r->f[EXIT_CODE] = (code & 0x7f) ? (__u64)-1 : (__u64)((code >> 8) & 0xff);
		r->f[EXIT_SIGNAL] = code & 0x7f;
		rec_submit(r, true);
	}
	bpf_map_delete_elem(&parked, &tgid);
	mm_forget(tgid);
}

/*
 * Whether the exiting @p is its process's last thread.  Newer kernels pass
 * group_dead as the tracepoint's second argument (this host's 6.18; not
 * 6.12; the loader sets exit_has_group_dead); before, do_exit() has counted
 * the thread out of signal->live by then.  ctx[1] is read only where it
 * exists: the verifier rejects the load otherwise, and skips the branch
 * the constant rules out.
 */
static __always_inline bool exit_group_dead(__u64 *ctx, struct task_struct *p)
{
	if (exit_has_group_dead)
		return (bool)ctx[1];
	return BPF_CORE_READ(p, signal, live.counter) == 0;
}

/*
 * A task exits.  When it is memtrack's last thread, memtrack is dying
 * (killed, most likely: a clean exit detaches these programs first); its
 * fds, and so these programs, go only once this tracepoint returns: parking
 * stops, and with @resume every parked process is resumed here, so none
 * waits for a SIGCONT that will never come (bpf_task_from_pid, 6.2, and
 * bpf_send_signal_task, 6.13).  Without them memtrack's reaper resumes
 * them once memtrack is gone (record/reaper.c holds the `parked` map).
 */
static __always_inline int on_exit(__u64 *ctx, bool resume)
{
	struct task_struct *p = (void *)ctx[0];
	bool group_dead = exit_group_dead(ctx, p);
	__u32 tgid = p->tgid;

	if (tgid == memtrack_tgid && group_dead) {
		parking_stop();
		if (resume)
			bpf_for_each_map_elem(&parked, resume_one, NULL, 0);
		return 0;
	}
	if (group_dead && is_tracked(tgid))
		exit_record(p, tgid);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int handle_exit(__u64 *ctx)
{
	return on_exit(ctx, true);
}

/* The same without those kfuncs (KF_RESUME's fallback). */
SEC("tp_btf/sched_process_exit")
int handle_exit_nokfunc(__u64 *ctx)
{
	return on_exit(ctx, false);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
