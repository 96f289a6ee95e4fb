/* SPDX-License-Identifier: MIT */
/*
 * event.h - the one record layout shared by the BPF programs and userspace.
 *
 * Every ring-buffer record is a struct mt_rec_hdr followed by up to
 * MT_MAX_FIELDS 64-bit fields; which fields a type carries is fixed by the
 * schema table in schema.c (and documented in docs/FORMAT.md).  EXEC records
 * carry a NUL-terminated path after their fields, MARK records (no fields)
 * a NUL-terminated name.
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
	MT_MARK = 15,	  /* written by userspace: `mark NAME` on the control socket */
	MT_ENABLE = 16,	  /* written by userspace: heap recording switched on */
	MT_DISABLE = 17,  /* written by userspace: heap recording switched off */
	MT_TYPE_MAX = 18, /* one past the last known type */
};

/*
 * How an allocator function's entry probe reads its arguments and what its
 * outermost call records (alloc.bpf.c).  Sizes are those the program asked
 * for.
 */
enum mt_fn_kind {
	MT_K_MALLOC = 0,	/* (size) -> MALLOC */
	MT_K_CALLOC = 1,	/* (n, size) -> CALLOC of n * size */
	MT_K_ZALLOC = 2,	/* (size) -> CALLOC */
	MT_K_REALLOC = 3,	/* (ptr, size, ...) -> REALLOC; MALLOC for ptr NULL, FREE for size 0 */
	MT_K_REALLOCARRAY = 4,	/* (ptr, n, size) -> as REALLOC of n * size */
	MT_K_ALIGN_SIZE = 5,	/* (align, size) -> ALIGNED_ALLOC */
	MT_K_SIZE_ALIGN = 6,	/* (size, align) -> ALIGNED_ALLOC */
	MT_K_POSIX_MEMALIGN = 7, /* (memptr, align, size) -> ALIGNED_ALLOC of *memptr on 0 */
	MT_K_PAGE_ALIGNED = 8,	/* (size) -> ALIGNED_ALLOC, align one page */
	MT_K_MALLOCX = 9,	/* jemalloc (size, flags): ALIGNED_ALLOC, CALLOC or MALLOC by flags */
	MT_K_XALLOCX = 10,	/* jemalloc (ptr, size, extra, flags): REALLOC in place when it grew to size */
	MT_K_FREE = 11,		/* (ptr) -> FREE */
};

/*
 * Allocator entry points: MT_FN_* is the `fn` of a heap record, its name
 * is dump's "fn" value.  X(ID, name, kind): values are positions in this
 * list, which is append-only (they are stored in artifacts); symbols.c maps
 * ELF symbol names (free, tc_free, je_free, _ZdlPv ...) onto them.
 */
