/* SPDX-License-Identifier: MIT */
/*
 * sample_counts.h - --sample-bytes on the uprobe path: the SAMPLING record
 * that opens the recording, and at its end one COUNTS record per process
 * from the BPF side's exact totals (map `heap_counts`, alloc.bpf.c).  The
 * in-process path writes its own processes' COUNTS (fast_drain.c).
 *
 * THREAD NOTES: sample_counts_start() runs on main before the poller
 * starts; the source's feed runs on the poller (pipeline.h).
 */
#ifndef MEMTRACK_SAMPLE_COUNTS_H
#define MEMTRACK_SAMPLE_COUNTS_H

#include <stdint.h>
#include "compiler.h"

struct pipeline;

/*
 * Injects the SAMPLING record of @period into @p (before any heap record)
 * and adds the source that writes the COUNTS records of @counts_fd (the
 * map, borrowed) when the pipeline drains.  Returns 0 or -errno.
 */
MT_MUST_CHECK int sample_counts_start(struct pipeline *p, int counts_fd, uint64_t period);

#endif /* MEMTRACK_SAMPLE_COUNTS_H */
