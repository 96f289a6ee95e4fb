/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * bpf_abi.h - what the BPF programs and userspace must agree on besides the
 * record layout (event.h): value types, flags and default sizes of the
 * shared maps, and the uprobe-multi link attributes.  Included by ring.bpf.c
 * (which defines the maps), common.bpf.h (which declares them extern) and
 * userspace (loader.c, probes.c), so no side re-types them.
 *
 * Like event.h it includes nothing and uses only __u32/__u64.
 */
#ifndef MEMTRACK_BPF_ABI_H
#define MEMTRACK_BPF_ABI_H

#define MT_RING_DEFAULT (2u << 20) /* bytes; a power-of-two multiple of the page size */
/*
 * A hash map's bucket array (16 bytes per entry, rounded up to a power of
 * two) is allocated and initialised at creation even without preallocation:
 * 64K entries cost ~1 ms, 4M entries ~60 ms.  Keep the limits tight.
 */
#define MT_CTL_RING (256u << 10) /* bytes of the control ring (parking records) */
#define MT_MAX_TRACKED 16384	 /* processes of the tree alive at once */
#define MT_MAX_INFLIGHT 16384	 /* threads inside an allocator or syscall at once */

/*
 * The process is another memtrack: its children are its own session's tree.
 * Two sessions parking the same process would race (either one's SIGCONT
 * can resume it before the other has attached), so the outer session
 * records the inner memtrack itself and leaves its workload to it.
 */
#define MT_PROC_NO_CHILDREN 1u
/*
 * The process announced libmemtrack-fast.so (--fast, src/fast/): its calls
 * to the allocator names the library interposes are recorded in-process,
 * and alloc.bpf.c ignores sites with MT_COOKIE_INTERPOSED.  Cleared at exec.
 */
#define MT_PROC_FAST 2u
/*
 * The process was running when `memtrack attach` found it: its mm was never
 * seen at a fork or exec, so rss.bpf.c adopts it at its first counter
 * change in the process's own context (then the flag is cleared).
 */
#define MT_PROC_ADOPT_MM 4u
/*
 * The same process, while its allocator probes go in (one site after
 * another: one perf event each before Linux 6.6): its heap calls are not
 * recorded, or a malloc seen before free's probe is in would stay "live"
 * for ever.  Cleared by memtrack once they are all in (adopt.c sync_one),
 * so its heap is recorded from one instant on, like a command's from its
 * start.  Only userspace writes it; the BPF side's concurrent change of
 * MT_PROC_ADOPT_MM that the rewrite could undo only repeats an adoption
 * that rss.bpf.c never repeats (the mm is registered by then).
 */
#define MT_PROC_ARMING 8u

/*
 * The marker syscall of the handover: prctl(MT_FAST_PRCTL, MT_FAST_VERSION,
 * depth_offset), an option no kernel knows (it fails with EINVAL).
 * fast.bpf.c sees it at sys_enter and sets MT_PROC_FAST, so calls before it
 * are BPF's and calls after it the library's.  depth_offset: where the
 * library's per-thread allocator-call depth lies, bytes from the thread
 * pointer (0: not given); vm.bpf.c reads it at mmap and brk.
 */
#define MT_FAST_PRCTL 0x4d544601u
/*
 * 2: the ring's memfd is sealed (fast_ring.h); 3: the answer may carry the
 * unwinder's tables, the ring STACK records, and the marker's 4th argument
 * says whether the library unwinds (MT_FAST_UNWINDS: the FAST record's
 * `stacks` field).
 */
#define MT_FAST_VERSION 4u
#define MT_FAST_UNWINDS 1u

/* Per tracked process (key: tgid). */
struct tracked_proc {
	__u32 ppid;  /* tgid of the parent in the tree, 0 for the root */
	__u32 flags; /* MT_PROC_* */
	/* MT_PROC_FAST: the library's depth word, from the thread pointer (the marker's) */
	__s64 fast_depth_off;
};

/*
 * --sample-bytes: one process's exact heap totals (map `heap_counts`, key:
 * tgid), counted by the uprobes for every outermost call, sampled or not;
 * userspace writes them as a COUNTS record at the end (sample_counts.c).
 * Fields in COUNTS' order.
 */
struct mt_heap_counts {
	__u64 allocs;	   /* allocating calls that returned a block */
	__u64 alloc_bytes; /* bytes they asked for */
	__u64 frees;	   /* blocks freed (free of non-NULL, realloc's old block) */
	__u64 sampled;	   /* allocations recorded */
	__u64 unmatched;   /* sampled ones not recorded: no room to follow their free */
};

