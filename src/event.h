/* SPDX-License-Identifier: MIT */
/*
 * event.h - the one record layout shared by the BPF programs and userspace.
 *
 * Every ring-buffer record is a struct mt_rec_hdr followed by up to
 * MT_MAX_FIELDS 64-bit fields; which fields a type carries is fixed by the
 * schema table in schema.c (and documented in docs/FORMAT.md).  EXEC records
 * carry a NUL-terminated path after their fields.
 *
 * This header includes nothing and uses only __u16/__u32/__u64, so it can be
 * included after vmlinux.h on the BPF side and after <linux/types.h> in
 * userspace.
 */
#ifndef MEMTRACK_EVENT_H
#define MEMTRACK_EVENT_H

#define MT_FORMAT_VERSION 1

/* Record types.  They start at 1 so an all-zero record is never valid. */
enum mt_type {
	MT_MALLOC = 1,
	MT_CALLOC = 2,
	MT_REALLOC = 3,
	MT_ALIGNED_ALLOC = 4,
	MT_FREE = 5,
	MT_MMAP = 6,
	MT_MUNMAP = 7,
	MT_MREMAP = 8,
	MT_BRK = 9,
	MT_FORK = 10,
	MT_EXEC = 11,
	MT_EXIT = 12,
	MT_RSS = 13,
	MT_PHYSICAL = 14,
	MT_TYPE_MAX = 15, /* one past the last known type */
};

/* Allocator entry points; MT_FN_* is the `fn` of a heap record. */
enum mt_fn {
	MT_FN_MALLOC = 0,
	MT_FN_CALLOC = 1,
	MT_FN_REALLOC = 2,
	MT_FN_REALLOCARRAY = 3,
	MT_FN_ALIGNED_ALLOC = 4,
	MT_FN_MEMALIGN = 5,
	MT_FN_POSIX_MEMALIGN = 6,
	MT_FN_VALLOC = 7,
	MT_FN_PVALLOC = 8,
	MT_FN_FREE = 9,
	MT_FN_MAX = 10,
};

#define MT_MAX_FIELDS 6
#define MT_PATH_MAX 256

/*
 * fn of a FORK, EXEC or MMAP record whose task the BPF side parked with
 * SIGSTOP: userspace must attach what the task needs, then SIGCONT it.
 */
#define MT_REC_PARKED 0x8000u

/* Flags of a FORK record (field 2). */
#define MT_FORK_THREAD 1u /* clone with CLONE_THREAD */
#define MT_FORK_VM 2u     /* shares the parent's mm (CLONE_VM: vfork, threads) */

struct mt_rec_hdr {
	__u16 type;   /* enum mt_type */
	__u16 fn;     /* enum mt_fn for heap records, else 0 */
	__u32 pid;    /* tgid */
	__u32 tid;    /* thread id */
	__u32 nfields; /* number of __u64 fields that follow */
	__u64 ts;     /* CLOCK_MONOTONIC, ns */
};

struct mt_rec {
	struct mt_rec_hdr h;
	__u64 f[MT_MAX_FIELDS];
};

struct mt_rec_exec {
	struct mt_rec_hdr h;
	__u64 f[1];		   /* old pid (the tid that called execve) */
	char path[MT_PATH_MAX];    /* NUL-terminated */
};

_Static_assert(sizeof(struct mt_rec_hdr) == 24, "mt_rec_hdr layout");
_Static_assert(sizeof(struct mt_rec) == 24 + 8 * MT_MAX_FIELDS, "mt_rec layout");
_Static_assert(sizeof(struct mt_rec_exec) == 24 + 8 + MT_PATH_MAX, "mt_rec_exec layout");

/*
 * Per-type drop counters live in a per-CPU array indexed by enum mt_type;
 * slot 0 counts records that were lost before their type was known.
 */
#define MT_DROP_SLOTS MT_TYPE_MAX

#endif /* MEMTRACK_EVENT_H */
