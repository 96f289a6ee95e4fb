// SPDX-License-Identifier: MIT
/*
 * test_artifact.c - the .mtrk writer and reader (src/artifact.h), and files
 * hand-crafted from docs/FORMAT.md alone for what the writer cannot produce
 * (unknown record types and frame kinds, extra fields, corrupt lengths).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>
#include "harness.h"
#include "format/artifact.h"
#include "format/artifact_format.h"
#include "format/schema.h"
#include "format/varint.h"

/* A record as the tests write it. */
struct trec {
	struct mt_rec_hdr h;
	__u64 f[MT_MAX_FIELDS];
	const char *str;
};

#define TMP_TEMPLATE "/tmp/memtrack-test-XXXXXX"

/* Creates an empty temporary file; returns its fd, its name in @path. */
static int tmp_file(char *path)
{
	int fd;

	strcpy(path, TMP_TEMPLATE);
	fd = mkstemp(path);
	CHECK(fd >= 0);
	return fd;
}

static void fill_header(struct mt_header *h)
{
	memset(h, 0, sizeof(*h));
	h->format_version = MT_FORMAT_VERSION;
	strcpy(h->memtrack_version, "0.1.0");
	h->page_size = 4096;
	h->clock_id = 1;
	h->wall_offset_ns = -1234567890123LL;
	h->start_ns = 987654321012345ULL;
	strcpy(h->kernel_release, "6.1.0-18-arm64");
	strcpy(h->arch, "aarch64");
	strcpy(h->command, "./demo --size 4096 'quoted arg' \xc3\xa9t\xc3\xa9");
	h->flags = MT_HDR_ALLOCATORS | MT_HDR_PHYSICAL;
}

static struct trec rec(unsigned type, unsigned fn, uint64_t ts, const uint64_t *f, unsigned nf)
{
	struct trec r;

	memset(&r, 0, sizeof(r));
	r.h.type = (__u16)type;
	r.h.fn = (__u16)fn;
	r.h.pid = 4242;
	r.h.tid = 4243;
	r.h.nfields = nf;
	r.h.ts = ts;
	for (unsigned i = 0; i < nf && i < MT_MAX_FIELDS; i++)
		r.f[i] = f[i];
	return r;
}

/* R(type, fn, ts, fields...) */
#define R(type, fn, ts, ...)                                 \
	rec(type, fn, ts, (const uint64_t[]){ __VA_ARGS__ }, \
	    sizeof((const uint64_t[]){ __VA_ARGS__ }) / sizeof(uint64_t))

/* Checks that @ev is exactly @r: every header field, field and the string. */
static void check_event(const struct mt_event *ev, const struct trec *r)
{
	const struct mt_type_def *d = mt_type_def(r->h.type);

	CHECK_EQ(ev->h.type, r->h.type);
	CHECK_EQ(ev->h.fn, r->h.fn);
	CHECK_U64(ev->h.pid, r->h.pid);
	CHECK_U64(ev->h.tid, r->h.tid);
	CHECK_EQ(ev->h.nfields, r->h.nfields);
	CHECK_U64(ev->h.ts, r->h.ts);
	for (unsigned i = 0; i < MT_MAX_FIELDS; i++)
		CHECK_U64(ev->f[i], i < r->h.nfields ? r->f[i] : 0);
	if (mt_stack_field(r->h.type) >= 0) { /* 0 when the record has no stack field */
		unsigned k = (unsigned)mt_stack_field(r->h.type);

		CHECK_U64(ev->stack, k < r->h.nfields ? r->f[k] : 0);
	}
	if (r->h.type == MT_STACK && r->str) {
		const struct mt_rec_stack *s = (const void *)r->str;

		CHECK_EQ(ev->nframes, s->nframes);
		for (unsigned i = 0; i < s->nframes && i < ev->nframes; i++) {
			CHECK_EQ(ev->frames[i].object, s->frames[i].object);
			CHECK_U64(ev->frames[i].addr, s->frames[i].addr);
		}
		CHECK_EQ(ev->truncated, r->f[STACK_TRUNCATED] != 0);
	}
	if (r->h.type == MT_OBJECT && r->str) {
		const struct mt_rec_object *o = (const void *)r->str;

		CHECK_EQ(ev->build_id_len, o->build_id_len);
		CHECK(!memcmp(ev->build_id, o->build_id, o->build_id_len));
		CHECK_STR(ev->str, o->path);
	} else if (d && d->has_string && r->str) {
		char want[MT_PATH_MAX];

		snprintf(want, sizeof(want), "%s", r->str);
		CHECK_STR(ev->str, want);
	} else {
		CHECK_STR(ev->str, "");
	}
}

/*
 * Writes @n records to a new temp file, flushing after the records whose
 * index is in @flush_after (sorted, -1 terminated; NULL for none), and
 * finishing unless @no_finish.  Frame end offsets go to @ends when non-NULL
 * (ends[0] = end of the file header).
 */
static void write_recs(char *path, const struct trec *r, size_t n, const int *flush_after,
		       bool no_finish, uint64_t *ends, struct mt_writer_stats *st_out)
{
	struct mt_header h;
	struct mt_writer_stats st;
	struct mt_trailer t;
	struct mt_writer *w;
	size_t nends = 0;
	int fd = tmp_file(path);

	fill_header(&h);
	w = mt_writer__new(fd, &h, 0);
	CHECK(w != NULL);
	if (!w)
		goto out;
	mt_writer__stats(w, &st);
	if (ends)
		ends[nends++] = st.file_bytes;
	for (size_t i = 0; i < n; i++) {
		CHECK_EQ(mt_writer__add(w, &r[i].h, r[i].f, r[i].str), 0);
		if (flush_after && *flush_after == (int)i) {
			CHECK_EQ(mt_writer__flush(w), 0);
			mt_writer__stats(w, &st);
			if (ends)
				ends[nends++] = st.file_bytes;
			flush_after++;
		}
	}
	if (!no_finish) {
		memset(&t, 0, sizeof(t));
		CHECK_EQ(mt_writer__finish(w, &t), 0);
	}
	if (st_out)
		mt_writer__stats(w, st_out);
	mt_writer__free(w);
out:
	close(fd);
}

/*
 * Reads @path to its end, checking each record against @want in order.
 * Returns the last mt_reader__next() result; the count read goes to *@got,
 * the error message to @msg.
 */
static int read_recs(const char *path, const struct trec *want, size_t nwant, size_t *got,
		     char *msg, size_t msglen)
{
	char err[256];
	struct mt_reader *r;
	struct mt_event ev;
	int rc;

	*got = 0;
	r = mt_reader__open(path, err, sizeof(err));
	CHECK(r != NULL);
	if (!r) {
		fprintf(stderr, "  open: %s\n", err);
		return -999;
	}
	while ((rc = mt_reader__next(r, &ev)) == 1) {
		CHECK(*got < nwant);
		if (*got < nwant)
			check_event(&ev, &want[*got]);
		(*got)++;
	}
	/* the end and errors are sticky */
	CHECK_EQ(mt_reader__next(r, &ev), rc);
	if (msg)
		snprintf(msg, msglen, "%s", mt_reader__error(r));
	if (rc == 0)
		CHECK_STR(mt_reader__error(r), "");
	mt_reader__free(r);
	return rc;
}

static const char long_path[] =
	"/very/long/path/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	"ccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
	"ddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd"
	"eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee";

