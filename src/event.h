/* SPDX-License-Identifier: MIT */
/*
 * event.h - the one record layout shared by the BPF programs and userspace.
 *
 * Every ring-buffer record is a struct mt_rec_hdr followed by up to
 * MT_MAX_FIELDS 64-bit fields; which fields a type carries is fixed by
 * MT_RECORD_TYPES below (the schema table in schema.c is built from it,
 * docs/FORMAT.md §8 documents it).  EXEC records
 * and RUNNING records carry a NUL-terminated path after their fields, MARK
 * records (no fields) a NUL-terminated name.
 *
 * This header includes nothing and uses only __u16/__u32/__u64, so it can be
 * included after vmlinux.h on the BPF side and after <linux/types.h> in
 * userspace.
 */
#ifndef MEMTRACK_EVENT_H
#define MEMTRACK_EVENT_H

#define MT_FORMAT_VERSION 2

/*
 * Every record type, defined once.  Each line of MT_RECORD_TYPES is
 *     X(NAME, number, "dump name", string key or NULL, natural fn)
 * and MT_FIELDS_<NAME> lists that type's fields in on-disk order as
 *     F(INDEX, "dump key", kind)      kind: UINT, SINT or ADDR (FORMAT.md §5.4)
 * From these come enum mt_type (MT_<NAME>), the field indexes usable from
 * BPF (r->f[MREMAP_NEW_ADDR]), <NAME>_NFIELDS, the schema table
 * (format/schema.c, hence dump's keys and the codec) and the check of
 * docs/FORMAT.md §8 (tests/unit/test_schema.c).  Numbers are on disk:
 * append, never renumber; they start at 1 so an all-zero record is never
 * valid, and they are consecutive (checked below).  "natural fn" is the
 * allocator function a heap type names by default (0 for the others).
 */
/* the tables keep one entry a line, aligned by hand */
/* clang-format off */
#define MT_RECORD_TYPES(X)                                                  \
	X(MALLOC, 1, "malloc", NULL, MT_FN_MALLOC)                          \
	X(CALLOC, 2, "calloc", NULL, MT_FN_CALLOC)                          \
	X(REALLOC, 3, "realloc", NULL, MT_FN_REALLOC)                       \
	X(ALIGNED_ALLOC, 4, "aligned_alloc", NULL, MT_FN_ALIGNED_ALLOC)     \
	X(FREE, 5, "free", NULL, MT_FN_FREE)                                \
	X(MMAP, 6, "mmap", NULL, 0)                                         \
	X(MUNMAP, 7, "munmap", NULL, 0)                                     \
	X(MREMAP, 8, "mremap", NULL, 0)                                     \
	X(BRK, 9, "brk", NULL, 0)                                           \
	X(FORK, 10, "fork", NULL, 0)                                        \
	X(EXEC, 11, "exec", "path", 0)                                      \
	X(EXIT, 12, "exit", NULL, 0)                                        \
	X(RSS, 13, "rss", NULL, 0)                                          \
	X(PHYSICAL, 14, "physical", NULL, 0)                                \
	/* written by userspace (control socket, src/record/control.c) */   \
	X(MARK, 15, "mark", "name", 0)         /* `mark NAME` */            \
	X(ENABLE, 16, "enable", NULL, 0)       /* heap recording on */      \
	X(DISABLE, 17, "disable", NULL, 0)     /* heap recording off */     \
	/* call stacks (--stacks): objects and mappings by userspace */     \
	X(OBJECT, 18, "object", "path", 0)     /* an ELF file mapped exec */ \
	X(MAPPING, 19, "mapping", NULL, 0)     /* one exec mapping */       \
	X(STACK, 20, "stack", NULL, 0)         /* one deduplicated stack */ \
	/* the in-process heap path (--fast, src/record/fast_drain.c) */    \
	X(FAST, 21, "fast", NULL, 0)           /* heap calls in-process */  \
	X(REFUSED, 22, "refused", NULL, 0)     /* what its ring lied about */ \
	X(MPROTECT, 23, "mprotect", NULL, 0)   /* the mapping syscalls again */ \
	/* `memtrack attach` (src/record/adopt.c) */                         \
	X(RUNNING, 24, "running", "path", 0)   /* a process found at attach */ \
	/* attach under sudo (src/bpf/proc.bpf.c, src/inspect/authority.c) */ \
	X(LEFT, 25, "left", NULL, 0)           /* no longer the user's to trace */ \
	/* Python frames (src/fast/python.c, src/record/python.c) */         \
	X(PYTHON, 26, "python", NULL, 0)       /* an interpreter's verdict */ \
	X(PYCODE, 27, "pycode", NULL, 0)       /* one code object */ \
	/* --sample-bytes (src/record/sample_counts.c, fast_drain.c) */      \
	X(SAMPLING, 28, "sampling", NULL, 0)   /* the period, before any heap record */ \
	X(COUNTS, 29, "counts", NULL, 0)       /* a process's exact heap totals */ \
	/* the kernel's OOM killer (src/bpf/proc.bpf.c, at the victim's exit) */ \
	X(OOM, 30, "oom", NULL, 0)             /* it chose this process */

