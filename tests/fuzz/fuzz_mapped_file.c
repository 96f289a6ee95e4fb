// SPDX-License-Identifier: MIT
/*
 * fuzz_mapped_file.c - libFuzzer target for the recorder's readers of the
 * files tracked processes map: alloc_syms_read() (symbols.c, the allocator
 * symbols probes.c attaches to), unwind_table_build() (unwind_table.c,
 * the --stacks rows) and elf_needed() (elf_needed.c, the libraries the
 * stacks prebuild reads ahead), all reached through mapped_file_open().  A tracked
 * program chooses what those files hold (it can map a file it wrote), and
 * root memtrack parses them while the program is parked, so every input is
 * such a file.  The readers must neither crash, overrun (ASan) nor invoke
 * undefined behaviour (UBSan), and what they return must be consistent:
 * known allocator functions, rows sorted, the index within the rows.
 * (The native CFI interpreter is not held to libdw's rows here: on a
 * crafted file whose .eh_frame_hdr disagrees with .eh_frame, libdw follows
 * the table and the interpreter .eh_frame itself; either way only that
 * file's own stacks are affected.  tests/unit/test_unwind_cfi_diff.c holds
 * it to libdw's rows on every real object of the system.)  `make
 * fuzz` runs it from tests/fuzz/seeds_mapped_file/ (small real ELF files).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/types.h>
#include "event.h"
#include "inspect/elf_needed.h"
#include "inspect/symbols.h"
#include "inspect/unwind_table.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char needed[8][ELF_NEEDED_PATH_MAX];

static char dir[64];

/* The scratch directory goes when the fuzzer exits (libFuzzer ends with exit()). */
static void remove_dir(void)
{
	rmdir(dir);
}

static void check_syms(const struct alloc_syms *s)
{
	if (s->n > sizeof(s->site) / sizeof(s->site[0]))
		abort();
	for (unsigned i = 0; i < s->n; i++)
		if (s->site[i].fn >= MT_FN_MAX)
			abort();
}

static void check_table(const struct unwind_table *t)
{
	for (size_t i = 1; i < t->nrows; i++)
		if (t->rows[i - 1].pc > t->rows[i].pc)
			abort();
	for (size_t b = 0; b < t->nindex; b++)
		if (t->index[b] >= t->nrows)
			abort();
	if (t->nloads > UNWIND_MAX_LOADS || t->build_id_len > MT_BUILD_ID_MAX)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct unwind_table *t = NULL;
	struct alloc_syms s;
	char path[128];
	FILE *f;

	if (!dir[0]) {
		snprintf(dir, sizeof(dir), "/dev/shm/fuzz-mapped-file-%d", (int)getpid());
		mkdir(dir, 0700);
		atexit(remove_dir);
	}
	snprintf(path, sizeof(path), "%s/object", dir);
	f = fopen(path, "w");
	if (!f)
		return 0;
	fwrite(data, 1, size, f);
	fclose(f);
	if (!alloc_syms_read(path, &s))
		check_syms(&s);
	if (!unwind_table_build(path, &t) && t)
		check_table(t);
	unwind_table_free(t);
	if (elf_needed(path, needed, 8) > 8)
		abort(); /* more than asked for */
	unlink(path);
	return 0;
}
