// SPDX-License-Identifier: MIT
/*
 * bench_ctl.c - round-trip latency of the control socket: N times enable
 * then disable through libmemtrack-ctl, each command timed from send to
 * answer.  Run it under memtrack (`make bench-ctl` does):
 *   memtrack track -q -o /tmp/ctl.mtrk --control /tmp/ctl.sock -- build/bench/bench_ctl 10000
 * Prints the median, 99th percentile and maximum per command, in µs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "memtrack-ctl.h"

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void print_stats(const char *what, double *v, int n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	printf("%-8s n=%d  median %.1f us  p99 %.1f us  max %.1f us\n", what, n, v[n / 2],
	       v[(int)(n * 0.99)], v[n - 1]);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 10000;
	double *en = calloc(n, sizeof(*en)), *dis = calloc(n, sizeof(*dis));
	struct memtrack_ctl c;

	if (n < 1 || !en || !dis)
		return 2;
	if (memtrack_ctl_open(&c, NULL)) {
		fprintf(stderr, "bench_ctl: %s\n", memtrack_ctl_error(&c));
		return 1;
	}
	for (int i = 0; i < n; i++) {
		double t0 = now_us(), t1, t2;

		if (memtrack_ctl_enable(&c))
			break;
		t1 = now_us();
		if (memtrack_ctl_disable(&c))
			break;
		t2 = now_us();
		en[i] = t1 - t0;
		dis[i] = t2 - t1;
	}
	if (*memtrack_ctl_error(&c)) {
		fprintf(stderr, "bench_ctl: %s\n", memtrack_ctl_error(&c));
		return 1;
	}
	memtrack_ctl_close(&c);
	print_stats("enable", en, n);
	print_stats("disable", dis, n);
	free(en);
	free(dis);
	return 0;
}
