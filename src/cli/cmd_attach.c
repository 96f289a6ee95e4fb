// SPDX-License-Identifier: MIT
/*
 * cmd_attach.c - `memtrack attach PID`: record a process that is already
 * running, its threads and descendants, from now on, and leave it as it
 * was.
 *
 * The checklist: parse, check the host and the PID, open the output, start
 * the session in its attach mode (record/session.h: the running tree
 * tracked and probed, nothing stopped), place the output, wait (a signal,
 * --duration, or the tree's end), finish, and turn what was recorded into
 * the exit status: 0, or 1 when events were lost or a process went
 * unprobed.  Heap calls are recorded by uprobes only: nothing is injected
 * into the process, so the in-process path (--fast) does not apply.
 *
 * THREAD NOTES: main runs this file; the session's notices may come from the
 * poller thread (control socket problems), as one die_msg() line each.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/types.h>
#include "bpf_abi.h"
#include "cli/cli.h"
#include "cli/help.h"
#include "cli/profiler.h"
#include "cli/track_daemon.h"
#include "cli/track_output.h"
#include "format/artifact.h"
#include "inspect/authority.h"
#include "inspect/unwind_cache.h"
#include "kernel/kernel_features.h"
#include "record/adopt.h"
#include "record/session.h"

struct attach_opts {
	const char *output; /* artifact path */
	bool quiet;	    /* -q: no summary line */
	pid_t pid;
	struct authority auth;	 /* under sudo: the invoking user's processes only */
	struct daemon_choice dc; /* --daemon[=PATH], --no-daemon */
	struct kernel_features kf;
	struct profile_opts profile; /* --profile-every, --profile-dir */
	struct session_opts s;
};

enum {
	OPT_PHYSICAL = 255,
	OPT_NO_ALLOC = 256,
	OPT_RING,
	OPT_CONTROL,
	OPT_STACKS,
	OPT_NO_STACKS,
	OPT_DURATION,
	OPT_UNWIND_CACHE,
	OPT_NO_UNWIND_CACHE,
	OPT_NO_PYTHON_FRAMES,
	OPT_DAEMON,
	OPT_NO_DAEMON,
	OPT_SAMPLE_BYTES,
	OPT_PROFILE_EVERY,
	OPT_PROFILE_DIR,
};

static const struct option attach_options[] = {
	{ "output", required_argument, NULL, 'o' },
	{ "no-allocators", no_argument, NULL, OPT_NO_ALLOC },
	{ "physical", no_argument, NULL, OPT_PHYSICAL },
	{ "ring-size", required_argument, NULL, OPT_RING },
	{ "control", required_argument, NULL, OPT_CONTROL },
	{ "stacks", no_argument, NULL, OPT_STACKS },
	{ "no-stacks", no_argument, NULL, OPT_NO_STACKS },
	{ "duration", required_argument, NULL, OPT_DURATION },
	{ "unwind-cache", required_argument, NULL, OPT_UNWIND_CACHE },
	{ "no-unwind-cache", no_argument, NULL, OPT_NO_UNWIND_CACHE },
	{ "no-python-frames", no_argument, NULL, OPT_NO_PYTHON_FRAMES },
	{ "daemon", optional_argument, NULL, OPT_DAEMON },
	{ "no-daemon", no_argument, NULL, OPT_NO_DAEMON },
	{ "sample-bytes", required_argument, NULL, OPT_SAMPLE_BYTES },
	{ "profile-every", required_argument, NULL, OPT_PROFILE_EVERY },
	{ "profile-dir", required_argument, NULL, OPT_PROFILE_DIR },
	{ "verbose", no_argument, NULL, 'v' },
	{ "quiet", no_argument, NULL, 'q' },
	{ "help", no_argument, NULL, 'h' },
	{ 0 },
};

/* --duration SECONDS: a positive decimal, at most a day's worth... of years. */
static int parse_duration(const char *arg, uint64_t *ns)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(arg, &end);
	if (errno || end == arg || *end || !(v > 0) || v > 1e7) {
		die_msg("invalid --duration '%s'; give seconds, e.g. --duration 30 or 0.5", arg);
		return 2;
	}
	*ns = (uint64_t)(v * 1e9);
	return 0;
}

