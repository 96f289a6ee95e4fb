/* SPDX-License-Identifier: MIT */
/*
 * elf_needed.h - the shared libraries an executable or library will have
 * the dynamic loader map (DT_NEEDED), found as ld.so would for the usual
 * cases: in the file's DT_RUNPATH (or DT_RPATH) with $ORIGIN expanded, then
 * the system's library directories.  A guess for the stacks prebuild
 * (record/stacks.h), which only uses a table for the very file a process
 * maps: LD_LIBRARY_PATH, ld.so.cache entries outside the usual
 * directories and hwcaps subdirectories are not looked at, and a library
 * found wrongly costs a table built for nothing.
 *
 * The file is untrusted (mapped_file.h opens it); a name with a '/', an
 * empty or overlong one, is skipped.
 */
#ifndef MEMTRACK_ELF_NEEDED_H
#define MEMTRACK_ELF_NEEDED_H

#include <stddef.h>

#define ELF_NEEDED_PATH_MAX 4096

/*
 * Resolves @path's DT_NEEDED libraries to canonical paths (realpath) in
 * @out, at most @max; returns how many, 0 when @path is no dynamic ELF.
 */
unsigned elf_needed(const char *path, char (*out)[ELF_NEEDED_PATH_MAX], unsigned max);

#endif /* MEMTRACK_ELF_NEEDED_H */
