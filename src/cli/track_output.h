/* SPDX-License-Identifier: MIT */
/*
 * track_output.h - the artifact's name and place for `memtrack track`: a
 * temporary file next to the -o path, created before the command runs,
 * renamed into place once it runs, removed if it never did.  Every step is
 * the invoking user's under sudo (as_user.h).
 *
 * THREAD NOTES: main only.
 */
#ifndef MEMTRACK_TRACK_OUTPUT_H
#define MEMTRACK_TRACK_OUTPUT_H

#include <stdbool.h>
#include <sys/stat.h>

/* The output: a temporary file next to -o until the command runs. */
struct track_out {
	int fd;		     /* the temporary file, -1 once the session owns it */
	int dir;	     /* the directory of the -o path (O_PATH), -1 before */
	const char *base;    /* the -o path's last component */
	char tmp_path[4096]; /* the artifact until it is renamed to the -o path */
	char *tmp_base;	     /* tmp_path's last component (in tmp_path) */
	struct stat tmp_st;  /* the temporary file as created: only that one is removed */
	bool placed;	     /* renamed: the artifact is at the -o path */
};

/* Names the artifact memtrack.<command>.<pid>.mtrk (a static buffer) when there is no -o. */
const char *track_default_output(const char *cmd);

/*
 * Creates the temporary file for the artifact @out into @run (fd and dir,
 * which the caller closes).  Returns 0, 1 (failure) or 2 (usage error),
 * already reported.
 */
int track_open_output(struct track_out *run, const char *out);

/*
 * Moves the artifact to the -o path (as the invoking user).  Returns 0 or
 * -errno; -EBUSY: another live memtrack session writes that path (the
 * artifact's flock, taken by track_open_output), which is left alone.
 */
int track_place_output(struct track_out *run);

/* Removes the artifact of a run that recorded nothing (see track_output.c). */
void track_discard_output(struct track_out *run);

struct kernel_features;
struct mt_trailer;
struct session;
struct session_opts;
struct session_stats;

/*
 * --unwind-cache DIR (@dir) or --no-unwind-cache (@dir NULL) into @so.
 * Returns 0 or 2 (an empty DIR, reported).
 */
int track_unwind_cache_opt(const char *dir, struct session_opts *so);

/*
 * --sample-bytes N (@arg: a byte count, K/M/G suffixes) into @so, for track
 * and attach.  Returns 0 or 2 (reported).
 */
int track_sample_opt(const char *arg, struct session_opts *so);

/*
 * Moves the artifact to the -o path once the session runs; if that fails
 * it stays at the temporary name, said in one line, and *@output names it.
 */
void track_place_or_keep(struct track_out *out, const char **output);

/*
 * The end every recording shares: waits for the session's end and
 * finishes the artifact @output into @trailer and @st.  Returns 0, or 1
 * after one line (the events before the error stay readable).
 */
int track_wait_finish(struct session *s, const char *output, struct mt_trailer *trailer,
		      struct session_stats *st);

/*
 * What `track` and `attach` share from the output on: creates the artifact
 * for @output, starts a session of @so (its output and notice set by the
 * caller, except so->output, set here) and hands both to @record, whose
 * return is the exit status.  A failure before @record: one line, the
 * reason and @fail_suffix ("" or "; nothing is left attached"), the
 * session aborted and no artifact left; exit 1.
 */
int track_run_session(struct session_opts *so, const char *output,
		      int (*record)(struct session *s, void *ctx, struct track_out *out), void *ctx,
		      const char *fail_suffix);

/*
 * cmd_track.c, shared with cmd_attach.c: whether memtrack can record here
 * (capabilities, PID namespace, the kernel's mechanisms, into @kf and
 * s->kf).  Returns 0, or 1 after one line.
 */
int check_recording_host(struct kernel_features *kf, struct session_opts *s);

#endif /* MEMTRACK_TRACK_OUTPUT_H */
