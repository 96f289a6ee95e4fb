// SPDX-License-Identifier: MIT
/*
 * elf_needed.c - a file's DT_NEEDED libraries, resolved (elf_needed.h).
 */
#include <gelf.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "inspect/elf_needed.h"
#include "inspect/mapped_file.h"

/* Where ld.so looks after the run path, on Debian's x86-64 (merged /usr). */
static const char *const system_dirs[] = {
	"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/lib", "/usr/lib",
	"/usr/local/lib",
};

#define MAX_NEEDED 64

struct dyn_info {
	char names[MAX_NEEDED][256];
	unsigned n;
	char runpath[1024]; /* ':'-separated, "" when none */
};

/* The file's dynamic section: its needed names and run path. */
static void read_dynamic(Elf *elf, struct dyn_info *d)
{
	size_t strndx = 0;
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	while ((scn = elf_nextscn(elf, scn))) {
		Elf_Data *data;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNAMIC)
			continue;
		strndx = sh.sh_link;
		data = elf_getdata(scn, NULL);
		for (size_t i = 0; data && sh.sh_entsize && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Dyn dyn;
			const char *s;

			if (!gelf_getdyn(data, (int)i, &dyn) || dyn.d_tag == DT_NULL)
				break;
			if (dyn.d_tag != DT_NEEDED && dyn.d_tag != DT_RUNPATH &&
			    dyn.d_tag != DT_RPATH)
				continue;
			s = elf_strptr(elf, strndx, dyn.d_un.d_val);
			if (!s || !*s || strlen(s) >= sizeof(d->names[0]))
				continue;
			if (dyn.d_tag == DT_NEEDED && d->n < MAX_NEEDED && !strchr(s, '/'))
				snprintf(d->names[d->n++], sizeof(d->names[0]), "%s", s);
			else if (dyn.d_tag != DT_NEEDED &&
				 !d->runpath[0]) /* RUNPATH and RPATH: one of */
				snprintf(d->runpath, sizeof(d->runpath), "%s", s);
		}
		return;
	}
}

/* @dir/@name, $ORIGIN in @dir replaced by @origin, canonical in @out if it exists. */
static bool try_dir(const char *dir, size_t dlen, const char *origin, const char *name, char *out)
{
	char cand[ELF_NEEDED_PATH_MAX];
	int len;

	if (dlen >= 7 && !strncmp(dir, "$ORIGIN", 7))
		len = snprintf(cand, sizeof(cand), "%s%.*s/%s", origin, (int)(dlen - 7), dir + 7,
			       name);
	else
		len = snprintf(cand, sizeof(cand), "%.*s/%s", (int)dlen, dir, name);
	if (len <= 0 || (size_t)len >= sizeof(cand) || access(cand, R_OK))
		return false;
	return realpath(cand, out) != NULL;
}

static bool resolve(const struct dyn_info *d, const char *origin, const char *name, char *out)
{
	const char *p = d->runpath;

	while (*p) {
		size_t len = strcspn(p, ":");

		if (len && try_dir(p, len, origin, name, out))
			return true;
		p += len + (p[len] == ':');
	}
	for (size_t i = 0; i < sizeof(system_dirs) / sizeof(system_dirs[0]); i++)
		if (try_dir(system_dirs[i], strlen(system_dirs[i]), origin, name, out))
			return true;
	return false;
}

unsigned elf_needed(const char *path, char (*out)[ELF_NEEDED_PATH_MAX], unsigned max)
{
	struct dyn_info *d = calloc(1, sizeof(*d));
	char origin[ELF_NEEDED_PATH_MAX], *slash;
	unsigned n = 0;
	Elf *elf = NULL;
	int fd;

	if (!d)
		return 0;
	fd = mapped_file_open(path);
	if (fd < 0)
		goto out;
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ, NULL); /* read, never mapped: mapped_file.h */
	if (!elf || elf_kind(elf) != ELF_K_ELF)
		goto out;
	read_dynamic(elf, d);
	snprintf(origin, sizeof(origin), "%s", path);
	slash = strrchr(origin, '/');
	if (slash)
		*slash = 0;
	for (unsigned i = 0; i < d->n && n < max; i++)
		n += resolve(d, origin, d->names[i], out[n]);
out:
	if (elf)
		elf_end(elf);
	if (fd >= 0)
		close(fd);
	free(d);
	return n;
}
