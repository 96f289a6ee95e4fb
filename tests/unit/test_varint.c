// SPDX-License-Identifier: MIT
/* test_varint.c - LEB128 varints and zigzag (src/varint.h). */
#include <errno.h>
#include <stdint.h>
#include "harness.h"
#include "format/varint.h"

/* Encodes @v, checks its length, decodes it back exactly. */
static void roundtrip(uint64_t v)
{
	uint8_t buf[MT_VARINT_MAX + 4];
	const uint8_t *p = buf;
	uint64_t got = 0;
	size_t n;

	memset(buf, 0xee, sizeof(buf));
	n = mt_varint_encode(buf, v);
	CHECK_EQ(n, mt_varint_len(v));
	CHECK(n >= 1 && n <= MT_VARINT_MAX);
	CHECK_EQ(buf[n], 0xee); /* nothing written past the varint */
	CHECK_EQ(mt_varint_decode(&p, buf + n, &got), 0);
	CHECK_U64(got, v);
	CHECK(p == buf + n);
	p = buf;
	got = 0;
	CHECK_EQ(mt_varint_get(&p, buf + n, &got), 0);
	CHECK_U64(got, v);
	CHECK(p == buf + n);
}

static void test_roundtrip(void)
{
	static const uint64_t vals[] = {
		0,
		1,
		127,
		128,
		129,
		255,
		256,
		300,
		16383,
		16384,
		2097151,
		2097152,
		UINT32_MAX,
		(uint64_t)UINT32_MAX + 1,
		INT64_MAX,
		(uint64_t)INT64_MAX + 1,
		UINT64_MAX - 1,
		UINT64_MAX,
	};

	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++)
		roundtrip(vals[i]);
	/* every power of two and its neighbours */
	for (unsigned b = 0; b < 64; b++) {
		uint64_t v = (uint64_t)1 << b;

		roundtrip(v - 1);
		roundtrip(v);
		roundtrip(v + 1);
	}
}

static void test_lengths(void)
{
	CHECK_EQ(mt_varint_len(0), 1);
	CHECK_EQ(mt_varint_len(127), 1);
	CHECK_EQ(mt_varint_len(128), 2);
	CHECK_EQ(mt_varint_len(16383), 2);
	CHECK_EQ(mt_varint_len(16384), 3);
	CHECK_EQ(mt_varint_len(UINT32_MAX), 5);
	CHECK_EQ(mt_varint_len(INT64_MAX), 9);
	CHECK_EQ(mt_varint_len(UINT64_MAX), 10);
}

/* The exact bytes FORMAT.md shows as examples. */
static void test_known_bytes(void)
{
	uint8_t buf[MT_VARINT_MAX];
	static const uint8_t max[10] = {
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01
	};

	CHECK_EQ(mt_varint_encode(buf, 0), 1);
	CHECK_EQ(buf[0], 0x00);
	CHECK_EQ(mt_varint_encode(buf, 127), 1);
	CHECK_EQ(buf[0], 0x7f);
	CHECK_EQ(mt_varint_encode(buf, 128), 2);
	CHECK_EQ(buf[0], 0x80);
	CHECK_EQ(buf[1], 0x01);
	CHECK_EQ(mt_varint_encode(buf, 300), 2);
	CHECK_EQ(buf[0], 0xac);
	CHECK_EQ(buf[1], 0x02);
	CHECK_EQ(mt_varint_encode(buf, UINT64_MAX), 10);
	CHECK(!memcmp(buf, max, sizeof(max)));
}

/* Every proper prefix of a varint is -ENODATA and consumes nothing. */
static void test_truncated(void)
{
	static const uint64_t vals[] = { 128, 300, 16384, UINT32_MAX, UINT64_MAX };

	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
		uint8_t buf[MT_VARINT_MAX];
		size_t n = mt_varint_encode(buf, vals[i]);

		for (size_t cut = 0; cut < n; cut++) {
			const uint8_t *p = buf;
			uint64_t v = 42;

			CHECK_EQ(mt_varint_decode(&p, buf + cut, &v), -ENODATA);
			CHECK(p == buf);
			CHECK_U64(v, 42);
			CHECK_EQ(mt_varint_get(&p, buf + cut, &v), -ENODATA);
			CHECK(p == buf);
		}
	}
}

