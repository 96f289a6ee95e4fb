// SPDX-License-Identifier: MIT
/*
 * test_elf_needed.c - src/inspect/elf_needed.c: the libraries a file
 * needs, resolved as ld.so would: this test binary's own C library (the
 * very file /proc/self/maps shows), a library found through a
 * DT_RUNPATH of $ORIGIN (an executable and a library built here), and
 * nothing for a file that is not ELF or does not exist.
 */
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "harness.h"
#include "inspect/elf_needed.h"

static char dir[64];
static char found[16][ELF_NEEDED_PATH_MAX];

/* The C library this process runs on, as /proc/self/maps names it. */
static int own_libc(char *out, size_t len)
{
	char line[4096 + 128];
	FILE *f = fopen("/proc/self/maps", "re");
	int ret = -1;

	while (f && fgets(line, sizeof(line), f)) {
		char *path = strchr(line, '/');

		if (!path || !strstr(path, "/libc.so"))
			continue;
		path[strcspn(path, "\n")] = 0;
		snprintf(out, len, "%s", path);
		ret = 0;
		break;
	}
	if (f)
		fclose(f);
	return ret;
}

static bool has(unsigned n, const char *path)
{
	for (unsigned i = 0; i < n; i++)
		if (!strcmp(found[i], path))
			return true;
	return false;
}

static void test_own_libc(void)
{
	char libc[4096];
	unsigned n;

	CHECK_EQ(own_libc(libc, sizeof(libc)), 0);
	n = elf_needed("/proc/self/exe", found, 16);
	CHECK(n >= 1);
	CHECK(has(n, libc));
}

static void test_origin_runpath(void)
{
	char cmd[1024], lib[PATH_MAX], want[PATH_MAX], exe[PATH_MAX];
	unsigned n;

	snprintf(
		cmd, sizeof(cmd),
		"mkdir -p %s/lib && echo 'int mt_origin(void) { return 7; }' > %s/o.c && "
		"cc -shared -fPIC -o %s/lib/libmtorigin.so %s/o.c && "
		"echo 'int mt_origin(void); int main(void) { return mt_origin(); }' > %s/m.c && "
		"cc -o %s/exe %s/m.c -L%s/lib -lmtorigin -Wl,--enable-new-dtags,-rpath,'$ORIGIN/lib'",
		dir, dir, dir, dir, dir, dir, dir, dir);
	if (system(cmd)) {
		SKIP("no C compiler to build the $ORIGIN fixture");
		return;
	}
	snprintf(lib, sizeof(lib), "%s/lib/libmtorigin.so", dir);
	CHECK(realpath(lib, want) != NULL);
	snprintf(exe, sizeof(exe), "%s/exe", dir);
	n = elf_needed(exe, found, 16);
	CHECK(n >= 2); /* libmtorigin.so and libc.so.6 */
	CHECK_STR(found[0], want);
	CHECK_EQ(elf_needed(exe, found, 1), 1u); /* @max is kept */
}

static void test_not_elf(void)
{
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/text", dir);
	f = fopen(path, "w");
	CHECK(f != NULL);
	if (f) {
		fputs("#!/bin/sh\nexit 0\n", f);
		fclose(f);
	}
	CHECK_EQ(elf_needed(path, found, 16), 0u);
	snprintf(path, sizeof(path), "%s/none", dir);
	CHECK_EQ(elf_needed(path, found, 16), 0u);
}

int main(void)
{
	char cmd[128];

	snprintf(dir, sizeof(dir), "/tmp/memtrack-needed-XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	RUN(test_own_libc);
	RUN(test_origin_runpath);
	RUN(test_not_elf);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd)) {
		/* a scratch directory left in /tmp is harmless */
	}
	HARNESS_EXIT();
}
