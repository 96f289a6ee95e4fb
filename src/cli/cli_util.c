// SPDX-License-Identifier: MIT
/* cli_util.c - helpers shared by the subcommands; see cli.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "util/as_user.h"
#include "cli/cli.h"
#include "analyze/filter.h"
#include "format/artifact.h"

void die_msg(const char *fmt, ...)
{
	va_list ap;

	fputs("memtrack: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int close_stdout(const char *what)
{
	int err = 0;

	if (fflush(stdout) || ferror(stdout))
		err = errno ? errno : EIO;
	if (fclose(stdout) && !err)
		err = errno;
	if (!err)
		return 0;
	die_msg("cannot write the %s to standard output: %s; free space or redirect it elsewhere",
		what, strerror(err));
	return 1;
}

bool output_refused(int dirfd, const char *base, const char *path, const char *opt)
{
	struct stat st;

	if (fstatat(dirfd, base, &st, AT_SYMLINK_NOFOLLOW) || S_ISREG(st.st_mode))
		return false;
	die_msg("'%s' exists and is not a regular file (%s); memtrack replaces only regular files: choose another path with %s",
		path,
		S_ISLNK(st.st_mode)   ? "a symbolic link"
		: S_ISDIR(st.st_mode) ? "a directory"
				      : "a device, FIFO or socket",
		opt);
	return true;
}

/*
 * Opens @base under @dirfd for writing as the invoking user, without
 * following a link and without blocking on a FIFO, and truncates it once it
 * proved a regular file with no other name (a hard link would have memtrack
 * write over a file it was not given).  Returns the fd or -errno (-EINVAL:
 * not a regular file, -EMLINK: other links).
 */
static int open_for_writing(int dirfd, const char *base)
{
	int fd = as_user_openat(dirfd, base, O_WRONLY | O_CREAT | O_NONBLOCK, 0666);
	struct stat st;
	int err;

	if (fd < 0)
		return fd;
	err = fstat(fd, &st)	     ? -errno
	      : !S_ISREG(st.st_mode) ? -EINVAL
	      : st.st_nlink > 1	     ? -EMLINK
				     : 0;
	if (!err && ftruncate(fd, 0))
		err = -errno;
	if (err) {
		close(fd);
		return err;
	}
	return fd;
}

/* Says why output_fopen() could not open @path (@err, from open_for_writing or the directory). */
static void output_failed(const char *path, const char *opt, int err)
{
	if (err == -ELOOP || err == -EINVAL)
		die_msg("'%s' is not a regular file (it changed while memtrack opened it); memtrack replaces only regular files: choose another path with %s",
			path, opt);
	else if (err == -EMLINK)
		die_msg("'%s' has other hard links; memtrack does not write through them: remove it or choose another path with %s",
			path, opt);
	else
		die_msg("cannot write '%s': %s; choose a path you can write with %s", path,
			strerror(-err), opt);
}

int output_open(const char *path, const char *opt)
{
	const char *base;
	int dirfd = as_user_open_dir(path, &base), fd = -1;

	if (dirfd == -EINVAL) {
		die_msg("invalid output path '%s'; give a file name with %s", path, opt);
		return -1;
	}
	if (dirfd < 0) {
		output_failed(path, opt, dirfd);
		return -1;
	}
	if (!output_refused(dirfd, base, path, opt)) {
		fd = open_for_writing(dirfd, base);
		if (fd < 0)
			output_failed(path, opt, fd);
	}
	close(dirfd);
	return fd < 0 ? -1 : fd;
}

FILE *output_fopen(const char *path, const char *opt)
{
	int fd = output_open(path, opt);
	FILE *f;

	if (fd < 0)
		return NULL;
	f = fdopen(fd, "w");
	if (!f) {
		output_failed(path, opt, -errno);
		close(fd);
	}
	return f;
}

int cli_filter_arg(struct proc_filter *f, int argc, char **argv, int *i)
{
	const char *opt = argv[*i];
	bool pid = !strcmp(opt, "--pid");
	int err;

	if (!pid && strcmp(opt, "--comm") != 0)
		return 0;
	if (*i + 1 >= argc) {
		die_msg("%s needs a value, e.g. %s", opt, pid ? "--pid 1234" : "--comm python3");
		return -1;
	}
	++*i;
	err = pid ? proc_filter_add_pid(f, argv[*i]) : proc_filter_add_comm(f, argv[*i]);
	if (err == -E2BIG)
		die_msg("at most %d %s options", FILTER_MAX, opt);
	else if (err && pid)
		die_msg("--pid takes a process id (a number from 1), not '%s'", argv[*i]);
	else if (err)
		die_msg("--comm takes a command name as the report lists it (no '/'), not '%s'",
			argv[*i]);
	return err ? -1 : 1;
}

/* --top's N: 0, or -EINVAL after one line. */
static int parse_top(const char *arg, size_t *n)
{
	char *end;
	unsigned long v;

	if (!arg) {
		die_msg("--top needs a number of call sites, e.g. --top 10");
		return -EINVAL;
	}
	errno = 0;
	v = strtoul(arg, &end, 10);
	if (*end || end == arg || arg[0] == '-' || !v || errno || v > 1000000) {
		die_msg("--top takes a number of call sites from 1 to 1000000, not '%s'", arg);
		return -EINVAL;
	}
	*n = v;
	return 0;
}

int cli_top_arg(int argc, char **argv, int *i, size_t *n, bool *by_stack)
{
	const char *opt = argv[*i], *val = *i + 1 < argc ? argv[*i + 1] : NULL;

	if (strcmp(opt, "--top") != 0 && strcmp(opt, "--by") != 0)
		return 0;
	++*i;
	if (!strcmp(opt, "--top"))
		return parse_top(val, n) ? -1 : 1;
	if (val && (!strcmp(val, "function") || !strcmp(val, "stack"))) {
		*by_stack = !strcmp(val, "stack");
		return 1;
	}
	die_msg("--by takes function or stack, not '%s'", val ? val : "");
	return -1;
}

int cli_no_stacks(const char *path, const struct mt_header *h)
{
	if (h->flags & MT_HDR_ATTACHED)
		die_msg("'%s' has no call stacks: attach records them only with --stacks; record again with memtrack attach --stacks PID",
			path);
	else if (!(h->flags & MT_HDR_ALLOCATORS))
		die_msg("'%s' has no call stacks: track --no-allocators records them only with --stacks; record again with --stacks",
			path);
	else
		die_msg("'%s' has no call stacks: it was recorded with track --no-stacks; record again without --no-stacks (stacks are track's default)",
			path);
	return 1;
}

void cli_filter_warn_unmatched(const struct proc_filter *f, const char *path)
{
	char desc[256];

	if (proc_filter_active(f) && !f->kept)
		die_msg("warning: no record of '%s' is of a process matching %s (%llu processes recorded); see memtrack report %s for their pids and commands",
			path, proc_filter_describe(f, desc, sizeof(desc)),
			(unsigned long long)f->nprocs, path);
}
