/* SPDX-License-Identifier: MIT */
/*
 * spawn.h - start the command as a parked child.
 *
 * The child is forked and waits on a pipe, before exec, until memtrack has
 * registered its pid with the BPF side; only then does it exec the command.
 * Under sudo the child drops to the invoking user first, with
 * PR_SET_NO_NEW_PRIVS: a setuid binary in the tree does not run privileged.
 */
#ifndef MEMTRACK_SPAWN_H
#define MEMTRACK_SPAWN_H

#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>
#include "util/as_user.h" /* sudo_invoker() */
#include "compiler.h"

struct spawn {
	pid_t pid;		  /* the child, -1 when not started */
	int release_fd;		  /* write end of the pipe the child waits on */
	int status_fd;		  /* read end: the child's exec errno, EOF on success */
	unsigned long nofile;	  /* soft RLIMIT_NOFILE the command gets (memtrack
				 * raised its own), set by the caller; 0: leave it */
	unsigned long nofile_max; /* and its hard one (root raises that too) */
	char **envp;		  /* the command's environment (borrowed), NULL: memtrack's */
	sigset_t ignored;	  /* signals ignored when memtrack started (nohup: SIGHUP),
				 * which memtrack catches: ignored again in the command;
				 * set by the caller, empty if never set */
};

/*
 * The command's environment, built explicitly: memtrack's own, with names
 * set or removed, and memtrack's untouched (no setenv).
 */
struct spawn_env {
	char **vars; /* NULL-terminated, owned with its strings */
	size_t n;    /* entries before the NULL */
};

/* Copies memtrack's environment into @e.  Returns 0 or -ENOMEM (@e empty). */
MT_MUST_CHECK int spawn_env_init(struct spawn_env *e);

/* Sets @name to @value, or removes it (@value NULL).  Returns 0 or -ENOMEM. */
MT_MUST_CHECK int spawn_env_set(struct spawn_env *e, const char *name, const char *value);

/*
 * Puts @value first in the list @name holds (@sep between entries, e.g.
 * LD_PRELOAD's ':'), or sets it to @value when unset or empty.  Returns 0
 * or -ENOMEM.
 */
MT_MUST_CHECK int spawn_env_prepend(struct spawn_env *e, const char *name, const char *value,
				    char sep);

/* @name's value in @e, or NULL. */
const char *spawn_env_get(const struct spawn_env *e, const char *name);

/* Frees @e's strings and array (an empty one is fine). */
void spawn_env_free(struct spawn_env *e);

/*
 * Resolves @argv[0] like a shell would (PATH search unless it has a '/').
 * Returns 0, or -ENOENT (not found), -EACCES (not executable), -EISDIR (a
 * path naming a directory).
 */
MT_MUST_CHECK int spawn_resolve(const char *file, char *path, size_t len);

/*
 * Forks the child; it is parked until spawn_release().  @argv is the command,
 * run with sp->envp;
 * when @shell is true, argv[0] is run through /bin/sh -c.  @drop_to_sudo_user
 * makes the child run as SUDO_UID/SUDO_GID with that user's groups, and
 * with PR_SET_NO_NEW_PRIVS (an exec never raises privileges again).
 * @mask is the signal mask the command starts with (memtrack's own before
 * it blocked the signals it handles).  Returns 0 or -errno; on failure
 * nothing is left running.
 */
MT_MUST_CHECK int spawn_parked(struct spawn *sp, char *const argv[], bool shell,
			       bool drop_to_sudo_user, const sigset_t *mask);

/*
 * Lets the parked child exec.  Returns 0 when the exec succeeded, or the
 * negative errno the exec failed with (the child then exits with 127).
 */
MT_MUST_CHECK int spawn_release(struct spawn *sp);

/* Kills and reaps a child that was never released (setup failed). */
void spawn_abort(struct spawn *sp);

#endif /* MEMTRACK_SPAWN_H */
