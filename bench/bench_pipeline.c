// SPDX-License-Identifier: MIT
/*
 * bench_pipeline.c - throughput and size of the userspace event path.
 *
 * Synthetic but realistic heap events (malloc/free of tcache-like reused
 * addresses, sizes 16..4096 skewed small, one pid, a few tids, ts deltas
 * 100..2000 ns) are laid out in memory exactly as the BPF ring buffer hands
 * them to the poller.  Then, on the same events:
 *
 *   memtrack      the real pipeline: the main thread acts as the poller
 *                 (parse = rec_size, pipeline_feed, a tick now and then), the
 *                 encoding threads (one per usable CPU) sort, varint-encode,
 *                 zstd-compress and write the artifact; timed from the first
 *                 feed until pipeline__stop() has written the last frame.
 *   memtrack 1cpu the same pinned to one CPU (so one encoding thread).
 *   msgpack+zstd  the artifact format of a comparable Rust eBPF tracker:
 *                 each event a MessagePack map with string keys (pid, tid,
 *                 timestamp, addr, type, size) packed with msgpack-c, frames
 *                 of the same events as ours compressed with
 *                 ZSTD_compressCCtx(level -5, one reused context), written
 *                 to a file; one thread.
 *
 * Both outputs are read back and counted afterwards (not timed).
 *
 * Usage: bench_pipeline [-n EVENTS] [-r REPS] [-d DIR] [-m all|memtrack|pin|msgpack]
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <msgpack.h>
#include <zstd.h>
#include "format/artifact.h"
#include "pipeline/batch.h"
#include "pipeline/pipeline.h"

#define PID 4242u
#define NTIDS 4

/* ---- synthetic events -------------------------------------------------- */

static uint64_t rng = 0x2545f4914f6cdd1dull;

static inline uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* 16..4096, heavily skewed small: half below 32, 7/8 below 128. */
static uint32_t rnd_size(void)
{
	unsigned k = 0;
	uint32_t lo;

	while (k < 8 && (rnd() & 1))
		k++;
	lo = 16u << k;
	if (lo >= 4096)
		return 4096;
	return lo + (uint32_t)(rnd() % lo);
}

struct live {
	uint64_t addr;
	uint32_t tid;
};

/*
 * Fills @buf with @n records as the ring buffer would deliver them; returns
 * the bytes used.  A tcache-like allocator model: freed chunks go to a
 * per-size-class LIFO and are handed out again first, new ones come from a
 * bump pointer, so addresses repeat and cluster as in a real heap.
 */
static size_t gen_events(unsigned char *buf, size_t n, uint64_t *mallocs)
{
	enum { CLASSES = 4096 / 16 + 1, LIVE_MAX = 1 << 16, BIN_MAX = 64 };
	static uint64_t bins[CLASSES][BIN_MAX];
	static unsigned nbin[CLASSES];
	static struct live live[LIVE_MAX];
	static const uint32_t tids[NTIDS] = { PID, PID + 1, PID + 2, PID + 7 };
	uint64_t top = 0x55d0c6a3f000ull, ts = 88000000000ull;
	unsigned nlive = 0;
	size_t used = 0;

	*mallocs = 0;
	for (size_t i = 0; i < n; i++) {
		struct mt_rec *r = (struct mt_rec *)(buf + used);
		/* the main thread does most of the work */
		uint32_t tid = tids[rnd() % 10 < 7 ? 0 : 1 + rnd() % (NTIDS - 1)];
		bool do_free = nlive && (nlive >= LIVE_MAX - 1 || rnd() % 100 < 48);

		ts += 100 + rnd() % 1901;
		r->h.pid = PID;
		r->h.ts = ts;
		if (do_free) {
			/* mostly recent allocations die first */
			unsigned j =
				rnd() % 4 ? nlive - 1 - (unsigned)(rnd() % (nlive < 8 ? nlive : 8))
					  : (unsigned)(rnd() % nlive);
			uint64_t a = live[j].addr;
			unsigned c = (unsigned)((a >> 48) & 0xfff);

			a &= 0xffffffffffffull;
			r->h.type = MT_FREE;
			r->h.fn = MT_FN_FREE;
			r->h.tid = live[j].tid;
			r->h.nfields = 1;
			r->f[0] = a;
			if (nbin[c] < BIN_MAX)
				bins[c][nbin[c]++] = a;
			live[j] = live[--nlive];
		} else {
			uint32_t size = rnd_size();
			unsigned c = (size + 15) / 16;
			uint64_t a;

			if (nbin[c]) {
				a = bins[c][--nbin[c]];
			} else {
				a = top + 16; /* past the chunk header */
				top += 16 + (uint64_t)c * 16;
			}
			r->h.type = MT_MALLOC;
			r->h.fn = MT_FN_MALLOC;
			r->h.tid = tid;
			r->h.nfields = 2;
			r->f[0] = a;
			r->f[1] = size;
			live[nlive].addr = a | (uint64_t)c << 48;
			live[nlive].tid = tid;
			nlive++;
			(*mallocs)++;
		}
		used += rec_size(r);
	}
	return used;
}

