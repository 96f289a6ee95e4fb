// SPDX-License-Identifier: MIT
/*
 * test_timeline.c - the timeline's downsampling keeps every peak: a value
 * held for one event among a million survives bucket merging and pixel
 * columns, in the right column, and reaches the rendered page.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "harness.h"
#include "synth.h"
#include "analyze/timeline.h"

#define SPIKE 10000000ull
#define N 1000000ull
#define STEP_NS 7919ull	     /* 1M events over ~7.9 s */
#define SPIKE_AT (N * 3 / 7) /* event index of the spike: 428571, odd */
/*
 * At the spike the steady block is the one event 428570 malloc'd (its free,
 * the odd event, is replaced by the spike): 100 + 428570 % 64 = 126 bytes.
 */
#define PEAK (SPIKE + 126)

/* A steady heap of 100..164 bytes with one 10 MB block malloc'd and freed at once. */
static void feed(struct analysis *a)
{
	for (uint64_t i = 0; i < N; i++) {
		uint64_t ts = 1000 + i * STEP_NS;

		if (i == SPIKE_AT) {
			S_MALLOC(a, 1, ts, 0x900000, SPIKE);
			S_FREE(a, 1, ts + 1, 0x900000);
		} else if (i % 2) {
			S_FREE(a, 1, ts, 0x1000);
		} else {
			S_MALLOC(a, 1, ts, 0x1000, 100 + i % 64);
		}
	}
}

static void check_columns(const struct timeline *tl, unsigned ncols)
{
	struct tl_column *cols = calloc(ncols, sizeof(*cols));
	uint64_t span = timeline_span_ns(tl), spike_ts = SPIKE_AT * STEP_NS;
	unsigned at = (unsigned)(spike_ts * ncols / span), spikes = 0;

	CHECK_EQ(timeline_columns(tl, -1, TL_HEAP, ncols, cols), 0);
	for (unsigned c = 0; c < ncols; c++) {
		CHECK(cols[c].valid);
		if (cols[c].hi >= SPIKE)
			spikes++;
	}
	/* the column of the spike's time holds it; a bucket straddling two
	 * columns shows in both */
	CHECK_U64(cols[at].hi, PEAK);
	CHECK(spikes == 1 || spikes == 2);
	CHECK(cols[0].lo == 0);
	CHECK(cols[ncols - 1].hi < 200);
	free(cols);
}

static void test_one_event_peak(void)
{
	struct analysis a;
	struct timeline *tl = timeline__new(1000, false);
	struct timeline_meta m = { .command = "synthetic", .a = &a };
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	CHECK(tl != NULL);
	if (!tl)
		return;
	analysis_init(&a);
	timeline_attach(tl, &a);
	feed(&a);
	analysis_finish(&a);
	timeline_finish(tl, 1000 + N * STEP_NS);
	CHECK_U64(a.peak_live_bytes, PEAK);
	CHECK(timeline_span_ns(tl) >= N * STEP_NS);
	check_columns(tl, 1080);
	check_columns(tl, 100);
	check_columns(tl, 7);
	/* the page carries it: hover data and the peak label */
	f = open_memstream(&buf, &len);
	CHECK_EQ(timeline_write_html_section(tl, &m, f), 0);
	fclose(f);
	CHECK(buf && strstr(buf, ",10000126,"));
	CHECK(buf && strstr(buf, "data-series=\"heap\" data-bytes=\"10000126\""));
	CHECK(buf && strstr(buf, "peak heap 9.5 MiB at 3.394 s"));
	free(buf);
	timeline__free(tl);
	analysis_release(&a);
}

/* Per-process series stop at the process's exit; the tree's run to the end. */
static void test_per_process(void)
{
	struct analysis a;
	struct timeline *tl = timeline__new(0, true);
	struct tl_column cols[10];

	analysis_init(&a);
	timeline_attach(tl, &a);
	S_RSS(&a, 1, 10, 4096, 0, 0);
	S_FORK(&a, 1, 20, 2);
	S_RSS(&a, 2, 500000, 8192, 0, 0);
	S_EXIT(&a, 2, 600000, 0);
	S_RSS(&a, 1, 900000, 4096, 4096, 0);
	analysis_finish(&a);
	timeline_finish(tl, 1000000);
	CHECK_EQ(timeline_columns(tl, 1, TL_RSS, 10, cols), 0);
	CHECK(cols[5].valid && cols[5].hi == 8192);
	CHECK(!cols[8].valid); /* after the exit */
	CHECK(!cols[0].valid); /* before its first value */
	CHECK_EQ(timeline_columns(tl, -1, TL_RSS, 10, cols), 0);
	CHECK(cols[5].hi == 12288 && cols[9].last == 8192);
	CHECK_EQ(timeline_columns(tl, 1, TL_ANON, 10, cols), -2);
	timeline__free(tl);
	analysis_release(&a);
}

int main(void)
{
	RUN(test_one_event_peak);
	RUN(test_per_process);
	HARNESS_EXIT();
}