/* One of every type, with extreme values where the coding could break. */
/* The tails of the OBJECT and STACK records of all_types(). */
static const struct mt_rec_object test_object = {
	.build_id_len = 20,
	.build_id = { 0x93, 0xac, 0x61, 0xec, 0x5a, 0x8e, 0xb1, 0x39, 0x6f, 0x9f,
		      0xbd, 0x35, 0x0e, 0x31, 0x69, 0xa5, 0x58, 0x52, 0x8a, 0x40 },
	.path = "/usr/lib/x86_64-linux-gnu/libc.so.6",
};
static const struct mt_rec_stack test_stack = {
	.nframes = 3,
	.frames = { { 7, 0, 0x1169 }, { 0, 0, 0x7fffffffe000ULL }, { 7, 0, UINT32_MAX } },
};

static size_t all_types(struct trec *r)
{
	const uint64_t H = 0x55d3a0e4c010ULL, M = 0x7f3a12345000ULL;
	const uint64_t T = 3600ULL * 1000000000ULL;
	size_t n = 0;

	r[n++] = R(MT_MALLOC, MT_FN_MALLOC, T, H, 32);
	r[n++] = R(MT_CALLOC, MT_FN_CALLOC, T + 150, H - 0x1000, UINT64_MAX);
	r[n++] = R(MT_REALLOC, MT_FN_REALLOCARRAY, T + 900, H + 0x40, 4096, H);
	r[n++] = R(MT_ALIGNED_ALLOC, MT_FN_POSIX_MEMALIGN, T + 1000, H + 0x2000, 100, 64);
	r[n++] = R(MT_FREE, MT_FN_FREE, T + 1100, 0);
	r[n++] = R(MT_FREE, MT_FN_FREE, T + 1101, UINT64_MAX);
	r[n++] = R(MT_MALLOC, MT_FN_VALLOC, T + 1200, 0, 0);
	r[n++] = R(MT_MMAP, 0, T + 1300, M, 1 << 20, 3, 0x22, (uint64_t)-1, 0);
	r[n++] = R(MT_MMAP, 0, T + 1350, M + 0x100000, 8192, 1, 2, 3, UINT64_MAX);
	r[n++] = R(MT_MUNMAP, 0, T + 1400, M, 1 << 20);
	r[n++] = R(MT_MREMAP, 0, T + 1500, M + 0x200000, 1 << 21, M, 1 << 20, 1);
	r[n++] = R(MT_BRK, 0, T + 1600, 0x55d3a0f00000ULL);
	r[n++] = R(MT_FORK, 0, T + 1700, 4242, 4250, MT_FORK_THREAD | MT_FORK_VM);
	r[n] = R(MT_EXEC, 0, T + 1800, 4250);
	r[n++].str = "/usr/bin/env";
	r[n] = R(MT_EXEC, 0, T + 1801, 4251);
	r[n++].str = long_path; /* 2-byte body length; cut at MT_PATH_MAX - 1 */
	r[n] = R(MT_EXEC, 0, T + 1802, 4252);
	r[n++].str = NULL; /* read back as "" */
	r[n] = R(MT_EXEC, 0, T + 1803, 4253);
	r[n++].str = "";
	r[n++] = R(MT_EXIT, 0, T + 1900, (uint64_t)-1, 9);
	r[n++] = R(MT_EXIT, 0, T + 1901, (uint64_t)INT64_MIN, 0);
	r[n++] = R(MT_EXIT, 0, T + 1902, (uint64_t)INT64_MAX, UINT64_MAX);
	r[n++] = R(MT_RSS, 0, T + 2000, UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX);
	r[n++] = R(MT_RSS, 0, T + 2001, 0, 0, 0, 0);
	r[n++] = R(MT_PHYSICAL, 0, T + 2100, 123456789);
	/* timestamps out of order, at both ends of the range */
	r[n++] = R(MT_PHYSICAL, 0, T - 5000, 1);
	r[n++] = R(MT_PHYSICAL, 0, 0, 2);
	r[n++] = R(MT_PHYSICAL, 0, UINT64_MAX, 3);
	r[n++] = R(MT_PHYSICAL, 0, 1, 4);
	/* control records: no fields; a mark carries its name */
	r[n++] = rec(MT_DISABLE, 0, T + 2200, NULL, 0);
	r[n] = rec(MT_MARK, 0, T + 2300, NULL, 0);
	r[n++].str = "phase 2: \xc3\xa9t\xc3\xa9";
	r[n] = rec(MT_MARK, 0, T + 2301, NULL, 0);
	r[n++].str = long_path; /* cut at MT_PATH_MAX - 1 like a path */
	r[n++] = rec(MT_ENABLE, 0, T + 2400, NULL, 0);
	r[n++] = R(MT_FAST, 0, T + 2500, 1);	   /* the handover, the library unwinds */
	r[n++] = R(MT_REFUSED, 0, T + 2600, 3, 1); /* a ring that lied */
	r[n++] = R(MT_MPROTECT, 0, T + 2700, M + 0x1000, 8192, 0);
	r[n++] = R(MT_MMAP, MT_REC_ALLOCATOR, T + 2701, M, 4096, 0, 0x4022, (uint64_t)-1, 0);
	/* a process found at attach: its exe path, or its comm (any byte but NUL) */
	r[n] = R(MT_RUNNING, 0, T + 2800, 4242, 0);
	r[n++].str = "/usr/sbin/nginx (deleted)";
	r[n] = R(MT_RUNNING, 0, T + 2801, 1, 1);
	r[n++].str = "a\nb\x1b[31m";
	r[n] = R(MT_RUNNING, 0, T + 2802, 1, 0);
	r[n++].str = long_path; /* cut at MT_PATH_MAX - 1 */
	/* processes leaving an attach made under sudo */
	r[n++] = R(MT_LEFT, 0, T + 2900, MT_LEFT_EXEC);
	r[n++] = R(MT_LEFT, 0, T + 2901, MT_LEFT_DUMPABLE);
	/* Python frames: an interpreter's verdict, a code object without strings or lines */
	r[n++] = R(MT_PYTHON, 0, T + 3000, 7, 0x030b02f0, 1);
	r[n++] = R(MT_PYCODE, 0, T + 3001, 0x7f0000004000ULL, 10, 0, 0, 0);
	/* --sample-bytes: the period, a process's exact totals */
	r[n++] = R(MT_SAMPLING, 0, T + 3100, 65536);
	r[n++] = R(MT_COUNTS, 0, T + 3101, UINT64_MAX, 246269160, 1100003, 3697, 0);
	/* the OOM killer's victim, at the lowest oom_score_adj (SINT) */
	r[n++] = R(MT_OOM, 0, T + 3200, (uint64_t)-1000);
	/* extreme ids */
	r[n] = R(MT_MALLOC, UINT16_MAX, T, UINT64_MAX, 1);
	r[n].h.pid = UINT32_MAX;
	r[n++].h.tid = 0;
	/* extra fields beyond the schema's, coded UINT */
	r[n++] = R(MT_FREE, MT_FN_FREE, T, H, UINT64_MAX, 0, 7, 8, 9);
	r[n++] = R(MT_MALLOC, MT_FN_MALLOC, T, H, 16, UINT64_MAX);
	/* call stacks: an object, a mapping, a stack; heap records naming it */
	r[n] = R(MT_OBJECT, 0, T + 2500, 7);
	r[n++].str = (const char *)&test_object;
	r[n++] = R(MT_MAPPING, 0, T + 2501, 0x7f0000001000ULL, 0x7f0000002000ULL, 0x1000, 7,
		   0x7f0000000000ULL);
	r[n] = R(MT_STACK, 0, T + 2502, 0xdeadbeefcafeULL, 1);
	r[n++].str = (const char *)&test_stack;
	r[n++] = R(MT_MALLOC, MT_FN_MALLOC, T + 2503, H, 16, 0xdeadbeefcafeULL);
	r[n++] = R(MT_MMAP, 0, T + 2504, M, 4096, 3, 0x22, (uint64_t)-1, 0, 0xdeadbeefcafeULL);
	/* every type also survives a frame of its own */
	return n;
}

