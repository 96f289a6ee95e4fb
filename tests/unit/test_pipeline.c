// SPDX-License-Identifier: MIT
/*
 * test_pipeline.c - the pipeline stages (src/pipeline.h) without BPF.
 *
 * The test's own thread is the poller: synthetic records are fed as the raw
 * bytes the ring buffer would deliver (rec_size() of them), time is passed to
 * pipeline_tick() explicitly, and a real mt_writer writes to a mkstemp file
 * that mt_reader reads back once pipeline__stop() has joined the writer.
 * Nothing waits on a sleep: the one test that needs the writer stalled gives
 * it a pipe nobody reads, and waits for the feeding thread to block.
 *
 * Poller-side statistics (events, batches, flushes, poller_waits) are read
 * with pipeline__stats() while the pipeline runs: they are written only by
 * the poller, which is this thread; writer-side ones only after stop.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "harness.h"
#include "waits.h"
#include "format/artifact.h"
#include "format/artifact_format.h"
#include "pipeline/batch.h"
#include "pipeline/pipeline.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define MS 1000000ull

/* ---- synthetic records ------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	uint64_t x = rng_state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return rng_state = x;
}

/* A record of @type carrying @n fields (taken from @f), as BPF emits it. */
static struct mt_rec mk(unsigned type, unsigned fn, uint32_t pid, uint32_t tid, uint64_t ts,
			unsigned n, const uint64_t *f)
{
	struct mt_rec r;

	memset(&r, 0, sizeof(r));
	r.h.type = (__u16)type;
	r.h.fn = (__u16)fn;
	r.h.pid = pid;
	r.h.tid = tid;
	r.h.nfields = n;
	r.h.ts = ts;
	for (unsigned i = 0; i < n; i++)
		r.f[i] = f[i];
	return r;
}

static struct mt_rec mk_malloc(uint64_t ts, uint64_t addr, uint64_t size)
{
	uint64_t f[] = { addr, size };

	return mk(MT_MALLOC, MT_FN_MALLOC, 100, 101, ts, 2, f);
}

static struct mt_rec mk_free(uint64_t ts, uint64_t addr)
{
	uint64_t f[] = { addr };

	return mk(MT_FREE, MT_FN_FREE, 100, 101, ts, 1, f);
}

static struct mt_rec_exec mk_exec(unsigned fn, uint64_t ts, uint32_t pid, uint64_t old_pid,
				  const char *path)
{
	struct mt_rec_exec r;

	memset(&r, 0, sizeof(r));
	r.h.type = MT_EXEC;
	r.h.fn = (__u16)fn;
	r.h.pid = pid;
	r.h.tid = pid;
	r.h.nfields = 1;
	r.h.ts = ts;
	r.f[0] = old_pid;
	snprintf(r.path, sizeof(r.path), "%s", path);
	return r;
}

/* A record of every kind that may come out of the ring buffer, fields random. */
static struct mt_rec mk_random(uint64_t ts)
{
	static const unsigned types[] = {
		MT_MALLOC, MT_CALLOC, MT_REALLOC, MT_ALIGNED_ALLOC, MT_FREE, MT_MMAP,	  MT_MUNMAP,
		MT_MREMAP, MT_BRK,    MT_FORK,	  MT_EXIT,	    MT_RSS,  MT_PHYSICAL,
	};
	static const unsigned nf[MT_TYPE_MAX] = {
		[MT_MALLOC] = 2,   [MT_CALLOC] = 2, [MT_REALLOC] = 3, [MT_ALIGNED_ALLOC] = 3,
		[MT_FREE] = 1,	   [MT_MMAP] = 6,   [MT_MUNMAP] = 2,  [MT_MREMAP] = 5,
		[MT_BRK] = 1,	   [MT_FORK] = 3,   [MT_EXIT] = 2,    [MT_RSS] = 4,
		[MT_PHYSICAL] = 1,
	};
	unsigned type = types[rnd() % ARRAY_SIZE(types)];
	uint64_t f[MT_MAX_FIELDS];

	for (unsigned i = 0; i < MT_MAX_FIELDS; i++) {
		/* a mix of small, heap-like and full 64-bit values */
		switch (rnd() % 3) {
		case 0: f[i] = rnd() % 5000; break;
		case 1: f[i] = 0x55550000000ull + (rnd() % (1u << 24)) * 16; break;
		default: f[i] = rnd(); break;
		}
	}
	return mk(type, (unsigned)(rnd() % MT_FN_MAX), 1 + (uint32_t)(rnd() % 4), (uint32_t)rnd(),
		  ts, nf[type], f);
}

/* ---- artifact files ---------------------------------------------------- */

struct art {
	char path[64];
	int fd;
	struct mt_writer *w;
};

static void art_header(struct mt_header *h)
{
	memset(h, 0, sizeof(*h));
	h->format_version = MT_FORMAT_VERSION;
	snprintf(h->memtrack_version, sizeof(h->memtrack_version), "test");
	h->page_size = 4096;
	h->clock_id = 1; /* CLOCK_MONOTONIC */
	snprintf(h->kernel_release, sizeof(h->kernel_release), "test");
	snprintf(h->command, sizeof(h->command), "test_pipeline");
}

static int art_open(struct art *a)
{
	struct mt_header h;

	art_header(&h);
	snprintf(a->path, sizeof(a->path), "/tmp/mt_test_pipeline.XXXXXX");
	a->fd = mkstemp(a->path);
	if (a->fd < 0) {
		perror("mkstemp");
		return -1;
	}
	a->w = mt_writer__new(a->fd, &h, 0);
	if (!a->w) {
		perror("mt_writer__new");
		close(a->fd);
		unlink(a->path);
		return -1;
	}
	return 0;
}

/* Writes the trailer (after pipeline__stop) and closes the file. */
static int art_finish(struct art *a, const struct mt_trailer *t)
{
	struct mt_trailer zero;
	int err;

	memset(&zero, 0, sizeof(zero));
	err = mt_writer__finish(a->w, t ? t : &zero);
	close(a->fd);
	a->fd = -1;
	return err;
}

static void art_free(struct art *a)
{
	mt_writer__free(a->w);
	a->w = NULL;
	if (a->fd >= 0)
		close(a->fd);
	unlink(a->path);
}

struct frame_info {
	unsigned kind;
	uint32_t count;
	uint64_t first_ts, last_ts;
};

/*
 * Walks the file's frame headers (artifact_format.h) and returns how many
 * frames it has, trailer included, or -1 when the layout is broken.
 */
static int walk_frames(const char *path, struct frame_info *fi, int max)
{
	uint8_t pre[MT_FILE_PREFIX_LEN], fh[MT_FRAME_HDR_LEN];
	int fd = open(path, O_RDONLY), n = 0;
	struct mt_frame_hdr h;
	off_t off;

	if (fd < 0)
		return -1;
	if (read(fd, pre, sizeof(pre)) != (ssize_t)sizeof(pre) ||
	    memcmp(pre, MT_FILE_MAGIC, MT_FILE_MAGIC_LEN))
		goto bad;
	off = MT_FILE_PREFIX_LEN + (off_t)mt_get_le32(pre + 12) + 4;
	for (;;) {
		ssize_t got = pread(fd, fh, sizeof(fh), off);

		if (got == 0)
			break;
		if (got != (ssize_t)sizeof(fh) || memcmp(fh, MT_FRAME_MAGIC, 4) ||
		    mt_get_le32(fh + MT_FRAME_OFF_HDR_CRC) != mt_crc32(fh, MT_FRAME_OFF_HDR_CRC))
			goto bad;
		mt_frame_hdr_get(fh, &h);
		if (n < max) {
			fi[n].kind = h.kind;
			fi[n].count = h.event_count;
			fi[n].first_ts = h.first_ts;
			fi[n].last_ts = h.last_ts;
		}
		n++;
		off += MT_FRAME_HDR_LEN + (off_t)h.comp_len;
	}
	close(fd);
	return n;
bad:
	close(fd);
	return -1;
}

/*
 * Reads every record of @path into @ev (at most @max); returns how many, or
 * -1 when the file does not read to a clean end.  *@t gets the trailer.
 */
