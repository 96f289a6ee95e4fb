/* SPDX-License-Identifier: MIT */
/*
 * mapped_file.h - opening a file a tracked process maps (its executable, its
 * libraries) so that memtrack, running as root, can read its ELF symbols
 * (symbols.c) and unwind tables (unwind_table.c).
 *
 * The path comes from /proc/PID/maps and names a file in the tracked
 * program's file system, so the program, or any user who can write one of
 * the path's directories, may have replaced it since it was mapped: with a
 * FIFO (a blocking open would hang memtrack's poller), a device node (an
 * open has side effects), or a symbolic link in any directory of the path
 * (to a file only root may read).  And the program may truncate a file it
 * owns while memtrack reads it (a mapping of it would raise SIGBUS in
 * memtrack).  So the path is resolved without following any symbolic link
 * to an O_PATH fd, which opens nothing (no driver's open, no FIFO to block
 * on); only a regular file of at most MAPPED_FILE_MAX_BYTES is then opened
 * for reading, through that fd (the same inode, whatever replaced the path
 * since), O_NONBLOCK and O_NOCTTY; and libelf reads it with pread
 * (ELF_C_READ), never through a mapping (ELF_C_READ_MMAP).
 */
#ifndef MEMTRACK_MAPPED_FILE_H
#define MEMTRACK_MAPPED_FILE_H

/* Larger files are refused: no object a process maps is this big. */
#define MAPPED_FILE_MAX_BYTES (4ull << 30)

/*
 * Opens @path for reading: "/proc/PID/root/ABSOLUTE" (as probes.c and
 * stacks.c name a process's files) is resolved inside that root with no
 * symbolic link followed in ABSOLUTE (the paths /proc/PID/maps shows have
 * none); any other path is opened as given, links followed (tests and
 * tools name files through links such as /proc/self/exe).  Returns the fd
 * (O_CLOEXEC; the caller closes it) or -errno: -ELOOP for a link, -EINVAL
 * for a file that is not regular, -EFBIG for one larger than
 * MAPPED_FILE_MAX_BYTES.
 */
int mapped_file_open(const char *path);

#endif /* MEMTRACK_MAPPED_FILE_H */