/* A sampled block that is live (map `sampled_blocks`): its free is recorded. */
struct mt_sampled_key {
	__u64 addr;
	__u32 tgid;
	__u32 pad; /* 0 */
};

#define MT_MAX_SAMPLED (1u << 20) /* sampled blocks live at once, the tree's */

/*
 * The session's state, one element of the `session` array (key 0).  Set
 * once memtrack stops (normally, or killed: see proc.bpf.c handle_exit):
 * from then on nothing is parked, and every parked process was resumed.
 */
struct session_state {
	__u32 parking_off; /* 1: memtrack is gone or going; park nothing */
	__u32 pad;
};

/*
 * A fork child not parked yet (key: its tgid), where the kernel has no
 * bpf_send_signal_task (Linux 6.13): the fork record and the stop wait for
 * the child's own first return to user space (proc.bpf.c).
 */
struct fork_pending {
	__u32 ptgid; /* the parent process */
	__u32 ptid;  /* the parent's thread that forked */
	__u32 flags; /* MT_FORK_* */
	__u32 pad;
};

#define MT_MAX_CPUS 512	 /* per-CPU counters are summed over at most this many */
#define MT_MAX_MMS 16384 /* address spaces of the tree alive at once */

/*
 * Owner of an address space (key: the struct mm_struct pointer).  RSS
 * counters are updated from contexts that are not the owner (reclaim,
 * another process's madvise, exit), so rss_stat is attributed by mm.
 */
#define MM_EXEC_PENDING 1u /* its owner is in execve: the mm is about to be torn down */

struct mm_owner {
	__u32 tgid;    /* the process whose address space this is */
	__u32 flags;   /* MM_* */
	__u64 last[4]; /* counters (pages) last reported, by MM_* index */
};

/*
 * uprobe-multi links (kernel 6.6) are newer than Debian 12's UAPI headers
 * and libbpf 1.1, so probes.c issues BPF_LINK_CREATE itself.  This is the
 * link_create part of union bpf_attr; ring.bpf.c checks every offset and
 * constant against the kernel's own definitions in vmlinux.h.
 */
#define MT_BPF_TRACE_UPROBE_MULTI 48	/* enum bpf_attach_type */
#define MT_BPF_F_UPROBE_MULTI_RETURN 1u /* uprobe_multi.flags: return probes */

struct mt_uprobe_multi_attr {
	__u32 prog_fd;
	__u32 target_fd;
	__u32 attach_type; /* MT_BPF_TRACE_UPROBE_MULTI */
	__u32 flags;
	__u64 path;	       /* const char * */
	__u64 offsets;	       /* const __u64 *, cnt of them */
	__u64 ref_ctr_offsets; /* NULL: none */
	__u64 cookies;	       /* const __u64 *, cnt of them */
	__u32 cnt;
	__u32 umflags; /* MT_BPF_F_UPROBE_MULTI_* */
	__u32 pid;     /* only this process traps */
	__u32 pad[5];  /* zero: the rest of union bpf_attr's link_create */
};

/*
 * Call stacks (--stacks): userspace turns each object's .eh_frame into
 * unwind rows (src/inspect/unwind_table.c), all objects' rows in one flat
 * numbering (`unwind_rows`, chunks written by userspace through mmap, each
 * object a sorted slice of it),
 * and gives each address space its executable mappings (`proc_maps`, key:
 * the tgid owning the mm); src/bpf/unwind.bpf.h walks the user stack with
 * them.  See docs/DESIGN.md, "Call stacks".
 */
#define MT_UNWIND_ROWS_DEFAULT (1u << 20) /* the ceiling: 1M rows of 16 bytes, 16 MiB */
/*
 * The kernel's rows are stored in chunks (`unwind_rows` is an array of
 * maps, each an array of MT_UNWIND_CHUNK_ROWS rows) that userspace creates
 * as objects need them, so the kernel holds about what the tree maps, not
 * the ceiling: a BPF array's pages are all allocated at its creation.  Row
 * r of the flat numbering (mt_umap.row_start) is element r mod
 * MT_UNWIND_CHUNK_ROWS of chunk r / MT_UNWIND_CHUNK_ROWS; the index alike,
 * with MT_UNWIND_CHUNK_INDEX entries a chunk.
 */