static long read_events(const char *path, struct mt_event *ev, long max, struct mt_trailer *t)
{
	char err[256];
	struct mt_reader *r = mt_reader__open(path, err, sizeof(err));
	struct mt_event scratch;
	long n = 0;
	int rc;

	if (!r) {
		fprintf(stderr, "  mt_reader__open: %s\n", err);
		return -1;
	}
	while ((rc = mt_reader__next(r, n < max ? &ev[n] : &scratch)) == 1)
		n++;
	if (rc < 0) {
		fprintf(stderr, "  mt_reader__next: %d: %s\n", rc, mt_reader__error(r));
		n = -1;
	} else if (!mt_reader__trailer(r)) {
		fprintf(stderr, "  no trailer\n");
		n = -1;
	} else if (t) {
		*t = *mt_reader__trailer(r);
	}
	mt_reader__free(r);
	return n;
}

/* Mismatches of one read-back event against the raw record that was fed. */
static int event_diff(const struct mt_event *ev, const void *rec)
{
	const struct mt_rec_hdr *h = rec;
	const __u64 *f = (const __u64 *)(h + 1);
	int bad = 0;

	bad += ev->h.type != h->type;
	bad += ev->h.fn != h->fn;
	bad += ev->h.pid != h->pid;
	bad += ev->h.tid != h->tid;
	bad += ev->h.nfields != h->nfields;
	bad += ev->h.ts != h->ts;
	for (unsigned i = 0; i < h->nfields && i < MT_MAX_FIELDS; i++)
		bad += ev->f[i] != f[i];
	if (h->type == MT_EXEC)
		bad += strcmp(ev->str, ((const struct mt_rec_exec *)rec)->path) != 0;
	else
		bad += ev->str[0] != '\0';
	return bad;
}

/* CHECKs that @ev[0..n) are exactly the records at @recs[0..n), in order. */
#define CHECK_EVENTS(ev, recs, n)                                                   \
	do {                                                                        \
		long _bad = 0, _first = -1;                                         \
		for (long _i = 0; _i < (long)(n); _i++) {                           \
			if (event_diff(&(ev)[_i], (recs)[_i])) {                    \
				_bad++;                                             \
				if (_first < 0)                                     \
					_first = _i;                                \
			}                                                           \
		}                                                                   \
		CHECK_EQ(_bad, 0);                                                  \
		if (_bad)                                                           \
			fprintf(stderr, "  first mismatch at event %ld\n", _first); \
	} while (0)

static int feed(struct pipeline *p, const void *rec)
{
	return pipeline_feed(p, rec, rec_size(rec));
}

static struct pipeline_stats stats(const struct pipeline *p)
{
	struct pipeline_stats st;

	pipeline__stats(p, &st);
	return st;
}

static struct pipeline *new_pipe(struct art *a, size_t batch_bytes, unsigned batches,
				 unsigned flush_ms, const struct pipeline_observer *obs)
{
	struct pipeline_opts o = {
		.batch_bytes = batch_bytes,
		.batches = batches,
		.flush_ms = flush_ms,
	};
	struct pipeline *p = pipeline__new(&o, a->w, obs);

	if (!p)
		perror("pipeline__new");
	return p;
}

/* ---- tests ------------------------------------------------------------- */

/*
 * A batch of B bytes holds k = B / S records of S bytes; FLUSH_FULL counts
 * one more exactly at records k+1, 2k+1, ...: when a record does not fit.
 */
static void full_batch_case(size_t batch_bytes)
{
	const size_t S = sizeof(struct mt_rec_hdr) + 2 * sizeof(__u64); /* malloc: 40 */
	const unsigned k = (unsigned)(batch_bytes / S), N = 7 * k + 3;
	struct mt_rec *recs = calloc(N, sizeof(*recs));
	const void **ptrs = calloc(N, sizeof(*ptrs));
	struct mt_event *ev = calloc(N + 1, sizeof(*ev));
	struct frame_info fi[16];
	struct pipeline_stats st;
	struct pipeline *p;
	struct art a;
	long n;
	int nf;

	CHECK(recs && ptrs && ev);
	if (!recs || !ptrs || !ev || art_open(&a)) {
		CHECK(0);
		goto out_mem;
	}
	p = new_pipe(&a, batch_bytes, 3, 1000, NULL);
	CHECK(p != NULL);
	if (!p)
		goto out;
	for (unsigned i = 0; i < N; i++) {
		recs[i] = mk_malloc(1000 + i, 0x5555000 + 16 * i, 16 + i);
		ptrs[i] = &recs[i];
		CHECK_EQ(rec_size(&recs[i]), S);
		CHECK_EQ(feed(p, &recs[i]), 0);
		st = stats(p);
		/* record i+1 was the (f*k+1)-th for f = i / k */
		CHECK_U64(st.flushes[FLUSH_FULL], i / k);
		CHECK_U64(st.batches, i / k);
		CHECK_U64(st.events, i + 1);
	}
	CHECK_EQ(pipeline__stop(p, FLUSH_DRAIN), 0);
	st = stats(p);
	CHECK_U64(st.flushes[FLUSH_FULL], 7);
	CHECK_U64(st.flushes[FLUSH_DRAIN], 1);
	CHECK_U64(st.flushes[FLUSH_TIMEOUT], 0);
	CHECK_U64(st.flushes[FLUSH_SHUTDOWN], 0);
	CHECK_U64(st.batches, 8);
	CHECK_U64(st.frames, 8);
	/* the poller's own batch may join the others while it waits for one */
	CHECK(st.max_queue >= 1 && st.max_queue <= 3);
	CHECK_EQ(art_finish(&a, NULL), 0);

	nf = walk_frames(a.path, fi, (int)ARRAY_SIZE(fi));
	CHECK_EQ(nf, 9); /* 7 full + the drained 3 + trailer */
	for (int i = 0; i < nf && i < 9; i++) {
		CHECK_EQ(fi[i].kind, i < 8 ? MT_FRAME_EVENTS : MT_FRAME_TRAILER);
		if (i < 7) {
			CHECK_EQ(fi[i].count, k);
			CHECK_U64(fi[i].first_ts, 1000 + (uint64_t)i * k);
			CHECK_U64(fi[i].last_ts, 1000 + (uint64_t)i * k + k - 1);
		}
	}
	if (nf >= 8)
		CHECK_EQ(fi[7].count, 3);
	n = read_events(a.path, ev, N + 1, NULL);
	CHECK_EQ(n, N);
	if (n == N)
		CHECK_EVENTS(ev, ptrs, N);
	pipeline__free(p);
out:
	art_free(&a);
out_mem:
	free(recs);
	free(ptrs);
	free(ev);
}

static void test_full_batch_exact_fit(void)
{
	full_batch_case(5 * 40); /* the 5th record fills the batch to the byte */
}

static void test_full_batch_with_slack(void)
{
	full_batch_case(5 * 40 + 39); /* 39 bytes left: still no room for a 6th */
}

/* Records of two sizes: FULL follows a byte-exact model of the batch. */
static void test_full_batch_mixed_sizes(void)
{
	const size_t B = 1000;
	struct pipeline_stats st;
	uint64_t expect = 0;
	struct pipeline *p;
	size_t used = 0;
	struct art a;

	if (art_open(&a)) {
		CHECK(0);
		return;
	}
	p = new_pipe(&a, B, 2, 1000, NULL);
	CHECK(p != NULL);
	for (unsigned i = 0; p && i < 2000; i++) {
		struct mt_rec r =
			rnd() % 3 ? mk_malloc(i, 0x1000 + 16 * i, 32) : mk_free(i, 0x1000 + 16 * i);
		size_t s = rec_size(&r);

		if (used + s > B) {
			expect++;
			used = 0;
		}
		used += s;
		CHECK_EQ(feed(p, &r), 0);
		st = stats(p);
		CHECK_U64(st.flushes[FLUSH_FULL], expect);
	}
	if (p) {
		CHECK_EQ(pipeline__stop(p, FLUSH_SHUTDOWN), 0);
		st = stats(p);
		CHECK_U64(st.flushes[FLUSH_SHUTDOWN], 1);
		CHECK_U64(st.frames, expect + 1);
		CHECK_U64(st.events, 2000);
	}
	pipeline__free(p);
	art_free(&a);
}