/* ---- measurement helpers ----------------------------------------------- */

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t proc_cpu_ns(void)
{
	return clock_ns(CLOCK_PROCESS_CPUTIME_ID);
}

static long maxrss_kb(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss;
}

static size_t heap_in_use(void)
{
	struct mallinfo2 mi = mallinfo2();

	return mi.uordblks + mi.hblkhd;
}

struct result {
	const char *name;
	double wall_s;	     /* first event in .. last byte written */
	double cpu_s;	     /* process CPU over the same span, all threads */
	double poller_cpu_s; /* the main thread's share */
	uint64_t file_bytes;
	uint64_t frames;
	long rss_delta_kb;  /* growth of the process's peak RSS during the run */
	size_t heap_bytes;  /* malloc'd bytes the run added, live at its end */
	uint64_t encode_ns; /* writer-reported encode+compress+write time */
	uint64_t raw_bytes; /* encoded bytes before compression */
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* ---- memtrack ---------------------------------------------------------- */


/* -w: encoding threads; 0 (default): what memtrack picks, one per CPU but the poller's */
static unsigned bench_writers;

static int run_memtrack(const unsigned char *buf, size_t len, uint64_t nev, const char *path,
			struct result *res)
{
	struct pipeline_opts o = {
		.batch_bytes = PIPELINE_DEFAULT_BATCH_BYTES,
		.batches = PIPELINE_DEFAULT_BATCHES,
		.flush_ms = PIPELINE_DEFAULT_FLUSH_MS,
		.writers = bench_writers,
	};
	struct mt_trailer t = { .exit_code = 0 };
	struct pipeline_stats st;
	struct mt_header h;
	struct mt_writer *w;
	struct pipeline *p;
	uint64_t t0, c0, tc0, fed = 0;
	int prio0;
	size_t heap0 = heap_in_use();
	long rss0;
	int fd, err = 0;

	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	memset(&h, 0, sizeof(h));
	snprintf(h.memtrack_version, sizeof(h.memtrack_version), "bench");
	h.page_size = 4096;
	h.clock_id = CLOCK_MONOTONIC;
	snprintf(h.command, sizeof(h.command), "bench_pipeline");

