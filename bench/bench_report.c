// SPDX-License-Identifier: MIT
/*
 * bench_report.c - how fast `memtrack report` reads an artifact, and how its
 * memory grows.
 *
 * Writes a synthetic artifact of N events (default 50 million) with the
 * artifact writer: a tree of processes forked one after another (at most 8
 * alive, taking turns in bursts of 1..256 events), each running a tcache-like allocator model (malloc/free of reused
 * addresses: a freed block is handed out again first, as tcache and fastbins
 * do; at most LIVE_MAX blocks live per process; realloc now and then),
 * an rss record every 64 events, fork, exec and exit records.  Then runs
 * the real `memtrack report FILE --json` on it, pinned to one CPU, and
 * prints events per CPU-second and per wall-second and its peak RSS.
 *
 * Usage: bench_report [-n EVENTS] [-d DIR] [-m MEMTRACK] [-r REPS] [-k]
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "analyze/analysis.h"
#include "format/artifact.h"

#define NPROCS_ALIVE 8
#define LIVE_MAX 4096		/* live blocks per process */
#define EVENTS_PER_PROC 2000000 /* then it exits and a new one is forked */
#define BIN_MAX 256		/* freed blocks an allocator keeps for reuse */

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static inline uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

struct sim_proc {
	uint32_t pid;
	uint64_t events;	 /* recorded so far */
	uint64_t live[LIVE_MAX]; /* addresses */
	unsigned nlive;
	uint64_t bin[BIN_MAX]; /* freed addresses, handed out again first */
	unsigned nbin;
	uint64_t top;  /* bump pointer */
	uint64_t anon; /* rss bytes */
};

static int add(struct mt_writer *w, uint16_t type, uint32_t pid, uint64_t ts, unsigned n,
	       const __u64 *f, const char *str)
{
	struct mt_rec_hdr h = { .type = type, .pid = pid, .tid = pid, .nfields = n, .ts = ts };

	if (type == MT_FREE)
		h.fn = MT_FN_FREE;
	return mt_writer__add(w, &h, f, str);
}

/* One event of process @p. */
static int heap_event(struct mt_writer *w, struct sim_proc *p, uint64_t ts)
{
	__u64 f[3];
	uint64_t r = rnd();

	if (p->nlive && (p->nlive == LIVE_MAX || r % 100 < 48)) {
		unsigned j = p->nlive - 1 - (unsigned)(r >> 8) % (p->nlive < 8 ? p->nlive : 8);

		if (r % 50 == 0) { /* realloc in place or moved */
			f[0] = (r & 64) ? p->live[j] : (p->top += 4096);
			f[1] = 64 + (r >> 20) % 4000;
			f[2] = p->live[j];
			p->live[j] = f[0];
			return add(w, MT_REALLOC, p->pid, ts, 3, f, NULL);
		}
		f[0] = p->live[j];
		p->live[j] = p->live[--p->nlive];
		if (p->nbin < BIN_MAX)
			p->bin[p->nbin++] = f[0];
		return add(w, MT_FREE, p->pid, ts, 1, f, NULL);
	}
	f[0] = p->nbin ? p->bin[--p->nbin] : (p->top += 16 + (r >> 16) % 512);
	f[1] = 16 + (r >> 32) % 1024;
	p->live[p->nlive++] = f[0];
	return add(w, MT_MALLOC, p->pid, ts, 2, f, NULL);
}

