/* SPDX-License-Identifier: MIT */
/*
 * varint.h - unsigned LEB128 varints and zigzag, as used by the artifact
 * format (docs/FORMAT.md, "Varints").
 *
 * A varint stores a u64 in 1..10 bytes, 7 bits per byte, least significant
 * group first; bit 7 of a byte says another byte follows.  Only the shortest
 * encoding is valid: the decoder rejects a final 0x00 group (overlong) and a
 * 10th byte above 0x01 (more than 64 bits), so every value has exactly one
 * encoding and random corruption is more likely to be noticed.
 *
 * Encoding is inline because it sits on the writer's hot path (several
 * varints per record, tens of millions of records per second).
 */
#ifndef MEMTRACK_VARINT_H
#define MEMTRACK_VARINT_H

#include <stddef.h>
#include <stdint.h>

#define MT_VARINT_MAX 10 /* bytes of the longest varint (UINT64_MAX) */

/*
 * Writes @v at @p, which must have room for MT_VARINT_MAX bytes; returns the
 * number of bytes written (1..10).
 */
static inline size_t mt_varint_encode(uint8_t *p, uint64_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		p[n++] = (uint8_t)v | 0x80;
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}

/* Bytes mt_varint_encode() needs for @v. */
size_t mt_varint_len(uint64_t v);

/*
 * Decodes the varint at *@pp, reading no byte at or past @end.  On success
 * stores it in *@v, advances *@pp past it and returns 0.  Returns -ENODATA
 * when the input ends inside the varint, -EBADMSG when it is overlong (a
 * non-minimal encoding, or more than 64 bits); *@pp and *@v are then left
 * untouched.
 */
int mt_varint_decode(const uint8_t **pp, const uint8_t *end, uint64_t *v);

/*
 * mt_varint_decode() with the one- and two-byte cases inlined (timestamp
 * deltas and most sizes).  A second byte of 0 is overlong: the slow path
 * rejects it.
 */
static inline int mt_varint_get(const uint8_t **pp, const uint8_t *end, uint64_t *v)
{
	const uint8_t *p = *pp;

	if (p < end && *p < 0x80) {
		*v = *p;
		*pp = p + 1;
		return 0;
	}
	if (end - p >= 2 && p[1] < 0x80 && p[1]) {
		*v = (uint64_t)(p[0] & 0x7f) | (uint64_t)p[1] << 7;
		*pp = p + 2;
		return 0;
	}
	return mt_varint_decode(pp, end, v);
}

/* Zigzag maps 0, -1, 1, -2, ... to 0, 1, 2, 3, ... so small magnitudes of
 * either sign make short varints. */
static inline uint64_t mt_zigzag_encode(int64_t v)
{
	/*
	 * Both shifts are done unsigned: left-shifting a negative int is UB,
	 * right-shifting one implementation-defined; 0 - sign is all ones
	 * for a negative v.
	 */
	return ((uint64_t)v << 1) ^ (0 - ((uint64_t)v >> 63));
}

static inline int64_t mt_zigzag_decode(uint64_t u)
{
	return (int64_t)((u >> 1) ^ (0 - (u & 1)));
}

#endif /* MEMTRACK_VARINT_H */
