// SPDX-License-Identifier: MIT
/*
 * track_output.c - the artifact's name and place for `memtrack track`; see
 * track_output.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/types.h>
#include "sample.h"
#include "cli/cli.h"
#include "cli/profiler.h"
#include "cli/track_output.h"
#include "inspect/unwind_cache.h"
#include "record/session.h"
#include "util/as_user.h"

/* Names the artifact memtrack.<command>.<pid>.mtrk when there is no -o. */
const char *track_default_output(const char *cmd)
{
	static char def[512];
	const char *base = strrchr(cmd, '/');

	base = base ? base + 1 : cmd;
	snprintf(def, sizeof(def), "memtrack.%.*s.%d.mtrk", (int)strcspn(base, " \t|&;<>"), base,
		 getpid());
	return def;
}

/*
 * Creates the artifact as a temporary file next to the -o path (so it is
 * checked writable before the command runs); place_output() renames it into
 * place once the command runs.  Under sudo every step is the invoking
 * user's own (as_user.h): the directory is opened, the file created and
 * renamed by that user, so memtrack writes nowhere they could not have and
 * the artifact is theirs without a chown.  All steps work under the
 * directory's fd, and memtrack only ever removes or replaces what it
 * created in this run: an existing -o that is not a regular file (a device
 * node, a symbolic link, a FIFO, a directory) is refused.  Returns 0, 1
 * (failure) or 2 (usage error), already reported.
 */
int track_open_output(struct track_out *run, const char *out)
{
	mode_t mask;
	int fd;

	run->dir = as_user_open_dir(out, &run->base);
	if (run->dir == -EINVAL || run->dir == -ENAMETOOLONG) {
		die_msg("invalid output path '%s'; give a file name with -o", out);
		return 2;
	}
	if (run->dir < 0) {
		die_msg("cannot write '%s': %s; choose a writable path with -o", out,
			strerror(-run->dir));
		return 1;
	}
	if (output_refused(run->dir, run->base, out, "-o"))
		return 2;
	if (snprintf(run->tmp_path, sizeof(run->tmp_path), "%.*s.%s.XXXXXX", (int)(run->base - out),
		     out, run->base) >= (int)sizeof(run->tmp_path)) {
		die_msg("invalid output path '%s'; give a file name with -o", out);
		return 2;
	}
	run->tmp_base = run->tmp_path + (run->base - out);
	fd = as_user_mkstempat(run->dir, run->tmp_base, 0);
	if (fd < 0) {
		run->tmp_path[0] = 0;
		die_msg("cannot write '%s': %s; choose a writable path with -o", out,
			strerror(-fd));
		return 1;
	}
	/* held while memtrack writes it: another session with the same -o sees it (place_output) */
	(void)flock(fd, LOCK_EX | LOCK_NB);
	run->fd = fd;
	if (fstat(fd, &run->tmp_st))
		run->tmp_st.st_ino = 0; /* cannot happen on a file just made: then never removed */
	mask = umask(0);		/* no thread exists yet */
	umask(mask);
	if (fchmod(fd, 0666 & ~mask)) {
		/* stays 0600: readable by its owner, which is enough */
	}
	return 0;
}

/* Whether the file @name of @dir is an artifact a live memtrack writes (its lock, track_open_output). */
static bool being_written(int dir, const char *name)
{
	int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	bool busy;

	if (fd < 0)
		return false;
	busy = flock(fd, LOCK_SH | LOCK_NB) && errno == EWOULDBLOCK;
	close(fd);
	return busy;
}

/*
 * Moves the artifact to the -o path (as the invoking user).  Returns 0 or
 * -errno: -EBUSY when another memtrack session is writing that path (a
 * rename would unlink its recording under it).
 */
int track_place_output(struct track_out *run)
{
	int err;

	if (being_written(run->dir, run->base))
		return -EBUSY;
	err = as_user_renameat(run->dir, run->tmp_base, run->base);

	if (err)
		return err;
	run->placed = true;
	return 0;
}

/*
 * Removes the artifact of a run that recorded nothing, if the temporary
 * name still is the file memtrack made (the directory's owner may have
 * replaced it).
 */
void track_discard_output(struct track_out *run)
{
	struct stat st;

	if (!run->placed && run->tmp_path[0] &&
	    !fstatat(run->dir, run->tmp_base, &st, AT_SYMLINK_NOFOLLOW) &&
	    st.st_ino == run->tmp_st.st_ino && st.st_dev == run->tmp_st.st_dev)
		as_user_unlinkat(run->dir, run->tmp_base);
	run->tmp_path[0] = 0;
}

