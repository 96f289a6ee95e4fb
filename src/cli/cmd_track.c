// SPDX-License-Identifier: MIT
/*
 * cmd_track.c - `memtrack track`: run a command and record its process
 * tree's memory behaviour into an artifact.
 *
 * The checklist: parse, open the output, load the BPF side, start the
 * pipeline, spawn the parked child, register it, release it, wait for the
 * tree (forwarding signals), drain, finish the artifact.
 *
 * THREAD NOTES: main runs this file and handles every signal; the poller
 * thread runs track_hook() (probes.c is only touched from there once the
 * pipeline runs); the writer thread owns the artifact writer until
 * pipeline__stop() returns.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "format/artifact.h"
#include "record/as_user.h"
#include "record/attach.h"
#include "bpf_abi.h"
#include "cli/cli.h"
#include "record/control.h"
#include "record/fast_drain.h"
#include "fast/fast_ring.h"
#include "record/heap_switch.h"
#include "cli/help.h"
#include "record/kernel_features.h"
#include "record/loader.h"
#include "memtrack.skel.h"
#include "pipeline/pipeline.h"
#include "record/probes.h"
#include "record/heap_stub.h"
#include "record/reaper.h"
#include "record/retire.h"
#include "record/spawn.h"
#include "record/stacks.h"

struct track_opts {
	const char *output;   /* artifact path */
	bool allocators;      /* attach heap probes */
	bool physical;	      /* --physical: count the tree's physical pages */
	bool allow_drops;     /* keep the command's status despite drops */
	bool verbose;	      /* -v: libbpf output and statistics */
	bool quiet;	      /* -q: no summary line */
	bool shell;	      /* run argv[0] through /bin/sh -c */
	const char *control;  /* --control: the control socket's path, or NULL */
	bool start_disabled;  /* --start-disabled: heap recording off until `enable` */
	bool stacks;	      /* --stacks: a call stack for each allocation and mmap */
	uint64_t unwind_rows; /* --unwind-rows: size of the kernel's unwind table */
	int fast_choice;      /* --fast 1, --no-fast -1, neither 0 */
	bool fast;	      /* heap calls recorded in-process where possible */
	uint64_t ring_bytes;
	uint64_t wakeup_bytes;
	struct pipeline_opts pipe;
	char **argv; /* the command */
};

struct track_run {
	struct track_opts *o;
	struct memtrack_bpf *skel;
	struct reaper *reaper;		 /* NULL: memtrack makes its slow closes itself */
	struct retire *retire;		 /* every slow close goes through it (retire.h) */
	const struct attach_ops *attach; /* how uprobes are attached (attach.h) */
	struct probes *probes;
	struct heap_stub stub;	    /* stand-ins for the heap programs until loaded */
	pthread_t preattach_thread; /* attaches the root's libc during the load */
	bool preattaching;	    /* preattach_thread runs (joined by finish_early) */
	int preattach_err;	    /* its probes_preattach() result, if < 0 */
	struct stacks *stacks;	    /* NULL without --stacks */
	struct kernel_features kf;  /* what the kernel offers, the mechanisms chosen */
	struct pipeline *pipe;
	struct control *ctl;		 /* NULL without --control (or when it failed) */
	struct fast_drain *fast;	 /* --fast: the in-process rings, else NULL */
	struct heap_switch *heap_switch; /* with --control or --fast, once loaded */
	struct mt_writer *writer;
	struct mt_header hdr;
	struct spawn child;
	int out_fd;
	int out_dir;	      /* the directory of o->output (O_PATH), -1 before */
	const char *out_base; /* o->output's last component */
	char tmp_path[4096];  /* the artifact until it is renamed to o->output */
	char *tmp_base;	      /* tmp_path's last component (in tmp_path) */
	struct stat tmp_st;   /* the temporary file as created: only that one is removed */
	bool placed;	      /* renamed: the artifact is at o->output */
	int status;	      /* the root's wait status */
	/* the poller's hook cannot print (STYLE §5): it keeps its first failure */
	unsigned hook_failures; /* processes it could not attach or untrack */
	int hook_err;		/* the first failure, -errno */
	pid_t hook_err_pid;	/* the process it concerned */
	uint64_t events;	/* records that reached the artifact */
	uint64_t t_start, t_loaded, t_exited, t_finished; /* phases, for -v */
	bool signalled;					  /* memtrack got SIGINT/SIGTERM/SIGHUP */
	int unprobed_errno; /* why the last process went unprobed, 0 if none did */
};

enum {
	OPT_PHYSICAL = 255,
	OPT_NO_ALLOC = 256,
	OPT_ALLOW_DROPS,
	OPT_RING,
	OPT_BATCH,
	OPT_FLUSH,
	OPT_WAKEUP,
	OPT_CONTROL,
	OPT_START_DISABLED,
	OPT_STACKS,
	OPT_UNWIND_ROWS,
	OPT_FAST,
	OPT_NO_FAST,
};

static const struct option track_options[] = {
	{ "output", required_argument, NULL, 'o' },
	{ "no-allocators", no_argument, NULL, OPT_NO_ALLOC },
	{ "physical", no_argument, NULL, OPT_PHYSICAL },
	{ "allow-drops", no_argument, NULL, OPT_ALLOW_DROPS },
	{ "ring-size", required_argument, NULL, OPT_RING },
	{ "batch-size", required_argument, NULL, OPT_BATCH },
	{ "flush-ms", required_argument, NULL, OPT_FLUSH },
	{ "wakeup-bytes", required_argument, NULL, OPT_WAKEUP },
	{ "control", required_argument, NULL, OPT_CONTROL },
	{ "start-disabled", no_argument, NULL, OPT_START_DISABLED },
	{ "stacks", no_argument, NULL, OPT_STACKS },
	{ "unwind-rows", required_argument, NULL, OPT_UNWIND_ROWS },
	{ "fast", no_argument, NULL, OPT_FAST },
	{ "no-fast", no_argument, NULL, OPT_NO_FAST },
	{ "verbose", no_argument, NULL, 'v' },
	{ "quiet", no_argument, NULL, 'q' },
	{ "help", no_argument, NULL, 'h' },
	{ 0 },
};

