/* SPDX-License-Identifier: MIT */
/*
 * pprof.h - `export --format=pprof`: the call sites of a run as a gzipped
 * profile.proto (github.com/google/pprof, proto/profile.proto), which pprof
 * and speedscope open.  One sample per call site with six values:
 * alloc_objects (count), alloc_space (bytes), inuse_space (bytes live at
 * the tree's heap peak), leaked (bytes), memory (heap and mapped bytes at
 * the tree's memory peak) and inuse_objects (blocks live at the heap peak);
 * or, for a live profile (track --profile-every), Go's heap profile's four:
 * alloc_objects, alloc_space, inuse_objects, inuse_space, inuse being what
 * is live at the profile's time.  One location per distinct
 * return address with its symbolized lines (inlined frames first), one
 * mapping per object (addresses are ELF virtual addresses, so each mapping
 * starts at 0 with file offset 0), functions and the string table.
 *
 * The protobuf wire format (varints, length-delimited fields) is written by
 * pb.c; zlib gzips it.
 */
#ifndef MEMTRACK_PPROF_H
#define MEMTRACK_PPROF_H

#include "analyze/callsites.h"

struct pprof_run {
	uint64_t start_wall_ns; /* CLOCK_REALTIME of the run's start (or of a live profile) */
	uint64_t duration_ns;
	bool live;  /* Go's four sample types, inuse at the end of what was read */
	bool final; /* live, of a finished recording: inuse is what was never freed */
};

/*
 * Writes the profile of @a's sites to @fd, gzipped; @fd is closed.
 * Returns 0, -ENOMEM, or -EIO (errno-style message via errno) when the
 * file cannot be written.
 */
int pprof_write(const struct analysis *a, const struct stack_table *st, struct symbolizer *sym,
		const struct pprof_run *run, int fd);

#endif /* MEMTRACK_PPROF_H */
