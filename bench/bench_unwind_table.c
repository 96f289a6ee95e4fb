// SPDX-License-Identifier: MIT
/*
 * bench_unwind_table.c - one unwind table build (unwind_table.c) of a file,
 * for hyperfine: bench_unwind_table [-l] FILE... (-l: the libdw path, the
 * reference the native CFI interpreter replaced).  Prints rows and the
 * build's own time per file.
 */
#include <stdio.h>
#include <string.h>
#include "inspect/unwind_table.h"

int main(int argc, char **argv)
{
	enum unwind_cfi_mode mode = UNWIND_CFI_NATIVE;
	int i = 1;

	if (argc > 1 && !strcmp(argv[1], "-l")) {
		mode = UNWIND_CFI_LIBDW;
		i++;
	}
	if (i >= argc) {
		fprintf(stderr, "usage: bench_unwind_table [-l] FILE...\n");
		return 2;
	}
	for (; i < argc; i++) {
		struct unwind_table *t;
		int err = unwind_table_build_mode(argv[i], mode, &t);

		if (err) {
			fprintf(stderr, "bench_unwind_table: %s: %s\n", argv[i], strerror(-err));
			return 1;
		}
		printf("%s: %zu rows in %.3f ms%s\n", argv[i], t->nrows, t->build_ns / 1e6,
		       t->libdw_fallback ? " (libdw fallback)" : "");
		unwind_table_free(t);
	}
	return 0;
}