static void test_roundtrip_all_types(void)
{
	struct trec r[72];
	size_t n = all_types(r), got;
	char path[64], err[256];
	struct mt_reader *rd;
	struct mt_header want;
	const struct mt_header *h;
	bool seen[MT_TYPE_MAX] = { false };

	for (size_t i = 0; i < n; i++)
		seen[r[i].h.type] = true;
	for (unsigned t = 1; t < MT_TYPE_MAX; t++)
		CHECK(seen[t]);

	write_recs(path, r, n, NULL, false, NULL, NULL);
	CHECK_EQ(read_recs(path, r, n, &got, NULL, 0), 0);
	CHECK_EQ(got, n);

	fill_header(&want);
	rd = mt_reader__open(path, err, sizeof(err));
	CHECK(rd != NULL);
	if (rd) {
		h = mt_reader__header(rd);
		CHECK_EQ(h->format_version, MT_FORMAT_VERSION);
		CHECK_STR(h->memtrack_version, want.memtrack_version);
		CHECK_EQ(h->page_size, want.page_size);
		CHECK_EQ(h->clock_id, want.clock_id);
		CHECK_EQ(h->wall_offset_ns, want.wall_offset_ns);
		CHECK_U64(h->start_ns, want.start_ns);
		CHECK_STR(h->kernel_release, want.kernel_release);
		CHECK_STR(h->arch, want.arch);
		CHECK_STR(h->command, want.command);
		CHECK_EQ(h->flags, want.flags);
		CHECK(mt_reader__trailer(rd) == NULL); /* not read yet */
		CHECK_STR(mt_reader__error(rd), "");
	}
	mt_reader__free(rd);
	unlink(path);

	/* the same records, one frame each: the delta chains restart */
	{
		int flush[64];

		for (size_t i = 0; i < n; i++)
			flush[i] = (int)i;
		flush[n] = -1;
		write_recs(path, r, n, flush, false, NULL, NULL);
		CHECK_EQ(read_recs(path, r, n, &got, NULL, 0), 0);
		CHECK_EQ(got, n);
		unlink(path);
	}
}

/* Header strings at their full length, unterminated in the struct. */
static void test_header_limits(void)
{
	struct mt_header h;
	struct mt_writer *w;
	struct mt_reader *rd;
	struct mt_trailer t = { .exit_code = 0 };
	char path[64], err[256];
	int fd = tmp_file(path);

	fill_header(&h);
	memset(h.command, 'c', sizeof(h.command));
	memset(h.kernel_release, 'k', sizeof(h.kernel_release));
	memset(h.arch, 'a', sizeof(h.arch));
	memset(h.memtrack_version, 'v', sizeof(h.memtrack_version));
	h.wall_offset_ns = INT64_MIN;
	h.start_ns = UINT64_MAX;
	h.page_size = UINT32_MAX;
	w = mt_writer__new(fd, &h, 0);
	CHECK(w != NULL);
	CHECK_EQ(mt_writer__finish(w, &t), 0);
	mt_writer__free(w);
	close(fd);

	rd = mt_reader__open(path, err, sizeof(err));
	CHECK(rd != NULL);
	if (rd) {
		const struct mt_header *g = mt_reader__header(rd);

		CHECK_EQ(strlen(g->command), sizeof(h.command) - 1);
		CHECK_EQ(strspn(g->command, "c"), sizeof(h.command) - 1);
		CHECK_EQ(strlen(g->kernel_release), sizeof(h.kernel_release) - 1);
		CHECK_EQ(strlen(g->arch), sizeof(h.arch) - 1);
		CHECK_EQ(strlen(g->memtrack_version), sizeof(h.memtrack_version) - 1);
		CHECK_EQ(g->wall_offset_ns, INT64_MIN);
		CHECK_U64(g->start_ns, UINT64_MAX);
		CHECK_U64(g->page_size, UINT32_MAX);
	}
	mt_reader__free(rd);
	unlink(path);
}

/* Many frames: explicit flushes, and the writer's own at the size limit. */
static void test_multiple_frames(void)
{
	size_t n = 200000, got;
	struct trec *r = calloc(n, sizeof(*r));
	int flush[] = { 0, 1, 2, 999, 5000, 5001, -1 };
	struct mt_writer_stats st;
	struct mt_reader *rd;
	struct mt_event ev;
	char path[64], err[256];
	uint64_t addr = 0x55d3a0e4c000ULL, ts = 1000000;

	for (size_t i = 0; i < n; i++) {
		ts += 100 + (i * 7919) % 900;
		if (i % 3 == 2)
			r[i] = R(MT_FREE, MT_FN_FREE, ts, addr - 48 * (i % 97));
		else
			r[i] = R(MT_MALLOC, MT_FN_MALLOC, ts, addr += 48, 16 + i % 4081);
		r[i].h.tid = 4243 + (unsigned)(i % 5);
	}
	write_recs(path, r, n, flush, false, NULL, &st);
	CHECK_U64(st.events, n);
	/* 6 explicit frames plus the size-triggered ones (~3 MB of records) */
	CHECK(st.frames > 6);
	CHECK(st.raw_bytes > 2 * MT_FRAME_RAW_TARGET);
	CHECK(st.encode_ns > 0);
	{
		struct stat sb;

		CHECK_EQ(stat(path, &sb), 0);
		CHECK_U64(st.file_bytes, sb.st_size);
		CHECK(st.file_bytes < st.raw_bytes);
	}
	CHECK_EQ(read_recs(path, r, n, &got, NULL, 0), 0);
	CHECK_EQ(got, n);

	rd = mt_reader__open(path, err, sizeof(err));
	CHECK(rd != NULL);
	while (rd && mt_reader__next(rd, &ev) == 1)
		;
	if (rd && mt_reader__trailer(rd)) {
		CHECK_U64(mt_reader__trailer(rd)->frames, st.frames);
		CHECK_U64(mt_reader__trailer(rd)->events[MT_MALLOC], n - n / 3);
		CHECK_U64(mt_reader__trailer(rd)->events[MT_FREE], n / 3);
	} else {
		CHECK(0);
	}
	mt_reader__free(rd);
	unlink(path);
	free(r);
}

/* Header and trailer only: a clean end at once. */
static void test_empty(void)
{
	char path[64], err[256];
	struct mt_reader *rd;
	struct mt_event ev;
	size_t got;

	write_recs(path, NULL, 0, NULL, false, NULL, NULL);
	rd = mt_reader__open(path, err, sizeof(err));
	CHECK(rd != NULL);
	if (rd) {
		CHECK_EQ(mt_reader__next(rd, &ev), 0);
		CHECK(mt_reader__trailer(rd) != NULL);
		if (mt_reader__trailer(rd)) {
			CHECK_U64(mt_reader__trailer(rd)->frames, 0);
			for (unsigned t = 0; t < MT_TYPE_MAX; t++)
				CHECK_U64(mt_reader__trailer(rd)->events[t], 0);
		}
	}
	mt_reader__free(rd);
	unlink(path);

	/* header only (the run died at once): truncated, 0 events */
	write_recs(path, NULL, 0, NULL, true, NULL, NULL);
	CHECK_EQ(read_recs(path, NULL, 0, &got, err, sizeof(err)), -ENODATA);
	CHECK_EQ(got, 0);
	CHECK(strstr(err, "truncated") != NULL);
	CHECK(strstr(err, "0 events read") != NULL);
	unlink(path);
}

