/* SPDX-License-Identifier: MIT */
/*
 * objfile.h - opens the files an artifact names (binaries and their debug
 * files) for libdwfl as untrusted input.  The artifact is the user's and so
 * are the paths in it: a path may now be a FIFO (whose open() would wait
 * for a writer forever), a device, a directory, a file of any size, or a
 * user's file that its owner truncates while memtrack maps it (SIGBUS).
 *
 * So a path is opened by mt_open_regular() (open_regular.h: anything but a
 * regular file is refused without being opened; what was checked is what
 * is read, whatever replaces the path later), refused unless it is an ELF
 * file within OBJFILE_MAX_BYTES whose section headers lie within it and
 * whose compressed sections inflate within bounds; a file someone other
 * than root and the user running memtrack could change is copied into a
 * memfd of memtrack's own (within OBJFILE_MAX_COPY) so nothing it maps can
 * shrink.
 * Symlinks are followed: the recorded paths come from /proc/PID/maps, where
 * the kernel already resolved them, and a debug file is found through the
 * /usr/lib/debug/.build-id links.
 */
#ifndef MEMTRACK_OBJFILE_H
#define MEMTRACK_OBJFILE_H

#include <stdint.h>
#include <sys/stat.h>
#include <elfutils/libdwfl.h>

#define OBJFILE_MAX_BYTES (4ull << 30)	 /* root's or the user's own files, mapped in place */
#define OBJFILE_MAX_COPY (1ull << 30)	 /* anyone else's, copied into memory */
#define OBJFILE_MAX_SECTION (4ull << 30) /* a compressed section, inflated */
#define OBJFILE_MAX_RATIO 64		 /* ... and at most this many times its size */

/*
 * Opens @path as above.  Returns an fd (the file's or the copy's) for
 * libdwfl to map, or -errno: -ENOENT and the like from open(), -EINVAL not
 * a regular file, -EFBIG over the bound, -ENOEXEC not ELF.  @why (may be
 * NULL) gets a static phrase for a message ("is a FIFO, not a regular
 * file", ...) or "".  @st (may be NULL) gets the file's stat (its own, not
 * the copy's; st_ino 0 when there was nothing to look at): who it is, for
 * a caller that opens each file once however many paths name it.
 */
int objfile_open(const char *path, const char **why, struct stat *st);

/*
 * libdwfl's find_debuginfo callback, dwfl_standard_find_debuginfo()'s
 * lookup with every candidate opened by objfile_open(): by build-id under
 * each absolute entry of the debug path (".build-id/xx/yyyy.debug"), then
 * by .gnu_debuglink name (a plain file name only, no '/') in the binary's
 * directory, its relative entries and the absolute entries + its
 * directory; and the dwz file of .gnu_debugaltlink.  A candidate must have
 * the binary's build-id (the dwz file: the one its link names), so a binary
 * without a build-id gets no separate debug file.  The module's userdata
 * (dwfl_module_info()) must point at the debug path (":.debug:/usr/lib/debug").
 */
int objfile_find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, GElf_Addr base,
			   const char *file_name, const char *link, GElf_Word crc,
			   char **debuginfo_file_name);

#endif /* MEMTRACK_OBJFILE_H */
