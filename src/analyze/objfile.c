// SPDX-License-Identifier: MIT
/* objfile.c - the binaries an artifact names, opened as untrusted input; see objfile.h. */
#include <errno.h>
#include <stdbool.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <gelf.h>
#include <elfutils/libdwelf.h>
#include <zlib.h>
#include "format/open_regular.h"
#include "analyze/objfile.h"

/*
 * Whether only root or the user running memtrack can write (and so
 * truncate) the file: it may then be mapped as it is.
 */
static bool only_we_write(const struct stat *st)
{
	return (st->st_uid == 0 || st->st_uid == getuid()) && !(st->st_mode & (S_IWGRP | S_IWOTH));
}

/* Whether a compressed section of @stored bytes may inflate to @inflated. */
static bool inflates_sanely(uint64_t inflated, uint64_t stored)
{
	return inflated <= OBJFILE_MAX_SECTION && inflated / OBJFILE_MAX_RATIO <= stored;
}

/*
 * Checks the section headers of the ELF file @e of @size bytes before
 * libdw reads the sections: every one within the file, every compressed one
 * (SHF_COMPRESSED or GNU .zdebug) inflating to at most OBJFILE_MAX_SECTION
 * and OBJFILE_MAX_RATIO times its size (libelf allows 1032 times, so a
 * 1 GiB file could ask for 1 TiB).
 */
static int check_sections(Elf *e, uint64_t size, const char **why)
{
	size_t shstrndx;

	if (elf_kind(e) != ELF_K_ELF || elf_getshdrstrndx(e, &shstrndx)) {
		*why = "is not an ELF file libelf can read";
		return -ENOEXEC;
	}
	for (Elf_Scn *scn = elf_nextscn(e, NULL); scn; scn = elf_nextscn(e, scn)) {
		GElf_Shdr sh;
		GElf_Chdr ch;
		const char *name;

		if (!gelf_getshdr(scn, &sh) ||
		    (sh.sh_type != SHT_NOBITS &&
		     (sh.sh_offset > size || sh.sh_size > size - sh.sh_offset))) {
			*why = "has a section outside the file";
			return -ENOEXEC;
		}
		name = elf_strptr(e, shstrndx, sh.sh_name);
		if (((sh.sh_flags & SHF_COMPRESSED) &&
		     (!gelf_getchdr(scn, &ch) || !inflates_sanely(ch.ch_size, sh.sh_size))) ||
		    (!(sh.sh_flags & SHF_COMPRESSED) && name && !strncmp(name, ".zdebug", 7) &&
		     !inflates_sanely((uint64_t)dwelf_scn_gnu_compressed_size(scn), sh.sh_size))) {
			*why = "has a compressed section that would inflate too far";
			return -ENOEXEC;
		}
	}
	return 0;
}

/* check_sections() on the ELF file at @fd. */
static int check_elf(int fd, uint64_t size, const char **why)
{
	Elf *e;
	int err;

	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!e) {
		*why = "is not an ELF file libelf can read";
		return -ENOEXEC;
	}
	err = check_sections(e, size, why);
	elf_end(e);
	return err;
}

/* Checks the regular file at @fd: within @max, starting with the ELF magic. */
static int check_file(int fd, const struct stat *st, uint64_t max, const char **why)
{
	char magic[4];

	if ((uint64_t)st->st_size > max) {
		*why = max == OBJFILE_MAX_COPY ? "is over 1 GiB (and not root's own file)"
					       : "is over 4 GiB";
		return -EFBIG;
	}
	/* libdwfl would also try it as a gzip/xz/zstd stream: decompressed, without a bound */
	if (pread(fd, magic, sizeof(magic), 0) != (ssize_t)sizeof(magic) ||
	    memcmp(magic, "\177ELF", 4) != 0) {
		*why = "is not an ELF file";
		return -ENOEXEC;
	}
	return 0;
}