/*
 * TIMEOUT: born_ns is taken inside pipeline_feed() from CLOCK_MONOTONIC, so
 * it lies in [t0, t1] around the first feed.  Ticks at t1 and at t0 + T - 1
 * (both in [born, born + T)) must not flush; a tick at t1 + T (>= born + T)
 * must.
 */
static void test_timeout(void)
{
	const unsigned T = 1000; /* only ever compared, never waited for */
	struct mt_rec recs[5];
	const void *ptrs[5];
	struct mt_event ev[6];
	struct frame_info fi[4];
	struct pipeline_stats st;
	struct pipeline *p;
	uint64_t t0, t1, t2, t3;
	struct art a;
	int nf;

	if (art_open(&a)) {
		CHECK(0);
		return;
	}
	p = new_pipe(&a, 64 << 10, 2, T, NULL);
	CHECK(p != NULL);
	if (!p)
		goto out;
	for (int i = 0; i < 5; i++) {
		recs[i] = mk_malloc(500 + (uint64_t)i, 0x7000 + 64 * (uint64_t)i, 100);
		ptrs[i] = &recs[i];
	}

	/* an empty batch never times out */
	CHECK_EQ(pipeline_tick(p, mono_ns() + 1000 * T * MS), 0);
	CHECK_U64(stats(p).batches, 0);

	t0 = mono_ns();
	for (int i = 0; i < 3; i++)
		CHECK_EQ(feed(p, &recs[i]), 0);
	t1 = mono_ns();
	CHECK(t1 - t0 < T * MS); /* else the bracket is too wide to test in */
	CHECK_EQ(pipeline_tick(p, t1), 0);
	CHECK_EQ(pipeline_tick(p, t0 + T * MS - 1), 0);
	st = stats(p);
	CHECK_U64(st.batches, 0);
	CHECK_U64(st.flushes[FLUSH_TIMEOUT], 0);

	CHECK_EQ(pipeline_tick(p, t1 + T * MS), 0);
	st = stats(p);
	CHECK_U64(st.flushes[FLUSH_TIMEOUT], 1);
	CHECK_U64(st.batches, 1);
	CHECK_U64(st.flushes[FLUSH_FULL], 0);
	/* nothing left to time out */
	CHECK_EQ(pipeline_tick(p, t1 + 1000 * T * MS), 0);
	CHECK_U64(stats(p).flushes[FLUSH_TIMEOUT], 1);

	/* the next batch is born anew at its own first record */
	t2 = mono_ns();
	for (int i = 3; i < 5; i++)
		CHECK_EQ(feed(p, &recs[i]), 0);
	t3 = mono_ns();
	CHECK(t3 - t2 < T * MS);
	CHECK_EQ(pipeline_tick(p, t3), 0);
	CHECK_EQ(pipeline_tick(p, t2 + T * MS - 1), 0);
	CHECK_U64(stats(p).flushes[FLUSH_TIMEOUT], 1);

	CHECK_EQ(pipeline__stop(p, FLUSH_DRAIN), 0);
	st = stats(p);
	CHECK_U64(st.flushes[FLUSH_TIMEOUT], 1);
	CHECK_U64(st.flushes[FLUSH_DRAIN], 1);
	CHECK_U64(st.frames, 2);
	CHECK_EQ(art_finish(&a, NULL), 0);

	nf = walk_frames(a.path, fi, (int)ARRAY_SIZE(fi));
	CHECK_EQ(nf, 3);
	if (nf == 3) {
		/* frame 1: exactly the records fed before the tick */
		CHECK_EQ(fi[0].kind, MT_FRAME_EVENTS);
		CHECK_EQ(fi[0].count, 3);
		CHECK_U64(fi[0].first_ts, 500);
		CHECK_U64(fi[0].last_ts, 502);
		CHECK_EQ(fi[1].count, 2);
		CHECK_EQ(fi[2].kind, MT_FRAME_TRAILER);
	}
	CHECK_EQ(read_events(a.path, ev, 6, NULL), 5);
	CHECK_EVENTS(ev, ptrs, 5);
	pipeline__free(p);
out:
	art_free(&a);
}

/*
 * A tick whose now_ns precedes the batch's birth (born > now: the batch's
 * age is negative) is also "now < born + T" and must not flush.  A poller
 * that read the clock before polling would pass such a now.
 */
static void test_tick_before_birth(void)
{
	struct mt_rec r = mk_free(7, 0x1000);
	struct pipeline *p;
	uint64_t t0;
	struct art a;

	if (art_open(&a)) {
		CHECK(0);
		return;
	}
	p = new_pipe(&a, 4096, 2, 50, NULL);
	CHECK(p != NULL);
	if (p) {
		t0 = mono_ns();
		CHECK_EQ(feed(p, &r), 0); /* born >= t0 */
		CHECK_EQ(pipeline_tick(p, t0 - 1), 0);
		CHECK_U64(stats(p).flushes[FLUSH_TIMEOUT], 0);
		CHECK_EQ(pipeline__stop(p, FLUSH_DRAIN), 0);
		CHECK_U64(stats(p).flushes[FLUSH_DRAIN], 1);
	}
	pipeline__free(p);
	art_free(&a);
}

/* flush_ms 0: any tick flushes a non-empty batch. */
static void test_timeout_zero(void)
{
	struct mt_rec r = mk_free(7, 0x1000);
	struct pipeline *p;
	struct art a;

	if (art_open(&a)) {
		CHECK(0);
		return;
	}
	p = new_pipe(&a, 4096, 2, 0, NULL);
	CHECK(p != NULL);
	if (p) {
		CHECK_EQ(feed(p, &r), 0);
		CHECK_EQ(pipeline_tick(p, mono_ns()), 0);
		CHECK_U64(stats(p).flushes[FLUSH_TIMEOUT], 1);
		CHECK_EQ(pipeline__stop(p, FLUSH_DRAIN), 0);
		CHECK_U64(stats(p).flushes[FLUSH_DRAIN], 0);
		CHECK_U64(stats(p).frames, 1);
	}
	pipeline__free(p);
	art_free(&a);
}

/* pipeline__stop(@cause) flushes the partial batch under @cause only. */
static void stop_cause_case(enum flush_cause cause)
{
	struct mt_rec recs[4];
	const void *ptrs[4];
	struct mt_event ev[5];
	struct pipeline_stats st;
	struct pipeline *p;
	struct art a;

	if (art_open(&a)) {
		CHECK(0);
		return;
	}
	p = new_pipe(&a, 4096, 2, 1000, NULL);
	CHECK(p != NULL);
	if (!p)
		goto out;
	for (int i = 0; i < 4; i++) {
		recs[i] = mk_malloc(10 + (uint64_t)i, 0x9000 + 32 * (uint64_t)i, 24);
		ptrs[i] = &recs[i];
		CHECK_EQ(feed(p, &recs[i]), 0);
	}
	CHECK_U64(stats(p).batches, 0);
	CHECK_EQ(pipeline__stop(p, cause), 0);
	st = stats(p);
	for (int c = 0; c < FLUSH_CAUSES; c++)
		CHECK_U64(st.flushes[c], c == (int)cause);
	CHECK_U64(st.batches, 1);
	CHECK_U64(st.events, 4);
	CHECK_U64(st.frames, 1);
	CHECK_EQ(art_finish(&a, NULL), 0);
	CHECK_EQ(read_events(a.path, ev, 5, NULL), 4);
	CHECK_EVENTS(ev, ptrs, 4);
	pipeline__free(p);
out:
	art_free(&a);
}

static void test_stop_drain(void)
{
	stop_cause_case(FLUSH_DRAIN);
}

static void test_stop_shutdown(void)
{
	stop_cause_case(FLUSH_SHUTDOWN);
}

