// SPDX-License-Identifier: MIT
/*
 * cmd_track.c - `memtrack track`: run a command and record its process
 * tree's memory behaviour into an artifact.
 *
 * The checklist: parse, open the output, start the session (record/session.h:
 * everything from the spawned, parked command to the running pipeline),
 * release the command, place the output, wait for the tree, finish, and
 * turn what was recorded into the exit status.  This file keeps the
 * options, the output's name and place, and the exit-status policy.
 *
 * THREAD NOTES: main runs this file; the session's notices may come from the
 * poller thread (control socket problems), as one die_msg() line each.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "bpf_abi.h"
#include "cli/cli.h"
#include "cli/help.h"
#include "cli/profiler.h"
#include "cli/track_daemon.h"
#include "cli/track_output.h"
#include "fast/fast_ring.h"
#include "format/artifact.h"
#include "inspect/unwind_cache.h"
#include "kernel/kernel_features.h"
#include "util/as_user.h"
#include "record/attach.h"
#include "record/session.h"
#include "record/spawn.h"

struct track_opts {
	const char *output;	     /* artifact path */
	bool allow_drops;	     /* keep the command's status despite drops */
	bool quiet;		     /* -q: no summary line */
	int fast_choice;	     /* --fast 1, --no-fast -1, neither 0 */
	int stacks_choice;	     /* --stacks 1, --no-stacks -1 (the last wins), neither 0 */
	struct kernel_features kf;   /* what the kernel offers, the mechanisms chosen */
	struct daemon_choice dc;     /* --daemon[=PATH], --no-daemon */
	struct profile_opts profile; /* --profile-every, --profile-dir */
	struct session_opts s;
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
	OPT_NO_STACKS,
	OPT_UNWIND_ROWS,
	OPT_UNWIND_CACHE,
	OPT_NO_UNWIND_CACHE,
	OPT_FAST,
	OPT_NO_FAST,
	OPT_NO_PYTHON_FRAMES,
	OPT_DAEMON,
	OPT_NO_DAEMON,
	OPT_SAMPLE_BYTES,
	OPT_PROFILE_EVERY,
	OPT_PROFILE_DIR,
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
	{ "no-stacks", no_argument, NULL, OPT_NO_STACKS },
	{ "unwind-rows", required_argument, NULL, OPT_UNWIND_ROWS },
	{ "unwind-cache", required_argument, NULL, OPT_UNWIND_CACHE },
	{ "no-unwind-cache", no_argument, NULL, OPT_NO_UNWIND_CACHE },
	{ "fast", no_argument, NULL, OPT_FAST },
	{ "no-fast", no_argument, NULL, OPT_NO_FAST },
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

/* A size option's bounds and the message naming its fix. */
struct size_opt {
	uint64_t min, max;
	const char *msg; /* with the option's argument for %s */
	int opt;
	bool pow2;
};

static const struct size_opt size_opts[] = {
	{ 1024, 64u << 20, "invalid --unwind-rows '%s'; give a row count from 1K to 64M, e.g. 4M",
	  OPT_UNWIND_ROWS, false },
	/* the kernel takes a map size in 32 bits: 2G at most */
	{ 4096, 1ull << 31, "invalid --ring-size '%s'; give a power of two from 4K to 2G, e.g. 16M",
	  OPT_RING, true },
	{ 4096, 64u << 20, "invalid --batch-size '%s'; give 4K to 64M, e.g. 256K", OPT_BATCH,
	  false },
	{ 1, 3600000, "invalid --flush-ms '%s'; give milliseconds between 1 and 3600000", OPT_FLUSH,
	  false },
	{ 0, UINT64_MAX, "invalid --wakeup-bytes '%s'; give a byte count, e.g. 1M", OPT_WAKEUP,
	  false },
};

/* Parses size option @c's @arg into the option it sets; returns 0 or 2 (reported). */
static int parse_size_opt(int c, const char *arg, struct track_opts *o)
{
	const struct size_opt *so = NULL;
	uint64_t v;

	for (size_t i = 0; i < sizeof(size_opts) / sizeof(size_opts[0]); i++)
		if (size_opts[i].opt == c)
			so = &size_opts[i];
	if (parse_size(arg, &v) || v < so->min || v > so->max || (so->pow2 && (v & (v - 1)))) {
		die_msg(so->msg, arg);
		return 2;
	}
	if (c == OPT_UNWIND_ROWS)
		o->s.unwind_rows = (uint32_t)v;
	else if (c == OPT_RING)
		o->s.ring_bytes = v;
	else if (c == OPT_BATCH)
		o->s.pipe.batch_bytes = v;
	else if (c == OPT_FLUSH)
		o->s.pipe.flush_ms = v;
	else
		o->s.wakeup_bytes = v;
	return 0;
}