static bool is_pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

static bool fast_lib_found(void);

/* Returns 0, or the exit status for a usage error (already reported). */
static int parse_track_opts(int argc, char **argv, struct track_opts *o)
{
	uint64_t v;
	int c;

	*o = (struct track_opts){
		.allocators = true,
		.ring_bytes = MT_RING_DEFAULT,
		.pipe = { PIPELINE_DEFAULT_BATCH_BYTES, PIPELINE_DEFAULT_BATCHES,
			  PIPELINE_DEFAULT_FLUSH_MS },
	};
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+o:vqh", track_options, NULL)) != -1) {
		switch (c) {
		case 'o': o->output = optarg; break;
		case 'v': o->verbose = true; break;
		case 'q': o->quiet = true; break;
		case 'h': exit(help_show("track"));
		case OPT_NO_ALLOC: o->allocators = false; break;
		case OPT_PHYSICAL: o->physical = true; break;
		case OPT_ALLOW_DROPS: o->allow_drops = true; break;
		case OPT_CONTROL:
			if (!*optarg) {
				die_msg("empty --control path; give the path of a socket to create, e.g. --control /tmp/memtrack.sock");
				return 2;
			}
			o->control = optarg;
			break;
		case OPT_START_DISABLED: o->start_disabled = true; break;
		case OPT_STACKS: o->stacks = true; break;
		case OPT_UNWIND_ROWS:
			if (parse_size(optarg, &v) || v < 1024 || v > (64u << 20)) {
				die_msg("invalid --unwind-rows '%s'; give a row count from 1K to 64M, e.g. 4M",
					optarg);
				return 2;
			}
			o->unwind_rows = v;
			break;
		case OPT_FAST: o->fast_choice = 1; break;
		case OPT_NO_FAST: o->fast_choice = -1; break;
		case OPT_RING:
			/* the kernel takes a map size in 32 bits: 2G at most */
			if (parse_size(optarg, &v) || !is_pow2(v) || v < 4096 || v > (1ull << 31)) {
				die_msg("invalid --ring-size '%s'; give a power of two from 4K to 2G, e.g. 16M",
					optarg);
				return 2;
			}
			o->ring_bytes = v;
			break;
		case OPT_BATCH:
			if (parse_size(optarg, &v) || v < 4096 || v > (64u << 20)) {
				die_msg("invalid --batch-size '%s'; give 4K to 64M, e.g. 256K",
					optarg);
				return 2;
			}
			o->pipe.batch_bytes = v;
			break;
		case OPT_FLUSH:
			if (parse_size(optarg, &v) || !v || v > 3600000) {
				die_msg("invalid --flush-ms '%s'; give milliseconds between 1 and 3600000",
					optarg);
				return 2;
			}
			o->pipe.flush_ms = v;
			break;
		case OPT_WAKEUP:
			if (parse_size(optarg, &v)) {
				die_msg("invalid --wakeup-bytes '%s'; give a byte count, e.g. 1M",
					optarg);
				return 2;
			}
			o->wakeup_bytes = v;
			break;
		default:
			if (optopt)
				die_msg("unknown or incomplete option '-%c'; see memtrack help track",
					optopt);
			else
				die_msg("unknown option '%s'; see memtrack help track",
					argv[optind - 1]);
			return 2;
		}
	}
	if (optind >= argc) {
		die_msg("no command given; usage: memtrack track [-o FILE] -- CMD [ARGS...]; see memtrack help track");
		return 2;
	}
	if (o->stacks && !o->allocators) {
		die_msg("--stacks needs the allocator probes (it learns each process's code while they are attached); drop --no-allocators");
		return 2;
	}
	if (o->start_disabled && !o->control) {
		die_msg("--start-disabled needs --control PATH, or nothing could ever enable recording; add --control PATH");
		return 2;
	}
	if (o->fast_choice > 0 && !o->allocators) {
		die_msg("--fast records heap calls and --no-allocators records none; drop one of them");
		return 2;
	}
	if (o->fast_choice > 0 && o->stacks) {
		/* the in-process path does not unwind yet: its heap records would have no stack */
		die_msg("--fast records heap calls without call stacks; drop --fast to use --stacks");
		return 2;
	}
	/* the in-process path by default, where it can serve: heap calls, no stacks */
	o->fast = o->fast_choice > 0 ||
		  (!o->fast_choice && o->allocators && !o->stacks && fast_lib_found());
	o->argv = argv + optind;
	/* after `--` the command is argv as given; a lone quoted string is shell */
	o->shell = strcmp(argv[optind - 1], "--") != 0 && argc - optind == 1 &&
		   strpbrk(argv[optind], " \t\n|&;<>()$`\\\"'*?[]#~=%");
	if (!o->wakeup_bytes)
		o->wakeup_bytes = o->ring_bytes / 16;
	return 0;
}

/*
 * CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN) are needed; say so before
 * anything runs.  Reads the effective set from /proc/self/status.
 */
static bool has_bpf_caps(void)
{
	const unsigned long long sys_admin = 1ull << 21, perfmon = 1ull << 38, bpf = 1ull << 39;
	unsigned long long eff = 0;
	char line[256];
	FILE *f;

	if (geteuid() == 0)
		return true;
	f = fopen("/proc/self/status", "re");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &eff) == 1)
			break;
	fclose(f);
	return (eff & sys_admin) || ((eff & perfmon) && (eff & bpf));
}

/*
 * The BPF side sees global pids, and memtrack resumes, reads /proc of and
 * waits for the tree's processes by pid: inside a PID namespace of its own
 * those are other numbers.  PROC_PID_INIT_INO (include/linux/proc_ns.h) is
 * the initial namespace's inode number.
 */
static bool in_initial_pid_ns(void)
{
	struct stat st;

	return stat("/proc/self/ns/pid", &st) || st.st_ino == 0xEFFFFFFCu;
}

/* The fd limit memtrack raises its own to, as root, when its hard one is lower. */
#define FD_LIMIT_WANT 65536