/* Stopping with an empty partial batch counts no flush at all. */
static void test_stop_after_flush_counts_nothing(void)
{
	struct mt_rec r = mk_malloc(1, 0x1000, 8);
	struct pipeline_stats st;
	struct pipeline *p;
	struct art a;

	if (art_open(&a)) {
		CHECK(0);
		return;
	}
	p = new_pipe(&a, 4096, 2, 1000, NULL);
	CHECK(p != NULL);
	if (p) {
		CHECK_EQ(feed(p, &r), 0);
		CHECK_EQ(pipeline_flush(p, FLUSH_DRAIN), 0);
		CHECK_EQ(pipeline_flush(p, FLUSH_DRAIN), 0); /* no-op when empty */
		CHECK_EQ(pipeline__stop(p, FLUSH_SHUTDOWN), 0);
		st = stats(p);
		CHECK_U64(st.flushes[FLUSH_DRAIN], 1);
		CHECK_U64(st.flushes[FLUSH_SHUTDOWN], 0);
		CHECK_U64(st.batches, 1);
		CHECK_U64(st.frames, 1);
	}
	pipeline__free(p);
	art_free(&a);
}

static void test_empty_pipeline(void)
{
	struct mt_trailer t, got;
	struct frame_info fi[2];
	struct mt_writer_stats ws;
	struct pipeline_stats st;
	struct mt_event ev[1];
	struct pipeline *p;
	struct stat sb;
	struct art a;

	if (art_open(&a)) {
		CHECK(0);
		return;
	}
	p = new_pipe(&a, 4096, 2, 1000, NULL);
	CHECK(p != NULL);
	if (!p)
		goto out;
	CHECK_EQ(pipeline__stop(p, FLUSH_DRAIN), 0);
	st = stats(p);
	CHECK_U64(st.events, 0);
	CHECK_U64(st.batches, 0);
	for (int c = 0; c < FLUSH_CAUSES; c++)
		CHECK_U64(st.flushes[c], 0);
	CHECK_U64(st.frames, 0);
	CHECK_U64(st.max_queue, 0);

	memset(&t, 0, sizeof(t));
	t.exit_code = 3;
	t.duration_ns = 123456789;
	t.dropped[MT_MALLOC] = 7;
	t.events[MT_FREE] = 99; /* ignored: the writer counts its own */
	CHECK_EQ(art_finish(&a, &t), 0);
	mt_writer__stats(a.w, &ws);
	CHECK_EQ(stat(a.path, &sb), 0);
	CHECK_U64(ws.file_bytes, sb.st_size);
	CHECK_U64(ws.events, 0);

	CHECK_EQ(walk_frames(a.path, fi, 2), 1);
	CHECK_EQ(fi[0].kind, MT_FRAME_TRAILER);
	memset(&got, 0xff, sizeof(got));
	CHECK_EQ(read_events(a.path, ev, 1, &got), 0);
	CHECK_U64(got.frames, 0);
	for (int i = 0; i < MT_TYPE_MAX; i++)
		CHECK_U64(got.events[i], 0);
	CHECK_EQ(got.exit_code, 3);
	CHECK_EQ(got.exit_signal, 0);
	CHECK_U64(got.duration_ns, 123456789);
	CHECK_U64(got.dropped[MT_MALLOC], 7);
	pipeline__free(p);
out:
	art_free(&a);
}

/* The writer sorts each batch by timestamp; equal timestamps keep their order. */
static void test_sorted_within_batch(void)
{
	static const uint64_t ts1[] = { 50, 10, 40, 20, 30, 10, 60, 5 };
	static const uint64_t ts2[] = { 3, 2, 1 }; /* older than batch 1: stays after it */
	const unsigned N1 = ARRAY_SIZE(ts1), N2 = ARRAY_SIZE(ts2), R = 3000;
	struct mt_rec *rev = calloc(R, sizeof(*rev));
	struct mt_event *ev = calloc(N1 + N2 + R + 1, sizeof(*ev));
	struct mt_rec b1[ARRAY_SIZE(ts1)], b2[ARRAY_SIZE(ts2)];
	struct frame_info fi[5];
	struct pipeline *p;
	struct art a;
	long n;

	if (!rev || !ev || art_open(&a)) {
		CHECK(0);
		free(rev);
		free(ev);
		return;
	}
	p = new_pipe(&a, (size_t)R * 40, 2, 1000, NULL);
	CHECK(p != NULL);
	if (!p)
		goto out;
	for (unsigned i = 0; i < N1; i++) {
		b1[i] = mk_malloc(ts1[i], 0x1000 + 16 * i, i); /* size = feed order */
		CHECK_EQ(feed(p, &b1[i]), 0);
	}
	CHECK_EQ(pipeline_flush(p, FLUSH_TIMEOUT), 0);
	for (unsigned i = 0; i < N2; i++) {
		b2[i] = mk_free(ts2[i], 0x1000 + 16 * i);
		CHECK_EQ(feed(p, &b2[i]), 0);
	}
	CHECK_EQ(pipeline_flush(p, FLUSH_TIMEOUT), 0);
	/* a whole batch in reverse order: the sort's worst case */
	for (unsigned i = 0; i < R; i++) {
		rev[i] = mk_malloc(1000000 - i, 0x2000 + 16 * i, i);
		CHECK_EQ(feed(p, &rev[i]), 0);
	}
	CHECK_U64(stats(p).flushes[FLUSH_FULL], 0);
	CHECK_EQ(pipeline__stop(p, FLUSH_DRAIN), 0);
	CHECK_EQ(art_finish(&a, NULL), 0);

	CHECK_EQ(walk_frames(a.path, fi, 5), 4);
	CHECK_U64(fi[0].first_ts, 5);
	CHECK_U64(fi[0].last_ts, 60);
	CHECK_U64(fi[1].first_ts, 1);
	CHECK_U64(fi[1].last_ts, 3);
	CHECK_U64(fi[2].first_ts, 1000000 - (R - 1));
	CHECK_U64(fi[2].last_ts, 1000000);

	n = read_events(a.path, ev, N1 + N2 + R + 1, NULL);
	CHECK_EQ(n, N1 + N2 + R);
	if (n == N1 + N2 + R) {
		/* batch 1 sorted; the two ts 10 in feed order (sizes 1 then 5) */
		static const uint64_t want_ts[] = { 5, 10, 10, 20, 30, 40, 50, 60 };
		static const uint64_t want_size[] = { 7, 1, 5, 3, 4, 2, 0, 6 };
		unsigned unsorted = 0;

		for (unsigned i = 0; i < N1; i++) {
			CHECK_U64(ev[i].h.ts, want_ts[i]);
			CHECK_U64(ev[i].f[1], want_size[i]);
			CHECK_EQ(event_diff(&ev[i], &b1[want_size[i]]), 0);
		}
		for (unsigned i = 0; i < N2; i++)
			CHECK_EQ(event_diff(&ev[N1 + i], &b2[N2 - 1 - i]), 0);
		for (unsigned i = 0; i < R; i++)
			unsorted += event_diff(&ev[N1 + N2 + i], &rev[R - 1 - i]) != 0;
		CHECK_EQ(unsorted, 0);
	}
	pipeline__free(p);
out:
	art_free(&a);
	free(rev);
	free(ev);
}