static int write_artifact(const char *path, uint64_t n)
{
	struct sim_proc *procs = calloc(NPROCS_ALIVE, sizeof(*procs));
	struct mt_trailer t = { .exit_code = 0 };
	struct mt_header h;
	struct mt_writer *w;
	uint64_t ts = 1000000000ull, written = 0;
	uint32_t next_pid = 1001;
	int fd, err;

	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || !procs)
		return -errno;
	memset(&h, 0, sizeof(h));
	snprintf(h.memtrack_version, sizeof(h.memtrack_version), "bench");
	snprintf(h.command, sizeof(h.command), "bench_report synthetic");
	h.page_size = 4096;
	h.clock_id = CLOCK_MONOTONIC;
	h.start_ns = ts;
	h.flags = MT_HDR_ALLOCATORS;
	w = mt_writer__new(fd, &h, 0);
	if (!w) {
		close(fd);
		return -errno;
	}
	struct sim_proc *p = procs;
	unsigned burst = 0;

	for (err = 0; written < n && !err; written++) {
		__u64 f[4];

		/* a process runs for a burst of 1..256 events, then another one */
		if (!burst--) {
			p = &procs[rnd() % NPROCS_ALIVE];
			burst = rnd() % 256;
		}
		ts += 50 + rnd() % 200;
		if (!p->pid || p->events >= EVENTS_PER_PROC) {
			if (p->pid) { /* it exits: leaks what is live */
				f[0] = 0;
				f[1] = 0;
				err = add(w, MT_EXIT, p->pid, ts, 2, f, NULL);
				written++;
			}
			memset(p, 0, sizeof(*p));
			p->pid = next_pid++;
			p->top = 0x55d0c6a3f000ull;
			f[0] = 1000;
			f[1] = p->pid;
			f[2] = 0;
			err = err ?: add(w, MT_FORK, 1000, ts, 3, f, NULL);
			f[0] = p->pid;
			err = err ?: add(w, MT_EXEC, p->pid, ts, 1, f, "/usr/bin/worker");
			written += 1;
			continue;
		}
		p->events++;
		if (p->events % 64 == 0) {
			p->anon += 4096 * (rnd() % 3);
			f[0] = p->anon;
			f[1] = 1 << 20;
			f[2] = 0;
			f[3] = 0;
			err = add(w, MT_RSS, p->pid, ts, 4, f, NULL);
			continue;
		}
		err = heap_event(w, p, ts);
	}
	t.duration_ns = ts - h.start_ns;
	err = err ?: mt_writer__finish(w, &t);
	mt_writer__free(w);
	free(procs);
	if (close(fd) && !err)
		err = -errno;
	return err;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * Reads the artifact in this process, analysing it when @analyse (what
 * report does) or not (the reader's share); returns thread CPU s or -1.
 */
static double read_in_process(const char *path, uint64_t *n, bool analyse)
{
	struct analysis an;
	struct timespec a, b;
	struct mt_event ev;
	char err[256];
	struct mt_reader *r = mt_reader__open(path, err, sizeof(err));
	int rc;

	if (!r)
		return -1;
	*n = 0;
	analysis_init(&an);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
	while ((rc = mt_reader__next(r, &ev)) == 1) {
		(*n)++;
		if (analyse && analysis_add(&an, &ev))
			rc = -ENOMEM;
	}
	if (analyse)
		analysis_finish(&an);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
	analysis_release(&an);
	mt_reader__free(r);
	return rc ? -1 : (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9;
}

/* Runs `memtrack report FILE --json` on one CPU; fills CPU s, wall s, max RSS KiB. */
static int run_report(const char *memtrack, const char *path, double *cpu, double *wall,
		      long *rss_kb)
{
	struct rusage ru;
	double t0 = now_s();
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		cpu_set_t one;
		int devnull = open("/dev/null", O_WRONLY);

		CPU_ZERO(&one);
		CPU_SET(sched_getcpu(), &one);
		sched_setaffinity(0, sizeof(one), &one);
		dup2(devnull, 1);
		execl(memtrack, memtrack, "report", path, "--json", (char *)NULL);
		_exit(127);
	}
	if (wait4(pid, &status, 0, &ru) < 0)
		return -errno;
	*wall = now_s() - t0;
	*cpu = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
	       ru.ru_stime.tv_usec / 1e6;
	*rss_kb = ru.ru_maxrss;
	return WIFEXITED(status) && !WEXITSTATUS(status) ? 0 : -EIO;
}

int main(int argc, char **argv)
{
	uint64_t n = 50000000;
	const char *dir = "/dev/shm", *memtrack = "build/memtrack";
	char path[512];
	unsigned reps = 3;
	bool keep = false;
	double best_cpu = 0, best_wall = 1, t0, reader_cpu;
	long rss = 0;
	int c, err;

	while ((c = getopt(argc, argv, "n:d:m:r:k")) != -1) {
		switch (c) {
		case 'n': n = strtoull(optarg, NULL, 0); break;
		case 'd': dir = optarg; break;
		case 'm': memtrack = optarg; break;
		case 'r': reps = (unsigned)atoi(optarg); break;
		case 'k': keep = true; break;
		default:
			fprintf(stderr,
				"usage: bench_report [-n EVENTS] [-d DIR] [-m MEMTRACK] [-r REPS] [-k]\n");
			return 2;
		}
	}
	snprintf(path, sizeof(path), "%s/bench_report.mtrk", dir);
	t0 = now_s();
	err = write_artifact(path, n);
	if (err) {
		fprintf(stderr, "bench_report: writing %s: %s\n", path, strerror(-err));
		return 1;
	}
	t0 = now_s() - t0;
	reader_cpu = read_in_process(path, &n, false); /* n: the exact count written */
	if (reader_cpu < 0) {
		fprintf(stderr, "bench_report: cannot read %s back\n", path);
		return 1;
	}
	printf("bench_report: %llu events written to %s in %.1f s\n", (unsigned long long)n, path,
	       t0);
	for (unsigned i = 0; i < reps; i++) {
		double cpu = 0, wall = 0;
		long kb = 0;

		err = run_report(memtrack, path, &cpu, &wall, &kb);
		if (err) {
			fprintf(stderr, "bench_report: %s report %s failed\n", memtrack, path);
			return 1;
		}
		if (!best_cpu || cpu < best_cpu) {
			best_cpu = cpu;
			best_wall = wall;
		}
		rss = kb > rss ? kb : rss;
	}
	printf("memtrack report (1 cpu, best of %u): %.1f M events/CPU-s, %.1f M events/s wall, "
	       "%.2f s CPU, max RSS %ld KiB\n",
	       reps, n / best_cpu / 1e6, n / best_wall / 1e6, best_cpu, rss);
	{
		uint64_t m;
		double both = read_in_process(path, &m, true);

		printf("in-process: reader alone %.1f M events/CPU-s, reader + analysis %.1f M events/CPU-s "
		       "(analysis %.1f ns/event)\n",
		       n / reader_cpu / 1e6, n / both / 1e6, (both - reader_cpu) * 1e9 / n);
	}
	if (!keep)
		unlink(path);
	return 0;
}
