/* SPDX-License-Identifier: MIT */
/*
 * stack_id.h - a stack's id from its frames: FNV-1a over the 64-bit words
 * (object, ELF address) of each frame, innermost first, then the
 * truncation mark, then the low bit set (0 is "no stack").  Both unwinders
 * compute it frame by frame as they walk (src/bpf/unwind.bpf.c's
 * add_frame and unwind.bpf.h's emit_stack, src/fast/unwind.c); this is
 * the whole-stack form, for the reader that checks an in-process stack's
 * id against its frames (inspect/fast_reader.c) and the test fixture that
 * forges rings (tests/fixtures/hostile_ring.c).
 */
#ifndef MEMTRACK_STACK_ID_H
#define MEMTRACK_STACK_ID_H

#include <stdbool.h>
#include <stdint.h>
#include <linux/types.h>
#include "event.h"

static inline uint64_t mt_stack_id(const struct mt_rec_frame *fr, uint32_t n, bool truncated)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (uint32_t i = 0; i < n; i++) {
		h = (h ^ fr[i].object) * 0x100000001b3ull;
		h = (h ^ fr[i].addr) * 0x100000001b3ull;
	}
	return (h ^ (truncated ? 0x9e3779b97f4a7c15ull : 0)) | 1;
}

#endif /* MEMTRACK_STACK_ID_H */
