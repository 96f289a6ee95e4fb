/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * unwind.bpf.h - the user call stack at an allocator's entry (or at an
 * mmap syscall), unwound in the kernel from .eh_frame rows and written once
 * per distinct stack as a STACK record (--stacks).
 *
 * Userspace loads, before the process runs code in a new object (it is
 * parked then), the object's rows into `unwind_rows` (chunked: bpf_abi.h) and the process's
 * executable mappings into `proc_maps` (src/record/stacks.c).  Each frame is
 * a binary search in the mappings and one in the object's rows; the CFA is
 * rsp+N, rbp+N or *(rbp+N), the return address is at CFA-8 (x86-64) or
 * where the row says (arm64: saved at CFA+N, or still in x30 in the first
 * frame), rbp (x29) is restored from CFA+N where the row says so.  A stack is hashed over its
 * (object, address) frames, so the id does not depend on ASLR; an LRU set
 * remembers which ids were written.  Maps are defined in ring.bpf.c; a
 * frame's step is unwind.bpf.c's (global functions, verified once).
 */
#ifndef MEMTRACK_UNWIND_BPF_H
#define MEMTRACK_UNWIND_BPF_H

#include <bpf/bpf_core_read.h>
#include "bpf/common.bpf.h"

extern const volatile __u32 stacks_on; /* --stacks */

/*
 * Where a call's entry leaves its return address, and the bits of a
 * return address that are not its address.  x86-64: on the stack at sp
 * (the caller's rsp is sp + 8).  arm64: in x30, sp unchanged by the call;
 * a return address signed by pointer authentication (pac-ret) carries its
 * signature above the 48 bits of the user address space (Debian's kernels:
 * VA_BITS 48; a 52-bit address is only handed out on request), so masking
 * strips it without the key, as the kernel's own unwinder does
 * (ptrauth_strip_user_insn_pac).
 */
#if defined(__TARGET_ARCH_arm64)
#define UNWIND_ENTRY_IN_LR 1
#define UNWIND_ENTRY_LR(ctx) PT_REGS_RET(ctx) /* x30 */
#define UNWIND_RA_MASK ((1ull << 48) - 1)
#else
#define UNWIND_ENTRY_IN_LR 0
#define UNWIND_ENTRY_LR(ctx) 0
#define UNWIND_RA_MASK (~0ull)
#endif

struct unwind_rows_chunk {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, MT_UNWIND_CHUNK_ROWS);
	__type(key, __u32);
	__uint(value_size,
	       sizeof(struct mt_unwind_row)); /* a size: BTF has the struct as a declaration here */
};

extern struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, MT_UNWIND_ROWS_DEFAULT / MT_UNWIND_CHUNK_ROWS);
	__type(key, __u32);
	__array(values, struct unwind_rows_chunk);
} unwind_rows SEC(".maps");

struct unwind_index_chunk {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, MT_UNWIND_CHUNK_INDEX);
	__type(key, __u32);
	__type(value, __u64);
};

extern struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, MT_UNWIND_INDEX_CAP(MT_UNWIND_ROWS_DEFAULT) / MT_UNWIND_CHUNK_INDEX);
	__type(key, __u32);
	__array(values, struct unwind_index_chunk);
} unwind_index SEC(".maps");

extern struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, MT_MAX_MMS);
	__type(key, __u32);
	__type(value, struct mt_umaps);
} proc_maps SEC(".maps");

extern struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MT_STACKS_SEEN);
	__type(key, __u64);
	__type(value, __u8);
} stacks_seen SEC(".maps");

extern struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mt_rec_stack);
} stack_scratch SEC(".maps");

extern struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mt_unwind_state);
} unwind_state SEC(".maps");

enum { UNWIND_RUNNING = 0, UNWIND_COMPLETE = 1, UNWIND_TRUNCATED = 2 };

/*
 * bpf_loop's context: pointers only.  The values the unwinder branches on
 * are in *st, map memory, so that no kernel's verifier takes them for the
 * constants they are at the call (bpf_abi.h, struct mt_unwind_state).
 */
struct mt_unwind {
	struct mt_unwind_state *st; /* this CPU's unwind_state */
	struct mt_rec_stack *s;	    /* this CPU's stack_scratch: the frames */
	const struct mt_umaps *um;  /* the address space's mappings, or NULL */
};

/* Appends frame (@object, @addr) to @s and hashes it into the stack id. */
static __always_inline void add_frame(struct mt_unwind_state *st, struct mt_rec_stack *s,
				      __u32 object, __u64 addr)
{
	__u32 i = st->n;

	if (i >= MT_STACK_MAX)
		return;
	s->frames[i].object = object;
	s->frames[i].pad = 0;
	s->frames[i].addr = addr;
	st->n = i + 1;
	/* FNV-1a over 64-bit words */
	st->hash = (st->hash ^ object) * 0x100000001b3ull;
	st->hash = (st->hash ^ addr) * 0x100000001b3ull;
}