static int parse_ring(const char *arg, uint64_t *bytes)
{
	uint64_t v;

	/* the kernel takes a map size in 32 bits: 2G at most */
	if (parse_size(arg, &v) || v < 4096 || v > (1ull << 31) || (v & (v - 1))) {
		die_msg("invalid --ring-size '%s'; give a power of two from 4K to 2G, e.g. 16M",
			arg);
		return 2;
	}
	*bytes = v;
	return 0;
}

/* The PID operand: a decimal number, nothing else.  Returns 0 or 2 (reported). */
static int parse_pid(const char *arg, pid_t *pid)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(arg, &end, 10);
	if (errno || end == arg || *end || v <= 0 || v > 0x3fffffff) {
		die_msg("invalid PID '%s'; give the process id of a running process, e.g. memtrack attach $(pidof server)",
			arg);
		return 2;
	}
	*pid = (pid_t)v;
	return 0;
}

static int parse_option(int c, char **argv, struct attach_opts *o)
{
	struct session_opts *s = &o->s;

	switch (c) {
	case 'o': o->output = optarg; return 0;
	case 'v': s->verbose = true; return 0;
	case 'q': o->quiet = true; return 0;
	case 'h': exit(help_show("attach"));
	case OPT_NO_ALLOC: s->allocators = false; return 0;
	case OPT_PHYSICAL: s->physical = true; return 0;
	case OPT_STACKS: s->stacks = true; return 0;
	case OPT_NO_STACKS: s->stacks = false; return 0; /* the last of the two wins */
	case OPT_RING: return parse_ring(optarg, &s->ring_bytes);
	case OPT_DURATION: return parse_duration(optarg, &s->duration_ns);
	case OPT_UNWIND_CACHE: return track_unwind_cache_opt(optarg, s);
	case OPT_NO_UNWIND_CACHE: return track_unwind_cache_opt(NULL, s);
	case OPT_NO_PYTHON_FRAMES: s->no_python_frames = true; return 0;
	case OPT_DAEMON: return track_daemon_opt(optarg, &o->dc);
	case OPT_NO_DAEMON: o->dc = (struct daemon_choice){ .mode = -1 }; return 0;
	case OPT_SAMPLE_BYTES: return track_sample_opt(optarg, s);
	case OPT_PROFILE_EVERY: return profile_every_opt(optarg, &o->profile);
	case OPT_PROFILE_DIR: o->profile.dir = optarg; return 0;
	case OPT_CONTROL:
		if (!*optarg) {
			die_msg("empty --control path; give the path of a socket to create, e.g. --control /tmp/memtrack.sock");
			return 2;
		}
		s->control = optarg;
		return 0;
	default:
		if (optopt)
			die_msg("unknown or incomplete option '-%c'; see memtrack help attach",
				optopt);
		else
			die_msg("unknown option '%s'; see memtrack help attach", argv[optind - 1]);
		return 2;
	}
}

/* Returns 0, or the exit status for a usage error (already reported). */
static int parse_attach_opts(int argc, char **argv, struct attach_opts *o)
{
	int c, err = 0;

	*o = (struct attach_opts){ .s = {
					   .allocators = true,
					   .ring_bytes = MT_RING_DEFAULT,
					   .unwind_cache_dir = UNWIND_CACHE_DEFAULT_DIR,
					   .pipe = { PIPELINE_DEFAULT_BATCH_BYTES,
						     PIPELINE_DEFAULT_BATCHES,
						     PIPELINE_DEFAULT_FLUSH_MS },
				   } };
	optind = 1;
	opterr = 0;
	while (!err && (c = getopt_long(argc, argv, "o:vqh", attach_options, NULL)) != -1)
		err = parse_option(c, argv, o);
	if (err)
		return err;
	if (optind != argc - 1) {
		die_msg("%s; usage: memtrack attach [options] PID; see memtrack help attach",
			optind >= argc ? "no PID given" : "more than one PID given");
		return 2;
	}
	if (o->s.stacks && !MT_ARCH_STACKS) {
		die_msg(MT_NO_STACKS_MSG);
		return 2;
	}
	if (o->s.stacks && !o->s.allocators) {
		die_msg("--stacks needs the allocator probes (it learns each process's code while they are attached); drop --no-allocators");
		return 2;
	}
	if (o->s.sample_bytes && !o->s.allocators) {
		die_msg("--sample-bytes samples the heap calls and --no-allocators records none; drop one of them");
		return 2;
	}
	if (profile_opts_check(&o->profile) || parse_pid(argv[optind], &o->pid))
		return 2;
	if (o->profile.every_ns)
		o->s.profile = &o->profile;
	o->s.attach_pid = o->pid;
	o->s.wakeup_bytes = o->s.ring_bytes / 16;
	return 0;
}