	rss0 = maxrss_kb();
	w = mt_writer__new(fd, &h, 0);
	p = w ? pipeline__new(&o, w, NULL) : NULL;
	if (!p) {
		err = -errno;
		goto out;
	}
	/* the poller runs at nice -20 (pipeline.c raise_priority); so does this thread, if allowed */
	prio0 = getpriority(PRIO_PROCESS, 0);
	if (setpriority(PRIO_PROCESS, 0, -20)) {
		/* unprivileged: the default priority */
	}
	t0 = clock_ns(CLOCK_MONOTONIC);
	c0 = proc_cpu_ns();
	tc0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	/* the poller: what ring_buffer__poll's callback does, plus its ticks */
	for (size_t off = 0; off < len && !err;) {
		const void *rec = buf + off;
		size_t sz = rec_size(rec);

		err = pipeline_feed(p, rec, sz);
		off += sz;
		if (!(++fed & 0xffff))
			err = err ?: pipeline_tick(p, mono_ns());
	}
	res->poller_cpu_s = (double)(clock_ns(CLOCK_THREAD_CPUTIME_ID) - tc0) / 1e9;
	if (setpriority(PRIO_PROCESS, 0, prio0)) {
		/* lowering it back needs no privilege; nothing to do if it fails */
	}
	err = pipeline__stop(p, FLUSH_DRAIN) ?: err;
	res->wall_s = (double)(clock_ns(CLOCK_MONOTONIC) - t0) / 1e9;
	res->cpu_s = (double)(proc_cpu_ns() - c0) / 1e9;
	res->heap_bytes = heap_in_use() - heap0;
	err = err ?: mt_writer__finish(w, &t);
	res->rss_delta_kb = maxrss_kb() - rss0;
	pipeline__stats(p, &st);
	res->encode_ns = st.encode_ns;
	res->raw_bytes = st.raw_bytes;
	res->frames = st.frames;
	if (!err && (st.events != nev || fed != nev))
		err = -EIO;
	{
		struct mt_writer_stats ws;

		mt_writer__stats(w, &ws);
		res->file_bytes = ws.file_bytes;
	}
out:
	pipeline__free(p);
	mt_writer__free(w);
	close(fd);
	return err;
}

/* Reads the artifact back; returns the number of records or -1. */
static long long verify_memtrack(const char *path, const unsigned char *buf)
{
	char err[256];
	struct mt_reader *r = mt_reader__open(path, err, sizeof(err));
	const struct mt_rec *first = (const void *)buf;
	struct mt_event ev;
	long long n = 0;
	int rc;

	if (!r) {
		fprintf(stderr, "bench_pipeline: %s: %s\n", path, err);
		return -1;
	}
	while ((rc = mt_reader__next(r, &ev)) == 1) {
		if (!n && (ev.h.ts != first->h.ts || ev.f[0] != first->f[0]))
			rc = -EBADMSG;
		n++;
	}
	if (rc < 0)
		fprintf(stderr, "bench_pipeline: %s: %s\n", path, mt_reader__error(r));
	mt_reader__free(r);
	return rc < 0 ? -1 : n;
}

/* ---- msgpack + zstd ---------------------------------------------------- */

static inline void pack_key(msgpack_packer *pk, const char *k, size_t l)
{
	msgpack_pack_str(pk, l);
	msgpack_pack_str_body(pk, k, l);
}

#define KEY(pk, s) pack_key(pk, s, sizeof(s) - 1)

static int write_all(int fd, const void *p, size_t len)
{
	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		p = (const char *)p + n;
		len -= (size_t)n;
	}
	return 0;
}

/*
 * One frame per batch of the pipeline: a new frame starts where a record no
 * longer fits in PIPELINE_DEFAULT_BATCH_BYTES, exactly as pipeline_feed cuts.
 */
static int run_msgpack(const unsigned char *buf, size_t len, const char *path, struct result *res)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	ZSTD_CCtx *cctx = ZSTD_createCCtx();
	size_t batch = 0, dcap = 0, z;
	uint64_t t0, c0, frames = 0, file_bytes = 0, raw_bytes = 0;
	char *dst = NULL;
	size_t heap0 = heap_in_use();
	long rss0;
	int fd, err = 0;

	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || !cctx) {
		ZSTD_freeCCtx(cctx);
		return fd < 0 ? -errno : -ENOMEM;
	}
	rss0 = maxrss_kb();
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	t0 = clock_ns(CLOCK_MONOTONIC);
	c0 = proc_cpu_ns();
	for (size_t off = 0; off <= len && !err;) {
		const struct mt_rec *r = (const void *)(buf + off);
		size_t sz = off < len ? rec_size(r) : 0;

		if (off == len || batch + sz > PIPELINE_DEFAULT_BATCH_BYTES) {
			if (dcap < ZSTD_compressBound(sb.size)) {
				dcap = ZSTD_compressBound(sb.size) * 2;
				free(dst);
				dst = malloc(dcap);
				if (!dst) {
					err = -ENOMEM;
					break;
				}
			}
			z = ZSTD_compressCCtx(cctx, dst, dcap, sb.data, sb.size, -5);
			if (ZSTD_isError(z)) {
				err = -EIO;
				break;
			}
			err = write_all(fd, dst, z);
			raw_bytes += sb.size;
			file_bytes += z;
			frames++;
			msgpack_sbuffer_clear(&sb);
			batch = 0;
			if (off == len)
				break;
		}
		batch += sz;
		off += sz;

		msgpack_pack_map(&pk, 6);
		KEY(&pk, "pid");
		msgpack_pack_uint32(&pk, r->h.pid);
		KEY(&pk, "tid");
		msgpack_pack_uint32(&pk, r->h.tid);
		KEY(&pk, "timestamp");
		msgpack_pack_uint64(&pk, r->h.ts);
		KEY(&pk, "addr");
		msgpack_pack_uint64(&pk, r->f[0]);
		KEY(&pk, "type");
		if (r->h.type == MT_FREE)
			KEY(&pk, "free");
		else
			KEY(&pk, "malloc");
		KEY(&pk, "size");
		msgpack_pack_uint64(&pk, r->h.type == MT_FREE ? 0 : r->f[1]);
	}
	res->wall_s = (double)(clock_ns(CLOCK_MONOTONIC) - t0) / 1e9;
	res->cpu_s = (double)(proc_cpu_ns() - c0) / 1e9;
	res->poller_cpu_s = res->cpu_s;
	res->heap_bytes = heap_in_use() - heap0;
	res->rss_delta_kb = maxrss_kb() - rss0;
	res->file_bytes = file_bytes;
	res->raw_bytes = raw_bytes;
	res->frames = frames;
	res->encode_ns = 0;
	msgpack_sbuffer_destroy(&sb);
	ZSTD_freeCCtx(cctx);
	free(dst);
	close(fd);
	return err;
}