/* Every type, edge values included, comes back field for field. */
static void test_roundtrip_every_type(void)
{
	static char longpath[MT_PATH_MAX];
	const uint64_t M = UINT64_MAX;
	struct {
		struct mt_rec r;
		struct mt_rec_exec x;
		bool exec;
	} in[32];
	const void *ptrs[32];
	struct mt_event ev[33];
	struct mt_trailer t;
	uint64_t per_type[MT_TYPE_MAX] = { 0 };
	struct pipeline *p;
	unsigned n = 0;
	struct art a;

	memset(longpath, 'p', MT_PATH_MAX - 1);
	longpath[0] = '/';
	longpath[MT_PATH_MAX - 1] = '\0';
#define R(type, fn, pid, tid, ts, ...)                                    \
	do {                                                              \
		uint64_t _f[] = { __VA_ARGS__ };                          \
		in[n].exec = false;                                       \
		in[n].r = mk(type, fn, pid, tid, ts, ARRAY_SIZE(_f), _f); \
		n++;                                                      \
	} while (0)
#define X(fn, ts, pid, old, path)                          \
	do {                                               \
		in[n].exec = true;                         \
		in[n].x = mk_exec(fn, ts, pid, old, path); \
		n++;                                       \
	} while (0)
	R(MT_MALLOC, MT_FN_MALLOC, 1, 1, 1000, 0x55555555a2a0, 24);
	R(MT_CALLOC, MT_FN_CALLOC, 1, 2, 1000, 0x55555555a000, 4096);
	R(MT_REALLOC, MT_FN_REALLOCARRAY, 1, 2, 1001, 0x7ffff7a00010, 1 << 20, 0x55555555a000);
	R(MT_ALIGNED_ALLOC, MT_FN_POSIX_MEMALIGN, 1, 3, 1002, 0x1000, 4096, 4096);
	R(MT_FREE, MT_FN_FREE, 1, 3, 1003, 0);
	R(MT_FREE, MT_FN_FREE, 1, 3, 1004, M);
	R(MT_MMAP, MT_REC_PARKED, 4294967295u, 4294967295u, 1005, 0x7ffff7fc0000, 8192, 3, 0x22,
	  (uint64_t)-1, 0);
	R(MT_MMAP, 0, 1, 1, 1006, 0, M, 7, 0x802, 3, M - 4095);
	R(MT_MUNMAP, 0, 1, 1, 1007, 0x7ffff7fc0000, 8192);
	R(MT_MREMAP, 0, 1, 1, 1008, 0x7ffff0000000, 1 << 24, 0x7ffff7fc0000, 8192, 1);
	R(MT_BRK, 0, 1, 1, 1009, 0x555555580000);
	R(MT_FORK, 0, 1, 1, 1010, 1, 2, MT_FORK_THREAD | MT_FORK_VM);
	R(MT_FORK, MT_REC_PARKED, 1, 1, 1011, 1, 77, 0);
	X(MT_REC_PARKED, 1012, 77, 77, "/usr/bin/true");
	X(0, 1013, 78, 79, longpath);
	X(0, 1014, 80, 80, "");
	R(MT_EXIT, 0, 77, 77, 1015, (uint64_t)-1, 0);
	R(MT_EXIT, 0, 78, 78, 1016, 0, 9);
	R(MT_EXIT, 0, 1, 1, 1017, (uint64_t)INT64_MIN, M);
	R(MT_RSS, 0, 1, 1, 1018, 1 << 20, 2 << 20, 0, M);
	R(MT_PHYSICAL, 0, 1, 1, 1019, 123456789);
	R(MT_MALLOC, MT_FN_VALLOC, 1, 1, 1020, 0x1000, 4096, 42); /* extra field */
	R(MT_MALLOC, MT_FN_MALLOC, 1, 1, M, M, M);		  /* ts at the top */
#undef R
#undef X
	for (unsigned i = 0; i < n; i++) {
		ptrs[i] = in[i].exec ? (const void *)&in[i].x : (const void *)&in[i].r;
		per_type[((const struct mt_rec_hdr *)ptrs[i])->type]++;
	}

	if (art_open(&a)) {
		CHECK(0);
		return;
	}
	/* small batches: records cross frames, and EXEC (288 bytes) fits */
	p = new_pipe(&a, 600, 3, 1000, NULL);
	CHECK(p != NULL);
	if (!p)
		goto out;
	for (unsigned i = 0; i < n; i++)
		CHECK_EQ(feed(p, ptrs[i]), 0);
	CHECK(stats(p).flushes[FLUSH_FULL] > 2);
	CHECK_EQ(pipeline__stop(p, FLUSH_DRAIN), 0);
	CHECK_U64(stats(p).events, n);
	CHECK_EQ(art_finish(&a, NULL), 0);
	CHECK_EQ(read_events(a.path, ev, 33, &t), n);
	CHECK_EVENTS(ev, ptrs, n);
	CHECK_EQ(strlen(ev[14].str), MT_PATH_MAX - 1);
	for (int i = 1; i < MT_TYPE_MAX; i++)
		CHECK_U64(t.events[i], per_type[i]);
	pipeline__free(p);
out:
	art_free(&a);
}

/*
 * Control records made in userspace (src/record/control.c) go in through
 * pipeline_inject(): no fields, a mark's name as its string, and the size
 * the caller gives (the header alone for enable/disable) is enough.
 */
static void test_inject_control_records(void)
{
	struct mt_rec_mark m = { .h = { MT_MARK, 0, 42, 42, 0, 2000 } };
	struct mt_rec_hdr en = { MT_ENABLE, 0, 42, 42, 0, 1000 };
	struct mt_rec_hdr dis = { MT_DISABLE, 0, 7, 7, 0, 3000 };
	struct mt_event ev[4];
	struct pipeline *p;
	struct art a;

	snprintf(m.name, sizeof(m.name), "phase 2");
	if (art_open(&a)) {
		CHECK(0);
		return;
	}
	p = new_pipe(&a, 4096, 2, 1000, NULL);
	CHECK(p != NULL);
	if (!p)
		goto out;
	/* out of order on purpose: the writer sorts the batch by ts */
	CHECK_EQ(pipeline_inject(p, &dis, sizeof(dis)), 0);
	CHECK_EQ(pipeline_inject(p, &m, sizeof(m)), 0);
	CHECK_EQ(pipeline_inject(p, &en, sizeof(en)), 0);
	CHECK_EQ(pipeline__stop(p, FLUSH_DRAIN), 0);
	CHECK_EQ(art_finish(&a, NULL), 0);
	CHECK_EQ(read_events(a.path, ev, 4, NULL), 3);
	CHECK_EQ(ev[0].h.type, MT_ENABLE);
	CHECK_EQ(ev[1].h.type, MT_MARK);
	CHECK_STR(ev[1].str, "phase 2");
	CHECK_U64(ev[1].h.ts, 2000);
	CHECK_EQ(ev[1].h.nfields, 0);
	CHECK_EQ(ev[2].h.type, MT_DISABLE);
	CHECK_U64(ev[2].h.pid, 7);
	pipeline__free(p);
out:
	art_free(&a);
}

/*
 * RUNNING records (src/record/adopt.c, at attach) go in through
 * pipeline_inject() with their path as the string: a newline in it, and a
 * path of MT_PATH_MAX - 1 bytes, come back byte for byte.
 */
static void test_inject_running(void)
{
	struct mt_rec_running r[2] = {
		{ .h = { MT_RUNNING, 0, 42, 42, RUNNING_NFIELDS, 1000 }, .f = { 1, 0 } },
		{ .h = { MT_RUNNING, 0, 43, 43, RUNNING_NFIELDS, 1001 }, .f = { 42, 1 } },
	};
	struct mt_event ev[3];
	struct pipeline *p;
	struct art a;

	memset(r[0].path, 'x', MT_PATH_MAX - 1);
	r[0].path[0] = '/';
	snprintf(r[1].path, sizeof(r[1].path), "a\nb");
	if (art_open(&a)) {
		CHECK(0);
		return;
	}
	p = new_pipe(&a, 4096, 2, 1000, NULL);
	CHECK(p != NULL);
	if (!p)
		goto out;
	CHECK_EQ(pipeline_inject(p, &r[1], sizeof(r[1])), 0);
	CHECK_EQ(pipeline_inject(p, &r[0], sizeof(r[0])), 0);
	CHECK_EQ(pipeline__stop(p, FLUSH_DRAIN), 0);
	CHECK_EQ(art_finish(&a, NULL), 0);
	CHECK_EQ(read_events(a.path, ev, 3, NULL), 2);
	for (int i = 0; i < 2; i++) {
		CHECK_EQ(ev[i].h.type, MT_RUNNING);
		CHECK_U64(ev[i].h.pid, 42 + i);
		CHECK_EQ(ev[i].h.nfields, RUNNING_NFIELDS);
		CHECK_U64(ev[i].f[RUNNING_PPID], r[i].f[RUNNING_PPID]);
		CHECK_U64(ev[i].f[RUNNING_COMM], r[i].f[RUNNING_COMM]);
		CHECK_STR(ev[i].str, r[i].path);
	}
	pipeline__free(p);
out:
	art_free(&a);
}

