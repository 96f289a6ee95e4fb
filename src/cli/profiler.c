// SPDX-License-Identifier: MIT
/*
 * profiler.c - periodic pprof profiles of a recording; see profiler.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "analyze/analysis.h"
#include "analyze/pprof.h"
#include "analyze/stacks.h"
#include "analyze/symbolize.h"
#include "cli/cli.h"
#include "cli/profiler.h"
#include "cli/report_top.h"
#include "format/artifact.h"
#include "util/as_user.h"

#define FOLLOW_POLL_NS 100000000ull    /* between two reads of the growing artifact */
#define HEADER_WAIT_NS 600000000000ull /* a session's load, at most (the daemon's pool waits) */
#define FINISH_WAIT_S 300	       /* the last profile: one symbolized pass over every site */
#define ARTIFACT_FD 3		       /* the follower's read-only fd of the artifact */

int profile_every_opt(const char *arg, struct profile_opts *po)
{
	static const struct {
		const char *suffix;
		double ns;
	} units[] = { { "ms", 1e6 }, { "s", 1e9 }, { "m", 60e9 }, { "h", 3600e9 }, { "", 1e9 } };
	char *end;
	double v;

	errno = 0;
	v = strtod(arg, &end);
	for (size_t i = 0; !errno && end != arg && i < sizeof(units) / sizeof(units[0]); i++)
		if (!strcmp(end, units[i].suffix) && v * units[i].ns >= PROFILE_EVERY_MIN_NS &&
		    v * units[i].ns <= 1e7 * 1e9) {
			po->every_ns = (uint64_t)(v * units[i].ns);
			return 0;
		}
	die_msg("invalid --profile-every '%s'; give a duration of 100ms or more, e.g. 60s, 500ms, 5m or 1h",
		arg);
	return 2;
}

int profile_opts_check(const struct profile_opts *po)
{
	struct stat st;

	if (!po->every_ns && !po->dir)
		return 0;
	if (!po->every_ns || !po->dir || !*po->dir) {
		die_msg("--profile-every and --profile-dir go together; give both, e.g. --profile-every 60s --profile-dir profiles");
		return 2;
	}
	if (stat(po->dir, &st) || !S_ISDIR(st.st_mode)) {
		die_msg("--profile-dir '%s' is not a directory; create it first (mkdir -p %s)",
			po->dir, po->dir);
		return 2;
	}
	return 0;
}

static uint64_t mono_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t wall_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void nap_ns(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };

	nanosleep(&ts, NULL);
}

/* The follower's state. */
struct follower {
	const struct profile_opts *po;
	int dir;	     /* po->dir, O_PATH */
	struct mt_reader *r; /* the artifact, followed */
	const struct mt_header *hdr;
	struct analysis a;
	struct stack_table st;
	struct symbolizer *sym;
	unsigned seq;  /* profiles written */
	bool complete; /* the trailer was read */
};

/* Folds what was written so far: 0 more may come, 1 the trailer, < 0 an error. */
static int drain(struct follower *f)
{
	struct mt_event ev;
	int rc;

	while ((rc = mt_reader__next(f->r, &ev)) == 1)
		if (analysis_add(&f->a, &ev) || stack_table_add_event(&f->st, &ev) == -ENOMEM)
			return -ENOMEM;
	if (rc == -EAGAIN)
		return 0;
	if (rc == 0) {
		f->complete = true;
		analysis_finish(&f->a);
		return 1;
	}
	return rc;
}

/* From the recording's start to now (the header's clock is this machine's CLOCK_MONOTONIC). */
static uint64_t profile_duration(const struct follower *f)
{
	const struct mt_trailer *t = mt_reader__trailer(f->r);
	uint64_t now = mono_now_ns();

	if (t)
		return t->duration_ns;
	if (f->hdr->clock_id == CLOCK_MONOTONIC && now > f->hdr->start_ns)
		return now - f->hdr->start_ns;
	return f->a.last_ts > f->hdr->start_ns ? f->a.last_ts - f->hdr->start_ns : 0;
}

