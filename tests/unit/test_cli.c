// SPDX-License-Identifier: MIT
/* test_cli.c - option parsing helpers of the command layer (util/text.c). */
#include <errno.h>
#include <stdint.h>
#include "util/text.h"
#include "harness.h"

static uint64_t size_of(const char *s)
{
	uint64_t v = 12345;

	CHECK_EQ(parse_size(s, &v), 0);
	return v;
}

static void test_parse_size_accepts(void)
{
	CHECK_U64(size_of("0"), 0);
	CHECK_U64(size_of("64"), 64);
	CHECK_U64(size_of("64B"), 64);
	CHECK_U64(size_of("4k"), 4096);
	CHECK_U64(size_of("4K"), 4096);
	CHECK_U64(size_of("16M"), 16u << 20);
	CHECK_U64(size_of("16Mi"), 16u << 20);
	CHECK_U64(size_of("16MiB"), 16u << 20);
	CHECK_U64(size_of("16MB"), 16u << 20);
	CHECK_U64(size_of("1G"), 1u << 30);
	CHECK_U64(size_of("18446744073709551615"), UINT64_MAX);
	CHECK_U64(size_of("17179869183G"), 17179869183ull << 30); /* the largest that fits */
}

static void test_parse_size_rejects(void)
{
	const char *bad[] = { "",    "K",   "16i", "16iB", "16x",  "16KK", "16 K",
			      " 16", "+16", "-1",  "-16M", "16Mb", "0x10", "16MiBB" };
	uint64_t v = 7;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int err = parse_size(bad[i], &v);

		if (err != -EINVAL)
			fprintf(stderr, "  parse_size(\"%s\") = %d\n", bad[i], err);
		CHECK_EQ(err, -EINVAL);
	}
	CHECK_U64(v, 7); /* untouched on failure */
}

/* v <<= 30 used to wrap: 2^34 G is 2^64. */
static void test_parse_size_overflow(void)
{
	uint64_t v = 7;

	CHECK_EQ(parse_size("17179869184G", &v), -ERANGE);
	CHECK_EQ(parse_size("18014398509481984K", &v), -ERANGE);
	CHECK_EQ(parse_size("18446744073709551616", &v), -ERANGE);
	CHECK_EQ(parse_size("99999999999999999999999M", &v), -ERANGE);
	CHECK_U64(v, 7);
}

int main(void)
{
	RUN(test_parse_size_accepts);
	RUN(test_parse_size_rejects);
	RUN(test_parse_size_overflow);
	HARNESS_EXIT();
}
