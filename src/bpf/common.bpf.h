/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * common.bpf.h - what every memtrack BPF program shares: the maps and
 * config defined in ring.bpf.c (declared extern here, as the kernel's
 * selftests linked_maps1.c do), and the helpers that put a record into the
 * ring buffer.
 */
#ifndef MEMTRACK_COMMON_BPF_H
#define MEMTRACK_COMMON_BPF_H

#include "event.h"
#include "bpf_abi.h"

#define SIGCONT 18
#define SIGSTOP 19
#define EBUSY 16
#define PROT_EXEC 0x4

/* Set by userspace before load. */
extern const volatile __u64 wakeup_bytes;  /* wake the poller at this much unread data */
extern const volatile __u32 stop_on_spawn; /* park new processes until userspace attaches */
extern const volatile __u32 adopt_running; /* memtrack attach: adopt running mms (rss.bpf.c) */
extern const volatile __u64 rss_granularity_pages; /* report RSS after this much change */
extern const volatile __u32 nr_cpus;		   /* possible CPUs, for per-CPU counters */
extern const volatile __u64 page_size;		   /* bytes; valloc's alignment */
extern const volatile __u32 memtrack_tgid; /* memtrack itself: its exit resumes what is parked */
extern const volatile __u32 fast_path;	   /* --fast given */
extern const volatile __u32 exit_has_group_dead; /* sched_process_exit passes group_dead */
extern const volatile __u32 owner_only;		 /* attach under sudo: the user's only */
extern const volatile __u32 owner_uid;
extern const volatile __u32 owner_gid;
extern const volatile __u64 sample_bytes; /* --sample-bytes N (sample.h), 0: every call */

/*
 * Weak: a kernel without them (bpf_send_signal_task is 6.13, the other two
 * 6.2) still loads the object; the programs that call them are then not
 * loaded (record/kernel_features.c picks their fallbacks).
 */
extern int bpf_send_signal_task(struct task_struct *task, int sig, enum pid_type type,
				__u64 value) __ksym __weak;
extern struct task_struct *bpf_task_from_pid(s32 pid) __ksym __weak;
extern void bpf_task_release(struct task_struct *p) __ksym __weak;

/* Written by userspace at run time (control socket). */
extern volatile __u32 heap_enabled; /* 0: allocator probes record nothing */

extern struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, MT_RING_DEFAULT);
} events SEC(".maps");

extern struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, MT_CTL_RING);
} ctl_events SEC(".maps");

extern struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MT_DROP_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} drops SEC(".maps");

extern struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	/* creating a preallocated map costs ~10 ms at start */
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, MT_MAX_TRACKED);
	__type(key, __u32);
	__type(value, struct tracked_proc);
} tracked SEC(".maps");

extern struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	/* creating a preallocated map costs ~10 ms at start */
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, MT_MAX_MMS);
	__type(key, __u64);
	__type(value, struct mm_owner);
} mm_owners SEC(".maps");

extern struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	/* creating a preallocated map costs ~10 ms at start */
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, MT_MAX_TRACKED);
	__type(key, __u32);
	__type(value, __u64);
} proc_mm SEC(".maps");

extern struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags,
	       BPF_F_NO_PREALLOC); /* creating a preallocated map costs ~10 ms at start */
	__uint(max_entries, MT_MAX_TRACKED);
	__type(key, __u32);
	__type(value, __u32);
} parked SEC(".maps");

extern struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct session_state);
} session SEC(".maps");

static __always_inline bool is_tracked(__u32 tgid)
{
	return bpf_map_lookup_elem(&tracked, &tgid) != NULL;
}

/*
 * Whether @tgid's heap calls are recorded: tracked, and not a running
 * process whose allocator probes are still going in (MT_PROC_ARMING).
 */
static __always_inline bool heap_tracked(__u32 tgid)
{
	struct tracked_proc *tp = bpf_map_lookup_elem(&tracked, &tgid);

	return tp && !(tp->flags & MT_PROC_ARMING);
}

/*
 * --fast, at a site the library interposes: whether the library records
 * this call (the process announced, fast.bpf.c).
 */
static __always_inline bool fast_records(__u32 tgid)
{
	struct tracked_proc *tp;

	if (!fast_path)
		return false;
	tp = bpf_map_lookup_elem(&tracked, &tgid);
	return tp && (tp->flags & MT_PROC_FAST);
}

static __always_inline void count_drop(__u32 type)
{
	__u64 *cnt = bpf_map_lookup_elem(&drops, &type);

	if (cnt)
		*cnt += 1;
}

static __always_inline void fill_hdr(struct mt_rec *r, __u16 type, __u16 fn, __u32 nfields)
{
	__u64 id = bpf_get_current_pid_tgid();

	r->h.type = type;
	r->h.fn = fn;
	r->h.pid = id >> 32;
	r->h.tid = (__u32)id;
	r->h.nfields = nfields;
	r->h.ts = bpf_ktime_get_ns();
}

/*
 * Reserves a record of @nfields fields and fills its header for the current
 * task.  Returns NULL (and counts the drop) when the ring buffer is full.
 */