/* Heap types share their leading fields (alloc.bpf.c fills them alike). */
#define MT_FIELDS_MALLOC(F)                                                 \
	F(MALLOC_ADDR, "addr", ADDR)           /* returned pointer */       \
	F(MALLOC_SIZE, "size", UINT)           /* requested bytes */        \
	F(MALLOC_STACK, "stack", UINT)         /* stack id, 0: none */
#define MT_FIELDS_CALLOC(F)                                                 \
	F(CALLOC_ADDR, "addr", ADDR)           /* returned pointer */       \
	F(CALLOC_SIZE, "size", UINT)           /* nmemb * size */           \
	F(CALLOC_STACK, "stack", UINT)         /* stack id, 0: none */
#define MT_FIELDS_REALLOC(F)                                                \
	F(REALLOC_ADDR, "addr", ADDR)          /* new pointer */            \
	F(REALLOC_SIZE, "size", UINT)          /* requested bytes */        \
	F(REALLOC_OLD_ADDR, "old_addr", ADDR)  /* the pointer passed in */  \
	F(REALLOC_STACK, "stack", UINT)        /* stack id, 0: none */
#define MT_FIELDS_ALIGNED_ALLOC(F)                                          \
	F(ALIGNED_ALLOC_ADDR, "addr", ADDR)    /* returned pointer */       \
	F(ALIGNED_ALLOC_SIZE, "size", UINT)    /* requested bytes */        \
	F(ALIGNED_ALLOC_ALIGN, "align", UINT)  /* alignment, bytes */       \
	F(ALIGNED_ALLOC_STACK, "stack", UINT)  /* stack id, 0: none */
#define MT_FIELDS_FREE(F)                                                   \
	F(FREE_ADDR, "addr", ADDR)             /* pointer freed */
#define MT_FIELDS_MMAP(F)                                                   \
	F(MMAP_ADDR, "addr", ADDR)             /* mapped address */         \
	F(MMAP_LEN, "len", UINT)                                            \
	F(MMAP_PROT, "prot", UINT)                                          \
	F(MMAP_FLAGS, "flags", UINT)                                        \
	F(MMAP_FD, "fd", SINT)                 /* -1: anonymous */          \
	F(MMAP_OFFSET, "offset", UINT)                                      \
	F(MMAP_STACK, "stack", UINT)           /* stack id, 0: none */
#define MT_FIELDS_MUNMAP(F)                                                 \
	F(MUNMAP_ADDR, "addr", ADDR)                                        \
	F(MUNMAP_LEN, "len", UINT)
#define MT_FIELDS_MREMAP(F)                                                 \
	F(MREMAP_NEW_ADDR, "addr", ADDR)                                    \
	F(MREMAP_NEW_LEN, "len", UINT)                                      \
	F(MREMAP_OLD_ADDR, "old_addr", ADDR)                                \
	F(MREMAP_OLD_LEN, "old_len", UINT)                                  \
	F(MREMAP_FLAGS, "flags", UINT)
#define MT_FIELDS_BRK(F)                                                    \
	F(BRK_ADDR, "addr", ADDR)              /* the break after the call */
#define MT_FIELDS_FORK(F)                                                   \
	F(FORK_PARENT, "parent", UINT)         /* tgid */                   \
	F(FORK_CHILD, "child", UINT)           /* tgid, or tid of a thread */ \
	F(FORK_FLAGS, "flags", UINT)           /* MT_FORK_* */
#define MT_FIELDS_EXEC(F)                                                   \
	F(EXEC_OLD_PID, "old_pid", UINT)       /* the tid that called execve */
#define MT_FIELDS_EXIT(F)                                                   \
	F(EXIT_CODE, "code", SINT)             /* -1 when killed by a signal */ \
	F(EXIT_SIGNAL, "signal", UINT)         /* 0 if none */