/*
 * Every probed process holds a few link fds while it lives, every
 * in-process one a connection: raise the fd limit.  Root raises the hard
 * one too (CAP_SYS_RESOURCE): under `ulimit -n 64` (soft and hard) a tree
 * of 22 processes needs more than 64; without the capability, the soft
 * limit goes up to the hard one.  The command gets its own limits back
 * (spawn.c).  Sets *@old (soft, hard) to the limits memtrack started with;
 * returns false if unknown.
 */
static bool raise_fd_limit(struct rlimit *old)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, old))
		return false;
	rl.rlim_cur = rl.rlim_max = old->rlim_max < FD_LIMIT_WANT ? FD_LIMIT_WANT : old->rlim_max;
	if (rl.rlim_max == old->rlim_max || setrlimit(RLIMIT_NOFILE, &rl)) {
		rl.rlim_cur = rl.rlim_max = old->rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	return true;
}

static void join_argv(char *dst, size_t len, char **argv)
{
	size_t used = 0;

	dst[0] = 0;
	for (int i = 0; argv[i] && used + 1 < len; i++)
		used += snprintf(dst + used, len - used, "%s%s", i ? " " : "", argv[i]);
}

static void fill_header(struct mt_header *h, const struct track_opts *o)
{
	struct timespec mono, real;
	struct utsname u;

	memset(h, 0, sizeof(*h));
	h->format_version = MT_FORMAT_VERSION;
	snprintf(h->memtrack_version, sizeof(h->memtrack_version), "%s", MT_VERSION);
	h->page_size = sysconf(_SC_PAGESIZE);
	h->clock_id = CLOCK_MONOTONIC;
	clock_gettime(CLOCK_REALTIME, &real);
	clock_gettime(CLOCK_MONOTONIC, &mono);
	h->start_ns = mono.tv_sec * 1000000000ull + mono.tv_nsec;
	h->wall_offset_ns = (real.tv_sec * 1000000000ll + real.tv_nsec) - (int64_t)h->start_ns;
	if (!uname(&u))
		snprintf(h->kernel_release, sizeof(h->kernel_release), "%s", u.release);
	join_argv(h->command, sizeof(h->command), o->argv);
	h->flags = (o->allocators ? MT_HDR_ALLOCATORS : 0) | (o->physical ? MT_HDR_PHYSICAL : 0) |
		   (o->start_disabled ? MT_HDR_START_DISABLED : 0) |
		   (o->stacks ? MT_HDR_STACKS : 0);
}

/* Whether an exec'd path is a memtrack (see MT_PROC_NO_CHILDREN). */
static bool is_memtrack(const char *path)
{
	const char *base = strrchr(path, '/');

	return !strcmp(base ? base + 1 : path, "memtrack");
}

/*
 * Poller thread: remembers a failure of the hook for main to report once the
 * pipeline is stopped.  A process that is already gone (-ESRCH, -ENOENT)
 * needs nothing and is not a failure.
 */
static void hook_result(struct track_run *run, pid_t pid, int err)
{
	if (err >= 0 || err == -ESRCH || err == -ENOENT)
		return;
	if (!run->hook_failures++) {
		run->hook_err = err;
		run->hook_err_pid = pid;
	}
}

/*
 * Poller thread: a parked task gets its allocator probes, then SIGCONT; an
 * exited process's probes are detached.
 */
static void track_hook(void *ctx, const struct mt_rec_hdr *h, const __u64 *f)
{
	struct track_run *run = ctx;
	pid_t pid = h->pid;

	if (!run->probes) /* --no-allocators: nothing is ever parked */
		return;
	/*
	 * Links are bound to the leader task.  An exec by the leader keeps it
	 * (its links re-apply to the same files in the new image, so they
	 * stay); an exec by another thread makes that thread the leader: the
	 * old links must go before the new set is attached, or both fire.
	 */
	if (h->type == MT_EXIT) {
		probes_forget(run->probes, pid, false);
		if (run->stacks)
			stacks_forget(run->stacks, pid);
		return;
	}
	if (h->type == MT_FAST) { /* its library records its heap calls from now on */
		probes_fast(run->probes, pid);
		return;
	}
	if (h->type == MT_EXEC && f[EXEC_OLD_PID] != h->pid)
		probes_forget(run->probes, pid, true);
	else if (h->type == MT_EXEC && probes_is_fast(run->probes, pid))
		probes_forget(run->probes, pid, false); /* the new image starts on uprobes */
	if (h->type == MT_EXEC && run->stacks)
		stacks_forget(run->stacks, pid);
	if (h->type == MT_EXEC && is_memtrack((const char *)(f + EXEC_NFIELDS)))
		hook_result(run, pid, loader_untrack_children(run->skel, pid));
	if (h->type == MT_FORK)
		pid = f[FORK_CHILD];
	hook_result(run, pid, probes_sync(run->probes, pid));
	/* right after the record that parked it: before any stack through it */
	if (run->stacks)
		hook_result(run, pid, stacks_sync(run->stacks, pid, h->ts + 1));
	loader_resume(run->skel, pid);
}

