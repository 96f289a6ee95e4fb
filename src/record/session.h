/* SPDX-License-Identifier: MIT */
/*
 * session.h - one recording, from start to end: the command spawned
 * parked, the BPF side, the allocator probes, the pipeline to the artifact,
 * the in-process drain (--fast), the control socket, and the end (drain,
 * trailer, teardown).  The CLI (cli/cmd_track.c) keeps the options, the
 * output's name and place, and the exit status.
 *
 * The order: session__new(), session_start() (the reaper forked, the
 * control socket and --fast socket opened, the command forked parked with
 * its environment built explicitly, the root's libc attached during the BPF
 * load, the pipeline started), session_release() (the command execs),
 * session_wait() (signals forwarded), session_finish() (drained, trailer
 * written), session__free().  After a failed session_start(),
 * session_abort() kills the parked command.
 *
 * THREAD NOTES: main calls everything here and handles every signal
 * (session_start() installs the handlers; the mask memtrack started with
 * is the command's).  Threads the session starts: the pipeline's poller
 * (which runs the recorder, recorder.h, the control socket and the --fast
 * drain) and encoding threads, the preattach thread (during the load only),
 * the retire closers (retire.h, on first need); and one process, the
 * reaper.  notice() is called on main, and on the poller for the control
 * socket's notices.
 */
#ifndef MEMTRACK_SESSION_H
#define MEMTRACK_SESSION_H

#include <stdbool.h>
#include <stdint.h>
#include "format/artifact.h"
#include "kernel/kernel_features.h"
#include "pipeline/pipeline.h"
#include "record/fast_drain.h"
#include "record/probes.h"
#include "record/stacks.h"
#include "compiler.h"

struct session;
struct profile_opts;

struct session_opts {
	char **argv;	  /* the command (borrowed); NULL with attach_pid */
	pid_t attach_pid; /* memtrack attach: the running process, else 0 */
	/* attach: whose processes the tree may hold (inspect/authority.h; borrowed, NULL: any) */
	const struct authority *authority;
	uint64_t duration_ns;  /* attach --duration: stop after this long, 0: no limit */
	const char *output;    /* the artifact's name, for messages (borrowed) */
	bool shell;	       /* run argv[0] through /bin/sh -c */
	bool allocators;       /* attach heap probes */
	bool physical;	       /* --physical: count the tree's physical pages */
	bool verbose;	       /* -v: libbpf output, and statistics through notice() */
	bool start_disabled;   /* heap recording off until `enable` (needs control) */
	bool stacks;	       /* a call stack for each allocation and mmap */
	bool fast;	       /* heap calls recorded in-process where possible */
	bool no_python_frames; /* --no-python-frames: CPython's stacks native only */
	const char *control;   /* the control socket's path, or NULL */
	/* --sample-bytes N: one allocation in ~N bytes recorded, 0: all */
	uint64_t sample_bytes;
	/* what the kernel offers and the mechanism per facility (borrowed) */
	const struct kernel_features *kf;
	uint32_t unwind_rows; /* --stacks: rows of the unwind table */
	/* --stacks: tables kept across runs (inspect/unwind_cache.h; borrowed, NULL: none),
	 * opened by track_run_session() from the directory (NULL: --no-unwind-cache);
	 * given (--unwind-cache), a directory it cannot use is an error */
	struct unwind_cache *unwind_cache;
	const char *unwind_cache_dir;
	bool unwind_cache_given;
	uint64_t ring_bytes;
	uint64_t wakeup_bytes;
	struct pipeline_opts pipe;
	/* --profile-every, --profile-dir: the CLI's (cli/profiler.h; borrowed, NULL:
	 * none), run beside the session by track_run_session() and daemon_record();
	 * the session itself never reads it */
	const struct profile_opts *profile;
	/*
	 * The daemon (daemon/serve.c): a BPF side loaded before the session
	 * (borrowed; NULL: session_start() loads one, and forks the reaper),
	 * and the root, forked parked by the client before its exec (0:
	 * session_start() spawns argv).  With a slot, nothing of the process
	 * is the session's: no signal handler, no reaper, no spawn.
	 */
	struct bpf_slot *slot;
	pid_t root_pid;
	/* one line for the user, without "memtrack: " or "\n" (the CLI's words) */
	void (*notice)(void *ctx, const char *msg);
	void *notice_ctx;
};

