// SPDX-License-Identifier: MIT
/*
 * fuzz_drain.c - libFuzzer target for memtrack's reading of a process's
 * in-process heap ring (src/inspect/fast_reader.c, the code fast_drain.c
 * runs on every ring): the ring is memory the tracked program writes as it
 * likes, so every input is such a ring.  The reader is linked as it is;
 * the pipeline is this file's pipeline_feed(), which checks everything fed:
 * only heap calls of the process (type, fn, field count, pid, size), never
 * a record that makes memtrack act.  After the process "closes", the
 * reader must be done within two calls (no loop on a value of the ring),
 * and nothing may crash, overrun (ASan) or invoke undefined behaviour
 * (UBSan).
 *
 * Input (little-endian; missing bytes read as 0):
 *   u64 head     the header's head, as the process claims it
 *   u64 tail     where memtrack's reading starts (any lap)
 *   u8  close_at feed calls before the process closes (its last call is
 *                always followed by a close)
 *   u8  until    0: feed everything, else only records stamped up to
 *                NOW - until * 1 ms (some stay for the next call)
 *   then one slot after another from the tail on, 65 bytes each:
 *   u8  how      0: written for its lap (seq lap + 1), 1: not written
 *                (seq lap), 2: consumed (lap + slots), else the next 8
 *                bytes are the seq
 *   u64 seq      (used when how > 2)
 *   56 bytes     the slot's record header and fields, as the process wrote them
 * `make fuzz` runs it from tests/fuzz/seeds_drain/ (made by
 * tests/fuzz/make_drain_seeds.py).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "inspect/fast_reader.h"
#include "pipeline/pipeline.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PID 4242u
#define NOW 1000000000000ull   /* the fake clock, ns */
#define OPENED 999000000000ull /* when the ring was accepted */
#define VA_END (1ull << 47)

static void *ring;
static uint64_t fed, fed_bytes;

/* The reader's only clock. */
uint64_t mono_ns(void)
{
	return NOW;
}

static unsigned heap_nfields(unsigned type)
{
	switch (type) {
	case MT_MALLOC: return MALLOC_NFIELDS;
	case MT_CALLOC: return CALLOC_NFIELDS;
	case MT_REALLOC: return REALLOC_NFIELDS;
	case MT_ALIGNED_ALLOC: return ALIGNED_ALLOC_NFIELDS;
	case MT_FREE: return FREE_NFIELDS;
	default: return 0; /* not a heap call: must never be fed */
	}
}

#define OBJECTS 8 /* OBJECT ids announced, when the ring may carry stacks */

/* A STACK record the reader fed: whole, its frames in announced objects, its id theirs. */
static void check_stack(const struct mt_rec_stack *s, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;

	if (s->nframes < 1 || s->nframes > MT_STACK_MAX || s->h.nfields != STACK_NFIELDS ||
	    len != __builtin_offsetof(struct mt_rec_stack, frames) +
			    s->nframes * sizeof(s->frames[0]))
		abort();
	if (s->h.pid != PID || s->h.fn || s->h.ts < OPENED || s->h.ts > NOW ||
	    s->f[STACK_TRUNCATED] > 1)
		abort();
	for (uint32_t i = 0; i < s->nframes; i++) {
		if (s->frames[i].object > OBJECTS || s->frames[i].pad)
			abort();
		h = (h ^ s->frames[i].object) * 0x100000001b3ull;
		h = (h ^ s->frames[i].addr) * 0x100000001b3ull;
	}
	if (s->f[STACK_ID] != ((h ^ (s->f[STACK_TRUNCATED] ? 0x9e3779b97f4a7c15ull : 0)) | 1))
		abort();
}