/* DIR/profile-NNNNNN.pb.gz, written under a dot-name and renamed into place. */
static int write_profile(struct follower *f)
{
	struct pprof_run run = { .live = true, .final = f->complete };
	char tmp[96], name[64];
	int fd, err;

	snprintf(name, sizeof(name), "profile-%06u.pb.gz", f->seq + 1);
	snprintf(tmp, sizeof(tmp), ".%s.tmp", name);
	fd = openat(f->dir, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	run.start_wall_ns = wall_now_ns();
	run.duration_ns = profile_duration(f);
	err = pprof_write(&f->a, &f->st, f->sym, &run, fd); /* closes fd */
	if (!err && renameat(f->dir, tmp, f->dir, name))
		err = -errno;
	if (err) {
		(void)unlinkat(f->dir, tmp, 0);
		return err;
	}
	f->seq++;
	return 0;
}

/* Waits for the artifact's header (the session writes it as it starts); 0 or 1 (said). */
static int open_artifact(struct follower *f, pid_t parent)
{
	uint64_t deadline = mono_now_ns() + HEADER_WAIT_NS;
	char path[64], err[512];
	int rc;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", ARTIFACT_FD);
	while (!(f->r = mt_reader__open(path, err, sizeof(err)))) {
		if (errno != ENODATA || getppid() != parent || mono_now_ns() > deadline) {
			if (getppid() == parent && errno != ENODATA)
				die_msg("--profile-every: cannot read the artifact: %s", err);
			return 1;
		}
		nap_ns(FOLLOW_POLL_NS / 2);
	}
	rc = mt_reader__follow(f->r);
	if (rc) {
		die_msg("--profile-every: cannot follow the artifact: %s", strerror(-rc));
		return 1;
	}
	f->hdr = mt_reader__header(f->r);
	f->a.heap_off = f->hdr->flags & MT_HDR_START_DISABLED;
	analysis_set_page_size(&f->a, f->hdr->page_size);
	return 0;
}

/*
 * Until the trailer (or the writer gone): a profile every po->every_ns,
 * and one at the end.  Returns the follower's exit status.
 */
static int follow(struct follower *f)
{
	uint64_t next = mono_now_ns() + f->po->every_ns;
	int rc, err;

	for (;;) {
		rc = drain(f);
		if (!rc && !mt_reader__writer_holds(f->r) && !(rc = drain(f))) {
			/* stopped without finishing (memtrack killed): the last one of what it holds */
			f->complete = true;
			analysis_finish(&f->a);
			rc = 2;
		}
		if (rc < 0) {
			die_msg("--profile-every: %s; no more profiles",
				rc == -ENOMEM ? "out of memory" : mt_reader__error(f->r));
			return 1;
		}
		if (rc || mono_now_ns() >= next) {
			err = write_profile(f);
			if (err) {
				die_msg("--profile-every: cannot write profile %u into '%s': %s",
					f->seq + 1, f->po->dir, strerror(-err));
				return 1;
			}
			while (next <= mono_now_ns())
				next += f->po->every_ns; /* a slow profile skips its missed turns */
		}
		if (rc)
			return 0;
		nap_ns(FOLLOW_POLL_NS < next - mono_now_ns() ? FOLLOW_POLL_NS
							     : next - mono_now_ns());
	}
}

/* The forked follower: the user's, with only the artifact's read fd of memtrack's. */
static int follower_main(const struct profile_opts *po, pid_t parent)
{
	struct follower f = { .po = po, .dir = -1 };
	int ret = 1;

	if (as_user_become()) {
		die_msg("--profile-every: cannot become the invoking user; profiles are off");
		return 1;
	}
	f.dir = open(po->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (f.dir < 0) {
		die_msg("--profile-dir '%s': %s; profiles are off", po->dir, strerror(errno));
		return 1;
	}
	analysis_init(&f.a);
	stack_table_init(&f.st);
	f.sym = cli_symbolizer_new();
	if (!f.sym)
		die_msg("--profile-every: out of memory");
	else if (!open_artifact(&f, parent))
		ret = follow(&f);
	if (f.sym)
		symbolizer__save(f.sym);
	symbolizer__free(f.sym);
	stack_table_release(&f.st);
	analysis_release(&f.a);
	mt_reader__free(f.r);
	close(f.dir);
	return ret;
}

int profiler_start(struct profiler *p, const struct profile_opts *po, int artifact_fd)
{
	char path[64];
	pid_t parent = getpid(), pid;
	int rfd;

	p->pid = 0;
	if (!po->every_ns)
		return 0;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", artifact_fd);
	rfd = open(path, O_RDONLY | O_CLOEXEC);
	if (rfd < 0) {
		die_msg("--profile-every: cannot reopen the artifact for reading: %s",
			strerror(errno));
		return 1;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		die_msg("--profile-every: cannot fork the profile writer: %s", strerror(errno));
		close(rfd);
		return 1;
	}
	if (pid == 0) {
		/* nothing of memtrack's but the artifact read-only: not its write fd, whose flock
		 * says the recording runs, nor a socket or a BPF object */
		if (dup2(rfd, ARTIFACT_FD) < 0)
			_exit(1);
		(void)syscall(SYS_close_range, ARTIFACT_FD + 1, ~0u, 0);
		signal(SIGINT, SIG_IGN); /* Ctrl-C is track's: it finishes, the follower follows */
		signal(SIGHUP, SIG_IGN);
		_exit(follower_main(po, parent));
	}
	close(rfd);
	p->pid = pid;
	return 0;
}

int profiler_finish(struct profiler *p, bool finished)
{
	int status = 0;
	pid_t got;

	if (!p->pid)
		return 0;
	if (!finished)
		kill(p->pid, SIGTERM);
	for (int i = 0; i < FINISH_WAIT_S * 10; i++) {
		got = waitpid(p->pid, &status, WNOHANG);
		if (got == p->pid || (got < 0 && errno != EINTR))
			break;
		nap_ns(100000000ull);
		if (i == FINISH_WAIT_S * 10 - 1) {
			die_msg("--profile-every: the last profile took over %d s; stopped it",
				FINISH_WAIT_S);
			kill(p->pid, SIGKILL);
			waitpid(p->pid, &status, 0);
		}
	}
	p->pid = 0;
	return finished && !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}
