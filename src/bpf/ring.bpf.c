// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * ring.bpf.c - the maps and config every other program shares: the ring
 * buffer, the per-CPU drop counters and the set of tracked processes.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "event.h"
#include "bpf_abi.h"
#include "bpf/python_walk.bpf.h"

const volatile __u64 wakeup_bytes = 256 * 1024;
const volatile __u32 stop_on_spawn = 1;
const volatile __u64 rss_granularity_pages = 8; /* 32 KiB: ~1% of a small process */
const volatile __u32 nr_cpus = 1;
const volatile __u64 page_size = 4096; /* the loader writes sysconf(_SC_PAGESIZE) */
const volatile __u32 memtrack_tgid = 0;
const volatile __u32 adopt_running = 0; /* memtrack attach: see rss.bpf.c */
const volatile __u32 fast_path = 0;	/* --fast: the in-process heap path (fast.bpf.c) */
/* sched_process_exit has its group_dead argument (6.18 has, 6.12 not; kernel_features.c) */
const volatile __u32 exit_has_group_dead = 1;
/*
 * attach under sudo: the tree holds only processes the invoking user could
 * trace themselves; one that stops being one leaves it (proc.bpf.c).
 */
const volatile __u32 owner_only = 0;
const volatile __u32 owner_uid = 0; /* the invoking user's uid and gid (kernel ids) */
const volatile __u32 owner_gid = 0;
/* --sample-bytes: mean bytes between recorded allocations (alloc.bpf.c), 0: all */
const volatile __u64 sample_bytes = 0;

/*
 * Heap recording on (1) or off (0).  Not const: userspace flips it at run
 * time through the skeleton's mmaped .data (the control socket's enable and
 * disable, src/record/control.c); --start-disabled writes 0 before load.
 */
volatile __u32 heap_enabled = 1;

/* userspace resizes it (--ring-size) before load. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, MT_RING_DEFAULT);
} events SEC(".maps");

/* Records that park a task (fork, exec, executable mmap) travel apart. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, MT_CTL_RING);
} ctl_events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MT_DROP_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} drops SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	/* creating a preallocated map costs ~10 ms at start */
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, MT_MAX_TRACKED);
	__type(key, __u32);
	__type(value, struct tracked_proc);
} tracked SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	/* creating a preallocated map costs ~10 ms at start */
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, MT_MAX_MMS);
	__type(key, __u64);
	__type(value, struct mm_owner);
} mm_owners SEC(".maps");

/* The address space registered for a process (key: tgid). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	/* creating a preallocated map costs ~10 ms at start */
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, MT_MAX_TRACKED);
	__type(key, __u32);
	__type(value, __u64);
} proc_mm SEC(".maps");

/*
 * userspace creates uprobe-multi links with its own copy of the attributes
 * (bpf_abi.h: its headers predate them); hold that copy to the kernel's.
 */
#define ATTR_OFF(f) __builtin_offsetof(union bpf_attr, link_create.f)
#define MT_OFF(f) __builtin_offsetof(struct mt_uprobe_multi_attr, f)
_Static_assert(ATTR_OFF(prog_fd) == MT_OFF(prog_fd), "uprobe-multi attr: prog_fd");
_Static_assert(ATTR_OFF(target_fd) == MT_OFF(target_fd), "uprobe-multi attr: target_fd");
_Static_assert(ATTR_OFF(attach_type) == MT_OFF(attach_type), "uprobe-multi attr: attach_type");
_Static_assert(ATTR_OFF(flags) == MT_OFF(flags), "uprobe-multi attr: flags");
_Static_assert(ATTR_OFF(uprobe_multi.path) == MT_OFF(path), "uprobe-multi attr: path");
_Static_assert(ATTR_OFF(uprobe_multi.offsets) == MT_OFF(offsets), "uprobe-multi attr: offsets");
_Static_assert(ATTR_OFF(uprobe_multi.ref_ctr_offsets) == MT_OFF(ref_ctr_offsets),
	       "uprobe-multi attr: ref_ctr_offsets");