struct session_stats {
	int status;	    /* the root's wait status */
	bool signalled;	    /* memtrack got SIGINT/SIGTERM/SIGHUP */
	uint64_t events;    /* records that reached the artifact */
	int unprobed_errno; /* why the last process went unprobed, 0 if none did */
	bool fast;	    /* the --fast drain ran: fast is set */
	bool stacks_on;	    /* --stacks: stacks is set */
	struct pipeline_stats pipe;
	struct probes_stats probes;
	struct fast_drain_stats fast_st;
	struct stacks_stats stacks;
	uint64_t t_start, t_loaded, t_exited, t_finished; /* phases (mono_ns) */
	/* attach: when tracking began, the root's probes were in, all were in */
	uint64_t t_attach, t_root_probed, t_all_probed;
	unsigned attached_procs; /* attach: processes of the tree found running */
	unsigned refused_procs;	 /* attach: found in the tree but not the user's to trace */
	unsigned left_procs;	 /* attach: processes that left the recording (same rule) */
	bool tree_exited;	 /* attach: the recording ended because the tree had exited */
};

/* What session_check_host() found wrong, for the CLI to word. */
enum session_host {
	SESSION_HOST_OK,
	SESSION_HOST_NO_CAPS, /* neither root nor CAP_BPF and CAP_PERFMON */
	SESSION_HOST_PID_NS,  /* inside a PID namespace of its own */
};

/* Whether memtrack can record here at all (before anything runs). */
enum session_host session_check_host(void);

/* Whether libmemtrack-fast.so is installed where --fast finds it. */
bool session_fast_available(void);

/* Returns a session of @o (copied; argv and control borrowed), or NULL with errno set. */
struct session *session__new(const struct session_opts *o);

/*
 * The daemon's track session with fast (before session_start()): opens
 * the --fast socket, connectable by the client's @uid (@gid), before the
 * client forks its command, which must then have *@lib first in its
 * LD_PRELOAD and *@sock in MEMTRACK_FAST_SOCKET (both the session's, valid
 * until session__free()).  Returns 0, or -errno with a one-line message
 * in @err (the session then records the heap through the uprobes).
 */
MT_MUST_CHECK int session_open_fast(struct session *s, uid_t uid, gid_t gid, const char **lib,
				    const char **sock, char *err, size_t errlen);

/* The daemon's: the root the client forked, known after the session was made. */
void session_set_root(struct session *s, pid_t root_pid);

/*
 * Starts the recording into @out_fd (the artifact, owned by the session
 * from now on): everything up to the command parked before its exec, with
 * the pipeline running.  Returns 0, or -errno with a one-line message in
 * @err (then call session_abort()).
 */
MT_MUST_CHECK int session_start(struct session *s, int out_fd, char *err, size_t errlen);

/*
 * With attach_pid, session_start() tracks the running tree instead of
 * spawning a command (record/adopt.h): nothing is stopped, and the probes
 * are in when it returns.  session_release() and session_abort() then do
 * nothing; session_wait() returns on a signal (not forwarded), after
 * duration_ns, or when the tree has exited.
 */

/* Kills the command, parked before its exec, after a failed session_start(). */
void session_abort(struct session *s);

/*
 * Lets the command exec.  Returns 0, or the exec's -errno (the child is
 * then reaped: nothing ran).
 */
MT_MUST_CHECK int session_release(struct session *s);

/*
 * Waits for the root to exit, forwarding SIGINT, SIGTERM and SIGHUP to it;
 * then, unless memtrack itself was signalled, for the rest of the tree.
 */
void session_wait(struct session *s);

/*
 * Drains the pipeline and writes the trailer into @t (exit status, drops,
 * unprobed processes ...).  Returns 0 or -errno (the artifact's error).
 */
int session_finish(struct session *s, struct mt_trailer *t);

void session_stats(const struct session *s, struct session_stats *st);

/*
 * With root_pid (the daemon), in place of session_wait(): whether some
 * process of the tree still runs, and the root's wait status as its
 * parent (the client) saw it, @signalled when the recording is stopped
 * early (a signal, the client gone).
 */
bool session_tree_alive(const struct session *s);
void session_root_exited(struct session *s, int status, bool signalled);

/*
 * Ends the session: unloads the BPF side, leaves every fd to the reaper,
 * frees everything (NULL is fine).  Nothing of the tree is parked or
 * probed afterwards.
 */
void session__free(struct session *s);

#endif /* MEMTRACK_SESSION_H */