/* The 3-frame file of the truncation and corruption tests. */
static size_t small_file(char *path, struct trec *r, uint64_t *ends, size_t *per_frame)
{
	static const int flush[] = { 2, 6, 8, -1 };
	size_t n = 0;
	uint64_t ts = 5000;

	for (int i = 0; i < 9; i++) {
		ts += 333;
		if (i % 2)
			r[n++] = R(MT_FREE, MT_FN_FREE, ts, 0x55d3a0e4c000ULL + 64 * (uint64_t)i);
		else
			r[n++] = R(MT_MALLOC, MT_FN_MALLOC, ts,
				   0x55d3a0e4c040ULL + 64 * (uint64_t)i, 24);
	}
	r[3] = R(MT_EXEC, 0, ts, 77);
	r[3].str = "/bin/true";
	per_frame[0] = 3;
	per_frame[1] = 4;
	per_frame[2] = 2;
	write_recs(path, r, n, flush, false, ends, NULL);
	return n;
}

static uint8_t *slurp(const char *path, size_t *len)
{
	struct stat sb;
	uint8_t *buf;
	int fd = open(path, O_RDONLY);

	CHECK(fd >= 0);
	CHECK_EQ(fstat(fd, &sb), 0);
	*len = (size_t)sb.st_size;
	buf = malloc(*len + 1);
	CHECK_EQ(read(fd, buf, *len), (ssize_t)*len);
	close(fd);
	return buf;
}

static void spill(const char *path, const uint8_t *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_TRUNC);

	CHECK(fd >= 0);
	CHECK_EQ(write(fd, buf, len), (ssize_t)len);
	close(fd);
}

/*
 * Cut at every byte: never a crash, exactly the records of the complete
 * frames, then -ENODATA; only the whole file ends with 0.
 */
static void test_truncation(void)
{
	struct trec r[16];
	uint64_t ends[4];
	size_t per_frame[3], n, len, got;
	char path[64], cut[64], err[256];
	uint8_t *file;

	n = small_file(path, r, ends, per_frame);
	file = slurp(path, &len);
	close(tmp_file(cut));
	CHECK(ends[3] < len);
	for (size_t l = 0; l <= len; l++) {
		size_t want = 0;
		struct mt_reader *rd;
		int rc;

		spill(cut, file, l);
		for (int f = 0; f < 3; f++)
			if (ends[f + 1] <= l)
				want += per_frame[f];
		if (l < ends[0]) {
			rd = mt_reader__open(cut, err, sizeof(err));
			CHECK(rd == NULL);
			CHECK(strstr(err, "truncated") != NULL);
			mt_reader__free(rd);
			continue;
		}
		rc = read_recs(cut, r, n, &got, err, sizeof(err));
		CHECK_EQ(got, want);
		if (l == len) {
			CHECK_EQ(rc, 0);
			continue;
		}
		CHECK_EQ(rc, -ENODATA);
		{
			char expect[160];
			uint64_t start = ends[0];
			const char *where;

			for (int f = 0; f < 4; f++)
				if (ends[f] <= l)
					start = ends[f];
			where = l == start		       ? "no trailer"
				: l - start < MT_FRAME_HDR_LEN ? "inside a frame header"
							       : "inside a frame payload";
			snprintf(expect, sizeof(expect),
				 "file truncated at offset %zu (%s): %zu events read", l, where,
				 want);
			CHECK_STR(err, expect);
		}
		if (harness_failed_checks) {
			fprintf(stderr, "  cut at %zu\n", l);
			break;
		}
	}
	free(file);
	unlink(cut);
	unlink(path);
}

/*
 * Following a file as it is written (memtrack top): the file grows one byte
 * at a time under one reader; at every length the reader has returned
 * exactly the records of the complete frames, in order, then -EAGAIN (not
 * sticky, no error message); once the trailer is there, 0.  A pipe is not
 * even opened (artifacts are regular files only).
 */
static void test_follow(void)
{
	struct trec r[16];
	uint64_t ends[4];
	size_t per_frame[3], len, got = 0;
	char path[64], grow[64], pipe_path[64], err[256];
	struct mt_reader *rd = NULL;
	struct mt_event ev;
	int fd, pipefd[2], rc = -EAGAIN;
	uint8_t *file;

	small_file(path, r, ends, per_frame);
	file = slurp(path, &len);
	fd = tmp_file(grow);
	for (size_t l = 1; l <= len; l++) {
		size_t want = 0;

		CHECK_EQ(write(fd, file + l - 1, 1), 1);
		if (!rd) {
			rd = mt_reader__open(grow, err, sizeof(err));
			CHECK_EQ(rd == NULL, l < ends[0]);
			if (rd)
				CHECK_EQ(mt_reader__follow(rd), 0);
			continue;
		}
		while ((rc = mt_reader__next(rd, &ev)) == 1) {
			CHECK(got < 9);
			if (got < 9)
				check_event(&ev, &r[got]);
			got++;
		}
		for (int f = 0; f < 3; f++)
			if (ends[f + 1] <= l)
				want += per_frame[f];
		CHECK_EQ(got, want);
		CHECK_EQ(rc, l == len ? 0 : -EAGAIN);
		if (rc == -EAGAIN)
			CHECK_STR(mt_reader__error(rd), "");
		if (harness_failed_checks) {
			fprintf(stderr, "  at length %zu\n", l);
			break;
		}
	}
	CHECK_EQ(rc, 0);
	CHECK(rd && mt_reader__trailer(rd) != NULL);
	mt_reader__free(rd);
	close(fd);

	CHECK_EQ(pipe(pipefd), 0);
	CHECK_EQ(write(pipefd[1], file, ends[0]), (ssize_t)ends[0]);
	snprintf(pipe_path, sizeof(pipe_path), "/proc/self/fd/%d", pipefd[0]);
	rd = mt_reader__open(pipe_path, err, sizeof(err)); /* artifacts are regular files only */
	CHECK(rd == NULL);
	CHECK(strstr(err, "is a FIFO, not a regular file") != NULL);
	mt_reader__free(rd);
	close(pipefd[0]);
	close(pipefd[1]);
	free(file);
	unlink(grow);
	unlink(path);
}

/* A flipped payload bit: the records before it, then -EBADMSG with the offset. */
static void test_bitflip_payload(void)
{
	struct trec r[16];
	uint64_t ends[4];
	size_t per_frame[3], n, len, got;
	char path[64], err[256], expect[128];
	uint8_t *file;

	n = small_file(path, r, ends, per_frame);
	file = slurp(path, &len);
	file[ends[1] + MT_FRAME_HDR_LEN + 3] ^= 0x10;
	spill(path, file, len);
	CHECK_EQ(read_recs(path, r, n, &got, err, sizeof(err)), -EBADMSG);
	CHECK_EQ(got, per_frame[0]);
	snprintf(expect, sizeof(expect), "corrupt frame at offset %zu: payload checksum mismatch",
		 (size_t)ends[1]);
	CHECK_STR(err, expect);

	/* a flipped frame header bit */
	file[ends[1] + MT_FRAME_HDR_LEN + 3] ^= 0x10;
	file[ends[2] + MT_FRAME_OFF_COUNT] ^= 0x01;
	spill(path, file, len);
	CHECK_EQ(read_recs(path, r, n, &got, err, sizeof(err)), -EBADMSG);
	CHECK_EQ(got, per_frame[0] + per_frame[1]);
	snprintf(expect, sizeof(expect),
		 "corrupt frame at offset %zu: frame header checksum mismatch", (size_t)ends[2]);
	CHECK_STR(err, expect);
	free(file);
	unlink(path);
}

