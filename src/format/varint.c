// SPDX-License-Identifier: MIT
/* varint.c - LEB128 varint decoding; see varint.h. */
#include <errno.h>
#include "format/varint.h"

size_t mt_varint_len(uint64_t v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

int mt_varint_decode(const uint8_t **pp, const uint8_t *end, uint64_t *v)
{
	const uint8_t *p = *pp;
	uint64_t val = 0;
	unsigned shift = 0;

	for (;;) {
		uint8_t b;

		if (p >= end)
			return -ENODATA;
		b = *p++;
		/* the 10th byte holds bit 63 only */
		if (shift == 63 && b > 1)
			return -EBADMSG;
		val |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			/* a last group of 0 after others is padding: overlong */
			if (b == 0 && shift)
				return -EBADMSG;
			break;
		}
		shift += 7;
	}
	*v = val;
	*pp = p;
	return 0;
}