/* Many random records through small batches, flushed by every cause. */
static void test_roundtrip_many(void)
{
	const unsigned N = 50000;
	struct mt_rec *recs = calloc(N, sizeof(*recs));
	const void **ptrs = calloc(N, sizeof(*ptrs));
	struct mt_event *ev = calloc(N + 1, sizeof(*ev));
	struct pipeline_stats st;
	struct pipeline *p = NULL;
	uint64_t ts = 1ull << 40;
	struct art a;

	if (!recs || !ptrs || !ev || art_open(&a)) {
		CHECK(0);
		goto out_mem;
	}
	p = new_pipe(&a, 4096, 3, 10, NULL);
	CHECK(p != NULL);
	if (!p)
		goto out;
	for (unsigned i = 0; i < N; i++) {
		ts += rnd() % 3000;
		recs[i] = mk_random(ts);
		ptrs[i] = &recs[i];
		CHECK_EQ(feed(p, &recs[i]), 0);
		if (i % 1000 == 999)
			CHECK_EQ(pipeline_tick(p, mono_ns() + 10 * MS), 0);
		if (i % 4000 == 2499) /* between ticks: the batch is never empty here */
			CHECK_EQ(pipeline_flush(p, FLUSH_DRAIN), 0);
	}
	CHECK_EQ(pipeline__stop(p, FLUSH_SHUTDOWN), 0);
	st = stats(p);
	CHECK_U64(st.events, N);
	CHECK_U64(st.flushes[FLUSH_TIMEOUT], N / 1000);
	CHECK_U64(st.flushes[FLUSH_DRAIN], (N - 2500) / 4000 + 1);
	CHECK_U64(st.flushes[FLUSH_SHUTDOWN], 0); /* the last feed ended a tick */
	CHECK_U64(st.flushes[FLUSH_FULL] + st.flushes[FLUSH_TIMEOUT] + st.flushes[FLUSH_DRAIN] +
			  st.flushes[FLUSH_SHUTDOWN],
		  st.batches);
	CHECK_U64(st.frames, st.batches);
	CHECK_EQ(art_finish(&a, NULL), 0);
	CHECK_EQ(read_events(a.path, ev, N + 1, NULL), N);
	CHECK_EVENTS(ev, ptrs, N);
	pipeline__free(p);
out:
	art_free(&a);
out_mem:
	free(recs);
	free(ptrs);
	free(ev);
}

/* What is not a record is ignored (not batched, not an error). */
static void test_ignores_malformed(void)
{
	struct mt_rec r = mk_malloc(1, 0x1000, 8);
	struct mt_rec_exec x = mk_exec(0, 2, 5, 5, "/bin/sh");
	struct pipeline *p;
	struct art a;

	if (art_open(&a)) {
		CHECK(0);
		return;
	}
	p = new_pipe(&a, 256, 2, 1000, NULL);
	CHECK(p != NULL);
	if (p) {
		CHECK_EQ(pipeline_feed(p, &r, sizeof(struct mt_rec_hdr) - 1), 0); /* short */
		CHECK_EQ(pipeline_feed(p, &r, rec_size(&r) - 1), 0);		  /* fields cut */
		CHECK_EQ(pipeline_feed(p, &x, rec_size(&x)), 0); /* > batch_bytes */
		CHECK_U64(stats(p).events, 0);
		CHECK_EQ(pipeline_feed(p, &r, sizeof(r)), 0); /* padded: fine */
		CHECK_U64(stats(p).events, 1);
		CHECK_EQ(pipeline__stop(p, FLUSH_DRAIN), 0);
		CHECK_U64(stats(p).frames, 1);
	}
	pipeline__free(p);
	art_free(&a);
}

struct hook_log {
	struct pipeline *p;
	unsigned calls;
	uint64_t ts[16];
	uint64_t f0[16];
	uint64_t events_before[16];
};

static void hook(void *ctx, const struct mt_rec_hdr *h, const __u64 *f, struct rec_out *out)
{
	struct hook_log *l = ctx;

	if (l->calls < 16) {
		l->ts[l->calls] = h->ts;
		l->f0[l->calls] = f[0];
		/* called before the record is batched */
		l->events_before[l->calls] = l->p ? stats(l->p).events : UINT64_MAX;
	}
	l->calls++;
}

static void test_hook(void)
{
	struct pipeline_observer obs = { .observe = hook };
	struct hook_log log;
	struct pipeline *p;
	struct art a;
	struct {
		unsigned type, fn;
		bool want;
	} cases[] = {
		{ MT_MALLOC, MT_FN_MALLOC, false },
		{ MT_FORK, 0, false },
		{ MT_FORK, MT_REC_PARKED, true },
		{ MT_EXEC, 0, false },
		{ MT_EXEC, MT_REC_PARKED, true },
		{ MT_MMAP, 0, false },
		{ MT_MMAP, MT_REC_PARKED, true },
		{ MT_EXIT, 0, true },
		{ MT_FREE, MT_FN_FREE, false },
		{ MT_EXIT, MT_REC_PARKED, true }, /* once, not twice */
		{ MT_RSS, 0, false },
		{ MT_MUNMAP, 0x7fff, false }, /* every bit but PARKED */
	};
	unsigned want = 0;

	memset(&log, 0, sizeof(log));
	obs.ctx = &log;
	if (art_open(&a)) {
		CHECK(0);
		return;
	}
	/* what the recorder asks for: parked records, and every EXIT */
	obs.fn_flags = MT_REC_PARKED;
	obs.types[MT_EXIT / 64] = 1ull << (MT_EXIT % 64);
	p = new_pipe(&a, 4096, 2, 1000, &obs);
	CHECK(p != NULL);
	if (!p)
		goto out;
	log.p = p;
	for (unsigned i = 0; i < ARRAY_SIZE(cases); i++) {
		uint64_t f[MT_MAX_FIELDS] = { 1000 + i, 1, 2, 3, 4, 5 };
		unsigned nf = cases[i].type == MT_MMAP	 ? 6
			      : cases[i].type == MT_FORK ? 3
			      : cases[i].type == MT_RSS	 ? 4
							 : 2;
		struct mt_rec r = mk(cases[i].type, cases[i].fn, 1, 1, 100 + i, nf, f);
		struct mt_rec_exec x = mk_exec(cases[i].fn, 100 + i, 1, 1000 + i, "/x");

		CHECK_EQ(feed(p, cases[i].type == MT_EXEC ? (void *)&x : (void *)&r), 0);
		if (cases[i].want) {
			CHECK_EQ(log.calls, want + 1);
			if (log.calls == want + 1 && want < 16) {
				CHECK_U64(log.ts[want], 100 + i);
				CHECK_U64(log.f0[want], 1000 + i);
				CHECK_U64(log.events_before[want], i);
			}
			want++;
		} else {
			CHECK_EQ(log.calls, want);
		}
	}
	CHECK_EQ(want, 5);
	CHECK_EQ(pipeline__stop(p, FLUSH_DRAIN), 0);
	CHECK_EQ(log.calls, 5);
	CHECK_U64(stats(p).events, ARRAY_SIZE(cases));
	pipeline__free(p);
out:
	art_free(&a);
}

/*
 * An observer's records (rec_out) are batched right after the record it
 * observed, and are not observed themselves: the pipeline is never
 * re-entered, and a made record that would be observed cannot loop.
 */
struct maker_log {
	unsigned calls;
	int put_err;
};

static void maker(void *ctx, const struct mt_rec_hdr *h, const __u64 *f, struct rec_out *out)
{
	struct maker_log *l = ctx;
	/* an EXIT record (observed type) with the observed record's pid + 100 */
	struct mt_rec r = mk(MT_EXIT, 0, h->pid + 100, h->pid + 100, h->ts + 1, 2,
			     (uint64_t[MT_MAX_FIELDS]){ f[0], 0 });

	l->calls++;
	if (!l->put_err)
		l->put_err = rec_out_put(out, &r, sizeof(r));
	if (!l->put_err) /* a buffer that holds no whole record is refused */
		l->put_err = rec_out_put(out, &r, sizeof(r.h) - 1) == -EINVAL ? 0 : -1;
}