/*
 * Every single-bit flip anywhere in the file is noticed (the header's
 * reserved field aside, which readers ignore), and never yields a wrong
 * record.
 */
static void test_bitflip_everywhere(void)
{
	struct trec r[16];
	uint64_t ends[4];
	size_t per_frame[3], n, len, got;
	char path[64], err[256];
	uint8_t *file;
	int fd;

	n = small_file(path, r, ends, per_frame);
	file = slurp(path, &len);
	fd = open(path, O_RDWR);
	CHECK(fd >= 0);
	for (size_t i = 0; i < len; i++) {
		for (int bit = 0; bit < 8; bit++) {
			struct mt_reader *rd;
			int rc;

			uint8_t flipped = file[i] ^ (uint8_t)(1 << bit);

			/* in place: rewriting whole files is slow on disk */
			CHECK_EQ(pwrite(fd, &flipped, 1, (off_t)i), 1);
			rd = mt_reader__open(path, err, sizeof(err));
			if (!rd) {
				CHECK(i < ends[0]);
				CHECK(err[0] != '\0');
				CHECK_EQ(pwrite(fd, &file[i], 1, (off_t)i), 1);
				continue;
			}
			mt_reader__free(rd);
			rc = read_recs(path, r, n, &got, err, sizeof(err));
			if (i == 10 || i == 11) {
				CHECK_EQ(rc, 0);
			} else {
				CHECK(rc < 0);
				CHECK(err[0] != '\0');
			}
			CHECK_EQ(pwrite(fd, &file[i], 1, (off_t)i), 1);
			if (harness_failed_checks) {
				fprintf(stderr, "  flip of bit %d at offset %zu: %d %s\n", bit, i,
					rc, err);
				goto out;
			}
		}
	}
out:
	close(fd);
	free(file);
	unlink(path);
}

static void test_newer_version(void)
{
	struct trec r[16];
	uint64_t ends[4];
	size_t per_frame[3], len;
	char path[64], err[256];
	uint8_t *file;
	struct mt_reader *rd;

	small_file(path, r, ends, per_frame);
	file = slurp(path, &len);
	mt_put_le16(file + 8, 3);
	spill(path, file, len);
	errno = 0;
	rd = mt_reader__open(path, err, sizeof(err));
	CHECK(rd == NULL);
	CHECK_EQ(errno, EPROTONOSUPPORT);
	CHECK_STR(err, "file format version 3 is newer than this memtrack's (2); upgrade memtrack");
	mt_reader__free(rd);

	/* even when the rest is unreadable: the version decides first */
	spill(path, file, 12);
	rd = mt_reader__open(path, err, sizeof(err));
	CHECK(rd == NULL);
	CHECK(strstr(err, "newer") != NULL);

	memcpy(file, "MTRX", 4);
	spill(path, file, len);
	rd = mt_reader__open(path, err, sizeof(err));
	CHECK(rd == NULL);
	CHECK_STR(err, "not a memtrack artifact (bad magic)");

	rd = mt_reader__open("/nonexistent/memtrack.mtrk", err, sizeof(err));
	CHECK(rd == NULL);
	CHECK_EQ(errno, ENOENT);
	CHECK(err[0] != '\0');
	free(file);
	unlink(path);
}

static void test_trailer_roundtrip(void)
{
	struct trec r[8];
	struct mt_header h;
	struct mt_trailer t, want;
	const struct mt_trailer *got;
	struct mt_writer *w;
	struct mt_reader *rd;
	struct mt_event ev;
	char path[64], err[256];
	int fd = tmp_file(path);
	size_t n = 0;

	r[n++] = R(MT_MALLOC, MT_FN_MALLOC, 10, 0x1000, 1);
	r[n++] = R(MT_MALLOC, MT_FN_MALLOC, 20, 0x2000, 2);
	r[n++] = R(MT_FREE, MT_FN_FREE, 30, 0x1000);
	r[n++] = R(MT_MALLOC, MT_FN_MALLOC, 40, 0x3000, 3);
	r[n++] = R(MT_EXIT, 0, 50, (uint64_t)-1, 9);

	fill_header(&h);
	w = mt_writer__new(fd, &h, 3);
	CHECK(w != NULL);
	for (size_t i = 0; i < n; i++) {
		CHECK_EQ(mt_writer__add(w, &r[i].h, r[i].f, NULL), 0);
		if (i == 1)
			CHECK_EQ(mt_writer__flush(w), 0);
	}
	CHECK_EQ(mt_writer__flush(w), 0);
	CHECK_EQ(mt_writer__flush(w), 0); /* empty: no frame */
	memset(&t, 0xa5, sizeof(t));	  /* events and frames are the writer's */
	memset(t.dropped, 0, sizeof(t.dropped));
	t.dropped[0] = 7;
	t.dropped[MT_FREE] = UINT64_MAX;
	t.dropped[MT_PHYSICAL] = 1;
	t.exit_code = -1;
	t.exit_signal = 9;
	t.duration_ns = 123456789012ULL;
	CHECK_EQ(mt_writer__finish(w, &t), 0);
	/* finished: no more records, no second trailer */
	CHECK_EQ(mt_writer__add(w, &r[0].h, r[0].f, NULL), -EINVAL);
	CHECK_EQ(mt_writer__finish(w, &t), -EINVAL);
	mt_writer__free(w);
	close(fd);

	memset(&want, 0, sizeof(want));
	want.events[MT_MALLOC] = 3;
	want.events[MT_FREE] = 1;
	want.events[MT_EXIT] = 1;
	memcpy(want.dropped, t.dropped, sizeof(want.dropped));
	want.exit_code = -1;
	want.exit_signal = 9;
	want.duration_ns = 123456789012ULL;
	want.frames = 2;

	rd = mt_reader__open(path, err, sizeof(err));
	CHECK(rd != NULL);
	while (rd && mt_reader__next(rd, &ev) == 1)
		;
	got = rd ? mt_reader__trailer(rd) : NULL;
	CHECK(got != NULL);
	if (got) {
		for (unsigned i = 0; i < MT_TYPE_MAX; i++) {
			CHECK_U64(got->events[i], want.events[i]);
			CHECK_U64(got->dropped[i], want.dropped[i]);
		}
		CHECK_EQ(got->exit_code, want.exit_code);
		CHECK_EQ(got->exit_signal, want.exit_signal);
		CHECK_U64(got->duration_ns, want.duration_ns);
		CHECK_U64(got->frames, want.frames);
	}
	mt_reader__free(rd);
	unlink(path);
}

