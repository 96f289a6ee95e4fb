/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * python_walk.bpf.h - the value of the map py_walk (defined in ring.bpf.c,
 * used by python.bpf.h): BPF-only, beside event.h's MT_STACK_MAX.
 */
#ifndef MEMTRACK_PYTHON_WALK_BPF_H
#define MEMTRACK_PYTHON_WALK_BPF_H

#include "event.h"

/*
 * The kernel's walk of a thread's Python frames (src/bpf/python.bpf.h),
 * per CPU in the map py_walk for the reason mt_unwind_state is (bpf_abi.h).  A frame
 * is held back (pend) until the next one is known: a later frame of the
 * chain may mark it the entry of its eval loop call (MT_PY_ENTRY) before
 * it is hashed into the stack's id.
 */
struct mt_py_walk {
	__u64 frame;	   /* the next frame to read, 0: the walk has ended */
	__u64 pend_addr;   /* the held-back frame's key */
	__u32 pend_object; /* its object (MT_PY_FRAME | ...) */
	__u32 pending;	   /* 1: a frame is held back */
	__u32 pid;	   /* the keys' process */
	__u32 n0;	   /* the native frames before the Python ones */
	__u32 n;	   /* all frames, once the walk has ended */
	__u32 pad;
	__u64 codes[MT_STACK_MAX]; /* each Python frame's code object, by frame index */
};

#endif /* MEMTRACK_PYTHON_WALK_BPF_H */