static void test_observer_records_follow(void)
{
	struct maker_log log = { 0 };
	struct pipeline_observer obs = { .observe = maker, .ctx = &log };
	struct mt_event ev[8];
	struct mt_rec r[3];
	struct pipeline *p;
	struct art a;

	obs.types[MT_EXIT / 64] = 1ull << (MT_EXIT % 64);
	if (art_open(&a)) {
		CHECK(0);
		return;
	}
	p = new_pipe(&a, 4096, 2, 1000, &obs);
	CHECK(p != NULL);
	if (!p)
		goto out;
	r[0] = mk_malloc(10, 0x1000, 8);
	r[1] = mk(MT_EXIT, 0, 7, 7, 20, 2, (uint64_t[MT_MAX_FIELDS]){ 3, 0 });
	r[2] = mk_malloc(30, 0x2000, 8);
	for (int i = 0; i < 3; i++)
		CHECK_EQ(feed(p, &r[i]), 0);
	CHECK_EQ(log.calls, 1); /* the made EXIT was not observed */
	CHECK_EQ(log.put_err, 0);
	CHECK_EQ(pipeline__stop(p, FLUSH_DRAIN), 0);
	CHECK_U64(stats(p).events, 4);
	CHECK_EQ(art_finish(&a, NULL), 0);
	CHECK_EQ(read_events(a.path, ev, 8, NULL), 4);
	CHECK_U64(ev[1].h.type, MT_EXIT);
	CHECK_U64(ev[1].h.pid, 7);
	CHECK_U64(ev[2].h.type, MT_EXIT);
	CHECK_U64(ev[2].h.pid, 107);
	CHECK_U64(ev[2].h.ts, 21);
	CHECK_U64(ev[2].f[0], 3);
	pipeline__free(p);
out:
	art_free(&a);
}

/*
 * Any number of sources: each is fed what it holds stamped up to the time
 * asked (here an injected record's), and both sources' records reach the
 * artifact, sorted with the rest.
 */
struct held_source {
	struct mt_rec recs[3];
	unsigned n, next;
	uint64_t last_until; /* the @until of the last feed */
};

static int held_feed(void *ctx, struct pipeline *p, uint64_t until)
{
	struct held_source *hs = ctx;
	int fed = 0;

	hs->last_until = until;
	while (hs->next < hs->n && hs->recs[hs->next].h.ts <= until) {
		int err = feed(p, &hs->recs[hs->next++]);

		if (err)
			return err;
		fed++;
	}
	return fed;
}

static void test_two_sources(void)
{
	struct held_source a_src = { .n = 3 }, b_src = { .n = 3 };
	struct mt_rec inj = mk_malloc(250, 0x9000, 8);
	struct mt_event ev[8];
	struct pipeline *p;
	struct art a;

	for (unsigned i = 0; i < 3; i++) {
		a_src.recs[i] = mk_malloc(100 + 200 * i, 0x1000 + i, 8); /* 100 300 500 */
		b_src.recs[i] = mk_malloc(200 + 200 * i, 0x2000 + i, 8); /* 200 400 600 */
	}
	if (art_open(&a)) {
		CHECK(0);
		return;
	}
	p = new_pipe(&a, 4096, 2, 1000, NULL);
	CHECK(p != NULL);
	if (!p)
		goto out;
	CHECK_EQ(pipeline__add_source(
			 p, -1, &(struct pipeline_source){ .feed = held_feed, .ctx = &a_src }),
		 0);
	/* a second source is taken too (it was -EBUSY) */
	CHECK_EQ(pipeline__add_source(
			 p, -1, &(struct pipeline_source){ .feed = held_feed, .ctx = &b_src }),
		 0);
	CHECK_EQ(pipeline_inject(p, &inj, sizeof(inj)), 0);
	CHECK_U64(a_src.last_until, 250);
	CHECK_U64(b_src.last_until, 250);
	CHECK_EQ(a_src.next, 1); /* 100 */
	CHECK_EQ(b_src.next, 1); /* 200 */
	CHECK_U64(stats(p).events, 3);
	CHECK_EQ(pipeline__stop(p, FLUSH_DRAIN), 0);
	CHECK_EQ(art_finish(&a, NULL), 0);
	CHECK_EQ(read_events(a.path, ev, 8, NULL), 3);
	CHECK_U64(ev[0].h.ts, 100);
	CHECK_U64(ev[1].h.ts, 200);
	CHECK_U64(ev[2].h.ts, 250);
	pipeline__free(p);
out:
	art_free(&a);
}

/* A writer that fails (the pipe's reader is gone) is reported by stop. */
static void test_writer_error_reported(void)
{
	struct mt_header h;
	struct mt_writer *w;
	struct pipeline *p;
	struct pipeline_opts o = { .batch_bytes = 400, .batches = 2, .flush_ms = 1000 };
	int fds[2];

	art_header(&h);
	signal(SIGPIPE, SIG_IGN);
	if (pipe(fds)) {
		CHECK(0);
		return;
	}
	w = mt_writer__new(fds[1], &h, 0); /* the header fits in the pipe */
	CHECK(w != NULL);
	close(fds[0]);
	p = w ? pipeline__new(&o, w, NULL) : NULL;
	CHECK(p != NULL);
	if (p) {
		for (unsigned i = 0; i < 25; i++) {
			struct mt_rec r = mk_malloc(i, 0x1000 + 16 * i, 8);

			/* later feeds may already see the error: fine either way */
			int err = feed(p, &r);

			CHECK(err == 0 || err == -EPIPE);
		}
		CHECK_EQ(pipeline__stop(p, FLUSH_DRAIN), -EPIPE);
		CHECK_U64(stats(p).frames, 0);
	}
	pipeline__free(p);
	mt_writer__free(w);
	close(fds[1]);
}

/*
 * Bounded memory.  The writer writes to a pipe of one page that nobody reads
 * yet, so it blocks on its first frame (far larger than a page).  With
 * batches = 2 of k records each, the feeding thread must then block inside
 * the (2k+1)-th pipeline_feed(): batch 1 is with the writer, batch 2 is
 * queued, and the record needs a third.  The main thread waits, with no
 * sleep, until the feeder is blocked in a futex wait with 2k records fed (or
 * has finished, which is the failure), checks that, then drains the pipe and
 * checks that all M records arrive intact.
 */
#define BM_BATCH (64u << 10)
#define BM_REC 72u /* an MMAP record: header + 6 fields */
#define BM_K (BM_BATCH / BM_REC)
#define BM_M (10 * BM_K + 17)

struct bm {
	struct pipeline *p;
	struct mt_rec *recs;
	_Atomic unsigned fed;
	_Atomic pid_t tid;
	_Atomic bool done;
	int feed_err;

	int rfd; /* pipe read end, drained into out_fd */
	int out_fd;
	long drained;
};

static void *bm_feeder(void *arg)
{
	struct bm *b = arg;

	atomic_store(&b->tid, gettid());
	for (unsigned i = 0; i < BM_M; i++) {
		int err = feed(b->p, &b->recs[i]);

		if (err && !b->feed_err)
			b->feed_err = err;
		atomic_store(&b->fed, i + 1);
	}
	atomic_store(&b->done, true);
	return NULL;
}

static void *bm_drain(void *arg)
{
	struct bm *b = arg;
	char buf[1 << 16];
	ssize_t n;

	while ((n = read(b->rfd, buf, sizeof(buf))) > 0) {
		if (write(b->out_fd, buf, (size_t)n) != n)
			return NULL;
		b->drained += n;
	}
	return NULL;
}

