// SPDX-License-Identifier: MIT
/*
 * test_unwind_cfi_diff.c - the native CFI interpreter of unwind_table.c
 * against the libdw path it replaces: for every ELF file of a list of real
 * objects (the shared libraries of /usr/lib/x86_64-linux-gnu, /usr/bin,
 * gcc's cc1, python3 and the project's fixtures) the two tables must be the
 * same row for row, and so must their address index.  Reports how many
 * objects were compared and how many the native path gave to libdw.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "harness.h"
#include "inspect/unwind_table.h"

static unsigned compared, fell_back, rows_total;

static bool is_elf(const char *path)
{
	char m[4];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	bool ok = fd >= 0 && read(fd, m, 4) == 4 && !memcmp(m, "\177ELF", 4);

	if (fd >= 0)
		close(fd);
	return ok;
}

/* Builds @path both ways; every row, the index and the loads must match. */
static void compare(const char *path)
{
	struct unwind_table *a = NULL, *b = NULL;
	int ea = unwind_table_build_mode(path, UNWIND_CFI_NATIVE, &a);
	int eb = unwind_table_build_mode(path, UNWIND_CFI_LIBDW, &b);
	bool same;

	CHECK_EQ(ea, eb);
	if (ea || eb)
		goto out;
	compared++;
	if (a->libdw_fallback) {
		fell_back++;
		printf("  fell back to libdw: %s\n", path);
	}
	rows_total += (unsigned)a->nrows;
	same = a->nrows == b->nrows && a->nindex == b->nindex && a->shift == b->shift &&
	       a->text_lo == b->text_lo &&
	       (!a->nrows || !memcmp(a->rows, b->rows, a->nrows * sizeof(*a->rows))) &&
	       (!a->nindex || !memcmp(a->index, b->index, a->nindex * sizeof(*a->index)));
	if (!same) {
		size_t i = 0;

		while (i < a->nrows && i < b->nrows &&
		       !memcmp(&a->rows[i], &b->rows[i], sizeof(*a->rows)))
			i++;
		fprintf(stderr, "  %s: native %zu rows, libdw %zu; first difference at row %zu",
			path, a->nrows, b->nrows, i);
		if (i < a->nrows && i < b->nrows)
			fprintf(stderr, " (pc %#x/%#x cfa %u/%u off %d/%d rbp %u/%u off %d/%d)",
				a->rows[i].pc, b->rows[i].pc, a->rows[i].cfa, b->rows[i].cfa,
				a->rows[i].cfa_off, b->rows[i].cfa_off, a->rows[i].rbp,
				b->rows[i].rbp, a->rows[i].rbp_off, b->rows[i].rbp_off);
		fprintf(stderr, "\n");
	}
	CHECK(same);
out:
	unwind_table_free(a);
	unwind_table_free(b);
}

/* Every regular ELF file of @dir whose name holds @part (NULL: any). */
static void compare_dir(const char *dir, const char *part)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char path[4096];
	struct stat st;

	if (!d)
		return;
	while ((de = readdir(d))) {
		if (part && !strstr(de->d_name, part))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (lstat(path, &st) || !S_ISREG(st.st_mode) || !is_elf(path))
			continue;
		compare(path);
	}
	closedir(d);
}

static void test_native_matches_libdw(void)
{
	const char *out = getenv("OUT");
	char fixtures[4096];
	unsigned before;

	compare_dir("/usr/lib/x86_64-linux-gnu", ".so");
	compare_dir("/usr/bin", NULL);
	compare("/usr/lib/gcc/x86_64-linux-gnu/12/cc1");
	compare("/usr/bin/python3");
	snprintf(fixtures, sizeof(fixtures), "%s/%s/fixtures", MT_SOURCE_DIR,
		 out && *out ? out : "build");
	if (out && *out == '/')
		snprintf(fixtures, sizeof(fixtures), "%s/fixtures", out);
	before = compared;
	compare_dir(fixtures, NULL);
	printf("  compared %u objects (%u fixtures, %u rows), %u fell back to libdw\n", compared,
	       compared - before, rows_total, fell_back);
	CHECK(compared > 100);
}

int main(void)
{
	RUN(test_native_matches_libdw);
	HARNESS_EXIT();
}