/* A memfd holding the first @size bytes of @fd (fewer if it shrank meanwhile). */
static int copy_to_memfd(int fd, uint64_t size)
{
	int m = memfd_create("memtrack-object", MFD_CLOEXEC), err;
	off_t off = 0;

	if (m < 0)
		return -errno;
	while ((uint64_t)off < size) {
		ssize_t n = sendfile(m, fd, &off, size - (uint64_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = -errno;
			close(m);
			return err;
		}
		if (n == 0)
			break;
	}
	return m;
}

int objfile_open(const char *path, const char **why, struct stat *st)
{
	const char *dummy;
	struct stat mine;
	int fd, err;

	if (!why)
		why = &dummy;
	if (!st)
		st = &mine;
	*why = "";
	fd = mt_open_regular(path, st, why);
	if (fd < 0)
		return fd;
	err = check_file(fd, st, only_we_write(st) ? OBJFILE_MAX_BYTES : OBJFILE_MAX_COPY, why);
	if (!err && !only_we_write(st)) {
		int copy = copy_to_memfd(fd, (uint64_t)st->st_size);

		close(fd);
		fd = copy;
		if (fd < 0)
			return fd;
	}
	/* of the copy, when there is one: what libdw will read */
	if (!err)
		err = check_elf(fd, (uint64_t)st->st_size, why);
	if (err) {
		close(fd);
		return err;
	}
	return fd;
}

/* ---- separate debug files ----------------------------------------------- */

/* What proves a candidate is the debug file asked for: its build-id, else its CRC-32. */
struct want {
	const void *id; /* NULL: no build-id, check crc */
	ssize_t len;
	uint32_t crc; /* .gnu_debuglink's CRC-32 of the whole file */
};

/* Whether the ELF file at @fd has build-id @id (@len bytes). */
static bool has_build_id(int fd, const void *id, ssize_t len)
{
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	const void *got = NULL;
	ssize_t n = e ? dwelf_elf_gnu_build_id(e, &got) : -1;
	bool same = n > 0 && n == len && !memcmp(got, id, (size_t)len);

	elf_end(e);
	return same;
}

/* Whether the whole file at @fd has CRC-32 @crc (zlib's, as .gnu_debuglink's). */
static bool has_crc(int fd, uint32_t crc)
{
	unsigned char buf[1 << 16];
	uLong c = crc32(0, NULL, 0);
	off_t off = 0;
	ssize_t n;

	while ((n = pread(fd, buf, sizeof(buf), off)) > 0) {
		c = crc32(c, buf, (uInt)n);
		off += n;
	}
	return n == 0 && (uint32_t)c == crc;
}

/* Opens candidate @path when it is a safe ELF file that is the one @w wants; sets *@name. */
static int try_candidate(const char *path, const struct want *w, char **name)
{
	int fd = objfile_open(path, NULL, NULL);

	if (fd < 0)
		return -1;
	if (!(w->id ? has_build_id(fd, w->id, w->len) : w->crc && has_crc(fd, w->crc)) ||
	    !(*name = strdup(path))) {
		close(fd);
		return -1;
	}
	return fd;
}

/* A .gnu_debuglink or .gnu_debugaltlink name: a file name, nothing that climbs out. */
static bool plain_name(const char *link)
{
	return link && link[0] && !strchr(link, '/') && strcmp(link, ".") != 0 &&
	       strcmp(link, "..") != 0;
}

/* Tries @dir/@sub/@file (@sub may be NULL) and returns what try_candidate() does. */
static int try_in(const char *dir, const char *sub, const char *file, const struct want *w,
		  char **name)
{
	char path[PATH_MAX];
	int n = sub ? snprintf(path, sizeof(path), "%s/%s/%s", dir, sub, file)
		    : snprintf(path, sizeof(path), "%s/%s", dir, file);

	if (n < 0 || (size_t)n >= sizeof(path))
		return -1;
	return try_candidate(path, w, name);
}

/* /usr/lib/debug/.build-id/xx/yyyy.debug under the absolute directory @dir. */
static int try_build_id(const char *dir, const struct want *w, char **name)
{
	const unsigned char *id = w->id;
	ssize_t len = w->len;
	char file[2 * 64 + 16];
	size_t at;

	if (!id || len < 2 || len > 64)
		return -1;
	at = (size_t)snprintf(file, sizeof(file), ".build-id/%02x/", id[0]);
	for (ssize_t i = 1; i < len; i++)
		at += (size_t)snprintf(file + at, sizeof(file) - at, "%02x", id[i]);
	snprintf(file + at, sizeof(file) - at, ".debug");
	return try_in(dir, NULL, file, w, name);
}

/* By .gnu_debuglink name @link: in debug path entry @entry (absolute: + @dir; relative: under @dir). */
static int try_link(const char *entry, const char *dir, const char *link, const struct want *w,
		    char **name)
{
	if (!plain_name(link))
		return -1;
	if (entry[0] == '/')
		return try_in(entry, dir, link, w, name);
	return try_in(dir, entry[0] ? entry : NULL, link, w, name);
}

/*
 * The debug file of the binary in directory @dir that @w wants: by
 * build-id under each absolute entry of @path, then by @link (may be NULL)
 * in each entry.
 */
static int find_debug(const char *path, const char *dir, const char *link, const struct want *w,
		      char **name)
{
	int fd = -1;

	for (int pass = 0; pass < 2 && fd < 0; pass++) {
		char *copy = strdup(path), *rest = copy, *e;

		/* strsep keeps empty entries: "" is the binary's own directory */
		while (copy && fd < 0 && (e = strsep(&rest, ":"))) {
			if (pass)
				fd = try_link(e, dir, link, w, name);
			else if (e[0] == '/')
				fd = try_build_id(e, w, name);
		}
		free(copy);
	}
	return fd;
}

/* The dwz file named by @mod's .gnu_debugaltlink (@link), checked against its build-id. */
static int find_alt(Dwfl_Module *mod, const char *dir, const char *link, char **name)
{
	Dwarf_Addr bias;
	Dwarf *dw = dwfl_module_getdwarf(mod, &bias);
	const char *altname = NULL;
	struct want w = { NULL };

	w.len = dw ? dwelf_dwarf_gnu_debugaltlink(dw, &altname, &w.id) : -1;
	if (w.len <= 0)
		return -1;
	return link[0] == '/' ? try_candidate(link, &w, name) : try_in(dir, NULL, link, &w, name);
}

int objfile_find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, GElf_Addr base,
			   const char *file_name, const char *link, GElf_Word crc,
			   char **debuginfo_file_name)
{
	const char *path = *userdata;
	const unsigned char *id = NULL;
	struct want w = { NULL };
	char dir[PATH_MAX];
	const char *slash;
	GElf_Addr vaddr;
	int len;

	if (!file_name || !path || !(slash = strrchr(file_name, '/')) ||
	    (size_t)(slash - file_name) >= sizeof(dir))
		return -1;
	memcpy(dir, file_name, (size_t)(slash - file_name));
	dir[slash - file_name] = 0;
	/* libdwfl asks for the dwz file with the debuglink CRC 0 */
	if (link && !crc)
		return find_alt(mod, dir, link, debuginfo_file_name);
	/* without a build-id only the debuglink's CRC proves a debug file is this binary's */
	len = dwfl_module_build_id(mod, &id, &vaddr);
	if (len > 0)
		w = (struct want){ .id = id, .len = len };
	else if (!link)
		return -1;
	else
		w.crc = crc;
	/* a leading '+' or '-' switches libdwfl's CRC check: here a candidate is always checked */
	if (*path == '+' || *path == '-')
		path++;
	return find_debug(path, dir, link, &w, debuginfo_file_name);
}
