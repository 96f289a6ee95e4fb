/* SPDX-License-Identifier: MIT */
/*
 * as_user.h - file-system operations done as the user memtrack works for.
 *
 * Under sudo (memtrack is root and SUDO_UID/SUDO_GID are set) the files and
 * sockets memtrack makes for the invoking user are made *by* that user: each
 * operation runs in a forked child that has become the user (their groups,
 * gid, uid, no capabilities), so the kernel checks that user's permissions
 * and the result is theirs without a chown.  A path the user could not have
 * written is refused (EACCES), whatever root could do.  Run as plain root
 * (no SUDO_UID) the operations run directly in memtrack.
 *
 * Either way nothing follows a symbolic link in the last component
 * (O_NOFOLLOW; rename and unlink never follow one), and the callers work
 * under a directory fd opened once (as_user_open_dir), so a directory
 * swapped for a link later cannot redirect them.
 *
 * Every function returns 0 (or an fd) or -errno; none prints.
 *
 * THREAD NOTES: any thread may call these; the child runs async-signal-safe
 * calls only (memtrack has threads when it renames the artifact), so the
 * user's group list is read once, in the parent, by as_user_prepare()
 * (called by the first operation; main calls it early, before threads).
 */
#ifndef MEMTRACK_AS_USER_H
#define MEMTRACK_AS_USER_H

#include <stdbool.h>
#include <sys/types.h>
#include "compiler.h"

/* Returns the uid/gid memtrack was invoked by through sudo, or false. */
bool sudo_invoker(uid_t *uid, gid_t *gid);

/*
 * Reads the invoker's group list (getgrouplist) once; later calls do
 * nothing.  Returns 0 or -errno (-ENOMEM).
 */
MT_MUST_CHECK int as_user_prepare(void);

/* The uid whose files memtrack writes: the sudo invoker, else geteuid(). */
uid_t as_user_uid(void);

/*
 * In a forked child only (async-signal-safe): becomes the invoker with the
 * groups as_user_prepare() read.  Returns 0 (also when not under sudo:
 * nothing to do) or -errno.
 */
int as_user_become(void);

/*
 * Opens the directory holding @path (its dirname, "." for a bare name) as
 * O_PATH|O_DIRECTORY; *@base points at @path's last component.  Returns the
 * fd or -errno (-EINVAL for a path ending in "/" or an empty one).
 */
MT_MUST_CHECK int as_user_open_dir(const char *path, const char **base);

/* openat(@dirfd, @name, @flags | O_NOFOLLOW | O_CLOEXEC, @mode).  Returns the fd or -errno. */
MT_MUST_CHECK int as_user_openat(int dirfd, const char *name, int flags, mode_t mode);

/*
 * Creates @templ (ending in "XXXXXX", replaced) under @dirfd with
 * O_EXCL|O_NOFOLLOW, mode 0600, opened O_RDWR|@flags.  Returns the fd or -errno.
 */
MT_MUST_CHECK int as_user_mkstempat(int dirfd, char *templ, int flags);

/* mkdirat(@dirfd, @name, @mode).  Returns 0 or -errno. */
MT_MUST_CHECK int as_user_mkdirat(int dirfd, const char *name, mode_t mode);

/* renameat(@dirfd, @from, @dirfd, @to).  Returns 0 or -errno. */
MT_MUST_CHECK int as_user_renameat(int dirfd, const char *from, const char *to);

/* unlinkat(@dirfd, @name, 0).  Returns 0 or -errno. */
int as_user_unlinkat(int dirfd, const char *name);

/*
 * Binds the Unix socket @sock under @dirfd and listens on it (@backlog),
 * born with mode 0600 (umask 0177 in the binding process, so no one else
 * may ever connect).  The socket is bound under a temporary name and
 * renamed to @name only once it listens: a client that sees @name can
 * connect (no ECONNREFUSED window between bind and listen).  An existing
 * @name is never replaced (-EEXIST).  Returns 0 or -errno.
 */
MT_MUST_CHECK int as_user_listenat(int dirfd, int sock, const char *name, int backlog);

#endif /* MEMTRACK_AS_USER_H */