#define MT_UNWIND_CHUNK_LOG2 14 /* 16K rows: 256 KiB a chunk */
#define MT_UNWIND_CHUNK_ROWS (1u << MT_UNWIND_CHUNK_LOG2)
#define MT_UNWIND_CHUNK_INDEX_LOG2 14 /* 16K entries of 8 bytes: 128 KiB */
#define MT_UNWIND_CHUNK_INDEX (1u << MT_UNWIND_CHUNK_INDEX_LOG2)
/* chunks at most: the largest --unwind-rows (64M) */
#define MT_UNWIND_MAX_CHUNKS ((64u << 20) / MT_UNWIND_CHUNK_ROWS)
#define MT_UNWIND_OBJECT_ROWS_MAX (1u << 21) /* rows of one object: 21 search steps */
/*
 * An object's rows are indexed by address: bucket b (1 << shift bytes from
 * text_lo) gives the last row at or below its start, and no bucket spans
 * more than MT_UNWIND_BUCKET_ROWS rows, so a lookup is 5 search steps instead
 * of up to 21.  Both unwinders search through the index only: an object
 * whose index does not fit gets no rows (counted without room).  Index
 * entries live in `unwind_index`, at most as many as rows (cc1's index is
 * over half its rows); like the rows' chunks, the index's are created only
 * as they fill, so the ceiling costs nothing.
 */
#define MT_UNWIND_INDEX_CAP(rows) (rows)
#define MT_UNWIND_BUCKET_ROWS 32
#define MT_UNWIND_BUCKET_STEPS 5
#define MT_MAX_UMAPS 256 /* executable mappings of one process */
#define MT_UMAPS_LOG2 8
#define MT_STACKS_SEEN 65536 /* stack ids already written (LRU) */
/*
 * With the in-process path the kernel unwinds only mmap calls and the
 * processes that fall back to uprobes: a quarter of the set, whose
 * preallocation costs 0.5 ms of the load instead of 2.2.
 */
#define MT_STACKS_SEEN_FAST 16384

/*
 * How a row finds the CFA (the caller's stack pointer).  The rows of an
 * aarch64 object use the same numbers for its registers: "rsp" is sp,
 * "rbp" is the frame pointer x29, and enum mt_ra_rule says where the return
 * address (x30) is; on x86-64 it is always at CFA-8.
 */
enum mt_cfa_rule {
	MT_CFA_NONE = 0, /* unknown here (no FDE, unsupported rule): stop, truncated */
	MT_CFA_RSP = 1,	 /* rsp (sp) + off */
	MT_CFA_RBP = 2,	 /* rbp (x29) + off */
	MT_CFA_DEREF_RBP =
		3,	/* *(rbp + off): gcc's stack realignment (DW_OP_breg6 off; DW_OP_deref) */
	MT_CFA_END = 4, /* return address undefined: the outermost frame (_start, clone3) */
};

/* How a row restores the caller's rbp (x29 on aarch64). */
enum mt_rbp_rule {
	MT_RBP_SAME = 0,   /* unchanged */
	MT_RBP_AT_CFA = 1, /* saved at CFA + off */
	MT_RBP_LOST = 2,   /* any other rule: rbp is unknown from here on */
};

/*
 * Where a row's return address is.  x86-64's rows all say MT_RA_CFA_MINUS_8;
 * aarch64's say where x30 was saved, or that it still holds the return
 * address (a leaf, a function's first instructions), which only the first
 * frame (the registers of the interrupted call) can use.  A return address
 * signed by pointer authentication (DW_CFA_AARCH64_negate_ra_state) needs no
 * rule: the unwinders clear the bits above the user address space.
 */
enum mt_ra_rule {
	MT_RA_CFA_MINUS_8 = 0, /* at CFA - 8: x86-64 */
	MT_RA_AT_CFA = 1,      /* saved at CFA + ra_off: aarch64 */
	MT_RA_LR = 2,	       /* still in the link register x30: the first frame only */
};

struct mt_unwind_row {
	__u32 pc;      /* ELF virtual address where the row starts */
	__s32 cfa_off; /* enum mt_cfa_rule's off */
	__s16 rbp_off; /* MT_RBP_AT_CFA's off */
	__u8 cfa;      /* enum mt_cfa_rule */
	__u8 rbp;      /* enum mt_rbp_rule */
	__s16 ra_off;  /* MT_RA_AT_CFA's off */
	__u8 ra;       /* enum mt_ra_rule */
	__u8 pad;      /* zero; an array map's elements are 8-byte aligned anyway (mmaped) */
};

/* One executable file mapping of a process. */
struct mt_umap {
	__u64 start, end;  /* [start, end) in the process */
	__u64 bias;	   /* ELF vaddr = pc - bias */
	__u32 object;	   /* OBJECT id */
	__u32 row_start;   /* its rows: unwind_rows[row_start, row_start + nrows) */
	__u32 nrows;	   /* 0: no CFI (a stack through it is truncated) */
	__u32 text_lo;	   /* ELF address of bucket 0 (the first row's pc) */
	__u32 index_start; /* its buckets: unwind_index[index_start, + nbuckets) */
	__u32 nbuckets;	   /* 0: no index, so no row is found */
	__u32 shift;	   /* log2 of a bucket's bytes */
	__u32 pad;
};

