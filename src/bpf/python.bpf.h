/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * python.bpf.h - the current thread's Python frames, taken in the kernel
 * after its native frames (issue 37: --no-fast, attach): the same walk as
 * src/fast/python.c, with the same offsets (struct mt_py in the process's
 * proc_maps entry), keys, marks and PYCODE records, so that both paths give
 * the same frames and report needs no change.
 *
 * The thread's PyThreadState is what pthread_getspecific(the runtime's
 * TSS key) gives it, read where glibc keeps it: the thread pointer
 * (x86-64 fsbase, arm64 TPIDR_EL0) + specific_1stblock[key].data; memtrack measured that offset in
 * its own libc and gives it (mt_py.tls_specific) only to processes that map
 * the same libc file.  Otherwise, or when any read fails, or when the
 * native walk did not reach the stack's end (the Python frames would then
 * not line up with the eval loop's native frames they stand for), the
 * stack keeps its native frames only: never a wrong frame.
 */
#ifndef MEMTRACK_PYTHON_BPF_H
#define MEMTRACK_PYTHON_BPF_H

#include "bpf/unwind.bpf.h"
#include "bpf/python_walk.bpf.h"

extern struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mt_py_walk);
} py_walk SEC(".maps");

extern struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mt_rec_pycode);
} pycode_scratch SEC(".maps");

#define MT_GLIBC_KEY_1ST 32  /* PTHREAD_KEY_2NDLEVEL_SIZE: keys in specific_1stblock */
#define MT_GLIBC_KEY_DATA 16 /* sizeof(struct pthread_key_data) */

/*
 * One Python frame (python.bpf.c): reads w->frame, holds its frame back
 * (w->pend_*) after appending the one held before, moves to its caller.
 * Returns 1 once the walk has ended.  Global: verified once.
 */
long mt_py_frame(struct mt_py_walk *w, struct mt_unwind_state *st, struct mt_rec_stack *s,
		 const struct mt_umaps *um);

/*
 * Writes the PYCODE record of frame @idx of @s unless it is no Python
 * frame or its key was written.  Returns 1 to stop (a full ring).
 */
long mt_py_code(struct mt_py_walk *w, struct mt_rec_stack *s, struct mt_rec_pycode *c,
		const struct mt_umaps *um, __u64 idx);

struct mt_py_loop {
	struct mt_py_walk *w;
	struct mt_unwind_state *st;
	struct mt_rec_stack *s;
	const struct mt_umaps *um;
	struct mt_rec_pycode *c;
};

static long py_frame_step(__u64 i, void *ctx)
{
	const struct mt_py_loop *l = ctx;

	return mt_py_frame(l->w, l->st, l->s, l->um) ? 1 : 0;
}

static long py_code_step(__u64 i, void *ctx)
{
	const struct mt_py_loop *l = ctx;

	return mt_py_code(l->w, l->s, l->c, l->um, l->w->n0 + i) ? 1 : 0;
}

#if defined(__TARGET_ARCH_x86)
/* The current task's thread pointer (x86-64: fsbase, glibc's struct pthread). */
static __always_inline __u64 thread_pointer(void)
{
	return BPF_CORE_READ((struct task_struct *)bpf_get_current_task(), thread.fsbase);
}
#elif defined(__TARGET_ARCH_arm64)
/*
 * arm64: TPIDR_EL0 as the kernel saved it for the task; glibc's struct
 * pthread lies just below it (TLS_DTV_AT_TP), so tls_specific is negative.
 */
static __always_inline __u64 thread_pointer(void)
{
	return BPF_CORE_READ((struct task_struct *)bpf_get_current_task(), thread.uw.tp_value);
}
#else
/* Other architectures: no Python frames from the kernel. */
static __always_inline __u64 thread_pointer(void)
{
	return 0;
}
#endif

/* The current thread's innermost Python frame (0: none, or unreadable). */
static __always_inline __u64 py_first_frame(const struct mt_py *py)
{
	__u64 tp = thread_pointer(), slot, ts = 0, f = 0;
	__u32 init = 0, key = 0;

	if (!tp || !py->tls_specific ||
	    bpf_probe_read_user(&init, sizeof(init), (void *)(py->runtime + py->tss_key - 4)) ||
	    !init || bpf_probe_read_user(&key, sizeof(key), (void *)(py->runtime + py->tss_key)) ||
	    key >= MT_GLIBC_KEY_1ST)
		return 0; /* Py_tss_t's _is_initialized: the interpreter is not up */
	slot = tp + (__s64)py->tls_specific + key * MT_GLIBC_KEY_DATA + 8; /* the key's data */
	if (bpf_probe_read_user(&ts, sizeof(ts), (void *)slot) || !ts ||
	    bpf_probe_read_user(&f, sizeof(f), (void *)(ts + py->ts_frame)))
		return 0;
	if (f && (py->chain == MT_PY_CHAIN_311 || py->chain == MT_PY_CHAIN_312) &&
	    bpf_probe_read_user(&f, sizeof(f), (void *)(f + py->cf_frame)))
		return 0; /* the _PyCFrame's current_frame */
	return f;
}

/*
 * Appends the current thread's Python frames to the stack @u unwound
 * (complete: python.bpf.h's header says why) and writes the PYCODE
 * records its new code objects need, before the stack's own record.
 */
static __always_inline void take_python(const struct mt_unwind *u)
{
	struct mt_py_loop l = { .st = u->st, .s = u->s, .um = u->um };
	__u32 zero = 0;
	__u64 f, id;

	if (!l.um || !l.um->py.runtime || u->st->status != UNWIND_COMPLETE)
		return;
	l.w = bpf_map_lookup_elem(&py_walk, &zero);
	l.c = bpf_map_lookup_elem(&pycode_scratch, &zero);
	if (!l.w || !l.c || !(f = py_first_frame(&l.um->py)))
		return;
	l.w->frame = f;
	l.w->pending = 0;
	l.w->pid = bpf_get_current_pid_tgid() >> 32;
	l.w->n0 = u->st->n;
	bpf_loop(MT_STACK_MAX, py_frame_step, &l, 0);
	if (l.w->pending && u->st->n < MT_STACK_MAX)
		add_frame(u->st, u->s, l.w->pend_object, l.w->pend_addr);
	else if (l.w->pending)
		u->st->status = UNWIND_TRUNCATED;
	l.w->pending = 0;
	l.w->n = u->st->n;
	id = unwound_id(u->st);
	if (bpf_map_lookup_elem(&stacks_seen, &id))
		return; /* written with its code objects already (the hot path) */
	bpf_loop(MT_STACK_MAX, py_code_step, &l, 0);
}

#endif /* MEMTRACK_PYTHON_BPF_H */
