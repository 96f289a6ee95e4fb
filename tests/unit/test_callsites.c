// SPDX-License-Identifier: MIT
/*
 * test_callsites.c - ranking (callsites.c), the flame tree and its folded
 * output (flamegraph.c) and the protobuf encoder (pb.c) on hand-made
 * sites and stacks; frames lie in objects whose files do not exist, so their
 * names are the OBJECT+0xADDR fallback, known in advance.
 */
#include <stdlib.h>
#include <time.h>
#include "analyze/callsites.h"
#include "analyze/flamegraph.h"
#include "analyze/functions.h"
#include "harness.h"
#include "analyze/pb.h"

static void add_stack(struct stack_table *st, uint64_t id, const uint64_t *addrs, uint32_t n)
{
	struct mt_event *ev = calloc(1, sizeof(*ev));

	ev->h.type = MT_STACK;
	ev->f[STACK_ID] = id;
	ev->nframes = n;
	for (uint32_t i = 0; i < n; i++) {
		ev->frames[i].object = 1;
		ev->frames[i].addr = addrs[i];
	}
	CHECK_EQ(stack_table_add_event(st, ev), 0);
	memset(ev, 0, sizeof(*ev));
	ev->h.type = MT_OBJECT;
	ev->f[OBJECT_ID] = 1;
	snprintf(ev->str, sizeof(ev->str), "/nonexistent/prog");
	CHECK_EQ(stack_table_add_event(st, ev), 0);
	free(ev);
}

static void put(struct analysis *a, uint64_t stack, uint64_t allocs, uint64_t bytes, uint64_t peak,
		uint64_t leaked)
{
	struct site *s = site_get(&a->sites, stack);

	s->allocs = allocs;
	s->allocated_bytes = bytes;
	s->peak_bytes = peak;
	s->leaked_bytes = leaked;
}

/*
 * Stacks (innermost first): 1 = [0x11 f, 0x21 main], 2 = [0x12 g, 0x21 main],
 * 3 = [0x11 f, 0x22 main'] (another return address in main: a different
 * name).  Names are prog+0x<addr>.
 */
static void fill(struct analysis *a, struct stack_table *st)
{
	static const uint64_t s1[] = { 0x11, 0x21 }, s2[] = { 0x12, 0x21 }, s3[] = { 0x11, 0x22 };

	analysis_init(a);
	stack_table_init(st);
	add_stack(st, 1, s1, 2);
	add_stack(st, 2, s2, 2);
	add_stack(st, 3, s3, 2);
	put(a, 1, 5, 500, 100, 0);
	put(a, 2, 9, 90, 300, 7);
	put(a, 3, 1, 1000, 0, 7);
}

static void test_ranked(void)
{
	struct analysis a;
	struct stack_table st;
	const struct site **v;
	size_t n;

	fill(&a, &st);
	v = callsites_ranked(&a, SITE_PEAK, 0, &n);
	CHECK_EQ(n, 2); /* site 3 held nothing at the peak */
	CHECK(v && v[0]->stack == 2 && v[1]->stack == 1);
	free(v);
	v = callsites_ranked(&a, SITE_LEAKED, 1, &n);
	CHECK_EQ(n, 1); /* a tie (7 and 7): the lower stack id first */
	CHECK(v && v[0]->stack == 2);
	free(v);
	v = callsites_ranked(&a, SITE_ALLOCATED, 0, &n);
	CHECK(v && n == 3 && v[0]->stack == 3 && v[1]->stack == 1 && v[2]->stack == 2);
	free(v);
	stack_table_release(&st);
	analysis_release(&a);
}