#define MT_FN_LIST(X)                                                        \
	X(MALLOC, "malloc", MT_K_MALLOC)                                     \
	X(CALLOC, "calloc", MT_K_CALLOC)                                     \
	X(REALLOC, "realloc", MT_K_REALLOC)                                  \
	X(REALLOCARRAY, "reallocarray", MT_K_REALLOCARRAY)                   \
	X(ALIGNED_ALLOC, "aligned_alloc", MT_K_ALIGN_SIZE)                   \
	X(MEMALIGN, "memalign", MT_K_ALIGN_SIZE)                             \
	X(POSIX_MEMALIGN, "posix_memalign", MT_K_POSIX_MEMALIGN)             \
	X(VALLOC, "valloc", MT_K_PAGE_ALIGNED)                               \
	X(PVALLOC, "pvalloc", MT_K_PAGE_ALIGNED)                             \
	X(FREE, "free", MT_K_FREE)                                           \
	X(FREE_SIZED, "free_sized", MT_K_FREE)                               \
	X(FREE_ALIGNED_SIZED, "free_aligned_sized", MT_K_FREE)               \
	X(NEW, "operator new", MT_K_MALLOC)                                  \
	X(NEW_ARRAY, "operator new[]", MT_K_MALLOC)                          \
	X(NEW_NOTHROW, "operator new(nothrow)", MT_K_MALLOC)                 \
	X(NEW_ARRAY_NOTHROW, "operator new[](nothrow)", MT_K_MALLOC)         \
	X(NEW_ALIGNED, "operator new(align)", MT_K_SIZE_ALIGN)               \
	X(NEW_ARRAY_ALIGNED, "operator new[](align)", MT_K_SIZE_ALIGN)       \
	X(NEW_ALIGNED_NOTHROW, "operator new(align, nothrow)", MT_K_SIZE_ALIGN) \
	X(NEW_ARRAY_ALIGNED_NOTHROW, "operator new[](align, nothrow)", MT_K_SIZE_ALIGN) \
	X(DELETE, "operator delete", MT_K_FREE)                              \
	X(DELETE_ARRAY, "operator delete[]", MT_K_FREE)                      \
	X(DELETE_SIZED, "operator delete(size)", MT_K_FREE)                  \
	X(DELETE_ARRAY_SIZED, "operator delete[](size)", MT_K_FREE)          \
	X(DELETE_ALIGNED, "operator delete(align)", MT_K_FREE)               \
	X(DELETE_ARRAY_ALIGNED, "operator delete[](align)", MT_K_FREE)       \
	X(DELETE_SIZED_ALIGNED, "operator delete(size, align)", MT_K_FREE)   \
	X(DELETE_ARRAY_SIZED_ALIGNED, "operator delete[](size, align)", MT_K_FREE) \
	X(DELETE_NOTHROW, "operator delete(nothrow)", MT_K_FREE)             \
	X(DELETE_ARRAY_NOTHROW, "operator delete[](nothrow)", MT_K_FREE)     \
	X(DELETE_ALIGNED_NOTHROW, "operator delete(align, nothrow)", MT_K_FREE) \
	X(DELETE_ARRAY_ALIGNED_NOTHROW, "operator delete[](align, nothrow)", MT_K_FREE) \
	X(MALLOCX, "mallocx", MT_K_MALLOCX)                                  \
	X(RALLOCX, "rallocx", MT_K_REALLOC)                                  \
	X(XALLOCX, "xallocx", MT_K_XALLOCX)                                  \
	X(DALLOCX, "dallocx", MT_K_FREE)                                     \
	X(SDALLOCX, "sdallocx", MT_K_FREE)                                   \
	X(MI_ZALLOC, "mi_zalloc", MT_K_ZALLOC)                               \
	X(MI_MALLOC_ALIGNED, "mi_malloc_aligned", MT_K_SIZE_ALIGN)           \
	X(MI_ZALLOC_ALIGNED, "mi_zalloc_aligned", MT_K_SIZE_ALIGN)           \
	X(MI_REALLOC_ALIGNED, "mi_realloc_aligned", MT_K_REALLOC)            \
	X(MI_REALLOCN, "mi_reallocn", MT_K_REALLOCARRAY)                     \
	X(MI_FREE_SIZE, "mi_free_size", MT_K_FREE)                           \
	X(MI_FREE_ALIGNED, "mi_free_aligned", MT_K_FREE)

enum mt_fn {
#define MT_FN_ENUM(id, name, kind) MT_FN_##id,
	MT_FN_LIST(MT_FN_ENUM)
#undef MT_FN_ENUM
	MT_FN_MAX /* one past the last known function */
};

/*
 * Attach cookie of an allocator probe: the enum mt_fn, plus this flag on a
 * free-kind site that also has a return probe, so that a free made inside it
 * (operator delete calling free, an LD_PRELOAD wrapper calling libc's) is
 * known to be nested and is recorded once.
 */
#define MT_COOKIE_FN_MASK 0xffffu
#define MT_COOKIE_GUARDED 0x10000u
#define MT_COOKIE_NORET 0x20000u /* an allocating site without a return probe (operator new) */
#define MT_COOKIE_KIND_SHIFT 20 /* the enum mt_fn_kind, so BPF needs no table */
#define MT_COOKIE_KIND(c) (((c) >> MT_COOKIE_KIND_SHIFT) & 0xffu)

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

/* Made by userspace (src/record/control.c), never by BPF. */
struct mt_rec_mark {
	struct mt_rec_hdr h;	   /* nfields 0 */
	char name[MT_PATH_MAX];    /* NUL-terminated, 1 to MT_PATH_MAX - 1 bytes */
};

_Static_assert(sizeof(struct mt_rec_hdr) == 24, "mt_rec_hdr layout");
_Static_assert(sizeof(struct mt_rec) == 24 + 8 * MT_MAX_FIELDS, "mt_rec layout");
_Static_assert(sizeof(struct mt_rec_exec) == 24 + 8 + MT_PATH_MAX, "mt_rec_exec layout");
_Static_assert(sizeof(struct mt_rec_mark) == 24 + MT_PATH_MAX, "mt_rec_mark layout");

/*
 * Per-type drop counters live in a per-CPU array indexed by enum mt_type;
 * slot 0 counts records that were lost before their type was known.
 */
#define MT_DROP_SLOTS MT_TYPE_MAX

#endif /* MEMTRACK_EVENT_H */
