/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * alloc.bpf.h - the per-thread state of the allocator probes (alloc.bpf.c,
 * map `inflight`), which vm.bpf.c reads too: a mapping made while a thread is inside an
 * allocator call is the allocator's (MT_REC_ALLOCATOR).
 */
#ifndef MEMTRACK_ALLOC_BPF_H
#define MEMTRACK_ALLOC_BPF_H

struct call_args {
	__u64 size;    /* bytes requested (nmemb * size for calloc) */
	__u64 arg;     /* realloc: old pointer; aligned: alignment; mallocx: flags */
	__u64 memptr;  /* posix_memalign: where the result is stored */
	__u64 sp;      /* stack pointer at the outermost entry */
	__u64 stack;   /* its call stack's id (--stacks), 0: none */
	__u16 fn;      /* enum mt_fn of the outermost call */
	__u8 kind;     /* its enum mt_fn_kind */
	__u8 noret;    /* no return probe: the first nested call's result is its own */
	__u32 depth;   /* allocator calls with a return probe nested inside it */
	__u32 sampled; /* 1: recorded (always without --sample-bytes), 0: only counted */
	__u32 pad;
};


#endif /* MEMTRACK_ALLOC_BPF_H */