/* Decompresses the frames and counts the maps; returns that or -1. */
static long long verify_msgpack(const char *path)
{
	ZSTD_DStream *ds = ZSTD_createDStream();
	size_t inlen = ZSTD_DStreamInSize(), outlen = ZSTD_DStreamOutSize();
	char *in = malloc(inlen);
	msgpack_unpacker up;
	msgpack_unpacked obj;
	long long n = -1;
	FILE *f = fopen(path, "rb");
	size_t got;

	if (!ds || !in || !f || !msgpack_unpacker_init(&up, outlen * 2))
		goto out;
	msgpack_unpacked_init(&obj);
	n = 0;
	while ((got = fread(in, 1, inlen, f)) > 0) {
		ZSTD_inBuffer ib = { in, got, 0 };

		while (ib.pos < ib.size) {
			ZSTD_outBuffer ob;
			size_t rc;

			if (msgpack_unpacker_buffer_capacity(&up) < outlen &&
			    !msgpack_unpacker_reserve_buffer(&up, outlen)) {
				n = -1;
				goto done;
			}
			ob.dst = msgpack_unpacker_buffer(&up);
			ob.size = outlen;
			ob.pos = 0;
			rc = ZSTD_decompressStream(ds, &ob, &ib);
			if (ZSTD_isError(rc)) {
				n = -1;
				goto done;
			}
			msgpack_unpacker_buffer_consumed(&up, ob.pos);
			while (msgpack_unpacker_next(&up, &obj) == MSGPACK_UNPACK_SUCCESS) {
				if (obj.data.type != MSGPACK_OBJECT_MAP ||
				    obj.data.via.map.size != 6) {
					n = -1;
					goto done;
				}
				n++;
			}
		}
	}
done:
	msgpack_unpacked_destroy(&obj);
	msgpack_unpacker_destroy(&up);
out:
	if (f)
		fclose(f);
	free(in);
	ZSTD_freeDStream(ds);
	return n;
}

/* ---- main -------------------------------------------------------------- */

static void usage(void)
{
	fprintf(stderr, "usage: bench_pipeline [-n EVENTS] [-r REPS] [-d DIR] "
			"[-m all|memtrack|pin|msgpack] [-w WRITERS] [-k]\n");
	exit(2);
}

static void print_row(const struct result *r, uint64_t nev)
{
	printf("%-26s %12.2f %10.1f %10.1f %10.1f %9.2f %8llu %10ld %10.1f\n", r->name,
	       nev / r->wall_s / 1e6, r->wall_s * 1e9 / nev, r->cpu_s * 1e9 / nev,
	       nev / r->cpu_s / 1e6, (double)r->file_bytes / nev, (unsigned long long)r->frames,
	       r->rss_delta_kb, r->heap_bytes / 1048576.0);
}

