// SPDX-License-Identifier: MIT
/* test_json.c - JSON string escaping (format/json.h), plain and for HTML. */
#include <stdio.h>
#include <stdlib.h>
#include "harness.h"
#include "format/json.h"

/* @s printed by @print, as one string. */
static char *printed(void (*print)(FILE *, const char *), const char *s)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);

	print(out, s);
	fclose(out);
	return buf;
}

static void check(void (*print)(FILE *, const char *), const char *s, const char *want)
{
	char *got = printed(print, s);

	CHECK_STR(got, want);
	free(got);
}

static void test_plain(void)
{
	check(json_print_string, "a\"b\\c\n\t\x01", "\"a\\\"b\\\\c\\n\\t\\u0001\"");
	check(json_print_string, "</script>&", "\"</script>&\"");
	check(json_print_string, "\xff", "\"\\udcff\"");
	check(json_print_string, "\xc3\xa9", "\"\xc3\xa9\"");
}

/* what a tracked program names itself cannot end the page's <script> */
static void test_html(void)
{
	check(json_print_string_html, "</script><b>&amp;",
	      "\"\\u003c/script\\u003e\\u003cb\\u003e\\u0026amp;\"");
	check(json_print_string_html, "a\"b\n\xff\xc3\xa9", "\"a\\\"b\\n\\udcff\xc3\xa9\"");
}

int main(void)
{
	RUN(test_plain);
	RUN(test_html);
	HARNESS_EXIT();
}
