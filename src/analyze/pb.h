/* SPDX-License-Identifier: MIT */
/*
 * pb.h - a protocol buffers encoder of the documented wire format
 * (protobuf.dev/programming-guides/encoding): varint and length-delimited
 * fields into a growing buffer.  A nested message is encoded into its own
 * buffer and appended with pb_message().
 *
 * Errors are sticky: after an allocation failure every call is a no-op and
 * b->err is -ENOMEM.  The buffer owns its bytes until pb_release().
 */
#ifndef MEMTRACK_PB_H
#define MEMTRACK_PB_H

#include <stddef.h>
#include <stdint.h>

struct pb {
	uint8_t *p; /* owned */
	size_t n, cap;
	int err; /* 0 or -ENOMEM */
};

void pb_varint_field(struct pb *b, uint32_t field, uint64_t v);			 /* wire type 0 */
void pb_bytes_field(struct pb *b, uint32_t field, const void *data, size_t len); /* type 2 */
void pb_string_field(struct pb *b, uint32_t field, const char *s);
void pb_message(struct pb *b, uint32_t field, const struct pb *sub); /* sub's bytes, type 2 */
/* A packed repeated varint field of @n values. */
void pb_packed(struct pb *b, uint32_t field, const uint64_t *v, size_t n);
void pb_reset(struct pb *b); /* empty, keeps the memory */
void pb_release(struct pb *b);

#endif /* MEMTRACK_PB_H */