static void test_folded(void)
{
	struct symbolizer *sym = symbolizer__new(&(struct symbolizer_opts){ .cache_dir = "" });
	struct analysis a;
	struct stack_table st;
	struct flame f;
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);

	fill(&a, &st);
	CHECK_EQ(flame_build(&f, &a, &st, sym, SITE_ALLOCATIONS), 0);
	CHECK_U64(f.nodes[0].value, 15);
	CHECK_EQ(f.depth, 2);
	CHECK_EQ(flame_write_folded(&f, out), 0);
	fclose(out);
	/* return address - 1 is looked up, but the fallback names the recorded address */
	CHECK_STR(buf, "prog+0x21;prog+0x11 5\n"
		       "prog+0x21;prog+0x12 9\n"
		       "prog+0x22;prog+0x11 1\n");
	free(buf);
	flame_release(&f);
	buf = NULL;
	out = open_memstream(&buf, &len);
	CHECK_EQ(flame_build(&f, &a, &st, sym, SITE_PEAK), 0);
	CHECK_EQ(flame_write_svg(&f, "t<&>", false, out), 0);
	fclose(out);
	/* an icicle: the root's row is at the top, under the title, and the picture is
	 * as tall as its three levels (44 px of title, 16 a level, 20 of footer) */
	CHECK(strstr(buf,
		     "data-n=\"all\"><title>all (400 bytes, 100.00%)</title><rect x=\"10.0\" y=\"44.0\"") !=
	      NULL);
	CHECK(strstr(buf, "height=\"112\" viewBox=\"0 0 1200 112\"") != NULL);
	CHECK(strstr(buf, "data-n=\"prog+0x12\"") != NULL);
	CHECK(strstr(buf, "t&lt;&amp;&gt;") != NULL);
	CHECK(strstr(buf, "data-n=\"prog+0x22\"") == NULL); /* no peak bytes there */
	free(buf);
	flame_release(&f);
	symbolizer__free(sym);
	stack_table_release(&st);
	analysis_release(&a);
}

/*
 * A crafted file's worth of siblings: 100,000 one-frame stacks in no object,
 * each its own name under the root, added in ascending order (each new
 * name sorts last, the far end of a sorted sibling list).  The
 * tree has them all, sorted by name (folded output is in name order:
 * 0x10000 .. 0x2869f, "0x1..." before "0x2..."), within 10 s (a sorted
 * sibling list walked for each new child made it quadratic: 5e9 steps).
 */
static void test_flame_many_siblings(void)
{
	const uint32_t n = 100000;
	struct mt_event *ev = calloc(1, sizeof(*ev));
	struct stack_table st;
	struct timespec t0, t1;
	struct analysis a;
	struct flame f;
	char *buf = NULL, *line, *prev = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);
	uint32_t lines = 0, sorted = 1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	analysis_init(&a);
	stack_table_init(&st);
	for (uint32_t i = 0; i < n; i++) {
		uint64_t id = i + 1;

		memset(ev, 0, sizeof(*ev));
		ev->h.type = MT_STACK;
		ev->f[STACK_ID] = id;
		ev->nframes = 1;
		ev->frames[0].addr = 0x10000 + i;
		CHECK_EQ(stack_table_add_event(&st, ev), 0);
		put(&a, id, 1, 1, 0, 0);
	}
	CHECK_EQ(flame_build(&f, &a, &st, NULL, SITE_ALLOCATIONS), 0);
	CHECK_EQ(f.nnodes, n + 1);
	CHECK_EQ(flame_write_folded(&f, out), 0);
	fclose(out);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	CHECK(t1.tv_sec - t0.tv_sec < 10);
	for (line = strtok(buf, "\n"); line; prev = line, line = strtok(NULL, "\n"), lines++)
		sorted &= !prev || strcmp(prev, line) < 0;
	CHECK_EQ(lines, n);
	CHECK_EQ(sorted, 1);
	free(buf);
	free(ev);
	flame_release(&f);
	stack_table_release(&st);
	analysis_release(&a);
}

/* Bytes from the protobuf encoding guide: field 1 = 150 is 08 96 01. */
static void test_pb(void)
{
	struct pb b = { .p = NULL }, sub = { .p = NULL };
	static const uint64_t v[] = { 3, 270, 86942 };
	static const uint8_t want[] = { 0x08, 0x96, 0x01, 0x12, 0x07, 't',  'e',  's',	't',
					'i',  'n',  'g',  0x22, 0x06, 0x03, 0x8e, 0x02, 0x9e,
					0xa7, 0x05, 0x1a, 0x03, 0x08, 0x96, 0x01 };

	pb_varint_field(&b, 1, 150);
	pb_string_field(&b, 2, "testing");
	pb_packed(&b, 4, v, 3);
	pb_varint_field(&sub, 1, 150);
	pb_message(&b, 3, &sub);
	CHECK_EQ(b.err, 0);
	CHECK_EQ(b.n, sizeof(want));
	CHECK(b.n == sizeof(want) && !memcmp(b.p, want, sizeof(want)));
	pb_release(&b);
	pb_release(&sub);
}