static void test_writer_errors(void)
{
	struct trec ok = R(MT_MALLOC, MT_FN_MALLOC, 10, 0x1000, 1);
	struct trec bad_type = R(MT_TYPE_MAX, 0, 10, 1);
	struct trec zero_type = R(0, 0, 10, 1);
	struct trec few = R(MT_MMAP, 0, 10, 1, 2);
	struct mt_header h;
	struct mt_trailer t;
	struct mt_writer *w;
	char path[64];
	size_t got;
	int fd, full;

	memset(&t, 0, sizeof(t));
	fill_header(&h);
	errno = 0;
	CHECK(mt_writer__new(-1, &h, 0) == NULL);
	CHECK_EQ(errno, EBADF);
	CHECK(mt_writer__new(1, NULL, 0) == NULL);
	CHECK_EQ(errno, EINVAL);
	CHECK(mt_writer__new(1, &h, 1000) == NULL);
	CHECK_EQ(errno, EINVAL);
	full = open("/dev/full", O_WRONLY);
	if (full >= 0) {
		CHECK(mt_writer__new(full, &h, 0) == NULL);
		CHECK_EQ(errno, ENOSPC);
	}

	/* an invalid record is a sticky error */
	struct trec *bad[] = { &bad_type, &zero_type, &few };
	for (size_t i = 0; i < 3; i++) {
		fd = tmp_file(path);
		w = mt_writer__new(fd, &h, 0);
		CHECK(w != NULL);
		CHECK_EQ(mt_writer__add(w, &ok.h, ok.f, NULL), 0);
		CHECK_EQ(mt_writer__add(w, &bad[i]->h, bad[i]->f, NULL), -EINVAL);
		CHECK_EQ(mt_writer__add(w, &ok.h, ok.f, NULL), -EINVAL);
		CHECK_EQ(mt_writer__flush(w), -EINVAL);
		CHECK_EQ(mt_writer__finish(w, &t), -EINVAL);
		mt_writer__free(w);
		close(fd);
		/* nothing reached the file after the header */
		CHECK_EQ(read_recs(path, &ok, 1, &got, NULL, 0), -ENODATA);
		CHECK_EQ(got, 0);
		unlink(path);
	}

	/* a write error is sticky; what was written before stays readable */
	if (full >= 0) {
		fd = tmp_file(path);
		w = mt_writer__new(fd, &h, 0);
		CHECK(w != NULL);
		CHECK_EQ(mt_writer__add(w, &ok.h, ok.f, NULL), 0);
		CHECK_EQ(mt_writer__flush(w), 0);
		CHECK_EQ(mt_writer__add(w, &ok.h, ok.f, NULL), 0);
		CHECK_EQ(dup2(full, fd), fd);
		CHECK_EQ(mt_writer__flush(w), -ENOSPC);
		CHECK_EQ(mt_writer__add(w, &ok.h, ok.f, NULL), -ENOSPC);
		CHECK_EQ(mt_writer__finish(w, &t), -ENOSPC);
		mt_writer__free(w);
		close(fd);
		CHECK_EQ(read_recs(path, &ok, 1, &got, NULL, 0), -ENODATA);
		CHECK_EQ(got, 1);
		unlink(path);
		close(full);
	}
	mt_writer__free(NULL);
	mt_reader__free(NULL);
}

/* ---- files crafted by hand from docs/FORMAT.md ---- */

struct buf {
	uint8_t *p;
	size_t len, cap;
};

static void b_put(struct buf *b, const void *d, size_t n)
{
	if (b->len + n > b->cap) {
		b->cap = (b->len + n) * 2 + 64;
		b->p = realloc(b->p, b->cap);
	}
	if (n)
		memcpy(b->p + b->len, d, n);
	b->len += n;
}

static void b_varint(struct buf *b, uint64_t v)
{
	uint8_t tmp[MT_VARINT_MAX];

	b_put(b, tmp, mt_varint_encode(tmp, v));
}

static void b_kv(struct buf *b, const char *k, const char *v)
{
	b_put(b, k, strlen(k) + 1);
	b_put(b, v, strlen(v) + 1);
}

static void b_le32(struct buf *b, uint32_t v)
{
	uint8_t tmp[4];

	mt_put_le32(tmp, v);
	b_put(b, tmp, 4);
}

static void craft_file_header(struct buf *f, const struct buf *body)
{
	uint8_t pre[MT_FILE_PREFIX_LEN];

	memcpy(pre, "MTRK\r\n\x1a\n", 8);
	mt_put_le16(pre + 8, 1);
	mt_put_le16(pre + 10, 0);
	mt_put_le32(pre + 12, (uint32_t)body->len);
	b_put(f, pre, sizeof(pre));
	b_put(f, body->p, body->len);
	b_le32(f, (uint32_t)crc32(0, body->p, (uInt)body->len));
}

/* An events frame (zstd at level 5, to show any level reads) or a stored one. */
static void craft_frame(struct buf *f, uint8_t kind, const struct buf *payload, uint32_t count,
			uint64_t first_ts, uint64_t last_ts)
{
	struct mt_frame_hdr fh = {
		.kind = kind, .event_count = count, .first_ts = first_ts, .last_ts = last_ts
	};
	uint8_t hdr[MT_FRAME_HDR_LEN];
	struct buf z = { NULL, 0, 0 };

	if (kind == MT_FRAME_EVENTS) {
		size_t bound = ZSTD_compressBound(payload->len);

		z.p = malloc(bound);
		z.len = ZSTD_compress(z.p, bound, payload->p, payload->len, 5);
		CHECK(!ZSTD_isError(z.len));
	} else {
		b_put(&z, payload->p, payload->len);
	}
	fh.raw_len = (uint32_t)payload->len;
	fh.comp_len = (uint32_t)z.len;
	fh.payload_crc = (uint32_t)crc32(0, z.p, (uInt)z.len);
	mt_frame_hdr_put(hdr, &fh);
	b_put(f, hdr, sizeof(hdr));
	b_put(f, z.p, z.len);
	free(z.p);
}

/* Appends one record: type, body length, then @body. */
static void craft_record(struct buf *raw, uint64_t type, struct buf *body)
{
	b_varint(raw, type);
	b_varint(raw, body->len);
	b_put(raw, body->p, body->len);
	body->len = 0;
}

/* The common body start: ts delta, pid, tid, fn, nfields. */
static void body_start(struct buf *b, int64_t dts, uint64_t fn, uint64_t nf)
{
	b_varint(b, mt_zigzag_encode(dts));
	b_varint(b, 100);
	b_varint(b, 101);
	b_varint(b, fn);
	b_varint(b, nf);
}

static void write_buf(const char *path, const struct buf *f)
{
	int fd = open(path, O_WRONLY | O_TRUNC);

	CHECK(fd >= 0);
	CHECK_EQ(write(fd, f->p, f->len), (ssize_t)f->len);
	close(fd);
}

static void craft_trailer(struct buf *f, uint64_t frames, uint64_t mallocs, uint64_t frees,
			  uint64_t execs)
{
	struct buf tb = { NULL, 0, 0 };
	char num[32];

	snprintf(num, sizeof(num), "%" PRIu64, mallocs);
	b_kv(&tb, "events.malloc", num);
	snprintf(num, sizeof(num), "%" PRIu64, frees);
	b_kv(&tb, "events.free", num);
	snprintf(num, sizeof(num), "%" PRIu64, execs);
	b_kv(&tb, "events.exec", num);
	b_kv(&tb, "events.teleport", "3"); /* a type this reader lacks */
	b_kv(&tb, "dropped.unknown", "5");
	b_kv(&tb, "dropped.free", "2");
	b_kv(&tb, "dropped.teleport", "11");
	b_kv(&tb, "some_future_key", "anything at all");
	b_kv(&tb, "exit_code", "-1");
	b_kv(&tb, "exit_signal", "9");
	b_kv(&tb, "duration_ns", "18446744073709551615");
	snprintf(num, sizeof(num), "%" PRIu64, frames);
	b_kv(&tb, "frames", num);
	craft_frame(f, MT_FRAME_TRAILER, &tb, 0, 0, 0);
	free(tb.p);
}

static void craft_min_header(struct buf *f)
{
	struct buf hb = { NULL, 0, 0 };

	b_kv(&hb, "format_version", "1");
	b_kv(&hb, "page_size", "4096");
	b_kv(&hb, "a_future_key", "ignored");
	b_kv(&hb, "command", "");
	craft_file_header(f, &hb);
	free(hb.p);
}

