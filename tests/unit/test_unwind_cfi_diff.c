// SPDX-License-Identifier: MIT
/*
 * test_unwind_cfi_diff.c - the native CFI interpreter of unwind_table.c
 * against the libdw path it replaces: for every ELF file of a list of real
 * objects (the shared libraries of /usr/lib/x86_64-linux-gnu, /usr/bin,
 * gcc's cc1, python3 and the project's fixtures) the two tables must be the
 * same row for row, and so must their address index.  Reports how many
 * objects were compared and how many the native path gave to libdw.
 *
 * aarch64 objects too, read on any host (libdw's aarch64 backend gives the
 * ABI's rules for x29 and x30): Debian's :arm64 libraries, and the stacks
 * fixture cross-built by gcc and clang with pointer authentication
 * (-mbranch-protection=standard: DW_CFA_AARCH64_negate_ra_state), whose
 * rows must say where x30 is.  Without the cross toolchain that part is
 * reported skipped; MT_CFI_AARCH64=1 (make test-cfi-arm64) makes it fail.
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
static unsigned ra_saved, ra_lr; /* aarch64 rows: x30 saved at CFA + N, still in x30 */

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
	for (size_t i = 0; i < a->nrows; i++) {
		ra_saved += a->rows[i].ra == MT_RA_AT_CFA;
		ra_lr += a->rows[i].ra == MT_RA_LR;
	}
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
			fprintf(stderr,
				" (pc %#x/%#x cfa %u/%u off %d/%d rbp %u/%u off %d/%d ra %u/%u off "
				"%d/%d)",
				a->rows[i].pc, b->rows[i].pc, a->rows[i].cfa, b->rows[i].cfa,
				a->rows[i].cfa_off, b->rows[i].cfa_off, a->rows[i].rbp,
				b->rows[i].rbp, a->rows[i].rbp_off, b->rows[i].rbp_off,
				a->rows[i].ra, b->rows[i].ra, a->rows[i].ra_off, b->rows[i].ra_off);
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

/* $OUT/fixtures/@name, the fixtures directory as test_native_matches_libdw finds it. */
static void fixture_path(char *buf, size_t len, const char *name)
{
	const char *out = getenv("OUT");

	if (out && *out == '/')
		snprintf(buf, len, "%s/fixtures/%s", out, name);
	else
		snprintf(buf, len, "%s/%s/fixtures/%s", MT_SOURCE_DIR, out && *out ? out : "build",
			 name);
}

/*
 * One PAC fixture: both ways alike, built natively, every followable row's
 * return address at CFA + N or in x30 (never x86-64's CFA-8), some saved.
 */
static void compare_pac_fixture(const char *path)
{
	struct unwind_table *t = NULL;
	unsigned before = ra_saved;
	size_t n_x86 = 0;

	compare(path);
	CHECK_EQ(unwind_table_build(path, &t), 0);
	if (!t)
		return;
	for (size_t i = 0; i < t->nrows; i++)
		n_x86 += t->rows[i].ra == MT_RA_CFA_MINUS_8 && t->rows[i].cfa != MT_CFA_NONE &&
			 t->rows[i].cfa != MT_CFA_END;
	CHECK_EQ(n_x86, (size_t)0);
	CHECK(!t->libdw_fallback); /* negate_ra_state is the native path's too */
	CHECK(ra_saved > before);  /* its prologues save x30 */
	unwind_table_free(t);
}

static void test_aarch64_native_matches_libdw(void)
{
	static const char *const pac[] = { "cfi_aarch64_gcc", "cfi_aarch64_clang" };
	const char *req = getenv("MT_CFI_AARCH64");
	unsigned before = compared, fixtures = 0;
	char path[4096];
	struct stat st;

	ra_saved = ra_lr = 0;
	compare_dir("/usr/lib/aarch64-linux-gnu", ".so");
	for (size_t i = 0; i < sizeof(pac) / sizeof(pac[0]); i++) {
		fixture_path(path, sizeof(path), pac[i]);
		if (stat(path, &st))
			continue;
		compare_pac_fixture(path);
		fixtures++;
	}
	if (compared == before && fixtures == 0 && !(req && *req == '1')) {
		SKIP("no aarch64 objects: no /usr/lib/aarch64-linux-gnu, no cross-built "
		     "cfi_aarch64_* fixtures (make test-cfi-arm64)");
		return;
	}
	printf("  aarch64: compared %u objects (%u PAC fixtures), rows with x30 saved %u, in "
	       "x30 %u\n",
	       compared - before, fixtures, ra_saved, ra_lr);
	/* required by make test-cfi-arm64, which builds them into this OUT; another
	 * build (make check's sanitized ones) compares the system's objects alone */
	if (req && *req == '1')
		CHECK_EQ(fixtures, 2u);
	CHECK(compared - before > 20);
	CHECK(ra_saved > 0);
	CHECK(ra_lr > 0);
}

int main(void)
{
	RUN(test_native_matches_libdw);
	RUN(test_aarch64_native_matches_libdw);
	HARNESS_EXIT();
}