/*
 * Whether memtrack's effective capabilities hold CAP_SYS_PTRACE (bit 19 of
 * CapEff in /proc/self/status): then a target it cannot read is not
 * another user's process it lacks the capability for.
 */
static bool has_sys_ptrace(void)
{
	unsigned long long eff = 0;
	char line[128];
	FILE *f = fopen("/proc/self/status", "re");
	bool found = false;

	while (f && !found && fgets(line, sizeof(line), f))
		found = sscanf(line, "CapEff: %llx", &eff) == 1;
	if (f)
		fclose(f);
	return found && (eff >> 19 & 1);
}

/* Whether @pid can be attached; 0, or 2 after one line naming the problem. */
static int check_target(pid_t pid)
{
	int err;

	switch (adopt_check_root(pid, getpid(), 0, &err)) {
	case ADOPT_OK: return 0;
	case ADOPT_NO_PROCESS:
		die_msg("no process %d; give the PID of a running process (see ps or pidof)",
			(int)pid);
		break;
	case ADOPT_KERNEL:
		die_msg("process %d is a kernel thread: it has no user space to record; give the PID of a user process",
			(int)pid);
		break;
	case ADOPT_SELF:
		die_msg("process %d is this memtrack; give the PID of another process", (int)pid);
		break;
	case ADOPT_MEMTRACK:
		die_msg("process %d is a memtrack: its tree is that memtrack's recording; attach to a process outside it, or record it with that memtrack",
			(int)pid);
		break;
	case ADOPT_ZOMBIE:
		die_msg("process %d has exited (a zombie, not yet reaped by its parent): nothing runs to record",
			(int)pid);
		break;
	case ADOPT_NO_ACCESS:
		if (has_sys_ptrace()) {
			die_msg("cannot read process %d's memory map (/proc/%d/maps: %s) although memtrack has CAP_SYS_PTRACE: the kernel refuses even so (the process holds capabilities memtrack lacks, or a security module protects it); run memtrack with every capability the process has",
				(int)pid, (int)pid, strerror(err));
			break;
		}
		die_msg("cannot read process %d's memory map (/proc/%d/maps: %s); attaching to another user's process needs CAP_SYS_PTRACE: run memtrack as root or with that capability",
			(int)pid, (int)pid, strerror(err));
		break;
	}
	return 2;
}

/*
 * Under sudo, whether the invoking user could trace @pid themselves
 * (inspect/authority.h); 0, or 2 after one line naming its owner and the
 * rule.
 */
static int check_authority(const struct authority *a, pid_t pid)
{
	struct authority_creds c = { 0 };
	enum authority_verdict v = authority_check(a, pid, &c);
	char msg[640];

	if (v == AUTH_OK)
		return 0;
	authority_explain(a, pid, v, &c, msg, sizeof(msg));
	die_msg("%s", msg);
	return 2;
}

static uint64_t total_drops(const struct mt_trailer *t)
{
	uint64_t n = 0;

	for (int i = 0; i < MT_DROP_SLOTS; i++)
		n += t->dropped[i];
	return n;
}

