// SPDX-License-Identifier: MIT
/* json.c - JSON string escaping; see json.h. */
#include "format/json.h"

/*
 * Length of the well-formed UTF-8 sequence at @p (RFC 3629: no overlong
 * forms, no surrogates, nothing above U+10FFFF), or 0 if there is none.
 */
static int utf8_len(const unsigned char *p)
{
	int n, i;
	unsigned lo = 0x80, hi = 0xbf;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		n = 2;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		n = 3;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		n = 4;
	else
		return 0;
	if (p[0] == 0xe0)
		lo = 0xa0;
	else if (p[0] == 0xed)
		hi = 0x9f;
	else if (p[0] == 0xf0)
		lo = 0x90;
	else if (p[0] == 0xf4)
		hi = 0x8f;
	if (p[1] < lo || p[1] > hi)
		return 0;
	for (i = 2; i < n; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	return n;
}

/* json_print_string(); @html: also <, > and & as \u00XX (see json.h). */
static void print_string(FILE *out, const char *s, bool html)
{
	const unsigned char *p = (const unsigned char *)s;
	int n;

	fputc('"', out);
	while (*p) {
		switch (*p) {
		case '"':
			fputs("\\\"", out);
			p++;
			continue;
		case '\\':
			fputs("\\\\", out);
			p++;
			continue;
		case '\n':
			fputs("\\n", out);
			p++;
			continue;
		case '\t':
			fputs("\\t", out);
			p++;
			continue;
		case '\r':
			fputs("\\r", out);
			p++;
			continue;
		default: break;
		}
		if (*p < 0x20 || *p == 0x7f || (html && (*p == '<' || *p == '>' || *p == '&'))) {
			fprintf(out, "\\u%04x", *p++);
			continue;
		}
		n = utf8_len(p);
		if (!n) {
			/* not UTF-8: the byte as a lone low surrogate (PEP 383) */
			fprintf(out, "\\udc%02x", *p++);
			continue;
		}
		fwrite(p, 1, n, out);
		p += n;
	}
	fputc('"', out);
}

void json_print_string(FILE *out, const char *s)
{
	print_string(out, s, false);
}

void json_print_string_html(FILE *out, const char *s)
{
	print_string(out, s, true);
}