static void test_bounded_memory(void)
{
	struct bm b = { .rfd = -1, .out_fd = -1 };
	struct mt_event *ev = calloc(BM_M + 1, sizeof(*ev));
	const void **ptrs = calloc(BM_M, sizeof(*ptrs));
	struct pipeline_opts o = { .batch_bytes = BM_BATCH, .batches = 2, .flush_ms = 1000 };
	pthread_t feeder, drain;
	struct pipeline_stats st;
	struct mt_writer *w = NULL;
	struct mt_header h;
	char path[64];
	uint64_t deadline;
	unsigned fed;
	bool done;
	int fds[2];
	pid_t tid;

	if (!can_see_syscalls()) {
		SKIP("no /proc/self/task/TID/syscall");
		free(ev);
		free(ptrs);
		return;
	}
	signal(SIGPIPE, SIG_IGN);
	b.recs = calloc(BM_M, sizeof(*b.recs));
	snprintf(path, sizeof(path), "/tmp/mt_test_pipeline.XXXXXX");
	if (!ev || !ptrs || !b.recs || pipe(fds)) {
		CHECK(0);
		goto out_mem;
	}
	b.rfd = fds[0];
	/* one page: far less than one frame of random 64-bit fields */
	CHECK(fcntl(fds[1], F_SETPIPE_SZ, 4096) >= 4096);
	b.out_fd = mkstemp(path);
	CHECK(b.out_fd >= 0);
	art_header(&h);
	w = mt_writer__new(fds[1], &h, 0);
	CHECK(w != NULL);
	b.p = w ? pipeline__new(&o, w, NULL) : NULL;
	CHECK(b.p != NULL);
	if (!b.p || b.out_fd < 0)
		goto out;
	for (unsigned i = 0; i < BM_M; i++) {
		uint64_t f[MT_MAX_FIELDS] = { rnd(), rnd(), rnd(), rnd(), rnd(), rnd() };

		b.recs[i] = mk(MT_MMAP, 0, 1, 2, 1000 + i, 6, f);
		ptrs[i] = &b.recs[i];
	}
	CHECK_EQ(rec_size(&b.recs[0]), BM_REC);

	if (pthread_create(&feeder, NULL, bm_feeder, &b)) {
		CHECK(0);
		goto out;
	}
	deadline = mono_ns() + 20000 * MS; /* only so that a bug cannot hang the run */
	for (;;) {
		tid = atomic_load(&b.tid);
		fed = atomic_load(&b.fed);
		done = atomic_load(&b.done);
		if (done || fed > 2 * BM_K || (fed == 2 * BM_K && tid && in_futex(tid)))
			break;
		if (mono_ns() > deadline) {
			fprintf(stderr, "  feeder neither blocked nor done: fed %u\n", fed);
			break;
		}
		sched_yield();
	}
	/* stalled: exactly two batches accepted, none more */
	CHECK(!done);
	CHECK_EQ(fed, 2 * BM_K);
	CHECK_EQ(atomic_load(&b.fed), 2 * BM_K);

	/* release the writer */
	if (pthread_create(&drain, NULL, bm_drain, &b)) {
		CHECK(0);
		close(fds[0]); /* the writer fails with EPIPE and frees the feeder */
		fds[0] = -1;
		pthread_join(feeder, NULL);
		goto out;
	}
	pthread_join(feeder, NULL); /* the feeder was the poller: stop after it */
	CHECK_EQ(b.feed_err, 0);
	CHECK_EQ(pipeline__stop(b.p, FLUSH_DRAIN), 0);
	st = stats(b.p);
	CHECK_U64(st.events, BM_M);
	CHECK(st.poller_waits >= 1);
	CHECK(st.max_queue >= 1 && st.max_queue <= 2);
	CHECK_U64(st.frames, BM_M / BM_K + 1);
	CHECK_EQ(mt_writer__finish(w, &(struct mt_trailer){ .exit_code = 0 }), 0);
	close(fds[1]);
	fds[1] = -1;
	pthread_join(drain, NULL);
	CHECK_EQ(read_events(path, ev, BM_M + 1, NULL), BM_M);
	CHECK_EVENTS(ev, ptrs, BM_M);
out:
	pipeline__free(b.p);
	mt_writer__free(w);
	if (fds[1] >= 0)
		close(fds[1]);
	if (fds[0] >= 0)
		close(fds[0]);
	if (b.out_fd >= 0) {
		close(b.out_fd);
		unlink(path);
	}
out_mem:
	free(ev);
	free(ptrs);
	free(b.recs);
}

/*
 * Several encoding threads finish their batches in any order, yet frames
 * must reach the file in batch order.  @writers threads, batches of
 * @batch_bytes: with 4 MiB batches of random MMAP records a batch encodes to
 * more than MT_FRAME_RAW_TARGET, so it becomes several frames and its
 * thread writes the first ones while holding the turn.  Every record comes
 * back in feeding order and every frame starts after the previous one ends.
 */
static void writers_case(unsigned writers, size_t batch_bytes, unsigned N)
{
	struct pipeline_opts o = {
		.batch_bytes = batch_bytes,
		.batches = 6,
		.flush_ms = 1000,
		.writers = writers,
	};
	struct mt_rec *recs = calloc(N, sizeof(*recs));
	const void **ptrs = calloc(N, sizeof(*ptrs));
	struct mt_event *ev = calloc(N + 1, sizeof(*ev));
	struct frame_info *fi = calloc(4096, sizeof(*fi));
	struct pipeline_stats st;
	struct pipeline *p = NULL;
	struct art a;
	int nf, bad = 0;
	long n;

	if (!recs || !ptrs || !ev || !fi || art_open(&a)) {
		CHECK(0);
		goto out_mem;
	}
	p = pipeline__new(&o, a.w, NULL);
	CHECK(p != NULL);
	if (!p)
		goto out;
	for (unsigned i = 0; i < N; i++) {
		uint64_t f[MT_MAX_FIELDS] = { rnd(), rnd(), rnd(), rnd(), rnd(), rnd() };

		recs[i] = mk(MT_MMAP, 0, 1, 2, 1000 + i, 6, f);
		ptrs[i] = &recs[i];
		CHECK_EQ(feed(p, &recs[i]), 0);
	}
	CHECK_EQ(pipeline__stop(p, FLUSH_DRAIN), 0);
	st = stats(p);
	CHECK_U64(st.events, N);
	CHECK(st.frames >= st.batches);
	CHECK(batch_bytes < MT_FRAME_RAW_TARGET || st.frames > st.batches);
	CHECK_EQ(art_finish(&a, NULL), 0);
	nf = walk_frames(a.path, fi, 4096);
	CHECK_EQ(nf, (int)st.frames + 1);
	for (int i = 1; i + 1 < nf; i++)
		bad += fi[i].first_ts != fi[i - 1].last_ts + 1;
	CHECK_EQ(bad, 0);
	n = read_events(a.path, ev, N + 1, NULL);
	CHECK_EQ(n, N);
	if (n == N)
		CHECK_EVENTS(ev, ptrs, N);
out:
	pipeline__free(p);
	art_free(&a);
out_mem:
	free(recs);
	free(ptrs);
	free(ev);
	free(fi);
}

static void test_writers_keep_batch_order(void)
{
	writers_case(1, 4096, 20000);
	writers_case(2, 4096, 20000);
	writers_case(4, 4096, 20000);
	/* 4 MiB batches: several frames per batch */
	writers_case(3, 4u << 20, 200000);
}

int main(void)
{
	RUN(test_full_batch_exact_fit);
	RUN(test_full_batch_with_slack);
	RUN(test_full_batch_mixed_sizes);
	RUN(test_timeout);
	RUN(test_timeout_zero);
	RUN(test_tick_before_birth);
	RUN(test_stop_drain);
	RUN(test_stop_shutdown);
	RUN(test_stop_after_flush_counts_nothing);
	RUN(test_empty_pipeline);
	RUN(test_sorted_within_batch);
	RUN(test_roundtrip_every_type);
	RUN(test_inject_control_records);
	RUN(test_inject_running);
	RUN(test_roundtrip_many);
	RUN(test_ignores_malformed);
	RUN(test_hook);
	RUN(test_observer_records_follow);
	RUN(test_two_sources);
	RUN(test_writer_error_reported);
	RUN(test_bounded_memory);
	RUN(test_writers_keep_batch_order);
	HARNESS_EXIT();
}
