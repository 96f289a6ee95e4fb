/* SPDX-License-Identifier: MIT */
/*
 * symtab.h - the function symbols of one libdwfl module, sorted by address
 * for a binary search.  libdwfl's own dwfl_module_addrinfo() walks the whole
 * symbol table on every call: with libc's full .symtab from its debug file
 * and tens of thousands of return addresses that was nine tenths of a flame
 * graph's time.
 *
 * Ownership: the table owns its array; names point into the module's ELF
 * string tables and stay valid while the module's Dwfl is open.
 */
#ifndef MEMTRACK_SYMTAB_H
#define MEMTRACK_SYMTAB_H

#include <stddef.h>
#include <stdint.h>
#include <elfutils/libdwfl.h>

struct symtab_entry {
	uint64_t addr;	  /* module address (ELF virtual address + bias) */
	uint64_t size;	  /* bytes, 0 when the symbol has no size */
	const char *name; /* borrowed from libelf */
	int rank;	  /* binding: global 2, weak 1, local 0 (prefer the higher) */
};

struct symtab {
	struct symtab_entry *v; /* owned, n of them, by address then preference */
	size_t n;
};

/* Reads @mod's function symbols (.symtab, else .dynsym).  0 or -ENOMEM. */
int symtab_load(struct symtab *t, Dwfl_Module *mod);

/*
 * The name of the function at module address @addr: the nearest symbol at
 * or below it that covers it (sized) or may (sizeless), the preferred one
 * among aliases; NULL when none does.
 */
const char *symtab_find(const struct symtab *t, uint64_t addr);

void symtab_release(struct symtab *t);

#endif /* MEMTRACK_SYMTAB_H */