static __always_inline struct mt_rec *rec_reserve(__u16 type, __u16 fn, __u32 nfields)
{
	struct mt_rec *r;

	r = bpf_ringbuf_reserve(&events, sizeof(r->h) + nfields * sizeof(__u64), 0);
	if (!r) {
		count_drop(type);
		return NULL;
	}
	fill_hdr(r, type, fn, nfields);
	return r;
}

/*
 * Reserves @size bytes from the control ring, for process records and
 * records that park their task (a parked task is resumed only when
 * userspace reads its record), so they never compete with the flood of
 * heap records for space.  The caller fills the header (fill_hdr).
 */
static __always_inline void *ctl_reserve(__u16 type, __u64 size)
{
	void *r = bpf_ringbuf_reserve(&ctl_events, size, 0);

	if (!r)
		count_drop(type);
	return r;
}

/*
 * Hands a record to userspace.  Heap and mapping records only wake the poller
 * once wakeup_bytes of unread data have piled up (its poll timeout picks up
 * the tail); process records that park a task always wake it.
 */
static __always_inline void rec_submit(void *r, bool urgent)
{
	__u64 flags = BPF_RB_NO_WAKEUP;

	if (urgent || bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= wakeup_bytes)
		flags = BPF_RB_FORCE_WAKEUP;
	bpf_ringbuf_submit(r, flags);
}

/* Forgets the address space registered for @tgid (exec replaced it, or exit). */
static __always_inline void mm_forget(__u32 tgid)
{
	__u64 *mm = bpf_map_lookup_elem(&proc_mm, &tgid);

	if (!mm)
		return;
	bpf_map_delete_elem(&mm_owners, mm);
	bpf_map_delete_elem(&proc_mm, &tgid);
}

/*
 * Makes @tgid the owner of @mm.  Only a process's own address space is
 * registered: a vfork child or a thread shares its parent's mm and leaves
 * the parent as its owner.
 */
static __always_inline void mm_adopt(__u32 tgid, void *mm)
{
	struct mm_owner o = {};
	__u64 key = (__u64)mm;

	if (!mm)
		return;
	mm_forget(tgid);
	o.tgid = tgid;
	bpf_map_update_elem(&mm_owners, &key, &o, BPF_ANY);
	bpf_map_update_elem(&proc_mm, &tgid, &key, BPF_ANY);
}

/*
 * Whether memtrack has stopped parking (it is gone, or finishing).  The
 * fetch-and-add is a full barrier: park() reads the flag after its `parked`
 * insert, and the side that sets it reads `parked` after setting it.
 */
static __always_inline bool parking_off(void)
{
	__u32 zero = 0;
	struct session_state *s = bpf_map_lookup_elem(&session, &zero);

	return !s || __sync_fetch_and_add(&s->parking_off, 0);
}

struct signal_try {
	struct task_struct *task;
	int sig;
	int err;
};

static long signal_task_once(__u64 i, void *ctx)
{
	struct signal_try *t = ctx;

	t->err = bpf_send_signal_task(t->task, t->sig, PIDTYPE_TGID, 0);
	return t->err != -EBUSY; /* 1 stops the loop */
}

static long signal_current_once(__u64 i, void *ctx)
{
	struct signal_try *t = ctx;

	t->err = bpf_send_signal(t->sig);
	return t->err != -EBUSY;
}

/*
 * Sends @sig to the process of @task, or of the current task if @task is
 * NULL.  From a non-preemptible context the kernel queues the signal on one
 * per-CPU irq_work, busy (-EBUSY) until that work has run (a self-IPI,
 * microseconds): retry until it is free.  The current task goes through the
 * helper, not the kfunc: bpftool 7.1 cannot link a kfunc extern that more
 * than one object uses, so only proc.bpf.c passes a task.
 */
static __always_inline int signal_task(struct task_struct *task, int sig)
{
	struct signal_try t = { .task = task, .sig = sig, .err = -EBUSY };

	if (task)
		bpf_loop(1u << 16, signal_task_once, &t, 0);
	else
		bpf_loop(1u << 16, signal_current_once, &t, 0);
	return t.err;
}

/*
 * Parks the process of @task (NULL: the current task; tgid @tgid) with SIGSTOP until userspace has
 * attached its probes and resumes it.  Returns whether it is parked.
 *
 * A process must never stay stopped because memtrack went away.  The
 * `parked` entry is made before the stop and parking_off() read after it;
 * whoever stops memtrack sets parking_off first and resumes the `parked`
 * entries then (handle_exit in proc.bpf.c, or userspace at its end).  So
 * either that side sees this entry, or this side sees the flag and resumes
 * the process itself.
 */
static __always_inline bool park_process(struct task_struct *task, __u32 tgid)
{
	__u32 one = 1;

	if (!stop_on_spawn || parking_off())
		return false;
	if (bpf_map_update_elem(&parked, &tgid, &one, BPF_ANY))
		return false;
	if (signal_task(task, SIGSTOP)) {
		bpf_map_delete_elem(&parked, &tgid);
		return false;
	}
	if (!parking_off())
		return true;
	signal_task(task, SIGCONT);
	bpf_map_delete_elem(&parked, &tgid);
	return false;
}

#endif /* MEMTRACK_COMMON_BPF_H */
