// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * rss.bpf.c - resident memory of every process of the tree, from the
 * kernel's rss_stat tracepoint.
 *
 * The BTF-typed tracepoint hands over the mm_struct whose counter changed;
 * the change may happen in another task's context (kswapd reclaiming, a
 * process_madvise from outside, a parent tearing down a vfork child), so the
 * record is attributed to the mm's registered owner (mm_owners, maintained
 * by proc.bpf.c at fork, exec and exit), never to the current task.  An mm
 * that is freed is unregistered first, so a recycled mm_struct of a foreign
 * process is never attributed to the tree.
 *
 * While the owner is inside execve its old mm is not reported: a successful
 * exec tears it down page by page before sched_process_exec, which would
 * show as the process's RSS sliding to zero (proc.bpf.c marks it).
 *
 * A record is emitted once the counters moved by rss_granularity_pages
 * since the last one, so a 64 MiB ramp costs ~500 records, not 16384.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "bpf/common.bpf.h"

static __always_inline __u64 absdiff(__u64 a, __u64 b)
{
	return a > b ? a - b : b - a;
}

/*
 * What get_mm_counter() reports: the counter's shared count.  It lags the
 * exact value by the per-CPU deltas not yet folded in (fewer than 32 pages
 * per CPU); summing those would need the per-CPU offsets, which this kernel
 * exposes neither through BTF (counters is not tagged __percpu) nor through
 * kallsyms (no data symbols).
 */
static __always_inline __s64 counter_sum(struct percpu_counter *pc)
{
	return BPF_CORE_READ(pc, count);
}

/*
 * Linux 6.1's layout: mm->rss_stat is a struct of four atomic counters
 * (percpu_counter came in 6.2), which get_mm_counter() reads as they are.
 * CO-RE picks the layout at load time.
 */
struct mm_rss_stat___v61 {
	atomic_long_t count[4];
} __attribute__((preserve_access_index));

struct mm_struct___v61 {
	struct mm_rss_stat___v61 rss_stat;
} __attribute__((preserve_access_index));

static __always_inline void rss_counters(struct mm_struct *mm, __s64 v[4])
{
	struct mm_struct___v61 *old = (void *)mm;

	if (bpf_core_field_exists(old->rss_stat.count)) {
		for (int i = 0; i < 4; i++)
			v[i] = BPF_CORE_READ(old, rss_stat.count[i].counter);
		return;
	}
	for (int i = 0; i < 4; i++)
		v[i] = counter_sum(&mm->rss_stat[i]);
}

/*
 * `memtrack attach`: a process that was running at the attach has an mm no
 * fork or exec registered.  The first change of its counters made in its
 * own context (a page fault, an munmap) registers it; a change from another
 * context (kswapd) waits for one.  Only attach sessions load this path
 * (adopt_running); others pay nothing.
 */
static __always_inline struct mm_owner *adopt_running_mm(struct mm_struct *mm)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u32 tgid = task->tgid;
	struct tracked_proc *tp;
	__u64 key = (__u64)mm;

	if (!adopt_running || (__u64)BPF_CORE_READ(task, mm) != key)
		return NULL;
	tp = bpf_map_lookup_elem(&tracked, &tgid);
	if (!tp || !(tp->flags & MT_PROC_ADOPT_MM))
		return NULL;
	__sync_fetch_and_and(&tp->flags, ~MT_PROC_ADOPT_MM);
	mm_adopt(tgid, mm);
	return bpf_map_lookup_elem(&mm_owners, &key);
}

SEC("tp_btf/rss_stat")
int BPF_PROG(handle_rss_stat, struct mm_struct *mm, int member)
{
	__u64 key = (__u64)mm, now[4], moved = 0;
	struct mm_owner *o;
	struct mt_rec *r;

	o = bpf_map_lookup_elem(&mm_owners, &key);
	if (!o)
		o = adopt_running_mm(mm);
	if (!o || (o->flags & MM_EXEC_PENDING))
		return 0;
	__s64 v[4];

	rss_counters(mm, v);
	for (int i = 0; i < 4; i++) {
		now[i] = v[i] > 0 ? v[i] : 0;
		moved += absdiff(now[i], o->last[i]);
	}
	if (moved < rss_granularity_pages)
		return 0;
	for (int i = 0; i < 4; i++)
		o->last[i] = now[i];
	r = rec_reserve(MT_RSS, 0, RSS_NFIELDS);
	if (!r)
		return 0;
	r->h.pid = o->tgid; /* the owner, not the current task */
	r->h.tid = o->tgid;
	r->f[RSS_ANON] = now[MM_ANONPAGES] * page_size;
	r->f[RSS_FILE] = now[MM_FILEPAGES] * page_size;
	r->f[RSS_SHMEM] = now[MM_SHMEMPAGES] * page_size;
	r->f[RSS_SWAP] = now[MM_SWAPENTS] * page_size;
	rec_submit(r, false);
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