static int decode_bytes(const uint8_t *b, size_t n, uint64_t *v)
{
	const uint8_t *p = b;
	int rc = mt_varint_get(&p, b + n, v);

	if (rc)
		CHECK(p == b);
	return rc;
}

static void test_malformed(void)
{
	/* non-minimal: a trailing zero group */
	static const uint8_t pad1[] = { 0x80, 0x00 };
	static const uint8_t pad2[] = { 0x81, 0x80, 0x00 };
	static const uint8_t pad_max[] = { 0xff, 0xff, 0xff, 0xff, 0xff,
					   0xff, 0xff, 0xff, 0xff, 0x00 };
	/* more than 64 bits */
	static const uint8_t over[] = {
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02
	};
	static const uint8_t eleven[] = { 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
					  0x80, 0x80, 0x80, 0x81, 0x01 };
	/* bit 63 alone is fine */
	static const uint8_t top[] = { 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01 };
	uint64_t v = 0;

	CHECK_EQ(decode_bytes(pad1, sizeof(pad1), &v), -EBADMSG);
	CHECK_EQ(decode_bytes(pad2, sizeof(pad2), &v), -EBADMSG);
	CHECK_EQ(decode_bytes(pad_max, sizeof(pad_max), &v), -EBADMSG);
	CHECK_EQ(decode_bytes(over, sizeof(over), &v), -EBADMSG);
	CHECK_EQ(decode_bytes(eleven, sizeof(eleven), &v), -EBADMSG);
	CHECK_EQ(decode_bytes(top, sizeof(top), &v), 0);
	CHECK_U64(v, (uint64_t)1 << 63);
	/* a lone zero is the one valid encoding of 0 */
	CHECK_EQ(decode_bytes((const uint8_t *)"\0", 1, &v), 0);
	CHECK_U64(v, 0);
}

/* Decoding stops at the end of the varint, not at the end of the buffer. */
static void test_sequence(void)
{
	uint8_t buf[5 * MT_VARINT_MAX];
	static const uint64_t vals[] = { 5, UINT64_MAX, 0, 128, 1u << 20 };
	const uint8_t *p = buf, *end;
	size_t n = 0;

	for (size_t i = 0; i < 5; i++)
		n += mt_varint_encode(buf + n, vals[i]);
	end = buf + n;
	for (size_t i = 0; i < 5; i++) {
		uint64_t v;

		CHECK_EQ(mt_varint_get(&p, end, &v), 0);
		CHECK_U64(v, vals[i]);
	}
	CHECK(p == end);
}

static void test_zigzag(void)
{
	static const int64_t vals[] = { 0,	   -1,	      1,	 -2,	       2,
					63,	   -64,	      64,	 -65,	       INT32_MAX,
					INT32_MIN, INT64_MAX, INT64_MIN, INT64_MIN + 1 };

	CHECK_U64(mt_zigzag_encode(0), 0);
	CHECK_U64(mt_zigzag_encode(-1), 1);
	CHECK_U64(mt_zigzag_encode(1), 2);
	CHECK_U64(mt_zigzag_encode(-2), 3);
	CHECK_U64(mt_zigzag_encode(2), 4);
	CHECK_U64(mt_zigzag_encode(INT64_MAX), UINT64_MAX - 1);
	CHECK_U64(mt_zigzag_encode(INT64_MIN), UINT64_MAX);
	/* -64..63 fit one varint byte */
	CHECK_EQ(mt_varint_len(mt_zigzag_encode(-64)), 1);
	CHECK_EQ(mt_varint_len(mt_zigzag_encode(63)), 1);
	CHECK_EQ(mt_varint_len(mt_zigzag_encode(64)), 2);
	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++)
		CHECK_EQ(mt_zigzag_decode(mt_zigzag_encode(vals[i])), vals[i]);
	for (uint64_t u = 0; u < 1000; u++)
		CHECK_U64(mt_zigzag_encode(mt_zigzag_decode(u)), u);
	CHECK_U64(mt_zigzag_encode(mt_zigzag_decode(UINT64_MAX)), UINT64_MAX);
}

int main(void)
{
	RUN(test_roundtrip);
	RUN(test_lengths);
	RUN(test_known_bytes);
	RUN(test_truncated);
	RUN(test_malformed);
	RUN(test_sequence);
	RUN(test_zigzag);
	HARNESS_EXIT();
}