/* Names the artifact memtrack.<command>.<pid>.mtrk when there is no -o. */
static void default_output(struct track_opts *o)
{
	static char def[512];
	const char *base = strrchr(o->argv[0], '/');

	base = base ? base + 1 : o->argv[0];
	snprintf(def, sizeof(def), "memtrack.%.*s.%d.mtrk", (int)strcspn(base, " \t|&;<>"), base,
		 getpid());
	o->output = def;
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
static int open_output(struct track_run *run)
{
	const char *out;
	mode_t mask;
	int fd;

	if (!run->o->output)
		default_output(run->o);
	out = run->o->output;
	run->out_dir = as_user_open_dir(out, &run->out_base);
	if (run->out_dir == -EINVAL || run->out_dir == -ENAMETOOLONG) {
		die_msg("invalid output path '%s'; give a file name with -o", out);
		return 2;
	}
	if (run->out_dir < 0) {
		die_msg("cannot write '%s': %s; choose a writable path with -o", out,
			strerror(-run->out_dir));
		return 1;
	}
	if (output_refused(run->out_dir, run->out_base, out, "-o"))
		return 2;
	if (snprintf(run->tmp_path, sizeof(run->tmp_path), "%.*s.%s.XXXXXX",
		     (int)(run->out_base - out), out,
		     run->out_base) >= (int)sizeof(run->tmp_path)) {
		die_msg("invalid output path '%s'; give a file name with -o", out);
		return 2;
	}
	run->tmp_base = run->tmp_path + (run->out_base - out);
	fd = as_user_mkstempat(run->out_dir, run->tmp_base, 0);
	if (fd < 0) {
		run->tmp_path[0] = 0;
		die_msg("cannot write '%s': %s; choose a writable path with -o", out,
			strerror(-fd));
		return 1;
	}
	run->out_fd = fd;
	if (fstat(fd, &run->tmp_st))
		run->tmp_st.st_ino = 0; /* cannot happen on a file just made: then never removed */
	mask = umask(0);		/* no thread exists yet */
	umask(mask);
	if (fchmod(fd, 0666 & ~mask)) {
		/* stays 0600: readable by its owner, which is enough */
	}
	return 0;
}

/* Moves the artifact to the -o path (as the invoking user).  Returns 0 or -errno. */
static int place_output(struct track_run *run)
{
	int err = as_user_renameat(run->out_dir, run->tmp_base, run->out_base);

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
static void discard_output(struct track_run *run)
{
	struct stat st;

	if (!run->placed && run->tmp_path[0] &&
	    !fstatat(run->out_dir, run->tmp_base, &st, AT_SYMLINK_NOFOLLOW) &&
	    st.st_ino == run->tmp_st.st_ino && st.st_dev == run->tmp_st.st_dev)
		as_user_unlinkat(run->out_dir, run->tmp_base);
	run->tmp_path[0] = 0;
}

/* A signal to forward (SIGINT, SIGTERM, SIGHUP); SIGCHLD only wakes pselect. */
static volatile sig_atomic_t pending_signal;

static void on_signal(int sig)
{
	if (sig != SIGCHLD)
		pending_signal = sig;
}

static void install_signals(sigset_t *old)
{
	struct sigaction sa = { .sa_handler = on_signal };
	sigset_t block;

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGCHLD, &sa, NULL);
	/* blocked except inside sigsuspend-like waits, so none is lost */
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGHUP);
	sigaddset(&block, SIGCHLD);
	sigprocmask(SIG_BLOCK, &block, old);
}

/*
 * Waits for the root to exit, forwarding signals to it; then, unless memtrack
 * itself was signalled, for the rest of the tree (daemons it left behind).
 */
static void wait_tree(struct track_run *run, const sigset_t *unblocked)
{
	struct timespec tick = { 0, 20 * 1000000L };
	bool root_done = false;

	for (;;) {
		int sig = pending_signal;

		pending_signal = 0;
		if (sig) {
			run->signalled = true;
			if (!root_done)
				kill(run->child.pid, sig);
		}
		if (!root_done && waitpid(run->child.pid, &run->status, WNOHANG) == run->child.pid)
			root_done = true;
		if (root_done && (run->signalled || !loader_tree_alive(run->skel)))
			return;
		sigset_t wait_set = *unblocked;
		pselect(0, NULL, NULL, NULL, &tick, &wait_set);
	}
}

