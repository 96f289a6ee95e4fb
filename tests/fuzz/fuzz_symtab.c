// SPDX-License-Identifier: MIT
/*
 * fuzz_symtab.c - libFuzzer target for symbolizing addresses in an ELF file
 * that anyone may have written: an artifact names binaries by path, and a
 * user's binary (or a file put where the recorded one was) is read by root's
 * report --top, flamegraph and pprof export.  Every input is such a file,
 * reached as /proc/self/fd/N of a memfd, opened through objfile_open() and
 * libdwfl like a recorded binary, its symbol table sorted by symtab_load()
 * and a spread of addresses resolved (symtab_find(), DWARF scopes, line
 * tables).  Nothing may crash, overrun (ASan) or invoke undefined behaviour
 * (UBSan) in memtrack's code, and every name it returns is a C string.
 * libelf and libdw themselves are the system's, not instrumented: a bad read
 * inside them shows only when it faults.
 *
 * `make fuzz` builds it with clang -fsanitize=fuzzer,address,undefined and
 * runs it FUZZ_SECONDS from small real ELF files it compiles from
 * tests/fuzz/seeds_symtab/seed.c (with DWARF, stripped, a shared object).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "analyze/symbolize.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Addresses to resolve: ELF virtual addresses where small binaries put code, and two from the input. */
static uint64_t address(const uint8_t *data, size_t size, int i)
{
	uint64_t v = 0;

	if (i < 48)
		return 0x1000 + (uint64_t)i * 0x30;
	if (i < 56)
		return 0x400000 + (uint64_t)(i - 48) * 0x100;
	if (size >= 8)
		memcpy(&v, data + (i == 56 ? 0 : size - 8), 8);
	return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct symbolizer_opts o = { .cache_dir = "", .debug_path = "/nonexistent" };
	struct mt_object obj = { .id = 1 };
	char path[64];
	struct symbolizer *s;
	size_t total = 0;
	int fd = memfd_create("fuzz-symtab", MFD_CLOEXEC);

	if (fd < 0)
		return 0;
	if (size && write(fd, data, size) != (ssize_t)size) {
		close(fd);
		return 0;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	obj.path = path;
	s = symbolizer__new(&o);
	for (int i = 0; s && i < 58; i++) {
		struct sym_result r;

		if (symbolizer__lookup(s, &obj, address(data, size, i), &r))
			break;
		for (uint32_t k = 0; k < r.nframes; k++)
			total += (r.frames[k].function ? strlen(r.frames[k].function) : 0) +
				 (r.frames[k].file ? strlen(r.frames[k].file) : 0);
	}
	symbolizer__free(s);
	close(fd);
	return total == SIZE_MAX; /* keeps the strlen()s */
}