int main(int argc, char **argv)
{
	uint64_t nev = 20000000, mallocs;
	const char *dir = "/dev/shm", *mode = "all";
	struct result best[3];
	char path_mt[512], path_mp[512];
	unsigned reps = 3;
	bool keep = false;
	unsigned char *buf;
	size_t len;
	int c;

	while ((c = getopt(argc, argv, "n:r:d:m:w:kh")) != -1) {
		switch (c) {
		case 'n': nev = strtoull(optarg, NULL, 0); break;
		case 'r': reps = (unsigned)atoi(optarg); break;
		case 'd': dir = optarg; break;
		case 'm': mode = optarg; break;
		case 'k': keep = true; break;
		case 'w': bench_writers = (unsigned)atoi(optarg); break;
		default: usage();
		}
	}
	if (!nev || !reps || reps > 99)
		usage();
	buf = malloc(nev * sizeof(struct mt_rec));
	if (!buf) {
		perror("malloc");
		return 1;
	}
	len = gen_events(buf, nev, &mallocs);
	printf("bench_pipeline: %llu events (%llu malloc, %llu free), %.1f raw bytes/event, "
	       "frames of %u raw bytes, %u batches, output in %s, best of %u\n",
	       (unsigned long long)nev, (unsigned long long)mallocs,
	       (unsigned long long)(nev - mallocs), (double)len / nev, PIPELINE_DEFAULT_BATCH_BYTES,
	       PIPELINE_DEFAULT_BATCHES, dir, reps);
	snprintf(path_mt, sizeof(path_mt), "%s/bench_pipeline.mtrk", dir);
	snprintf(path_mp, sizeof(path_mp), "%s/bench_pipeline.msgpack.zst", dir);

	for (int v = 0; v < 3; v++) {
		static const char *const names[] = {
			"memtrack (all cpus)",
			"memtrack (pinned, 1 cpu)",
			"msgpack+zstd-5 (1 thread)",
		};
		static const char *const modes[] = { "memtrack", "pin", "msgpack" };
		double walls[99];
		cpu_set_t one, all;

		memset(&best[v], 0, sizeof(best[v]));
		best[v].name = names[v];
		if (strcmp(mode, "all") && strcmp(mode, modes[v]))
			continue;
		sched_getaffinity(0, sizeof(all), &all);
		if (v == 1) {
			/* the encoding threads inherit the poller's mask */
			CPU_ZERO(&one);
			CPU_SET(sched_getcpu(), &one);
			sched_setaffinity(0, sizeof(one), &one);
		}
		for (unsigned i = 0; i < reps; i++) {
			struct result r = { .name = names[v] };
			int err = v < 2 ? run_memtrack(buf, len, nev, path_mt, &r)
					: run_msgpack(buf, len, path_mp, &r);

			if (err) {
				fprintf(stderr, "bench_pipeline: %s: %s\n", names[v],
					strerror(-err));
				return 1;
			}
			walls[i] = r.wall_s;
			/* peak figures are the process's: keep the first run's */
			if (!i || r.wall_s < best[v].wall_s) {
				long rss = i ? best[v].rss_delta_kb : r.rss_delta_kb;

				best[v] = r;
				best[v].rss_delta_kb = rss;
			}
		}
		if (v == 1)
			sched_setaffinity(0, sizeof(all), &all);
		qsort(walls, reps, sizeof(walls[0]), cmp_double);
		fprintf(stderr, "  %-26s wall s: best %.3f, median %.3f, worst %.3f", names[v],
			walls[0], walls[reps / 2], walls[reps - 1]);
		if (v < 2)
			fprintf(stderr,
				"\n  %-26s poller thread CPU %.1f ns/event, encoding threads CPU %.1f ns/event "
				"(self-timed encode+compress+write %.1f)",
				"", best[v].poller_cpu_s * 1e9 / nev,
				(best[v].cpu_s - best[v].poller_cpu_s) * 1e9 / nev,
				best[v].encode_ns / (double)nev);
		fprintf(stderr, "; %.2f encoded bytes/event before zstd\n",
			(double)best[v].raw_bytes / nev);
	}

	printf("\n%-26s %12s %10s %10s %10s %9s %8s %10s %10s\n", "encoder", "Mevents/s",
	       "wall ns/ev", "cpu ns/ev", "Mev/cpu-s", "bytes/ev", "frames", "+maxrss KB",
	       "heap MiB");
	for (int v = 0; v < 3; v++)
		if (best[v].wall_s > 0)
			print_row(&best[v], nev);

	/* the outputs must hold every event (not timed) */
	if (best[0].wall_s > 0 || best[1].wall_s > 0) {
		long long n = verify_memtrack(path_mt, buf);

		printf("verify %s: %lld events%s\n", path_mt, n,
		       n == (long long)nev ? " (ok)" : " MISMATCH");
		if (n != (long long)nev)
			return 1;
	}
	if (best[2].wall_s > 0) {
		long long n = verify_msgpack(path_mp);

		printf("verify %s: %lld maps%s\n", path_mp, n,
		       n == (long long)nev ? " (ok)" : " MISMATCH");
		if (n != (long long)nev)
			return 1;
	}
	if (!keep) {
		unlink(path_mt);
		unlink(path_mp);
	}
	free(buf);
	return 0;
}