/*
 * Unknown record types are skipped without disturbing the delta chains,
 * extra fields read as UINT, fields past MT_MAX_FIELDS are dropped, bytes
 * after a known body are ignored, unknown frame kinds are skipped.
 */
static void test_forward_compat(void)
{
	const uint64_t T = 1000000, A = 0x55d3a0e4c000ULL;
	struct buf f = { NULL, 0, 0 }, raw = { NULL, 0, 0 }, b = { NULL, 0, 0 };
	struct trec want[10];
	char pq[301];
	const struct mt_trailer *t;
	struct mt_reader *rd;
	struct mt_event ev;
	char path[64], err[256];
	size_t n = 0, got = 0;
	int rc;

	close(tmp_file(path));
	craft_min_header(&f);

	/* 1: malloc(A, 64) at T */
	body_start(&b, 0, MT_FN_MALLOC, 2);
	b_varint(&b, mt_zigzag_encode((int64_t)A));
	b_varint(&b, 64);
	craft_record(&raw, MT_MALLOC, &b);
	want[n] = R(MT_MALLOC, MT_FN_MALLOC, T, A, 64);
	want[n].h.pid = 100;
	want[n++].h.tid = 101;
	/* 2: a future type at T + 50, whose fields look like addresses */
	body_start(&b, 50, 0, 2);
	b_varint(&b, mt_zigzag_encode(-12345));
	b_varint(&b, UINT64_MAX);
	b_put(&b, "opaque", 6);
	craft_record(&raw, MT_TYPE_MAX + 5, &b);
	/* 3: free(A) at T + 60: its ADDR delta is still relative to A */
	body_start(&b, 10, MT_FN_FREE, 1);
	b_varint(&b, 0);
	craft_record(&raw, MT_FREE, &b);
	want[n] = R(MT_FREE, MT_FN_FREE, T + 60, A);
	want[n].h.pid = 100;
	want[n++].h.tid = 101;
	/* 4: malloc with 2 extra fields, UINT coded */
	body_start(&b, -70, MT_FN_MALLOC, 4);
	b_varint(&b, mt_zigzag_encode(0x40));
	b_varint(&b, 32);
	b_varint(&b, 7);
	b_varint(&b, UINT64_MAX);
	craft_record(&raw, MT_MALLOC, &b);
	want[n] = R(MT_MALLOC, MT_FN_MALLOC, T - 10, A + 0x40, 32, 7, UINT64_MAX);
	want[n].h.pid = 100;
	want[n++].h.tid = 101;
	/* 5: malloc with 9 fields: the last 2 are dropped */
	body_start(&b, 20, MT_FN_MALLOC, 9);
	b_varint(&b, mt_zigzag_encode(-0x20));
	for (uint64_t i = 1; i < 9; i++)
		b_varint(&b, i * 1000);
	craft_record(&raw, MT_MALLOC, &b);
	want[n] = R(MT_MALLOC, MT_FN_MALLOC, T + 10, A + 0x20, 1000, 2000, 3000, 4000, 5000, 6000);
	want[n].h.pid = 100;
	want[n++].h.tid = 101;
	/* 6: a free with bytes after its field (a future extension) */
	body_start(&b, 1, MT_FN_FREE, 1);
	b_varint(&b, mt_zigzag_encode(0x10));
	b_put(&b, "\x01\x02\x03", 3);
	craft_record(&raw, MT_FREE, &b);
	want[n] = R(MT_FREE, MT_FN_FREE, T + 11, A + 0x30);
	want[n].h.pid = 100;
	want[n++].h.tid = 101;
	/* 7: exec with its string */
	body_start(&b, 1, 0, 1);
	b_varint(&b, 99);
	b_varint(&b, 4);
	b_put(&b, "/bin", 4);
	craft_record(&raw, MT_EXEC, &b);
	want[n] = R(MT_EXEC, 0, T + 12, 99);
	want[n].str = "/bin";
	want[n].h.pid = 100;
	want[n++].h.tid = 101;
	/* 8: exec with a string longer than MT_PATH_MAX: cut to 255 bytes */
	body_start(&b, 0, 0, 1);
	b_varint(&b, 98);
	b_varint(&b, 300);
	for (int i = 0; i < 300; i++)
		b_put(&b, i < 255 ? "p" : "q", 1);
	craft_record(&raw, MT_EXEC, &b);
	want[n] = R(MT_EXEC, 0, T + 12, 98);
	memset(pq, 'p', 255);
	memset(pq + 255, 'q', 45);
	pq[300] = '\0';
	want[n].str = pq; /* check_event cuts it at 255 too */
	want[n].h.pid = 100;
	want[n++].h.tid = 101;
	craft_frame(&f, MT_FRAME_EVENTS, &raw, 8, T, T + 12);
	/* a frame of a kind from the future */
	raw.len = 0;
	b_put(&raw, "index data", 10);
	craft_frame(&f, 9, &raw, 0, 0, 0);
	craft_trailer(&f, 1, 3, 2, 2);
	write_buf(path, &f);

	rd = mt_reader__open(path, err, sizeof(err));
	CHECK(rd != NULL);
	if (!rd)
		goto out;
	CHECK_EQ(mt_reader__header(rd)->page_size, 4096);
	CHECK_STR(mt_reader__header(rd)->command, "");
	while ((rc = mt_reader__next(rd, &ev)) == 1) {
		CHECK(got < n);
		if (got < n)
			check_event(&ev, &want[got]);
		got++;
	}
	CHECK_EQ(rc, 0);
	CHECK_EQ(got, n);
	CHECK_STR(mt_reader__error(rd), "");
	t = mt_reader__trailer(rd);
	CHECK(t != NULL);
	if (t) {
		CHECK_U64(t->events[MT_MALLOC], 3);
		CHECK_U64(t->events[MT_FREE], 2);
		CHECK_U64(t->events[MT_EXEC], 2);
		CHECK_U64(t->dropped[0], 5);
		CHECK_U64(t->dropped[MT_FREE], 2);
		CHECK_EQ(t->exit_code, -1);
		CHECK_EQ(t->exit_signal, 9);
		CHECK_U64(t->duration_ns, UINT64_MAX);
		CHECK_U64(t->frames, 1);
	}
	mt_reader__free(rd);
out:
	unlink(path);
	free(f.p);
	free(raw.p);
	free(b.p);
}

/* Builds a one-frame file around @raw (@count records) and reads it. */
static int read_crafted(const struct buf *raw, uint32_t count, uint64_t mallocs, uint64_t frames,
			char *err, size_t errlen)
{
	struct buf f = { NULL, 0, 0 };
	char path[64];
	size_t got;
	int rc;

	close(tmp_file(path));
	craft_min_header(&f);
	craft_frame(&f, MT_FRAME_EVENTS, raw, count, 0, 0);
	craft_trailer(&f, frames, mallocs, 0, 0);
	write_buf(path, &f);
	{
		struct trec want[4];

		for (int i = 0; i < 4; i++) {
			want[i] = R(MT_MALLOC, 0, 0, 0x10, 1);
			want[i].h.pid = 100;
			want[i].h.tid = 101;
		}
		rc = read_recs(path, want, 4, &got, err, errlen);
	}
	unlink(path);
	free(f.p);
	return rc;
}

static void good_malloc(struct buf *raw)
{
	struct buf b = { NULL, 0, 0 };

	body_start(&b, 0, 0, 2);
	b_varint(&b, mt_zigzag_encode(0x10));
	b_varint(&b, 1);
	craft_record(raw, MT_MALLOC, &b);
	free(b.p);
}