/*
 * By function: stacks 1 and 3 start in prog+0x11 (5 + 1 allocations, 1500
 * bytes, peak 100 + 0, leaked 0 + 7), stack 2 in prog+0x12.  prog+0x11's
 * callers: prog+0x21 (stack 1: 5 allocations) before prog+0x22 (stack 3: 1).
 * Its heaviest stack by peak bytes is 1.  A site with no stack is
 * FN_NO_STACK's.  Sums over the functions are the sites' sums.
 */
static void test_functions(void)
{
	struct symbolizer *sym = symbolizer__new(&(struct symbolizer_opts){ .cache_dir = "" });
	const struct fn_entry **v, *f;
	const struct fn_caller **c;
	struct stack_table st;
	struct analysis a;
	struct fn_table t;
	size_t n;

	fill(&a, &st);
	put(&a, 0, 2, 20, 0, 0);
	CHECK_EQ(fn_table_build(&t, &a, &st, sym), 0);
	CHECK_EQ(t.nfns, 3);
	v = fn_ranked(&t, SITE_ALLOCATIONS, 0, &n);
	CHECK(v && n == 3);
	CHECK_STR(v[0]->name, "prog+0x12"); /* 9 */
	CHECK_STR(v[1]->name, "prog+0x11"); /* 6 */
	CHECK_STR(v[2]->name, FN_NO_STACK); /* 2 */
	free(v);
	f = fn_find(&t, "prog+0x11");
	CHECK(f != NULL);
	CHECK_U64(f->cost.allocs, 6);
	CHECK_U64(f->cost.allocated_bytes, 1500);
	CHECK_U64(f->cost.peak_bytes, 100);
	CHECK_U64(f->cost.leaked_bytes, 7);
	CHECK_U64(f->cost.stack, 1);
	CHECK_U64(f->nsites, 2);
	CHECK_U64(f->ncallers, 2);
	c = fn_callers_ranked(f, SITE_ALLOCATIONS, 0, &n);
	CHECK(c && n == 2);
	CHECK_STR(c[0]->name, "prog+0x21");
	CHECK_U64(c[0]->cost.allocs, 5);
	CHECK_STR(c[1]->name, "prog+0x22");
	CHECK_U64(c[1]->cost.allocs, 1);
	free(c);
	c = fn_callers_ranked(f, SITE_PEAK, 0, &n); /* stack 3 held nothing at the peak */
	CHECK(c && n == 1);
	free(c);
	v = fn_ranked(&t, SITE_TEMPORARY, 0, &n);
	CHECK(!v && n == 0);
	fn_table_release(&t);
	symbolizer__free(sym);
	stack_table_release(&st);
	analysis_release(&a);
}

/* The allocator's frames are skipped; the program's and libc's others are not. */
static void test_frame_is_allocator(void)
{
	static const char *const yes[] = { "malloc",
					   "__GI___libc_malloc",
					   "operator new(unsigned long)",
					   "operator delete[](void*)",
					   "_Znwm",
					   "PyMem_Malloc",
					   "_PyObject_Malloc",
					   "mmap64",
					   "realloc" };
	static const char *const no[] = { "main",	  "__libc_start_main",	  "strdup",
					  "mallocx_user", "_PyUnicode_JoinArray", "PyObject_New" };
	struct mt_object je = { .id = 1, .path = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2" };
	struct site_frame f = { 0 };

	for (size_t i = 0; i < sizeof(yes) / sizeof(*yes); i++) {
		f.function = yes[i];
		CHECK(frame_is_allocator(&f));
	}
	for (size_t i = 0; i < sizeof(no) / sizeof(*no); i++) {
		f.function = no[i];
		CHECK(!frame_is_allocator(&f));
	}
	f.function = "imalloc_body";
	f.obj = &je;
	CHECK(frame_is_allocator(&f));
}

int main(void)
{
	RUN(test_ranked);
	RUN(test_functions);
	RUN(test_frame_is_allocator);
	RUN(test_folded);
	RUN(test_flame_many_siblings);
	RUN(test_pb);
	HARNESS_EXIT();
}