/* Options that do not go together; returns 0 or 2 (reported). */
static int check_combinations(const struct track_opts *o)
{
	const struct session_opts *s = &o->s;

	if (o->stacks_choice > 0 && !MT_ARCH_STACKS)
		die_msg(MT_NO_STACKS_MSG);
	else if (o->stacks_choice > 0 && !s->allocators)
		die_msg("--stacks needs the allocator probes (it learns each process's code while they are attached); drop --no-allocators");
	else if (s->start_disabled && !s->control)
		die_msg("--start-disabled needs --control PATH, or nothing could ever enable recording; add --control PATH");
	else if (s->sample_bytes && !s->allocators)
		die_msg("--sample-bytes samples the heap calls and --no-allocators records none; drop one of them");
	else if (o->fast_choice > 0 && !s->allocators)
		die_msg("--fast records heap calls and --no-allocators records none; drop one of them");
	else
		return 0;
	return 2;
}

/* Returns 0, or the exit status for a usage error (already reported). */
static int parse_track_opts(int argc, char **argv, struct track_opts *o)
{
	struct session_opts *s = &o->s;
	int c, err = 0;

	*o = (struct track_opts){ .s = {
					  .allocators = true,
					  .ring_bytes = MT_RING_DEFAULT,
					  .unwind_cache_dir = UNWIND_CACHE_DEFAULT_DIR,
					  .pipe = { PIPELINE_DEFAULT_BATCH_BYTES,
						    PIPELINE_DEFAULT_BATCHES,
						    PIPELINE_DEFAULT_FLUSH_MS },
				  } };
	optind = 1;
	opterr = 0;
	while (!err && (c = getopt_long(argc, argv, "+o:vqh", track_options, NULL)) != -1) {
		switch (c) {
		case 'o': o->output = optarg; break;
		case 'v': s->verbose = true; break;
		case 'q': o->quiet = true; break;
		case 'h': exit(help_show("track"));
		case OPT_NO_ALLOC: s->allocators = false; break;
		case OPT_PHYSICAL: s->physical = true; break;
		case OPT_ALLOW_DROPS: o->allow_drops = true; break;
		case OPT_CONTROL:
			if (!*optarg) {
				die_msg("empty --control path; give the path of a socket to create, e.g. --control /tmp/memtrack.sock");
				return 2;
			}
			s->control = optarg;
			break;
		case OPT_START_DISABLED: s->start_disabled = true; break;
		case OPT_STACKS: o->stacks_choice = 1; break;
		case OPT_NO_STACKS: o->stacks_choice = -1; break; /* the last of the two wins */
		case OPT_UNWIND_CACHE:
		case OPT_NO_UNWIND_CACHE:
			err = track_unwind_cache_opt(c == OPT_UNWIND_CACHE ? optarg : NULL, s);
			break;
		case OPT_FAST: o->fast_choice = 1; break;
		case OPT_NO_FAST: o->fast_choice = -1; break;
		case OPT_NO_PYTHON_FRAMES: s->no_python_frames = true; break;
		case OPT_DAEMON: err = track_daemon_opt(optarg, &o->dc); break;
		case OPT_NO_DAEMON: o->dc = (struct daemon_choice){ .mode = -1 }; break;
		case OPT_SAMPLE_BYTES: err = track_sample_opt(optarg, s); break;
		case OPT_PROFILE_EVERY: err = profile_every_opt(optarg, &o->profile); break;
		case OPT_PROFILE_DIR: o->profile.dir = optarg; break;
		case OPT_UNWIND_ROWS:
		case OPT_RING:
		case OPT_BATCH:
		case OPT_FLUSH:
		case OPT_WAKEUP: err = parse_size_opt(c, optarg, o); break;
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
	if (err)
		return err;
	if (optind >= argc) {
		die_msg("no command given; usage: memtrack track [-o FILE] -- CMD [ARGS...]; see memtrack help track");
		return 2;
	}
	if (check_combinations(o) || profile_opts_check(&o->profile))
		return 2;
	if (o->profile.every_ns)
		s->profile = &o->profile;
	/*
	 * Stacks by default: they cost the in-process path ~1.2x (issue 20's
	 * figures); they need the allocator probes, so --no-allocators alone
	 * means none.
	 */
	s->stacks =
		MT_ARCH_STACKS && (o->stacks_choice > 0 || (!o->stacks_choice && s->allocators));
	/* the in-process path by default, where it can serve (with stacks it unwinds in-process) */
	s->fast = o->fast_choice > 0 ||
		  (!o->fast_choice && s->allocators && session_fast_available());
	s->argv = argv + optind;
	/* after `--` the command is argv as given; a lone quoted string is shell */
	s->shell = strcmp(argv[optind - 1], "--") != 0 && argc - optind == 1 &&
		   strpbrk(argv[optind], " \t\n|&;<>()$`\\\"'*?[]#~=%");
	if (!s->wakeup_bytes)
		s->wakeup_bytes = s->ring_bytes / 16;
	return 0;
}

static uint64_t total_drops(const struct mt_trailer *t)
{
	uint64_t n = 0;

	for (int i = 0; i < MT_DROP_SLOTS; i++)
		n += t->dropped[i];
	return n;
}

static int exit_status_of(int status)
{
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

/* The summary line and the exit status: the command's, unless events were lost. */
static int report_end(const struct track_opts *o, const struct session_stats *st,
		      const struct mt_trailer *t)
{
	uint64_t drops = total_drops(t), events = st->events;
	int status = exit_status_of(st->status);
	char unprobed[64] = "", refused[96] = "", killed[96] = "", env[160] = "", cut[128] = "";
	uint64_t cut_rings = st->fast ? st->fast_st.cut : 0;

	if (t->unprobed)
		snprintf(unprobed, sizeof(unprobed), ", %llu processes unprobed",
			 (unsigned long long)t->unprobed);
	if (t->killed_in_call)
		snprintf(killed, sizeof(killed),
			 ", %llu heap calls cut short by a kill (never returned, not recorded)",
			 (unsigned long long)t->killed_in_call);
	if (t->env_overflow)
		snprintf(
			env, sizeof(env),
			", %llu processes exec'd a program on the uprobes (environment beyond %u entries or a %u-byte LD_PRELOAD)",
			(unsigned long long)t->env_overflow, MT_FAST_ENV_MAX_ENTRIES,
			MT_FAST_ENV_MAX_PRELOAD);
	if (cut_rings)
		snprintf(
			cut, sizeof(cut),
			", the heap calls of %llu processes lost after their in-process ring was cut off (ring_cut_off)",
			(unsigned long long)cut_rings);
	if (st->fast && st->fast_st.bad_records)
		snprintf(refused, sizeof(refused),
			 ", %llu forged records refused from %llu processes",
			 (unsigned long long)st->fast_st.bad_records,
			 (unsigned long long)st->fast_st.bad_procs);
	if (!o->quiet)
		fprintf(stderr,
			"memtrack: wrote %s: %llu events, %llu lost%s%s%s%s%s, command exited with %d\n",
			o->output, (unsigned long long)events, (unsigned long long)drops, cut,
			unprobed, killed, env, refused, status);
	if (o->allow_drops)
		return status;
	if (t->unprobed)
		die_msg("%llu processes ran without allocator probes (attaching failed: %s), their heap calls are missing; raise the fd limit (ulimit -Hn) or pass --allow-drops to keep the command's exit status",
			(unsigned long long)t->unprobed, strerror(st->unprobed_errno));
	if (drops)
		die_msg("%llu events were lost (ring buffer full); rerun with a larger --ring-size, or pass --allow-drops to keep the command's exit status",
			(unsigned long long)drops);
	if (cut_rings)
		die_msg("%llu processes wrote their in-process ring against its protocol and were cut off, so their later heap calls are missing; rerun with --no-fast to record them through the uprobes, or pass --allow-drops to keep the command's exit status",
			(unsigned long long)cut_rings);
	return drops || t->unprobed || cut_rings ? 1 : status;
}


/* The session's notices: one line each (from main, or the poller). */
static void track_notice(void *ctx, const char *msg)
{
	die_msg("%s", msg);
}

/*
 * What the running kernel offers (kernel/kernel_features.h): below the
 * floor, or where a facility has no mechanism that gives the same records,
 * one line and 1; -v prints the mechanism chosen per facility.  Returns 0
 * to go on.
 */
static int check_kernel(struct kernel_features *kfw, struct session_opts *s)
{
	const struct kernel_features *kf = kfw;
	char buf[256];

	(void)kernel_features_probe(kfw); /* no BTF: below_floor says so */
	if (kernel_features_below_floor(kf, buf, sizeof(buf))) {
		die_msg("%s", buf);
		return 1;
	}
	if (s->verbose) {
		fprintf(stderr, "memtrack: kernel %s%s:", kf->release,
			kf->forced ? " (fallbacks forced)" : "");
		for (int f = 0; f < KF_NFACILITIES; f++)
			fprintf(stderr, " %s=%s", kernel_features_facility(f),
				kernel_features_mech(kf, f));
		fputc('\n', stderr);
	}
	if (s->allocators && !attach_select(kf)->available()) {
		die_msg("this kernel (Linux %s) has neither uprobe-multi links (Linux 6.6) nor the uprobe perf PMU, which the heap probes need; record without them with --no-allocators",
			kf->release);
		return 1;
	}
	s->kf = kf;
	return 0;
}

int check_recording_host(struct kernel_features *kf, struct session_opts *s)
{
	enum session_host h = session_check_host();

	if (h == SESSION_HOST_NO_CAPS) {
		die_msg("memtrack needs root (or CAP_BPF and CAP_PERFMON) to load its BPF programs; run it with sudo");
		return 1;
	}
	if (h == SESSION_HOST_PID_NS) {
		die_msg("memtrack cannot run inside a PID namespace (its BPF side sees the host's pids); run it outside and put the namespace inside the command: memtrack track -- unshare -fp --mount-proc CMD");
		return 1;
	}
	return check_kernel(kf, s) ? 1 : 0;
}

/* Whether the command can run; 0, or the exit status (reported). */
static int check_command(struct track_opts *o, char *path, size_t len)
{
	int ret = o->s.shell ? 0 : spawn_resolve(o->s.argv[0], path, len);

	if (ret == -ENOENT) {
		die_msg("command not found: %s; check the name or give its full path",
			o->s.argv[0]);
		return 127;
	}
	if (ret) { /* like a shell: found but cannot run, 126 */
		die_msg("cannot run %s: %s; give an executable file", o->s.argv[0], strerror(-ret));
		return 126;
	}
	return 0;
}

/* Whether memtrack can record here; 0, or the exit status (reported). */
static int check_host(struct track_opts *o, char *path, size_t len)
{
	if (check_recording_host(&o->kf, &o->s))
		return 1;
	return check_command(o, path, len);
}

/* The session of the daemon on @sock: the user's command, the daemon's BPF side. */
static int track_through_daemon(struct track_opts *o, int sock)
{
	struct client_result res;
	char path[4096];
	int ret = check_command(o, path, sizeof(path));

	if (ret) {
		close(sock);
		return ret;
	}
	/* the in-process path is the daemon's library's: it falls back to the uprobes without */
	o->s.fast = o->fast_choice >= 0 && o->s.allocators;
	ret = daemon_record(&o->s, &o->output, sock, NULL, NULL, &res);
	return ret ? ret : report_end(o, &res.st, &res.t);
}

/* From the released command to the exit status. */
static int record(struct session *s, struct track_opts *o, struct track_out *out)
{
	struct mt_trailer trailer = { 0 };
	struct session_stats st;
	int ret = session_release(s);

	if (ret) {
		/* like a shell: 127 or 126, and no artifact of a command that never ran */
		die_msg("cannot run %s: %s; check the file and its interpreter (#! line)",
			o->s.argv[0], strerror(-ret));
		track_discard_output(out);
		return ret == -ENOENT ? 127 : 126;
	}
	track_place_or_keep(out, &o->output);
	if (track_wait_finish(s, o->output, &trailer, &st))
		return 1;
	return report_end(o, &st, &trailer);
}

static int record_track(struct session *s, void *o, struct track_out *out)
{
	return record(s, o, out);
}

int cmd_track(int argc, char **argv)
{
	struct track_opts o;
	char path[4096];
	int ret;

	ret = parse_track_opts(argc, argv, &o);
	if (ret)
		return ret;
	if (!o.output)
		o.output = track_default_output(o.s.argv[0]);
	o.s.notice = track_notice;
	ret = daemon_pick(&o.dc, daemon_unsupported(&o.s), o.s.verbose);
	if (ret == -2)
		return 1;
	if (ret >= 0)
		return track_through_daemon(&o, ret);
	ret = check_host(&o, path, sizeof(path));
	if (ret)
		return ret;
	return track_run_session(&o.s, o.output, record_track, &o, "");
}