/*
 * Where a CPython interpreter keeps the calling thread's frames (issue 37):
 * the process's addresses of its runtime and of the code type, and the
 * offsets its version has (src/record/python.c's table).  runtime 0: no
 * interpreter, or none whose frames are taken (native frames only).
 */
enum mt_py_chain {
	MT_PY_CHAIN_310 = 1, /* tstate->frame: PyFrameObject, f_back, f_lasti */
	MT_PY_CHAIN_311 = 2, /* tstate->cframe->current_frame, is_entry, prev_instr */
	MT_PY_CHAIN_312 = 3, /* as 3.11, entries are frames owned by the C stack */
	MT_PY_CHAIN_313 = 4, /* tstate->current_frame, f_executable, instr_ptr */
};

struct mt_py {
	__u64 runtime;	 /* &_PyRuntime in the process, 0: no Python frames */
	__u64 code_type; /* &PyCode_Type in the process */
	__u32 version;	 /* PY_VERSION_HEX */
	__u16 chain;	 /* enum mt_py_chain */
	__u16 lines;	 /* enum mt_py_lines (event.h) */
	__u16 tss_key;	/* _PyRuntime's autoTSSkey._key: the thread's state (pthread_getspecific) */
	__u16 ts_frame; /* PyThreadState's cframe (3.11, 3.12), current_frame (3.13), frame (3.10) */
	__u16 cf_frame; /* _PyCFrame's current_frame (3.11, 3.12) */
	__u16 fr_code;	/* the frame's code object */
	__u16 fr_back;	/* the frame's caller */
	__u16 fr_instr; /* the frame's instruction pointer (3.10: f_lasti, an int) */
	__u16 fr_entry; /* is_entry (3.11), owner (3.12, 3.13) */
	__u16 fr_owner; /* owner (3.11+) */
	__u16 co_first; /* co_firstlineno (int) */
	__u16 co_name;
	__u16 co_qual; /* co_qualname (3.10: co_name) */
	__u16 co_file;
	__u16 co_lines;	    /* co_linetable (bytes) */
	__u16 co_code;	    /* where the instructions start: co_code_adaptive (3.11+) */
	__u16 co_traceable; /* _co_firsttraceable (3.11+): earlier frames are incomplete */
	__u16 str_ascii;    /* sizeof(PyASCIIObject): a compact ASCII string's data */
	__u16 str_compact;  /* sizeof(PyCompactUnicodeObject) */
	__u16 str_state;    /* PyASCIIObject's state bits */
	__u16 str_length;   /* PyASCIIObject's length */
	__u16 bytes_data;   /* PyBytesObject's ob_sval */
	/*
	 * glibc's struct pthread specific_1stblock, from the thread pointer
	 * (x86-64: fsbase, struct pthread's start; arm64: TPIDR_EL0, just
	 * past struct pthread's end, so negative there): where the kernel
	 * unwinder reads pthread_getspecific(key) of the task
	 * (src/inspect/glibc_tls.c); 0: the process's libc is not the one
	 * memtrack measured, the kernel takes no Python frames
	 */
	__s16 tls_specific;
	__u16 pad[2];
};

/* The executable mappings of an address space, sorted by start. */
struct mt_umaps {
	__u32 n;
	__u32 pad;
	struct mt_umap m[MT_MAX_UMAPS];
	struct mt_py py; /* the interpreter the process runs, if any */
};

/*
 * The unwinder's registers and progress (unwind.bpf.h), per CPU in the map
 * unwind_state rather than on the BPF stack: before Linux 6.7 the verifier
 * checks a bpf_loop callback once, with the values it knows at the call,
 * and drops the branches that one pass did not take from every iteration
 * (on 6.1, exact = 1 at a syscall removed the frame recording).  It knows
 * nothing of what a map holds, so no field here is a constant to it.
 */
struct mt_unwind_state {
	__u64 pc; /* a return address, or the exact pc when @exact */
	__u64 sp; /* the caller's rsp at pc */
	__u64 bp;
	__u64 lr; /* aarch64: x30 at pc when @exact (MT_RA_LR rows), 0 elsewhere */
	__u64 hash;
	__u32 last;   /* the previous frame's mapping in mt_umaps.m, MT_MAX_UMAPS: none */
	__u32 n;      /* frames recorded */
	__u32 status; /* unwind.bpf.h's UNWIND_* */
	__u32 exact;  /* pc is where the task is (a syscall), not a frame to record */
};

#endif /* MEMTRACK_BPF_ABI_H */