#define MT_FIELDS_RSS(F)                                                    \
	F(RSS_ANON, "anon", UINT)              /* bytes */                  \
	F(RSS_FILE, "file", UINT)              /* bytes */                  \
	F(RSS_SHMEM, "shmem", UINT)            /* bytes */                  \
	F(RSS_SWAP, "swap", UINT)              /* bytes of swap entries */
#define MT_FIELDS_PHYSICAL(F)                                               \
	F(PHYSICAL_BYTES, "bytes", UINT)       /* the tree's physical memory */
#define MT_FIELDS_MARK(F)                      /* the name follows the header */
#define MT_FIELDS_ENABLE(F)
#define MT_FIELDS_DISABLE(F)
#define MT_FIELDS_OBJECT(F)                    /* build-id and path follow */ \
	F(OBJECT_ID, "id", UINT)               /* > 0, unique in the file */
#define MT_FIELDS_MAPPING(F)                                                \
	F(MAPPING_START, "start", ADDR)                                     \
	F(MAPPING_END, "end", ADDR)                                         \
	F(MAPPING_OFFSET, "offset", UINT)      /* file offset of start */   \
	F(MAPPING_OBJECT, "object", UINT)      /* OBJECT id */              \
	F(MAPPING_BIAS, "bias", ADDR)          /* ELF vaddr = pc - bias */
#define MT_FIELDS_STACK(F)                     /* the frames follow */      \
	F(STACK_ID, "id", UINT)                /* > 0 */                    \
	F(STACK_TRUNCATED, "truncated", UINT)  /* 1: not unwound to the end */
#define MT_FIELDS_FAST(F)                      /* from here the library records */ \
	F(FAST_STACKS, "stacks", UINT)         /* 1: it unwinds its heap calls */
#define MT_FIELDS_REFUSED(F)                                                \
	F(REFUSED_RECORDS, "records", UINT)    /* ring records refused */   \
	F(REFUSED_CUT, "cut", UINT)            /* 1: the ring lied, unread since */
#define MT_FIELDS_MPROTECT(F)                                               \
	F(MPROTECT_ADDR, "addr", UINT)         /* UINT: a new type (FORMAT.md §5.3) */ \
	F(MPROTECT_LEN, "len", UINT)                                        \
	F(MPROTECT_PROT, "prot", UINT)
#define MT_FIELDS_RUNNING(F)                   /* the path follows */       \
	F(RUNNING_PPID, "ppid", UINT)          /* its parent at attach */   \
	F(RUNNING_COMM, "comm", UINT)          /* 1: path is its comm */
#define MT_FIELDS_LEFT(F)                                                   \
	F(LEFT_REASON, "reason", UINT)         /* MT_LEFT_* */
#define MT_FIELDS_PYTHON(F)                                                 \
	F(PYTHON_OBJECT, "object", UINT)       /* OBJECT id of the interpreter */ \
	F(PYTHON_VERSION, "version", UINT)     /* its PY_VERSION_HEX, 0: unread */ \
	F(PYTHON_FRAMES, "frames", UINT)       /* enum mt_py_verdict */
#define MT_FIELDS_PYCODE(F)                    /* the strings and lines follow */ \
	F(PYCODE_KEY, "key", UINT)             /* the frames' addr (> 0) */ \
	F(PYCODE_FIRSTLINE, "firstlineno", UINT)                            \
	F(PYCODE_STRINGS, "strings", UINT)     /* MT_PYCODE_STR_* lengths, kinds */ \
	F(PYCODE_LINES, "lines", UINT)         /* line table bytes | format << 32 */ \
	F(PYCODE_LINES_ALL, "lines_all", UINT) /* its bytes in the code object */

#define MT_FIELDS_SAMPLING(F)                                               \
	F(SAMPLING_PERIOD, "period", UINT)     /* N: mean bytes between samples */
#define MT_FIELDS_COUNTS(F)                                                 \
	F(COUNTS_ALLOCS, "allocs", UINT)       /* allocating calls, all */  \
	F(COUNTS_ALLOC_BYTES, "alloc_bytes", UINT) /* bytes they asked for */ \
	F(COUNTS_FREES, "frees", UINT)         /* blocks freed (free, realloc) */ \
	F(COUNTS_SAMPLED, "sampled", UINT)     /* allocations recorded */   \
	F(COUNTS_UNMATCHED, "unmatched", UINT) /* sampled, not followable: unrecorded */
#define MT_FIELDS_OOM(F)                                                    \
	F(OOM_SCORE_ADJ, "score_adj", SINT)    /* its oom_score_adj then */

