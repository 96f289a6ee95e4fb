// SPDX-License-Identifier: MIT
/* pb.c - protocol buffers wire-format encoder; see pb.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "analyze/pb.h"

static void put(struct pb *b, const void *data, size_t len)
{
	if (b->err || !len)
		return;
	if (b->n + len > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		uint8_t *p;

		while (cap < b->n + len)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p) {
			b->err = -ENOMEM;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, data, len);
	b->n += len;
}

static void varint(struct pb *b, uint64_t v)
{
	uint8_t buf[10];
	size_t n = 0;

	do {
		buf[n] = v & 0x7f;
		v >>= 7;
		buf[n++] |= v ? 0x80 : 0;
	} while (v);
	put(b, buf, n);
}

void pb_varint_field(struct pb *b, uint32_t field, uint64_t v)
{
	varint(b, (uint64_t)field << 3 | 0);
	varint(b, v);
}

void pb_bytes_field(struct pb *b, uint32_t field, const void *data, size_t len)
{
	varint(b, (uint64_t)field << 3 | 2);
	varint(b, len);
	put(b, data, len);
}

void pb_string_field(struct pb *b, uint32_t field, const char *s)
{
	pb_bytes_field(b, field, s, strlen(s));
}

void pb_message(struct pb *b, uint32_t field, const struct pb *sub)
{
	if (sub->err && !b->err)
		b->err = sub->err;
	pb_bytes_field(b, field, sub->p, sub->n);
}

void pb_packed(struct pb *b, uint32_t field, const uint64_t *v, size_t n)
{
	struct pb tmp = { .p = NULL };

	for (size_t i = 0; i < n; i++)
		varint(&tmp, v[i]);
	pb_message(b, field, &tmp);
	pb_release(&tmp);
}

void pb_reset(struct pb *b)
{
	b->n = 0;
}

void pb_release(struct pb *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}
