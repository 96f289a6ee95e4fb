// SPDX-License-Identifier: MIT
/*
 * fuzz_symcache.c - libFuzzer target for the symbolization cache's reader
 * (symcache.h): the cache is a file in the user's home that anything may
 * have written, so every input is such a file, handed to symcache_load().
 * It must neither crash, overrun (ASan) nor invoke undefined behaviour
 * (UBSan), and whatever it feeds must be well-formed: every frame's strings
 * NUL-terminated, without tab or newline.  Inputs whose first line is not
 * the header get it prepended half of the time, so mutations reach the
 * entry parser.  `make fuzz` runs it from tests/fuzz/seeds_symcache/.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "analyze/symcache.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const uint8_t bid[20] = { 0xab, 0xcd };
#define HEADER "memtrack-symcache 1 abcd000000000000000000000000000000000000\n"

static char dir[64];

static int check(void *ctx, uint64_t addr, const struct sym_frame *fr, uint32_t n)
{
	size_t *total = ctx;

	for (uint32_t i = 0; i < n; i++) {
		if ((fr[i].function && strpbrk(fr[i].function, "\t\n")) ||
		    (fr[i].file && strpbrk(fr[i].file, "\t\n")))
			abort();
		*total += (fr[i].function ? strlen(fr[i].function) : 0) +
			  (fr[i].file ? strlen(fr[i].file) : 0) + fr[i].line;
	}
	return 0;
}

/* The scratch directory goes when the fuzzer exits (libFuzzer ends with exit()). */
static void remove_dir(void)
{
	rmdir(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[128];
	size_t total = 0;
	FILE *f;

	if (!dir[0]) {
		snprintf(dir, sizeof(dir), "/dev/shm/fuzz-symcache-%d", (int)getpid());
		mkdir(dir, 0700);
		atexit(remove_dir);
	}
	snprintf(path, sizeof(path), "%s/abcd000000000000000000000000000000000000.syms", dir);
	f = fopen(path, "w");
	if (!f)
		return 0;
	if (size && (data[0] & 1) && memcmp(data, "memtrack", size < 8 ? size : 8) != 0)
		fputs(HEADER, f);
	fwrite(data, 1, size, f);
	fclose(f);
	symcache_load(dir, bid, sizeof(bid), check, &total);
	unlink(path);
	return 0;
}