#define MT_X_TYPE_ENUM(NAME, num, name, str, fn) MT_##NAME = (num),
#define MT_X_TYPE_SEQ(NAME, num, name, str, fn) MT_X_SEQ_##NAME,
/* MT_X_NTYPES counts the list's lines. */
enum { MT_RECORD_TYPES(MT_X_TYPE_SEQ) MT_X_NTYPES };
/* Record types (on disk as the record's type). */
enum mt_type {
	MT_RECORD_TYPES(MT_X_TYPE_ENUM)
	MT_TYPE_MAX = MT_X_NTYPES + 1, /* one past the last known type */
};

/* Field indexes, and <NAME>_NFIELDS, per type. */
#define MT_X_FIELD_INDEX(INDEX, key, kind) INDEX,
#define MT_X_TYPE_FIELDS(NAME, num, name, str, fn) \
	enum { MT_FIELDS_##NAME(MT_X_FIELD_INDEX) NAME##_NFIELDS };
MT_RECORD_TYPES(MT_X_TYPE_FIELDS)

/* Numbers are consecutive: schema and drop-counter arrays are indexed by type. */
#define MT_X_TYPE_DENSE(NAME, num, name, str, fn) \
	_Static_assert((num) >= 1 && (num) < MT_TYPE_MAX, "record type " #NAME " numbered out of order");
MT_RECORD_TYPES(MT_X_TYPE_DENSE)

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
 * is dump's "fn" value.  The one list of them: enum mt_fn, the schema's
 * names and kinds, the ELF symbols probed (inspect/symbols.c), the
 * functions libmemtrack-fast.so interposes (fast/interpose.c) and the fn
 * values memtrack accepts from its rings (inspect/fast_reader.c) all come
 * from it, so adding a function is one line here (and, for one the library
 * interposes, its entry point in fast/interpose.c).
 *
 * X(ID, value, name, kind, symbol, where):
 *   value   the MT_FN_ID, stored in artifacts: never renumber; a new line
 *           takes the next value (MT_FN_MAX); values are 0 .. MT_FN_MAX - 1
 *   name    dump's "fn"
 *   kind    enum mt_fn_kind
 *   symbol  the ELF symbol that defines it (other names of the same
 *           functions, cfree, tc_free, mi_malloc ..., are symbols.c's)
 *   where   FAST: a standard function libmemtrack-fast.so interposes;
 *           STD: a standard function only the uprobes see; VENDOR: part of
 *           an allocator library's own API (jemalloc, mimalloc)
 * The lines are in order of preference: where several names share one
 * address (glibc's aligned_alloc is its memalign, tcmalloc's free is also
 * operator delete), the site is probed, and the library's calls recorded,
 * under the first one, so standard C names win over C++ operators, which
 * win over vendor names (hence memalign before aligned_alloc).
 */
#define MT_FN_LIST(X)                                                                                                                    \
	X(MALLOC, 0, "malloc", MT_K_MALLOC, "malloc", FAST)                                                                              \
	X(CALLOC, 1, "calloc", MT_K_CALLOC, "calloc", FAST)                                                                              \
	X(REALLOC, 2, "realloc", MT_K_REALLOC, "realloc", FAST)                                                                          \
	X(REALLOCARRAY, 3, "reallocarray", MT_K_REALLOCARRAY, "reallocarray", FAST)                                                      \
	X(MEMALIGN, 5, "memalign", MT_K_ALIGN_SIZE, "memalign", FAST)                                                                    \
	X(ALIGNED_ALLOC, 4, "aligned_alloc", MT_K_ALIGN_SIZE, "aligned_alloc", FAST)                                                     \
	X(POSIX_MEMALIGN, 6, "posix_memalign", MT_K_POSIX_MEMALIGN, "posix_memalign", FAST)                                              \
	X(VALLOC, 7, "valloc", MT_K_PAGE_ALIGNED, "valloc", FAST)                                                                        \
	X(PVALLOC, 8, "pvalloc", MT_K_PAGE_ALIGNED, "pvalloc", FAST)                                                                     \
	X(FREE, 9, "free", MT_K_FREE, "free", FAST)                                                                                      \
	X(FREE_SIZED, 10, "free_sized", MT_K_FREE, "free_sized", STD)                                                                    \
	X(FREE_ALIGNED_SIZED, 11, "free_aligned_sized", MT_K_FREE, "free_aligned_sized", STD)                                            \
	X(NEW, 12, "operator new", MT_K_MALLOC, "_Znwm", FAST)                                                                           \
	X(NEW_ARRAY, 13, "operator new[]", MT_K_MALLOC, "_Znam", FAST)                                                                   \
	X(NEW_NOTHROW, 14, "operator new(nothrow)", MT_K_MALLOC, "_ZnwmRKSt9nothrow_t", FAST)                                            \
	X(NEW_ARRAY_NOTHROW, 15, "operator new[](nothrow)", MT_K_MALLOC, "_ZnamRKSt9nothrow_t", FAST)                                    \
	X(NEW_ALIGNED, 16, "operator new(align)", MT_K_SIZE_ALIGN, "_ZnwmSt11align_val_t", FAST)                                         \
	X(NEW_ARRAY_ALIGNED, 17, "operator new[](align)", MT_K_SIZE_ALIGN, "_ZnamSt11align_val_t", FAST)                                 \
	X(NEW_ALIGNED_NOTHROW, 18, "operator new(align, nothrow)", MT_K_SIZE_ALIGN, "_ZnwmSt11align_val_tRKSt9nothrow_t", FAST)          \
	X(NEW_ARRAY_ALIGNED_NOTHROW, 19, "operator new[](align, nothrow)", MT_K_SIZE_ALIGN, "_ZnamSt11align_val_tRKSt9nothrow_t", FAST)  \
	X(DELETE, 20, "operator delete", MT_K_FREE, "_ZdlPv", FAST)                                                                      \
	X(DELETE_ARRAY, 21, "operator delete[]", MT_K_FREE, "_ZdaPv", FAST)                                                              \
	X(DELETE_SIZED, 22, "operator delete(size)", MT_K_FREE, "_ZdlPvm", FAST)                                                         \
	X(DELETE_ARRAY_SIZED, 23, "operator delete[](size)", MT_K_FREE, "_ZdaPvm", FAST)                                                 \
	X(DELETE_ALIGNED, 24, "operator delete(align)", MT_K_FREE, "_ZdlPvSt11align_val_t", FAST)                                        \
	X(DELETE_ARRAY_ALIGNED, 25, "operator delete[](align)", MT_K_FREE, "_ZdaPvSt11align_val_t", FAST)                                \
	X(DELETE_SIZED_ALIGNED, 26, "operator delete(size, align)", MT_K_FREE, "_ZdlPvmSt11align_val_t", FAST)                           \
	X(DELETE_ARRAY_SIZED_ALIGNED, 27, "operator delete[](size, align)", MT_K_FREE, "_ZdaPvmSt11align_val_t", FAST)                   \
	X(DELETE_NOTHROW, 28, "operator delete(nothrow)", MT_K_FREE, "_ZdlPvRKSt9nothrow_t", FAST)                                       \
	X(DELETE_ARRAY_NOTHROW, 29, "operator delete[](nothrow)", MT_K_FREE, "_ZdaPvRKSt9nothrow_t", FAST)                               \
	X(DELETE_ALIGNED_NOTHROW, 30, "operator delete(align, nothrow)", MT_K_FREE, "_ZdlPvSt11align_val_tRKSt9nothrow_t", FAST)         \
	X(DELETE_ARRAY_ALIGNED_NOTHROW, 31, "operator delete[](align, nothrow)", MT_K_FREE, "_ZdaPvSt11align_val_tRKSt9nothrow_t", FAST) \
	X(MALLOCX, 32, "mallocx", MT_K_MALLOCX, "mallocx", VENDOR)                                                                       \
	X(RALLOCX, 33, "rallocx", MT_K_REALLOC, "rallocx", VENDOR)                                                                       \
	X(XALLOCX, 34, "xallocx", MT_K_XALLOCX, "xallocx", VENDOR)                                                                       \
	X(DALLOCX, 35, "dallocx", MT_K_FREE, "dallocx", VENDOR)                                                                          \
	X(SDALLOCX, 36, "sdallocx", MT_K_FREE, "sdallocx", VENDOR)                                                                       \
	X(MI_ZALLOC, 37, "mi_zalloc", MT_K_ZALLOC, "mi_zalloc", VENDOR)                                                                  \
	X(MI_MALLOC_ALIGNED, 38, "mi_malloc_aligned", MT_K_SIZE_ALIGN, "mi_malloc_aligned", VENDOR)                                      \
	X(MI_ZALLOC_ALIGNED, 39, "mi_zalloc_aligned", MT_K_SIZE_ALIGN, "mi_zalloc_aligned", VENDOR)                                      \
	X(MI_REALLOC_ALIGNED, 40, "mi_realloc_aligned", MT_K_REALLOC, "mi_realloc_aligned", VENDOR)                                      \
	X(MI_REALLOCN, 41, "mi_reallocn", MT_K_REALLOCARRAY, "mi_reallocn", VENDOR)                                                      \
	X(MI_FREE_SIZE, 42, "mi_free_size", MT_K_FREE, "mi_free_size", VENDOR)                                                           \
	X(MI_FREE_ALIGNED, 43, "mi_free_aligned", MT_K_FREE, "mi_free_aligned", VENDOR)

/* MT_FN_IF_FAST(where, ...): the arguments when @where is FAST, else nothing. */
#define MT_FN_IF_FAST(where, ...) MT_FN_IF_FAST_##where(__VA_ARGS__)
#define MT_FN_IF_FAST_FAST(...) __VA_ARGS__
#define MT_FN_IF_FAST_STD(...)
#define MT_FN_IF_FAST_VENDOR(...)
/* MT_FN_IS_VENDOR(where): 1 for VENDOR, else 0. */
#define MT_FN_IS_VENDOR(where) MT_FN_IS_VENDOR_##where
#define MT_FN_IS_VENDOR_FAST 0
#define MT_FN_IS_VENDOR_STD 0
#define MT_FN_IS_VENDOR_VENDOR 1

/* MT_X_NFNS counts the list's lines. */
#define MT_X_FN_SEQ(id, num, name, kind, sym, where) MT_X_FN_SEQ_##id,
enum { MT_FN_LIST(MT_X_FN_SEQ) MT_X_NFNS };
enum mt_fn {
#define MT_X_FN_ENUM(id, num, name, kind, sym, where) MT_FN_##id = (num),
	MT_FN_LIST(MT_X_FN_ENUM)
#undef MT_X_FN_ENUM
	MT_FN_MAX = MT_X_NFNS /* one past the last known function */
};

/* Values lie below MT_FN_MAX (that none repeats: tests/unit/test_schema.c). */
#define MT_X_FN_DENSE(id, num, name, kind, sym, where) \
	_Static_assert((num) >= 0 && (num) < MT_FN_MAX, "allocator function " #id " numbered out of order");
MT_FN_LIST(MT_X_FN_DENSE)

/*
 * Attach cookie of an allocator probe: the enum mt_fn, plus this flag on a
 * free-kind site that also has a return probe, so that a free made inside it
 * (operator delete calling free, an LD_PRELOAD wrapper calling libc's) is
 * known to be nested and is recorded once.
 */
#define MT_COOKIE_FN_MASK 0xffffu
#define MT_COOKIE_GUARDED 0x10000u
#define MT_COOKIE_NORET 0x20000u /* an allocating site without a return probe (operator new) */
#define MT_COOKIE_INTERPOSED 0x40000u /* a name libmemtrack-fast.so interposes (--fast) */
#define MT_COOKIE_KIND_SHIFT 20 /* the enum mt_fn_kind, so BPF needs no table */
#define MT_COOKIE_KIND(c) (((c) >> MT_COOKIE_KIND_SHIFT) & 0xffu)
/*
 * Perf-event uprobes (record/attach_perf.c) fire for every task of the
 * address space they were made for, a vfork child too, which has probes of
 * its own: they carry their process's tgid here, and fire only for it.
 * uprobe-multi links filter in the kernel and leave it 0.
 */
#define MT_COOKIE_TGID_SHIFT 32
#define MT_COOKIE_TGID(c) ((__u32)((c) >> MT_COOKIE_TGID_SHIFT))

#define MT_MAX_FIELDS 7

#define MT_X_TYPE_FITS(NAME, num, name, str, fn) \
	_Static_assert(NAME##_NFIELDS <= MT_MAX_FIELDS, #NAME " has more than MT_MAX_FIELDS fields");
MT_RECORD_TYPES(MT_X_TYPE_FITS)
/* clang-format on */
#define MT_PATH_MAX 256

/*
 * fn of a FORK, EXEC or MMAP record whose task the BPF side parked with
 * SIGSTOP: userspace must attach what the task needs, then SIGCONT it.
 */
#define MT_REC_PARKED 0x8000u
/*
 * fn of an MMAP or BRK record made while the thread was inside an allocator
 * call (vm.bpf.c): the allocator's memory, which its heap blocks account
 * for, not the program's own mapped memory (docs/METRICS.md).
 */
#define MT_REC_ALLOCATOR 0x4000u

/*
 * Why a process left an attach made under sudo (a LEFT record's reason):
 * from then on the invoking user could not have traced it themselves.
 */
#define MT_LEFT_EXEC 1u	    /* it exec'd a program that gained privileges (setid, caps) */
#define MT_LEFT_DUMPABLE 2u /* it made itself undumpable, prctl(PR_SET_DUMPABLE, 0) */

/* Flags of a FORK record (field 2). */
#define MT_FORK_THREAD 1u /* clone with CLONE_THREAD */
#define MT_FORK_VM 2u	  /* shares the parent's mm (CLONE_VM: vfork, threads) */

struct mt_rec_hdr {
	__u16 type;    /* enum mt_type */
	__u16 fn;      /* enum mt_fn for heap records, else 0 */
	__u32 pid;     /* tgid */
	__u32 tid;     /* thread id */
	__u32 nfields; /* number of __u64 fields that follow */
	__u64 ts;      /* CLOCK_MONOTONIC, ns */
};

struct mt_rec {
	struct mt_rec_hdr h;
	__u64 f[MT_MAX_FIELDS];
};

struct mt_rec_exec {
	struct mt_rec_hdr h;
	__u64 f[EXEC_NFIELDS];	/* EXEC_OLD_PID */
	char path[MT_PATH_MAX]; /* NUL-terminated */
};

/* Made by userspace (src/record/control.c), never by BPF. */
struct mt_rec_mark {
	struct mt_rec_hdr h;	/* nfields 0 */
	char name[MT_PATH_MAX]; /* NUL-terminated, 1 to MT_PATH_MAX - 1 bytes */
};

/*
 * Made by userspace at attach (src/record/adopt.c): a process that was
 * running before memtrack saw it exec, named by its /proc/PID/exe.
 */
struct mt_rec_running {
	struct mt_rec_hdr h;
	__u64 f[RUNNING_NFIELDS]; /* RUNNING_PPID, RUNNING_COMM */
	char path[MT_PATH_MAX];	  /* NUL-terminated, 1 to MT_PATH_MAX - 1 bytes */
};

_Static_assert(sizeof(struct mt_rec_hdr) == 24, "mt_rec_hdr layout");
_Static_assert(sizeof(struct mt_rec) == 24 + 8 * MT_MAX_FIELDS, "mt_rec layout");
/*
 * Call stacks (--stacks, docs/FORMAT.md §8.2).  A frame is an object id
 * (0: the pc lay in no known file mapping) and the ELF virtual address of
 * a return address in it (the absolute pc for object 0).
 */
#define MT_STACK_MAX 127   /* frames of one stack */
#define MT_BUILD_ID_MAX 20 /* bytes of a GNU build-id we keep */

struct mt_rec_frame {
	__u32 object;
	__u32 pad;
	__u64 addr;
};

/* A STACK record as BPF writes it: nframes frames, innermost first. */
struct mt_rec_stack {
	struct mt_rec_hdr h;
	__u64 f[STACK_NFIELDS]; /* STACK_ID, STACK_TRUNCATED */
	__u32 nframes;		/* 1 to MT_STACK_MAX */
	__u32 pad;
	struct mt_rec_frame frames[MT_STACK_MAX];
};

/* An OBJECT record as userspace makes it (src/record/stacks.c). */
struct mt_rec_object {
	struct mt_rec_hdr h;
	__u64 f[OBJECT_NFIELDS]; /* OBJECT_ID */
	__u8 build_id_len;	 /* 0: the file has no GNU build-id note */
	__u8 build_id[MT_BUILD_ID_MAX];
	char path[MT_PATH_MAX]; /* NUL-terminated */
	__u8 pad[3];
};

_Static_assert(sizeof(struct mt_rec_exec) == 24 + 8 + MT_PATH_MAX, "mt_rec_exec layout");
_Static_assert(sizeof(struct mt_rec_stack) == 24 + 16 + 8 + 16 * MT_STACK_MAX,
	       "mt_rec_stack layout");
_Static_assert(sizeof(struct mt_rec_object) == 24 + 8 + 24 + MT_PATH_MAX, "mt_rec_object layout");
_Static_assert(MALLOC_STACK == 2 && CALLOC_STACK == 2 && REALLOC_STACK == 3 &&
		       ALIGNED_ALLOC_STACK == 3 && MMAP_STACK == 6,
	       "the stack id is each heap record's last field");
_Static_assert(sizeof(struct mt_rec_mark) == 24 + MT_PATH_MAX, "mt_rec_mark layout");
_Static_assert(sizeof(struct mt_rec_running) == 24 + 16 + MT_PATH_MAX, "mt_rec_running layout");

/*
 * Python frames (issue 37, FORMAT.md §8.3).  A frame whose object has
 * MT_PY_FRAME set is one frame of the interpreter's chain: the low 31 bits
 * are the instruction's offset in the code object (code units, below
 * MT_PY_ENTRY), addr the key of a PYCODE record of the same file; the
 * frame with MT_PY_ENTRY is the outermost of one call of the eval loop
 * (_PyEval_EvalFrameDefault), whose native frame the Python frames up to
 * it stand for.  OBJECT ids never reach these bits.
 */
#define MT_PY_FRAME 0x80000000u
#define MT_PY_ENTRY 0x40000000u
#define MT_PY_OFFSET_MASK 0x3fffffffu

/* What a PYTHON record says of an interpreter's frames. */
enum mt_py_verdict {
	MT_PY_OFF = 0,	       /* --no-python-frames */
	MT_PY_ON = 1,	       /* its stacks carry Python frames */
	MT_PY_UNSUPPORTED = 2, /* a version memtrack has no offsets for: native frames only */
	MT_PY_UNREADABLE = 3,  /* its symbols or version could not be read: native frames only */
};

/* Where a PYCODE record's strings' bytes, kind and line-table format sit in its fields. */
#define MT_PYCODE_NAME_MAX 128	 /* bytes of co_name kept */
#define MT_PYCODE_QUAL_MAX 256	 /* bytes of co_qualname kept */
#define MT_PYCODE_FILE_MAX 512	 /* bytes of co_filename kept */
#define MT_PYCODE_LINES_MAX 1024 /* bytes of the line table kept */
#define MT_PYCODE_BLOB_MAX \
	(MT_PYCODE_NAME_MAX + MT_PYCODE_QUAL_MAX + MT_PYCODE_FILE_MAX + MT_PYCODE_LINES_MAX)
/* STRINGS: name, qualname, file bytes (10 bits each: < 1024), then each kind (3 bits: 1, 2, 4) */
#define MT_PYCODE_STR(name, qual, file, kn, kq, kf)                                      \
	((__u64)(name) | (__u64)(qual) << 10 | (__u64)(file) << 20 | (__u64)(kn) << 30 | \
	 (__u64)(kq) << 33 | (__u64)(kf) << 36)
#define MT_PYCODE_STR_LEN(v, i) ((__u32)((v) >> (10 * (i))) & 1023u)
#define MT_PYCODE_STR_KIND(v, i) ((__u32)((v) >> (30 + 3 * (i))) & 7u)
/* LINES' format: which CPython line table the bytes are */
enum mt_py_lines {
	MT_PY_LINES_NONE = 0,
	MT_PY_LINES_310 = 1, /* 3.10's co_linetable: (offset delta, line delta) byte pairs */
	MT_PY_LINES_311 = 2, /* 3.11+'s location table (Objects/locations.md) */
};

/* A PYCODE record as its writers make it: fields, then the blob (name, qualname, file, line table). */
struct mt_rec_pycode {
	struct mt_rec_hdr h;
	__u64 f[PYCODE_NFIELDS];
	__u8 blob[MT_PYCODE_BLOB_MAX];
};
_Static_assert(sizeof(struct mt_rec_pycode) == 24 + 40 + MT_PYCODE_BLOB_MAX,
	       "mt_rec_pycode layout");

/* The blob's bytes a PYCODE record's fields @f describe (above MT_PYCODE_BLOB_MAX: invalid). */
static inline __u64 mt_pycode_blob_len(const __u64 *f)
{
	return (__u64)MT_PYCODE_STR_LEN(f[PYCODE_STRINGS], 0) +
	       MT_PYCODE_STR_LEN(f[PYCODE_STRINGS], 1) + MT_PYCODE_STR_LEN(f[PYCODE_STRINGS], 2) +
	       (f[PYCODE_LINES] & 0xffffffffu);
}
/* alloc.bpf.c fills every heap record through one layout */
_Static_assert(MALLOC_ADDR == 0 && CALLOC_ADDR == 0 && REALLOC_ADDR == 0 &&
		       ALIGNED_ALLOC_ADDR == 0 && FREE_ADDR == 0,
	       "heap records start with addr");
_Static_assert(MALLOC_SIZE == 1 && CALLOC_SIZE == 1 && REALLOC_SIZE == 1 && ALIGNED_ALLOC_SIZE == 1,
	       "heap records carry size second");
_Static_assert(REALLOC_OLD_ADDR == 2 && ALIGNED_ALLOC_ALIGN == 2, "third heap field");

/*
 * Per-type drop counters live in a per-CPU array indexed by enum mt_type;
 * slot 0 counts records that were lost before their type was known.
 */
#define MT_DROP_SLOTS MT_TYPE_MAX

#endif /* MEMTRACK_EVENT_H */
