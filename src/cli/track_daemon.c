// SPDX-License-Identifier: MIT
/*
 * track_daemon.c - track and attach through the daemon; see track_daemon.h.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cli/cli.h"
#include "cli/profiler.h"
#include "cli/track_daemon.h"
#include "cli/track_output.h"
#include "daemon/proto.h"

int track_daemon_opt(const char *path, struct daemon_choice *dc)
{
	if (path && !*path) {
		die_msg("empty --daemon path; give the daemon's socket, e.g. --daemon=%s, or --daemon alone",
			MTD_DEFAULT_SOCKET);
		return 2;
	}
	*dc = (struct daemon_choice){ .mode = 1, .path = path };
	return 0;
}

const char *daemon_unsupported(const struct session_opts *so)
{
	if (so->physical)
		return "--physical";
	if (so->control)
		return "--control";
	if (so->unwind_cache_given)
		return "--unwind-cache DIR (the daemon keeps its own)";
	if (so->sample_bytes)
		return "--sample-bytes (the daemon's loaded BPF side records every call)";
	return NULL;
}

int daemon_pick(const struct daemon_choice *dc, const char *unsupported, bool verbose)
{
	const char *path = dc->path ? dc->path : MTD_DEFAULT_SOCKET;
	struct stat st;
	int s;

	if (dc->mode < 0)
		return -1;
	if (dc->mode == 0 && (stat(path, &st) || !S_ISSOCK(st.st_mode)))
		return -1; /* no daemon here: in-process, as before there was one */
	if (unsupported) {
		if (dc->mode == 0)
			return -1;
		die_msg("%s is not available through the memtrack daemon; drop it, or record in-process as root with --no-daemon",
			unsupported);
		return -2;
	}
	s = client_connect(path);
	if (s >= 0) {
		if (verbose)
			fprintf(stderr, "memtrack: recording through the daemon at %s\n", path);
		return s;
	}
	if (dc->mode == 0 && geteuid() == 0) {
		if (verbose)
			fprintf(stderr,
				"memtrack: no daemon answers at %s (%s); recording in-process\n",
				path, strerror(-s));
		return -1;
	}
	die_msg("cannot reach the memtrack daemon at %s: %s; start it (sudo systemctl start memtrack, or sudo memtrack daemon), or run memtrack as root with --no-daemon",
		path, strerror(-s));
	return -2;
}

/* Once the command runs (or the attach): the artifact goes to its -o name. */
struct placing {
	struct track_out *out;
	const char **output;
	void (*started)(void *ctx, unsigned procs); /* attach's, then */
	void *ctx;
};

static void placed(void *ctx)
{
	struct placing *p = ctx;

	track_place_or_keep(p->out, p->output);
}

static void attached(void *ctx, unsigned procs)
{
	struct placing *p = ctx;

	placed(p);
	if (p->started)
		p->started(p->ctx, procs);
}

/* What went wrong at the end, as one line each; returns 0 to report the run, else 1. */
static int check_end(const struct client_result *res, const char *output)
{
	if (res->lost) {
		die_msg("the memtrack daemon went away during the recording; '%s' holds what was recorded until then, without its end (memtrack dump reads it); restart the daemon and record again",
			output);
		return 1;
	}
	if (res->finish_err) {
		die_msg("cannot finish '%s': %s; the events before the error are readable", output,
			strerror(-res->finish_err));
		return 1;
	}
	return 0;
}

int daemon_record(struct session_opts *so, const char **output, int sock,
		  void (*started)(void *ctx, unsigned procs), void *ctx, struct client_result *res)
{
	struct track_out out = { .fd = -1, .dir = -1 };
	struct placing pl = { &out, output, started, ctx };
	struct profiler pf = { 0 };
	int ret;

	ret = track_open_output(&out, *output);
	if (!ret && so->profile)
		ret = profiler_start(&pf, so->profile, out.fd);
	if (ret) {
		if (out.fd >= 0) { /* the profiler's failure: nothing ran */
			track_discard_output(&out);
			close(out.fd);
			close(out.dir);
		}
		close(sock);
		return ret;
	}
	so->output = *output;
	if (so->attach_pid)
		ret = client_attach(sock, so, out.fd, attached, &pl, res);
	else
		ret = client_track(sock, so, out.fd, placed, &pl, res);
	close(out.fd);
	/* DONE came after the trailer (a lost daemon: the follower sees no writer) */
	(void)profiler_finish(&pf, !ret && !res->exec_err);
	if (ret || res->exec_err) {
		if (res->exec_err && !ret) /* like a shell: 127 or 126 */
			die_msg("cannot run %s: %s; check the file and its interpreter (#! line)",
				so->argv[0], strerror(-res->exec_err));
		track_discard_output(&out); /* nothing ran: no artifact */
		close(out.dir);
		if (ret)
			return 1;
		return res->exec_err == -ENOENT ? 127 : 126;
	}
	close(out.dir);
	return check_end(res, *output);
}