/* The summary line and the exit status: 0, or 1 when something was lost. */
static int report_end(const struct attach_opts *o, const struct session_stats *st,
		      const struct mt_trailer *t)
{
	uint64_t drops = total_drops(t);
	char unprobed[64] = "", owner[160] = "";

	if (t->unprobed)
		snprintf(unprobed, sizeof(unprobed), ", %llu processes unprobed",
			 (unsigned long long)t->unprobed);
	if (st->refused_procs || st->left_procs)
		snprintf(
			owner, sizeof(owner),
			"; not yours to trace: %u left out at the attach, %u left at a privileged exec or prctl",
			st->refused_procs, st->left_procs);
	if (!o->quiet)
		fprintf(stderr,
			"memtrack: wrote %s: %llu events, %llu lost%s, attached to %d (%u processes) for %.1f s%s%s\n",
			o->output, (unsigned long long)st->events, (unsigned long long)drops,
			unprobed, (int)o->pid, st->attached_procs,
			(st->t_exited - st->t_loaded) / 1e9,
			st->tree_exited ? ", the tree exited" : "", owner);
	if (o->s.verbose)
		fprintf(stderr,
			"memtrack: attach: %.2f ms from tracking to the root's probes, %.2f ms to all\n",
			(st->t_root_probed - st->t_attach) / 1e6,
			(st->t_all_probed - st->t_attach) / 1e6);
	if (t->unprobed)
		die_msg("%llu processes ran without allocator probes (attaching failed: %s), their heap calls are missing; raise the fd limit (ulimit -Hn)",
			(unsigned long long)t->unprobed, strerror(st->unprobed_errno));
	if (drops)
		die_msg("%llu events were lost (ring buffer full); attach again with a larger --ring-size",
			(unsigned long long)drops);
	return drops || t->unprobed ? 1 : 0;
}

static void attach_notice(void *ctx, const char *msg)
{
	die_msg("%s", msg);
}

/* The moment recording starts, for whoever waits for it. */
static void print_attached(const struct attach_opts *o, unsigned procs)
{
	if (o->quiet)
		return;
	if (o->s.duration_ns)
		fprintf(stderr, "memtrack: attached to %d (%u processes), recording for %g s\n",
			(int)o->pid, procs, o->s.duration_ns / 1e9);
	else
		fprintf(stderr,
			"memtrack: attached to %d (%u processes), recording until Ctrl-C or its exit\n",
			(int)o->pid, procs);
}

static void attached(void *ctx, unsigned procs)
{
	print_attached(ctx, procs);
}

/* The daemon on @sock records the target, which it checks is the user's to record. */
static int attach_through_daemon(struct attach_opts *o, int sock)
{
	struct client_result res;
	int ret = daemon_record(&o->s, &o->output, sock, attached, o, &res);

	return ret ? ret : report_end(o, &res.st, &res.t);
}

/* From the running session to the exit status. */
static int record(struct session *s, struct attach_opts *o, struct track_out *out)
{
	struct mt_trailer trailer = { 0 };
	struct session_stats st;

	track_place_or_keep(out, &o->output);
	session_stats(s, &st);
	print_attached(o, st.attached_procs);

	if (track_wait_finish(s, o->output, &trailer, &st))
		return 1;
	return report_end(o, &st, &trailer);
}

/* The default artifact name: memtrack.<comm>.<pid>.mtrk, from the target's name. */
static const char *default_output(pid_t pid)
{
	char path[32], comm[64] = "attach";
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	f = fopen(path, "re");
	if (f) {
		if (fgets(comm, sizeof(comm), f))
			comm[strcspn(comm, "\n")] = 0;
		fclose(f);
	}
	return track_default_output(comm);
}

static int record_attach(struct session *s, void *o, struct track_out *out)
{
	return record(s, o, out);
}

int cmd_attach(int argc, char **argv)
{
	struct attach_opts o;
	int ret;

	ret = parse_attach_opts(argc, argv, &o);
	if (ret)
		return ret;
	if (!o.output)
		o.output = default_output(o.pid);
	o.s.notice = attach_notice;
	ret = daemon_pick(&o.dc, daemon_unsupported(&o.s), o.s.verbose);
	if (ret == -2)
		return 1;
	if (ret >= 0)
		return attach_through_daemon(&o, ret);
	ret = check_recording_host(&o.kf, &o.s) ? 1 : 0;
	if (!ret)
		ret = check_target(o.pid);
	if (!ret) {
		authority_init(&o.auth);
		o.s.authority = &o.auth;
		ret = check_authority(&o.auth, o.pid);
	}
	if (ret)
		return ret;
	return track_run_session(&o.s, o.output, record_attach, &o, "; nothing is left attached");
}