_Static_assert(ATTR_OFF(uprobe_multi.cookies) == MT_OFF(cookies), "uprobe-multi attr: cookies");
_Static_assert(ATTR_OFF(uprobe_multi.cnt) == MT_OFF(cnt), "uprobe-multi attr: cnt");
_Static_assert(ATTR_OFF(uprobe_multi.flags) == MT_OFF(umflags), "uprobe-multi attr: flags");
_Static_assert(ATTR_OFF(uprobe_multi.pid) == MT_OFF(pid), "uprobe-multi attr: pid");
_Static_assert(BPF_TRACE_UPROBE_MULTI == MT_BPF_TRACE_UPROBE_MULTI, "BPF_TRACE_UPROBE_MULTI");

/*
_Static_assert(BPF_F_UPROBE_MULTI_RETURN == MT_BPF_F_UPROBE_MULTI_RETURN, "BPF_F_UPROBE_MULTI_RETURN");
 * Processes parked with SIGSTOP and not resumed yet (key: tgid).  Whoever
 * resumes one deletes it: userspace after its SIGCONT, handle_exit when the
 * process dies.  If memtrack dies, handle_exit resumes every one left.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags,
	       BPF_F_NO_PREALLOC); /* creating a preallocated map costs ~10 ms at start */
	__uint(max_entries, MT_MAX_TRACKED);
	__type(key, __u32);
	__type(value, __u32);
} parked SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct session_state);
} session SEC(".maps");

/* Fork children waiting for their first return to user space (proc.bpf.c). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, MT_MAX_TRACKED);
	__type(key, __u32);
	__type(value, struct fork_pending);
} fork_pending SEC(".maps");

/*
 * Call stacks (--stacks; unwind.bpf.h walks them).  Userspace sizes the
 * outer maps before load (1 entry each without --stacks; chunks for the
 * --unwind-rows ceiling otherwise), creates each chunk when the rows reach
 * it and writes rows through its own mmap of the chunk (bpf_abi.h).
 */
const volatile __u32 stacks_on = 0;

struct unwind_rows_chunk {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, MT_UNWIND_CHUNK_ROWS);
	__type(key, __u32);
	__uint(value_size,
	       sizeof(struct mt_unwind_row)); /* a size: BTF has the struct as a declaration here */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, MT_UNWIND_ROWS_DEFAULT / MT_UNWIND_CHUNK_ROWS);
	__type(key, __u32);
	__array(values, struct unwind_rows_chunk);
} unwind_rows SEC(".maps");

/* Per object, by address: the first row to search (bpf_abi.h). */
struct unwind_index_chunk {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, MT_UNWIND_CHUNK_INDEX);
	__type(key, __u32);
	__type(value, __u64); /* a row; 64 bits: an array's elements are 8-byte aligned */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, MT_UNWIND_INDEX_CAP(MT_UNWIND_ROWS_DEFAULT) / MT_UNWIND_CHUNK_INDEX);
	__type(key, __u32);
	__array(values, struct unwind_index_chunk);
} unwind_index SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, MT_MAX_MMS);
	__type(key, __u32); /* tgid owning the address space */
	__type(value, struct mt_umaps);
} proc_maps SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MT_STACKS_SEEN);
	__type(key, __u64); /* stack id */
	__type(value, __u8);
} stacks_seen SEC(".maps");

/* The stack being unwound, per CPU (too big for the BPF stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mt_rec_stack);
} stack_scratch SEC(".maps");

/* The unwinder's state, per CPU (bpf_abi.h says why not on the BPF stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mt_unwind_state);
} unwind_state SEC(".maps");

/* The walk of a thread's Python frames, per CPU (bpf_abi.h). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mt_py_walk);
} py_walk SEC(".maps");

/* A PYCODE record being filled, per CPU (2 KiB: not on the BPF stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mt_rec_pycode);
} pycode_scratch SEC(".maps");

char LICENSE[] SEC("license") = "Dual MIT/GPL";