static int exit_status_of(int status)
{
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

static uint64_t total_drops(const struct mt_trailer *t);

static void print_stats(const struct track_run *run, const struct pipeline_stats *ps,
			const struct mt_trailer *t)
{
	struct probes_stats pr = { 0 };

	if (run->probes)
		probes__stats(run->probes, &pr);
	fprintf(stderr,
		"memtrack: pipeline: %llu events, %llu batches (full %llu, timeout %llu, drain %llu, shutdown %llu), "
		"max queue %llu, poller waits %llu, dropped %llu, encode %.1f ms, %llu frames, %llu raw bytes, %llu file bytes\n",
		(unsigned long long)ps->events, (unsigned long long)ps->batches,
		(unsigned long long)ps->flushes[FLUSH_FULL],
		(unsigned long long)ps->flushes[FLUSH_TIMEOUT],
		(unsigned long long)ps->flushes[FLUSH_DRAIN],
		(unsigned long long)ps->flushes[FLUSH_SHUTDOWN], (unsigned long long)ps->max_queue,
		(unsigned long long)ps->poller_waits, (unsigned long long)total_drops(t),
		ps->encode_ns / 1e6, (unsigned long long)ps->frames,
		(unsigned long long)ps->raw_bytes, (unsigned long long)ps->file_bytes);
	if (run->fast) {
		struct fast_drain_stats fs;

		fast_drain__stats(run->fast, &fs);
		fprintf(stderr,
			"memtrack: fast: %llu processes recorded in-process (%llu refused), %llu records, %llu cut short by a kill, %llu rings open at most, %llu forged records refused (%llu rings cut off)\n",
			(unsigned long long)fs.rings, (unsigned long long)fs.refused,
			(unsigned long long)fs.records, (unsigned long long)fs.lost,
			(unsigned long long)fs.max_open, (unsigned long long)fs.bad_records,
			(unsigned long long)fs.cut);
	}
	fprintf(stderr, "memtrack: time: load+attach %.1f ms, run %.1f ms, drain+finish %.1f ms\n",
		(run->t_loaded - run->t_start) / 1e6, (run->t_exited - run->t_loaded) / 1e6,
		(run->t_finished - run->t_exited) / 1e6);
	fprintf(stderr,
		"memtrack: probes: %llu syncs, %llu uprobes attached, %llu failures, %llu processes unprobed, %.1f ms attaching\n",
		(unsigned long long)pr.syncs, (unsigned long long)pr.links,
		(unsigned long long)pr.failures, (unsigned long long)pr.lost, pr.sync_ns / 1e6);
	if (run->stacks) {
		struct stacks_stats ss;

		stacks__stats(run->stacks, &ss);
		fprintf(stderr,
			"memtrack: stacks: %llu objects, %llu unwind rows of %llu (%llu KiB table), %llu without CFI, %llu without room, %.1f ms building tables, %llu syncs %.1f ms\n",
			(unsigned long long)ss.objects, (unsigned long long)ss.rows,
			(unsigned long long)ss.rows_cap, (unsigned long long)ss.table_bytes >> 10,
			(unsigned long long)ss.no_cfi, (unsigned long long)ss.no_room,
			ss.build_ns / 1e6, (unsigned long long)ss.syncs, ss.sync_ns / 1e6);
	}
}

/* Drains the pipeline and writes the trailer; returns 0 or -errno. */
static int finish(struct track_run *run, struct mt_trailer *t)
{
	struct pipeline_stats ps;
	int err, drops_err;

	run->t_exited = mono_ns();
	/* what the poller has not resumed by now runs on untracked */
	loader_stop_parking(run->skel);
	err = pipeline__stop(run->pipe, run->signalled ? FLUSH_SHUTDOWN : FLUSH_DRAIN);
	pipeline__stats(run->pipe, &ps);
	run->events = ps.events;
	drops_err = loader_read_drops(run->skel, t->dropped);
	if (drops_err)
		die_msg("cannot read the kernel's drop counters: %s; the artifact may undercount lost events",
			strerror(-drops_err));
	if (run->hook_failures)
		die_msg("could not attach the allocator probes of %u process(es) (pid %d: %s); their heap events are missing",
			run->hook_failures, run->hook_err_pid, strerror(-run->hook_err));
	if (run->fast) {
		struct fast_drain_stats fs;

		/*
		 * Slots a killed thread reserved and never wrote: calls it was
		 * inside, that never returned to the program (a block it never
		 * got, a free not yet done), so no loss of the recording: named,
		 * not dropped, and the exit status stays the command's.
		 */
		fast_drain__stats(run->fast, &fs);
		t->killed_in_call = fs.lost;
	}
	if (run->probes) {
		struct probes_stats pr;

		probes__stats(run->probes, &pr);
		t->unprobed = pr.lost;
		run->unprobed_errno = pr.last_error;
	}
	t->exit_code = WIFEXITED(run->status) ? WEXITSTATUS(run->status) : -1;
	t->exit_signal = WIFSIGNALED(run->status) ? WTERMSIG(run->status) : 0;
	t->duration_ns = mono_ns() - run->hdr.start_ns;
	if (!err)
		err = mt_writer__finish(run->writer, t);
	run->t_finished = mono_ns();
	if (run->o->verbose)
		print_stats(run, &ps, t);
	return err;
}

static uint64_t total_drops(const struct mt_trailer *t)
{
	uint64_t n = 0;

	for (int i = 0; i < MT_DROP_SLOTS; i++)
		n += t->dropped[i];
	return n;
}

static int report_end(const struct track_run *run, const struct mt_trailer *t)
{
	uint64_t drops = total_drops(t), events = run->events;
	int status = exit_status_of(run->status);
	char unprobed[64] = "", refused[96] = "", killed[96] = "";

	if (t->unprobed)
		snprintf(unprobed, sizeof(unprobed), ", %llu processes unprobed",
			 (unsigned long long)t->unprobed);
	if (t->killed_in_call)
		snprintf(killed, sizeof(killed),
			 ", %llu heap calls cut short by a kill (never returned, not recorded)",
			 (unsigned long long)t->killed_in_call);
	if (run->fast) {
		struct fast_drain_stats fs;

		fast_drain__stats(run->fast, &fs);
		if (fs.bad_records)
			snprintf(refused, sizeof(refused),
				 ", %llu forged records refused from %llu processes",
				 (unsigned long long)fs.bad_records,
				 (unsigned long long)fs.bad_procs);
	}
	if (!run->o->quiet)
		fprintf(stderr,
			"memtrack: wrote %s: %llu events, %llu lost%s%s%s, command exited with %d\n",
			run->o->output, (unsigned long long)events, (unsigned long long)drops,
			unprobed, killed, refused, status);
	if (run->o->allow_drops)
		return status;
	if (t->unprobed)
		die_msg("%llu processes ran without allocator probes (attaching failed: %s), their heap calls are missing; raise the fd limit (ulimit -Hn) or pass --allow-drops to keep the command's exit status",
			(unsigned long long)t->unprobed, strerror(run->unprobed_errno));
	if (drops)
		die_msg("%llu events were lost (ring buffer full); rerun with a larger --ring-size, or pass --allow-drops to keep the command's exit status",
			(unsigned long long)drops);
	return drops || t->unprobed ? 1 : status;
}

/* Poller thread: a control socket problem that does not stop the session. */
static void control_notice(void *ctx, const char *msg)
{
	die_msg("%s", msg);
}

/*
 * Sets MEMTRACK_CONTROL for the command: the path made absolute when it fits
 * a socket address, so a command that changes directory still finds it.
 */
static void export_control_path(const char *path)
{
	char abs[108], cwd[4096];

	if (path[0] != '/' && getcwd(cwd, sizeof(cwd)) &&
	    (size_t)snprintf(abs, sizeof(abs), "%s/%s", cwd, path) < sizeof(abs))
		path = abs;
	setenv("MEMTRACK_CONTROL", path, 1);
}

/*
 * Creates the control socket.  A socket that cannot be made is reported and
 * the session goes on without one, heap recording on (even under
 * --start-disabled: nothing could enable it).
 */
static void open_control(struct track_run *run)
{
	struct control_opts co = {
		.path = run->o->control,
		.notice = control_notice, /* the switch comes once loaded: control__set_switch */
	};
	char err[512];

	run->ctl = control__new(&co, err, sizeof(err));
	if (!run->ctl) {
		die_msg("%s (the command runs without control, heap recording on)", err);
		run->o->start_disabled = false; /* read when the BPF side is configured */
		unsetenv("MEMTRACK_CONTROL");	/* no other session's socket either */
		return;
	}
	export_control_path(run->o->control);
}

/* Hooks the control socket to the poller and tells the command where it is. */
static void start_control(struct track_run *run)
{
	control__set_pipeline(run->ctl, run->pipe);
	pipeline__watch_fd(run->pipe, control__fd(run->ctl), control_handle, run->ctl);
	if (run->o->start_disabled)
		control_record(run->ctl, MT_DISABLE, getpid());
}

/*
 * What the running kernel offers (record/kernel_features.h): below the
 * floor, or where a facility has no mechanism that gives the same records,
 * one line and 1; -v prints the mechanism chosen per facility.  Returns 0
 * to go on.
 */
static int check_kernel(struct track_run *run)
{
	const struct kernel_features *kf = &run->kf;
	char buf[256];

	(void)kernel_features_probe(&run->kf); /* no BTF: below_floor says so */
	if (kernel_features_below_floor(kf, buf, sizeof(buf))) {
		die_msg("%s", buf);
		return 1;
	}
	if (run->o->verbose) {
		fprintf(stderr, "memtrack: kernel %s%s:", kf->release,
			kf->forced ? " (fallbacks forced)" : "");
		for (int f = 0; f < KF_NFACILITIES; f++)
			fprintf(stderr, " %s=%s", kernel_features_facility(f),
				kernel_features_mech(kf, f));
		fputc('\n', stderr);
	}
	run->attach = kf->mech[KF_UPROBES] == KF_BEST ? &attach_uprobe_multi : &attach_perf_uprobe;
	if (run->o->allocators && !run->attach->available()) {
		die_msg("this kernel (Linux %s) has neither uprobe-multi links (Linux 6.6) nor the uprobe perf PMU, which the heap probes need; record without them with --no-allocators",
			kf->release);
		return 1;
	}
	return 0;
}

/* Words a loader_open() failure as one line naming the fix; returns @buf. */
static const char *loader_reason(enum loader_step step, int err, char *buf, size_t len)
{
	switch (step) {
	case LOADER_BTF:
		snprintf(
			buf, len,
			"this kernel has no BTF (/sys/kernel/btf/vmlinux); memtrack needs a kernel built with CONFIG_DEBUG_INFO_BTF=y");
		break;
	case LOADER_OPEN:
		snprintf(buf, len, "cannot open the BPF object: %s", strerror(-err));
		break;
	case LOADER_LOAD:
		if (err == -ENOMEM)
			snprintf(
				buf, len,
				"not enough memory for memtrack's BPF maps; choose a smaller --ring-size");
		else if (err == -EPERM)
			snprintf(
				buf, len,
				"not allowed to load BPF programs (%s); run as root or grant CAP_BPF and CAP_PERFMON",
				strerror(-err));
		else
			snprintf(
				buf, len,
				"the kernel rejected memtrack's BPF programs (%s); rerun with -v to see the verifier's log",
				strerror(-err));
		break;
	case LOADER_ATTACH:
		snprintf(
			buf, len,
			"cannot attach memtrack's tracepoints (%s); this kernel needs BTF raw tracepoints (tp_btf, Linux 5.5+)",
			strerror(-err));
		break;
	}
	return buf;
}

/*
 * Finds libmemtrack-fast.so: next to the memtrack binary (the build tree),
 * else in the install's lib/memtrack.  Returns 0 or -ENOENT.
 */
static int fast_lib_path(char *buf, size_t len)
{
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	char *slash;

	if (n > 0) {
		exe[n] = 0;
		slash = strrchr(exe, '/');
		if (slash &&
		    (size_t)snprintf(buf, len, "%.*s/libmemtrack-fast.so", (int)(slash - exe),
				     exe) < len &&
		    !access(buf, R_OK))
			return 0;
		if (slash && (slash = memrchr(exe, '/', slash - exe)) &&
		    (size_t)snprintf(buf, len, "%.*s/lib/memtrack/libmemtrack-fast.so",
				     (int)(slash - exe), exe) < len &&
		    !access(buf, R_OK))
			return 0;
	}
	return -ENOENT;
}

/* Poller thread: a process whose executable allocates itself stays on the uprobes. */
static bool fast_lib_found(void)
{
	char lib[4096];

	return !fast_lib_path(lib, sizeof(lib));
}

static bool fast_admit(void *ctx, pid_t pid)
{
	struct track_run *run = ctx;

	return !probes_exe_allocates(run->probes, pid);
}

/*
 * --fast: opens the socket the library hands its rings to, makes the
 * pipeline drain them, and puts the library first in the command's
 * LD_PRELOAD (the command sees it there, and MEMTRACK_FAST_SOCKET: exec'd
 * programs keep the path through them).  Returns 0 or -errno with a
 * message in @err.
 */
static int open_fast(struct track_run *run, char *err, size_t errlen)
{
	char lib[4096], *preload;
	const char *old = getenv("LD_PRELOAD");
	uid_t uid;
	gid_t gid;
	int ret;

	if (fast_lib_path(lib, sizeof(lib))) {
		snprintf(
			err, errlen,
			"--fast needs libmemtrack-fast.so next to the memtrack binary or in lib/memtrack of its install; run make (or make install), or drop --fast");
		return -ENOENT;
	}
	if (!sudo_invoker(&uid, &gid)) { /* the command's user: the socket is theirs */
		uid = geteuid();
		gid = getegid();
	}
	run->fast = fast_drain__new(fast_admit, run, uid, gid, run->reaper);
	if (!run->fast) {
		ret = -errno;
		snprintf(
			err, errlen,
			"cannot create the --fast socket: %s; set TMPDIR to a writable directory or drop --fast",
			strerror(-ret));
		return ret;
	}
	if (asprintf(&preload, "%s%s%s", lib, old && *old ? ":" : "", old ? old : "") < 0)
		return -ENOMEM;
	setenv("LD_PRELOAD", preload, 1);
	free(preload);
	setenv(MT_FAST_SOCKET_ENV, fast_drain__path(run->fast), 1);
	return 0;
}

/* --fast, once the BPF side is loaded: the drain learns the tree and joins the pipeline. */
static int start_fast(struct track_run *run)
{
	fast_drain__set_tracked(run->fast, bpf_map__fd(run->skel->maps.tracked));
	/* the heap switch (control socket), on a sealed page the libraries map read-only */
	fast_drain__set_switch(run->fast, heap_switch__page_fd(run->heap_switch), 0,
			       HEAP_SWITCH_PAGE_BYTES);
	return pipeline__add_source(run->pipe, fast_drain__fd(run->fast),
				    &(struct pipeline_source){ .feed = fast_drain_feed,
							       .service = fast_drain_service,
							       .ctx = run->fast });
}

static void *preattach_main(void *arg)
{
	struct track_run *run = arg;
	int ret = probes_preattach(run->probes, run->child.pid);

	run->preattach_err = ret < 0 ? ret : 0;
	return NULL;
}

/*
 * Before the BPF side loads (~20 ms of CPU): forks the reaper (before any
 * thread), opens the --fast socket (its path goes into the command's
 * environment), forks the command parked before its exec, and attaches its
 * libc through the heap stubs on a thread of its own, so that link's grace
 * period (~10 ms) passes during the load (heap_stub.h).  Returns 0 or
 * -errno with a message in @err.
 */
static int start_early(struct track_run *run, const sigset_t *mask, char *err, size_t errlen)
{
	sigset_t all, old;
	int ret;

	run->reaper = reaper__new();
	run->retire = retire__new(run->reaper);
	if (run->o->control) /* before the fork: the command finds it in its environment */
		open_control(run);
	if (run->o->fast) {
		ret = open_fast(run, err, errlen);
		if (ret)
			return ret;
	}
	ret = spawn_parked(&run->child, run->o->argv, run->o->shell,
			   sudo_invoker(&(uid_t){ 0 }, &(gid_t){ 0 }), mask);
	if (ret) {
		snprintf(err, errlen, "cannot start the command: %s", strerror(-ret));
		return ret;
	}
	if (!run->o->allocators)
		return 0;
	run->probes = run->retire ? probes__new(run->retire, run->attach) : NULL;
	if (!run->probes) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	probes__set_fast(run->probes, run->o->fast);
	if (heap_stub_load(&run->stub, run->attach->prog_attach_type))
		return 0; /* libc is attached after the exec instead */
	probes__set_progs(run->probes, run->stub.enter_fd, run->stub.exit_fd);
	sigfillset(&all); /* signals are main's */
	pthread_sigmask(SIG_SETMASK, &all, &old);
	run->preattaching = !pthread_create(&run->preattach_thread, NULL, preattach_main, run);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return 0;
}

/*
 * Once the BPF side is loaded: the stubs run alloc_enter and alloc_exit
 * from now on, and later links use them directly.  Should the stubs not be
 * armed, the root's early links are dropped (its sync after exec attaches
 * libc again).
 */
static void finish_early(struct track_run *run)
{
	if (run->preattaching)
		pthread_join(run->preattach_thread, NULL);
	run->preattaching = false;
	if (!run->probes)
		return;
	if (run->skel) {
		int enter = bpf_program__fd(run->skel->progs.alloc_enter);
		int exit = bpf_program__fd(run->skel->progs.alloc_exit);

		if (run->stub.map_fd >= 0 && heap_stub_arm(&run->stub, enter, exit))
			probes_forget(run->probes, run->child.pid, true);
		probes__set_progs(run->probes, enter, exit);
	}
	if (run->preattach_err && run->o->verbose)
		fprintf(stderr, "memtrack: libc not attached before exec (%s); it is after\n",
			strerror(-run->preattach_err));
}

/*
 * Where the BPF side cannot resume parked processes at memtrack's death
 * (KF_RESUME's fallback), the reaper does it once memtrack is gone.
 * Without a reaper nothing would, and a child of a killed memtrack would
 * stay stopped: the run is refused.  Returns 0 or -errno.
 */
static int hand_parked_to_reaper(struct track_run *run)
{
	int parked, session, err;

	err = loader_parked_fds(run->skel, &parked, &session);
	return err ? err : reaper_resume_at_end(run->reaper, parked, session);
}

/*
 * Loads the BPF side and creates the writer, the probe registry and the
 * pipeline.  Returns 0, or -errno with a one-line message in @err (what was
 * created is freed by the caller's cleanup).
 */
static int setup(struct track_run *run, char *err, size_t errlen)
{
	struct loader_opts lo = {
		.ring_bytes = run->o->ring_bytes,
		.wakeup_bytes = run->o->wakeup_bytes,
		.allocators = run->o->allocators,
		.uprobe_attach_type = run->attach->prog_attach_type,
		.physical = run->o->physical,
		.verbose = run->o->verbose,
		.heap_disabled = run->o->start_disabled,
		.stacks = run->o->stacks,
		.unwind_rows = run->o->unwind_rows ? (uint32_t)run->o->unwind_rows
						   : MT_UNWIND_ROWS_DEFAULT,
		.fast = run->o->fast,
		.kf = &run->kf,
	};
	enum loader_step step;
	int ret;

	ret = loader_open(&lo, &run->skel, &step);
	if (!ret && run->kf.mech[KF_RESUME] != KF_BEST && lo.allocators) {
		ret = hand_parked_to_reaper(run);
		if (ret) {
			snprintf(
				err, errlen,
				"cannot start the reaper that resumes parked processes on this kernel (%s); free some processes or memory and retry",
				strerror(-ret));
			return ret;
		}
	}
	if (lo.physical_err)
		die_msg("--physical is not available on this kernel (%s); recording without it",
			loader_reason(lo.physical_step, lo.physical_err, err, errlen));
	if (ret) {
		loader_reason(step, ret, err, errlen);
		return ret;
	}
	run->o->physical = lo.physical;
	finish_early(run);
	if (loader_track_root(run->skel, run->child.pid)) {
		ret = -errno;
		snprintf(err, errlen, "cannot start the command: %s", strerror(-ret));
		return ret;
	}
	if (run->ctl || run->fast) {
		run->heap_switch = heap_switch__new(loader_heap_switch(run->skel));
		if (!run->heap_switch) {
			ret = -errno;
			snprintf(err, errlen, "cannot make the heap switch's page: %s",
				 strerror(-ret));
			return ret;
		}
	}
	if (run->ctl)
		control__set_switch(run->ctl, run->heap_switch);
	fill_header(&run->hdr, run->o);
	kernel_features_header(&run->kf, &run->hdr);
	run->writer = mt_writer__new(run->out_fd, &run->hdr, 0);
	if (!run->writer) {
		ret = -errno;
		snprintf(err, errlen, "cannot write the artifact header to '%s': %s",
			 run->o->output, strerror(-ret));
		return ret;
	}
	run->pipe = pipeline__new(&run->o->pipe, run->writer, track_hook, run);
	if (run->pipe && run->o->stacks) {
		run->stacks = stacks__new(run->skel, run->pipe);
		if (!run->stacks) {
			ret = -errno;
			snprintf(err, errlen, "cannot map the kernel's unwind table: %s",
				 strerror(-ret));
			return ret;
		}
	}
	if (run->pipe && run->ctl)
		start_control(run);
	if (run->pipe && run->fast) {
		ret = start_fast(run);
		if (ret) {
			snprintf(err, errlen, "cannot start the --fast drain: %s", strerror(-ret));
			return ret;
		}
	}
	ret = !run->pipe ? -errno
			 : pipeline__start_poller(run->pipe, bpf_map__fd(run->skel->maps.events),
						  bpf_map__fd(run->skel->maps.ctl_events));
	if (ret) {
		/* pthread_create's code, or libbpf's: errno may be stale */
		snprintf(err, errlen, "cannot start the event pipeline: %s%s", strerror(-ret),
			 ret == -EMFILE ? "; raise the fd limit (ulimit -Hn, at least 128)" : "");
		return ret;
	}
	return 0;
}

/*
 * Unloads the BPF side.  First the tracked set is emptied, so nothing is
 * recorded or parked any more (a process of a tree memtrack stopped waiting
 * for, after a signal, is sent SIGCONT in case it was parked); then every
 * fd goes to the reaper, which bears the kernel's grace periods once
 * memtrack has exited (reaper.h): the closes here are reference drops.
 */
static void teardown(struct track_run *run)
{
	uint64_t t0 = mono_ns(), t1;
	unsigned handed;

	loader_stop_parking(run->skel);
	if (run->skel)
		loader_untrack_all(run->skel);
	probes__free(run->probes);
	stacks__free(run->stacks);
	handed = retire_end(run->retire);
	t1 = mono_ns();
	heap_stub_close(&run->stub);
	loader_close(run->skel);
	if (run->o->verbose)
		fprintf(stderr,
			"memtrack: teardown: probes %.1f ms, bpf %.1f ms (%u fds left to the reaper)\n",
			(t1 - t0) / 1e6, (mono_ns() - t1) / 1e6, handed);
}

int cmd_track(int argc, char **argv)
{
	struct track_opts o;
	struct track_run run = { .o = &o,
				 .out_fd = -1,
				 .out_dir = -1,
				 .child = { .pid = -1, .release_fd = -1, .status_fd = -1 },
				 .stub = { -1, -1, -1 } };
	struct mt_trailer trailer = { 0 };
	struct rlimit nofile;
	char err[512] = "", path[4096];
	sigset_t old;
	int ret, exec_err;

	run.t_start = mono_ns();
	ret = parse_track_opts(argc, argv, &o);
	if (ret)
		return ret;
	if (!has_bpf_caps()) {
		die_msg("memtrack needs root (or CAP_BPF and CAP_PERFMON) to load its BPF programs; run it with sudo");
		return 1;
	}
	if (!in_initial_pid_ns()) {
		die_msg("memtrack cannot run inside a PID namespace (its BPF side sees the host's pids); run it outside and put the namespace inside the command: memtrack track -- unshare -fp --mount-proc CMD");
		return 1;
	}
	if (check_kernel(&run))
		return 1;
	ret = o.shell ? 0 : spawn_resolve(o.argv[0], path, sizeof(path));
	if (ret == -ENOENT) {
		die_msg("command not found: %s; check the name or give its full path", o.argv[0]);
		return 127;
	}
	if (ret) { /* like a shell: found but cannot run, 126 */
		die_msg("cannot run %s: %s; give an executable file", o.argv[0], strerror(-ret));
		return 126;
	}
	if (raise_fd_limit(&nofile)) {
		run.child.nofile = nofile.rlim_cur;
		run.child.nofile_max = nofile.rlim_max;
	}
	ret = open_output(&run);
	if (ret)
		return ret;
	install_signals(&old);
	if (start_early(&run, &old, err, sizeof(err)) || setup(&run, err, sizeof(err)))
		goto fail_setup;
	run.t_loaded = mono_ns();
	exec_err = spawn_release(&run.child);
	if (exec_err) {
		/* like a shell: 127 or 126, and no artifact of a command that never ran */
		die_msg("cannot run %s: %s; check the file and its interpreter (#! line)",
			o.argv[0], strerror(-exec_err));
		waitpid(run.child.pid, NULL, 0);
		discard_output(&run);
		ret = exec_err == -ENOENT ? 127 : 126;
		goto out;
	}
	ret = place_output(&run);
	if (ret) {
		die_msg("cannot rename '%s' to '%s': %s; the recording goes on in the first",
			run.tmp_path, o.output, strerror(-ret));
		o.output = run.tmp_path;
		run.placed = true;
	}
	wait_tree(&run, &old);
	ret = finish(&run, &trailer);
	if (ret) {
		die_msg("cannot finish '%s': %s; the events before the error are readable",
			o.output, strerror(-ret));
		ret = 1;
	} else {
		ret = report_end(&run, &trailer);
	}
	goto out;

fail_setup:
	die_msg("%s", err);
	finish_early(&run);
	spawn_abort(&run.child); /* before its exec: nothing ran */
	discard_output(&run);	 /* leave nothing half-written */
	ret = 1;
out:
	pipeline__free(run.pipe);
	control__free(run.ctl);		    /* after the poller, which serves it */
	fast_drain__free(run.fast);	    /* after the poller, which drains it */
	heap_switch__free(run.heap_switch); /* after the control socket and drain */
	mt_writer__free(run.writer);
	teardown(&run);
	if (run.out_fd >= 0)
		close(run.out_fd);
	if (run.out_dir >= 0)
		close(run.out_dir);
	retire__free(run.retire);
	reaper__free(run.reaper); /* after memtrack's last close */
	return ret;
}