/* The pipeline: whatever the ring held, only heap calls (and checked stacks) of PID come out. */
int pipeline_feed(struct pipeline *p, const void *rec, size_t len)
{
	const struct mt_rec *r = rec;
	unsigned n = heap_nfields(r->h.type);

	if (r->h.type == MT_STACK) {
		check_stack(rec, len);
		fed++;
		fed_bytes += len;
		return 0;
	}
	if (!n || r->h.nfields != n || len != sizeof(r->h) + n * sizeof(__u64))
		abort();
	if (r->h.pid != PID || r->h.fn >= MT_FN_MAX || (r->h.fn & MT_REC_PARKED))
		abort();
	if (r->h.ts < OPENED || r->h.ts > NOW || !r->f[0] || r->f[0] >= VA_END)
		abort();
	if (r->h.type != MT_FREE && r->f[1] > VA_END - r->f[0])
		abort(); /* a block past the address space */
	fed++;
	fed_bytes += len;
	return 0;
}

static uint64_t get_u64(const uint8_t *data, size_t size, size_t at)
{
	uint8_t b[8] = { 0 };

	if (at < size)
		memcpy(b, data + at, size - at < 8 ? size - at : 8);
	return (uint64_t)b[0] | (uint64_t)b[1] << 8 | (uint64_t)b[2] << 16 | (uint64_t)b[3] << 24 |
	       (uint64_t)b[4] << 32 | (uint64_t)b[5] << 40 | (uint64_t)b[6] << 48 |
	       (uint64_t)b[7] << 56;
}

/*
 * Lays the input's slots out from @tail on; the others are free for their
 * position's lap, as a ring read up to @tail leaves them.
 */
static void fill_ring(const uint8_t *data, size_t size, uint64_t tail)
{
	struct mt_fast_slot *slots = mt_fast_slots(ring);
	size_t at = 18;

	for (uint64_t pos = tail; pos - tail < MT_FAST_SLOTS; pos++)
		slots[pos & (MT_FAST_SLOTS - 1)].seq = pos & ~(uint64_t)(MT_FAST_SLOTS - 1);
	for (uint64_t pos = tail; at < size && pos - tail < MT_FAST_SLOTS; pos++, at += 65) {
		struct mt_fast_slot *s = &slots[pos & (MT_FAST_SLOTS - 1)];
		uint64_t lap = pos & ~(uint64_t)(MT_FAST_SLOTS - 1);
		size_t n = size - at - 1 < 64 ? size - at - 1 : 64;
		uint8_t how = data[at];

		memset(&s->h, 0, sizeof(s->h) + sizeof(s->f));
		if (n > 8)
			memcpy(&s->h, data + at + 9, n - 8);
		s->seq = how == 0   ? lap + 1
			 : how == 1 ? lap
			 : how == 2 ? lap + MT_FAST_SLOTS
				    : get_u64(data, size, at + 1);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mt_fast_hdr *hdr;
	struct fast_reader r;
	uint64_t head = get_u64(data, size, 0), tail = get_u64(data, size, 8), next;
	unsigned close_at = size > 16 ? data[16] % 8 : 0;
	uint64_t until = size > 17 && data[17] ? NOW - data[17] * 1000000ull : UINT64_MAX;

	if (!ring) {
		ring = aligned_alloc(4096, MT_FAST_RING_BYTES);
		if (!ring)
			abort();
	}
	memset(ring, 0, MT_FAST_RING_BYTES);
	hdr = ring;
	hdr->head = head;
	fill_ring(data, size, tail);
	fast_reader__init(&r, ring, PID, OPENED, VA_END);
	r.tail = tail;
	r.stacks = size > 16 && (data[16] & 0x80); /* --stacks: STACK records may come */
	r.objects = OBJECTS;
	fed = fed_bytes = 0;
	for (unsigned call = 0; call <= close_at; call++)
		if (fast_reader_feed(&r, NULL, until, &next) < 0)
			abort(); /* this pipeline never fails */
	fast_reader_close(&r);
	/* a closed ring is read to its end (or found lying) in at most two calls */
	for (int call = 0; call < 2 && !fast_reader_done(&r); call++)
		fast_reader_feed(&r, NULL, UINT64_MAX, &next);
	if (!fast_reader_done(&r) || r.records != fed)
		abort();
	if (!r.lied && r.lost > r.end - tail)
		abort(); /* lost more positions than were taken */
	if (fed + r.refused > 2 * (uint64_t)MT_FAST_SLOTS + 1)
		abort();
	return 0;
}
