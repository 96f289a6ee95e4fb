/* SPDX-License-Identifier: MIT */
/*
 * symbols.h - find the allocator entry points an ELF file defines.
 */
#ifndef MEMTRACK_SYMBOLS_H
#define MEMTRACK_SYMBOLS_H

#include <stdbool.h>
#include <stdint.h>
#include <linux/types.h>
#include "event.h"

/* One probe site: an allocator function of a file, as a file offset. */
struct alloc_site {
	unsigned fn;	 /* enum mt_fn */
	uint64_t offset; /* file offset of the probe */
	uint64_t entry;	 /* file offset of the function itself */
	bool vendor;	 /* under an allocator library's own name (mi_*, tc_*, mallocx ...) */
};

/* Allocator symbols a file can define (symbols.c lists them). */
#define MT_MAX_SITES 96

struct alloc_syms {
	unsigned n;  /* sites found, 0: not an allocator */
	bool vendor; /* jemalloc, mimalloc or tcmalloc: defines its own API */
	struct alloc_site site[MT_MAX_SITES];
};

/*
 * Reads @path's dynamic and static symbol tables and fills @out with every
 * allocator function it defines (not merely imports).  Functions that are
 * aliases of one another (glibc's aligned_alloc is memalign) are listed once,
 * under the first name of symbols.c's table.  free's probe is moved past a
 * leading `test %rdi,%rdi; je` NULL check when there is one: the kernel
 * emulates the instruction found there instead of single-stepping `test`.
 * Returns 0 or -errno (-ENOEXEC: not an ELF file).
 */
int alloc_syms_read(const char *path, struct alloc_syms *out);

#endif /* MEMTRACK_SYMBOLS_H */