/* Structural damage under a valid checksum (a writer bug) is -EBADMSG. */
static void test_corrupt_records(void)
{
	struct buf raw = { NULL, 0, 0 }, b = { NULL, 0, 0 };
	char err[256];

	/* sanity: the well-formed variant reads clean */
	good_malloc(&raw);
	CHECK_EQ(read_crafted(&raw, 1, 1, 1, err, sizeof(err)), 0);

	/* event_count too high, too low */
	CHECK_EQ(read_crafted(&raw, 2, 1, 1, err, sizeof(err)), -EBADMSG);
	CHECK(strstr(err, "frame header says 2") != NULL);
	good_malloc(&raw);
	CHECK_EQ(read_crafted(&raw, 1, 2, 1, err, sizeof(err)), -EBADMSG);
	CHECK(strstr(err, "more records than") != NULL);

	/* trailer disagreeing with the file */
	raw.len = 0;
	good_malloc(&raw);
	CHECK_EQ(read_crafted(&raw, 1, 1, 2, err, sizeof(err)), -EBADMSG);
	CHECK(strstr(err, "trailer counts 2 frames") != NULL);
	CHECK_EQ(read_crafted(&raw, 1, 5, 1, err, sizeof(err)), -EBADMSG);
	CHECK(strstr(err, "malloc events") != NULL);

	/* a body length past the payload */
	raw.len = 0;
	good_malloc(&raw);
	raw.p[1] = 0x7f;
	CHECK_EQ(read_crafted(&raw, 1, 1, 1, err, sizeof(err)), -EBADMSG);
	CHECK(strstr(err, "runs past the payload") != NULL);
	CHECK(strstr(err, "corrupt frame at offset") != NULL);

	/* a field running past its body */
	raw.len = 0;
	body_start(&b, 0, 0, 2);
	b_varint(&b, 0x10);
	craft_record(&raw, MT_MALLOC, &b);
	good_malloc(&raw);
	CHECK_EQ(read_crafted(&raw, 2, 2, 1, err, sizeof(err)), -EBADMSG);

	/* fewer fields than the type has */
	raw.len = 0;
	body_start(&b, 0, 0, 1);
	b_varint(&b, 0x10);
	craft_record(&raw, MT_MALLOC, &b);
	CHECK_EQ(read_crafted(&raw, 1, 1, 1, err, sizeof(err)), -EBADMSG);
	CHECK(strstr(err, "fewer fields") != NULL);

	/* type 0 */
	raw.len = 0;
	good_malloc(&raw);
	raw.p[0] = 0;
	CHECK_EQ(read_crafted(&raw, 1, 0, 1, err, sizeof(err)), -EBADMSG);
	CHECK(strstr(err, "type 0") != NULL);

	/* an overlong varint */
	raw.len = 0;
	b_put(&b, "\x80\x00", 2);
	b_varint(&b, 100);
	b_varint(&b, 101);
	b_varint(&b, 0);
	b_varint(&b, 2);
	b_varint(&b, 0x20);
	b_varint(&b, 1);
	craft_record(&raw, MT_MALLOC, &b);
	CHECK_EQ(read_crafted(&raw, 1, 1, 1, err, sizeof(err)), -EBADMSG);

	/* pid beyond 32 bits */
	raw.len = 0;
	b_varint(&b, 0);
	b_varint(&b, (uint64_t)1 << 32);
	b_varint(&b, 101);
	b_varint(&b, 0);
	b_varint(&b, 2);
	b_varint(&b, 0x20);
	b_varint(&b, 1);
	craft_record(&raw, MT_MALLOC, &b);
	CHECK_EQ(read_crafted(&raw, 1, 1, 1, err, sizeof(err)), -EBADMSG);
	free(raw.p);
	free(b.p);
}

/* Lengths that would make a reader allocate gigabytes, and junk after the end. */
static void test_corrupt_frames(void)
{
	struct buf f = { NULL, 0, 0 }, raw = { NULL, 0, 0 };
	struct mt_frame_hdr fh = {
		.kind = MT_FRAME_EVENTS, .comp_len = UINT32_MAX, .raw_len = 100, .event_count = 1
	};
	uint8_t hdr[MT_FRAME_HDR_LEN];
	char path[64], err[256];
	size_t got;

	close(tmp_file(path));
	craft_min_header(&f);
	mt_frame_hdr_put(hdr, &fh);
	b_put(&f, hdr, sizeof(hdr));
	write_buf(path, &f);
	CHECK_EQ(read_recs(path, NULL, 0, &got, err, sizeof(err)), -EBADMSG);
	CHECK(strstr(err, "exceeds the 64 MiB limit") != NULL);

	f.len = 0;
	craft_min_header(&f);
	fh.comp_len = 16;
	fh.raw_len = MT_FRAME_LEN_MAX + 1;
	mt_frame_hdr_put(hdr, &fh);
	b_put(&f, hdr, sizeof(hdr));
	b_put(&f, "0123456789abcdef", 16);
	write_buf(path, &f);
	CHECK_EQ(read_recs(path, NULL, 0, &got, err, sizeof(err)), -EBADMSG);
	CHECK(strstr(err, "exceeds the 64 MiB limit") != NULL);

	/* a payload that is not zstd, under a valid checksum */
	f.len = 0;
	craft_min_header(&f);
	b_put(&raw, "not zstd at all", 15);
	fh.comp_len = fh.raw_len = 15;
	fh.payload_crc = (uint32_t)crc32(0, raw.p, 15);
	mt_frame_hdr_put(hdr, &fh);
	b_put(&f, hdr, sizeof(hdr));
	b_put(&f, raw.p, raw.len);
	write_buf(path, &f);
	CHECK_EQ(read_recs(path, NULL, 0, &got, err, sizeof(err)), -EBADMSG);

	/* bytes after the trailer */
	f.len = 0;
	craft_min_header(&f);
	craft_trailer(&f, 0, 0, 0, 0);
	b_put(&f, "x", 1);
	write_buf(path, &f);
	CHECK_EQ(read_recs(path, NULL, 0, &got, err, sizeof(err)), -EBADMSG);
	CHECK(strstr(err, "data after the trailer") != NULL);

	/* a header without format_version, or with a malformed number */
	{
		struct buf hb = { NULL, 0, 0 };
		struct mt_reader *rd;

		f.len = 0;
		b_kv(&hb, "page_size", "4096");
		craft_file_header(&f, &hb);
		write_buf(path, &f);
		rd = mt_reader__open(path, err, sizeof(err));
		CHECK(rd == NULL);
		CHECK(strstr(err, "format_version") != NULL);

		f.len = 0;
		b_kv(&hb, "format_version", "1");
		b_kv(&hb, "start_ns", "12x");
		craft_file_header(&f, &hb);
		write_buf(path, &f);
		rd = mt_reader__open(path, err, sizeof(err));
		CHECK(rd == NULL);
		CHECK(strstr(err, "start_ns") != NULL);
		free(hb.p);
	}
	unlink(path);
	free(f.p);
	free(raw.p);
}

int main(void)
{
	RUN(test_roundtrip_all_types);
	RUN(test_header_limits);
	RUN(test_multiple_frames);
	RUN(test_empty);
	RUN(test_truncation);
	RUN(test_follow);
	RUN(test_bitflip_payload);
	RUN(test_bitflip_everywhere);
	RUN(test_newer_version);
	RUN(test_trailer_roundtrip);
	RUN(test_writer_errors);
	RUN(test_forward_compat);
	RUN(test_corrupt_records);
	RUN(test_corrupt_frames);
	HARNESS_EXIT();
}
