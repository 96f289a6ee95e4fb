/* SPDX-License-Identifier: MIT */
/*
 * python.h - the Python frames of the calling thread, taken in-process at
 * its outermost allocator call (issue 37): the interpreter's frame chain
 * walked from the thread's own state (pthread_getspecific of the runtime's
 * key: the thread's, whether it holds the GIL or not), each frame's code
 * object checked to be one (its type is PyCode_Type) before anything of it
 * is used, and appended after the native frames as FORMAT.md §8.3 frames.
 * Offsets and addresses are memtrack's (struct mt_py: src/record/python.c),
 * read from the process's mappings table.
 *
 * Only the calling thread's own chain is read: the frames on it are live
 * while the thread is inside a call (the interpreter holds references to
 * their code objects, and the code objects to their strings), so nothing
 * read here is freed under the walk.  Nothing here allocates or takes a
 * lock.  THREAD NOTES: any thread, with its allocator depth raised.
 */
#ifndef MEMTRACK_FAST_PYTHON_H
#define MEMTRACK_FAST_PYTHON_H

#include <stdbool.h>
#include <stdint.h>
#include "bpf_abi.h"
#include "fast/fast_lib.h"
#include "fast/unwind.h"

/*
 * Appends the calling thread's Python frames (innermost first) to @st
 * after its @st->n native frames, the code objects they name in @codes at
 * the same indexes, and marks @st truncated when the chain had more than
 * fit.  Returns the frames appended (0: no Python thread state, no frame).
 */
uint32_t fast_python_frames(const struct mt_py *py, uint32_t pid, struct fast_stack *st,
			    uint64_t *codes) HIDDEN;

/*
 * Writes a PYCODE record for each Python frame of @st whose key this
 * process has not written (the dedup set), before the stack is written.
 */
void fast_python_codes(const struct mt_py *py, const struct fast_stack *st,
		       const uint64_t *codes) HIDDEN;

#endif /* MEMTRACK_FAST_PYTHON_H */