int track_unwind_cache_opt(const char *dir, struct session_opts *so)
{
	if (dir && !*dir) {
		die_msg("empty --unwind-cache directory; give a directory only root can write, e.g. --unwind-cache %s, or --no-unwind-cache",
			UNWIND_CACHE_DEFAULT_DIR);
		return 2;
	}
	so->unwind_cache_dir = dir;
	so->unwind_cache_given = dir != NULL;
	return 0;
}

int track_sample_opt(const char *arg, struct session_opts *so)
{
	uint64_t v;

	if (parse_size(arg, &v) || v < MT_SAMPLE_MIN || v > MT_SAMPLE_MAX) {
		die_msg("invalid --sample-bytes '%s'; give the mean bytes between recorded allocations, 1 to 1024G, e.g. 512K",
			arg);
		return 2;
	}
	so->sample_bytes = v;
	return 0;
}

/*
 * --stacks: the unwind cache, if it can be used.  The default directory
 * that cannot is no error (a read-only /var, say: tables are built as
 * without a cache); one given with --unwind-cache is.  Returns 0 or 2.
 */
static int open_unwind_cache(struct session_opts *so, struct unwind_cache **out)
{
	char why[512];
	int err;

	*out = NULL;
	if (!so->stacks || !so->unwind_cache_dir)
		return 0;
	err = unwind_cache_open(so->unwind_cache_dir, out, why, sizeof(why));
	if (err && so->unwind_cache_given) {
		die_msg("%s", why);
		return 2;
	}
	if (err && so->verbose && so->notice)
		so->notice(so->notice_ctx, why);
	return 0;
}

int track_run_session(struct session_opts *so, const char *output,
		      int (*record)(struct session *s, void *ctx, struct track_out *out), void *ctx,
		      const char *fail_suffix)
{
	struct track_out out = { .fd = -1, .dir = -1 };
	struct profiler pf = { 0 };
	struct unwind_cache *cache;
	struct session *s = NULL;
	char err[512] = "";
	int ret;

	ret = open_unwind_cache(so, &cache);
	if (ret)
		return ret;
	so->unwind_cache = cache;
	ret = track_open_output(&out, output);
	if (!ret && so->profile && profiler_start(&pf, so->profile, out.fd)) {
		/* before the session's threads: it forks */
		track_discard_output(&out);
		ret = 1;
	}
	if (ret)
		goto out;
	so->output = output;
	s = session__new(so);
	if (!s) {
		snprintf(err, sizeof(err), "out of memory");
		goto fail_setup;
	}
	ret = session_start(s, out.fd, err, sizeof(err));
	out.fd = -1; /* the session's */
	if (ret)
		goto fail_setup;
	ret = record(s, ctx, &out);
	goto out;

fail_setup:
	die_msg("%s%s", err, fail_suffix);
	session_abort(s);
	track_discard_output(&out); /* leave nothing half-written */
	ret = 1;
out:
	session__free(s); /* first: the follower waits for the artifact's writer to be gone */
	/* its last profile, unless there is no artifact (the command never ran); a
	 * failed profile says so, and the status stays the command's */
	(void)profiler_finish(&pf, out.placed || out.tmp_path[0]);
	unwind_cache_close(cache);
	so->unwind_cache = NULL;
	if (out.fd >= 0)
		close(out.fd);
	if (out.dir >= 0)
		close(out.dir);
	return ret;
}

void track_place_or_keep(struct track_out *out, const char **output)
{
	int ret = track_place_output(out);

	if (ret == -EBUSY)
		die_msg("'%s' is being written by another memtrack session; this one records into '%s' (give concurrent sessions different -o paths)",
			*output, out->tmp_path);
	else if (ret)
		die_msg("cannot rename '%s' to '%s': %s; the recording goes on in the first",
			out->tmp_path, *output, strerror(-ret));
	if (ret) {
		*output = out->tmp_path;
		out->placed = true;
	}
}

int track_wait_finish(struct session *s, const char *output, struct mt_trailer *trailer,
		      struct session_stats *st)
{
	int ret;

	session_wait(s);
	ret = session_finish(s, trailer);
	session_stats(s, st);
	if (ret) {
		die_msg("cannot finish '%s': %s; the events before the error are readable", output,
			strerror(-ret));
		return 1;
	}
	return 0;
}
