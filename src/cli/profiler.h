/* SPDX-License-Identifier: MIT */
/*
 * profiler.h - `track`/`attach --profile-every DURATION --profile-dir DIR`:
 * periodic pprof heap profiles of a recording while it runs, for the fleet
 * engines that ingest pprof (Pyroscope, Parca).
 *
 * A follower process, forked before the recording starts, reads the
 * artifact as it is written (as `memtrack top` does: mt_reader__follow),
 * folds it into an analysis, and every DURATION writes
 * DIR/profile-NNNNNN.pb.gz (pprof.h's live profile: alloc_objects,
 * alloc_space, inuse_objects, inuse_space, cumulative since the start as
 * Go's heap profiles are), atomically (a dot-file renamed into place), and
 * a last one once the trailer is read (inuse: what was never freed).  It
 * runs as the invoking user under sudo (as_user_become), holds no fd of
 * memtrack's but a read-only one of the artifact, and a crash of it loses
 * profiles only, never a record.
 *
 * THREAD NOTES: main only; profiler_start() forks, so it is called before
 * the session starts any thread.
 */
#ifndef MEMTRACK_PROFILER_H
#define MEMTRACK_PROFILER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* The shortest --profile-every: a profile costs a symbolized pass over the sites. */
#define PROFILE_EVERY_MIN_NS 100000000ull

struct profile_opts {
	uint64_t every_ns; /* --profile-every, 0: no profiles */
	const char *dir;   /* --profile-dir (borrowed) */
};

struct profiler {
	pid_t pid; /* the follower, 0: none */
};

/*
 * --profile-every DURATION: "60s", "500ms", "2m", "1h", or seconds ("30",
 * "0.5").  Returns 0 or 2 (reported).
 */
int profile_every_opt(const char *arg, struct profile_opts *po);

/*
 * After the options: both or neither given, and DIR a directory the user
 * can write.  Returns 0 or 2 (reported: the problem and the fix).
 */
int profile_opts_check(const struct profile_opts *po);

/*
 * Forks the follower of the artifact open for writing at @artifact_fd
 * (nothing with po->every_ns 0).  Returns 0, or 1 (reported).
 */
int profiler_start(struct profiler *p, const struct profile_opts *po, int artifact_fd);

/*
 * Once the artifact is finished (or the recording failed: @finished
 * false, then the follower is stopped): waits for the follower's last
 * profile.  Returns 0, or 1 when it failed (it said why).
 */
int profiler_finish(struct profiler *p, bool finished);

#endif /* MEMTRACK_PROFILER_H */
