/* SPDX-License-Identifier: MIT */
/*
 * open_regular.h - opens a file named by untrusted input (an artifact's
 * path on the command line, the binaries an artifact names) for reading,
 * when and only when it is a regular file.
 *
 * The path is first opened O_PATH, which runs no driver's open and blocks
 * on nothing: a FIFO, a device (a tape that rewinds on open, a tty), a
 * socket or a directory is refused from that fd's fstat() without ever
 * being opened.  A regular file is then reopened for reading through
 * /proc/self/fd, which reaches the same inode whatever replaced the path
 * meanwhile, O_RDONLY|O_NONBLOCK|O_NOCTTY|O_CLOEXEC (without /proc: by its
 * path again, non-blocking, kept only when it is the same inode).
 * Symlinks are followed (the check is on what they lead to).
 */
#ifndef MEMTRACK_OPEN_REGULAR_H
#define MEMTRACK_OPEN_REGULAR_H

#include <sys/stat.h>

/*
 * Opens @path as above; fills @st (of the opened file, or of the refused
 * one: st_ino 0 when nothing could be looked at).  Returns the fd, or
 * -errno: open()'s, or -EINVAL when it is not a regular file; then @why
 * (may be NULL) is mt_file_kind()'s phrase, else "".
 */
int mt_open_regular(const char *path, struct stat *st, const char **why);

/*
 * The same for a path already resolved to the O_PATH fd @at (borrowed: the
 * caller closes it), e.g. with openat2()'s RESOLVE_ flags; @path is what
 * @at was opened from (the fallback without /proc).
 */
int mt_open_regular_at(int at, const char *path, struct stat *st, const char **why);

/*
 * What a file of st_mode @mode is when it is not regular, as a phrase after
 * its name: "is a FIFO, not a regular file"; for a refusal.
 */
const char *mt_file_kind(unsigned mode);

#endif /* MEMTRACK_OPEN_REGULAR_H */
