/* SPDX-License-Identifier: MIT */
/*
 * synth.h - builds synthetic event streams for the analysis unit tests:
 * each helper folds one record into an analysis, as report would after
 * reading it from an artifact.
 */
#ifndef MEMTRACK_TEST_SYNTH_H
#define MEMTRACK_TEST_SYNTH_H

#include <string.h>
#include "analyze/analysis.h"

static inline void synth(struct analysis *a, uint16_t type, uint32_t pid, uint64_t ts, uint64_t f0,
			 uint64_t f1, uint64_t f2, const char *str)
{
	struct mt_event ev;

	memset(&ev.h, 0, sizeof(ev.h));
	ev.h.type = type;
	ev.h.pid = pid;
	ev.h.tid = pid;
	ev.h.ts = ts;
	ev.h.nfields = 3;
	ev.f[0] = f0;
	ev.f[1] = f1;
	ev.f[2] = f2;
	ev.f[3] = 0;
	snprintf(ev.str, sizeof(ev.str), "%s", str ? str : "");
	analysis_add(a, &ev);
}

#define S_MALLOC(a, pid, ts, addr, size) synth(a, MT_MALLOC, pid, ts, addr, size, 0, NULL)
#define S_REALLOC(a, pid, ts, addr, size, old) synth(a, MT_REALLOC, pid, ts, addr, size, old, NULL)
#define S_FREE(a, pid, ts, addr) synth(a, MT_FREE, pid, ts, addr, 0, 0, NULL)
#define S_FORK(a, pid, ts, child) synth(a, MT_FORK, pid, ts, pid, child, 0, NULL)
#define S_EXEC(a, pid, ts, path) synth(a, MT_EXEC, pid, ts, pid, 0, 0, path)
#define S_EXIT(a, pid, ts, code) synth(a, MT_EXIT, pid, ts, code, 0, 0, NULL)
#define S_RSS(a, pid, ts, anon, file, shmem) synth(a, MT_RSS, pid, ts, anon, file, shmem, NULL)
#define S_PHYS(a, pid, ts, bytes) synth(a, MT_PHYSICAL, pid, ts, bytes, 0, 0, NULL)

#endif /* MEMTRACK_TEST_SYNTH_H */