/*
 * One frame: record where the walk is (@s->frames), then find the caller.
 * Returns 1 once the walk has ended (st->status says how), else 0.  A
 * global function (unwind.bpf.c): the verifier checks it once per program,
 * without its callers' state, instead of once per bpf_loop iteration it
 * simulates (the callback's convergence) with every search unrolled inside.
 * Each pointer may be NULL (a global function's contract): st or s NULL
 * ends the walk.
 */
long mt_unwind_frame(struct mt_unwind_state *st, struct mt_rec_stack *s, const struct mt_umaps *um);

/* bpf_loop's callback: the frame step, out of line. */
static long unwind_step(__u64 i, void *ctx)
{
	const struct mt_unwind *u = ctx;

	return mt_unwind_frame(u->st, u->s, u->um) ? 1 : 0;
}

/* The tgid whose executable mappings describe the current task's mm. */
static __always_inline __u32 mm_owner_tgid(void)
{
	/*
	 * A probe read, not the BTF pointer (bpf_get_current_task_btf): the
	 * verifier checks each BTF pointer walk with a search of vmlinux's
	 * types by name, ~1 ms of every stack-taking program's load.
	 */
	__u64 mm = (__u64)BPF_CORE_READ((struct task_struct *)bpf_get_current_task(), mm);
	struct mm_owner *o = bpf_map_lookup_elem(&mm_owners, &mm);

	return o ? o->tgid : (__u32)(bpf_get_current_pid_tgid() >> 32);
}

/* The id of the stack unwound so far: its frames' hash, and whether it is complete. */
static __always_inline __u64 unwound_id(const struct mt_unwind_state *st)
{
	return (st->hash ^ (st->status == UNWIND_COMPLETE ? 0 : 0x9e3779b97f4a7c15ull)) | 1;
}

/*
 * Writes the unwound stack in stack_scratch as a STACK record unless its id
 * was written already.  Returns the id.
 */
static __always_inline __u64 emit_stack(const struct mt_unwind *u)
{
	const struct mt_unwind_state *st = u->st;
	struct mt_rec_stack *s = u->s;
	__u32 n = st->n;
	__u64 id, size;
	__u8 one = 1;

	if (!n || n > MT_STACK_MAX)
		return 0;
	id = unwound_id(st);
	if (bpf_map_lookup_elem(&stacks_seen, &id))
		return id;
	fill_hdr((struct mt_rec *)s, MT_STACK, 0, STACK_NFIELDS);
	s->f[STACK_ID] = id;
	s->f[STACK_TRUNCATED] = st->status != UNWIND_COMPLETE;
	s->nframes = n;
	s->pad = 0;
	size = __builtin_offsetof(struct mt_rec_stack, frames) + (__u64)n * sizeof(s->frames[0]);
	if (size > sizeof(*s))
		return 0;
	if (bpf_ringbuf_output(&events, s, size, BPF_RB_NO_WAKEUP)) {
		count_drop(MT_STACK);
		return id; /* the heap record still names it; a later call writes it */
	}
	bpf_map_update_elem(&stacks_seen, &id, &one, BPF_ANY);
	return id;
}

static __always_inline void take_python(const struct mt_unwind *u);

/*
 * The current task's user stack: at an allocator's entry (@exact false: @sp
 * points at the return address; arm64: @lr holds it) or at a syscall
 * (@exact: @pc is where the task is, @lr its x30).  Returns its stack id, 0
 * when none was taken.
 */
static __always_inline __u64 take_stack(__u64 pc, __u64 sp, __u64 bp, __u64 lr, bool exact)
{
	struct mt_unwind_state *st;
	struct mt_unwind u;
	__u32 zero = 0, owner;

	if (!stacks_on)
		return 0;
	st = bpf_map_lookup_elem(&unwind_state, &zero);
	u.s = bpf_map_lookup_elem(&stack_scratch, &zero);
	if (!st || !u.s)
		return 0;
	u.st = st;
	owner = mm_owner_tgid();
	u.um = bpf_map_lookup_elem(&proc_maps, &owner);
	st->bp = bp;
	st->hash = 0xcbf29ce484222325ull;
	st->last = MT_MAX_UMAPS;
	st->n = 0;
	st->status = UNWIND_RUNNING;
	st->exact = exact;
	st->lr = exact ? lr : 0;
	if (exact) {
		st->pc = pc;
		st->sp = sp;
	} else if (UNWIND_ENTRY_IN_LR) {
		st->pc = lr & UNWIND_RA_MASK;
		st->sp = sp;
	} else {
		if (bpf_probe_read_user(&st->pc, sizeof(st->pc), (void *)sp))
			return 0;
		st->sp = sp + 8;
	}
	bpf_loop(MT_STACK_MAX + 1, unwind_step, &u, 0);
	if (st->status == UNWIND_RUNNING)
		st->status = UNWIND_TRUNCATED;
	take_python(&u);
	return emit_stack(&u);
}

#endif /* MEMTRACK_UNWIND_BPF_H */
