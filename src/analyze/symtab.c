// SPDX-License-Identifier: MIT
/* symtab.c - sorted function symbols of a module; see symtab.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "analyze/symtab.h"

#define SYMTAB_BACK 64 /* enclosing symbols looked for below the nearest one */

static int rank_of(const GElf_Sym *s)
{
	switch (GELF_ST_BIND(s->st_info)) {
	case STB_GLOBAL:
	case STB_GNU_UNIQUE: return 2;
	case STB_WEAK: return 1;
	default: return 0;
	}
}

/* Leading underscores: glibc's internal aliases (__GI___clone3, __clone3) have more. */
static size_t underscores(const char *s)
{
	return strspn(s, "_");
}

/*
 * By address; at one address the preferred name first: higher binding,
 * sized, fewer leading underscores (clone3 over __GI___clone3, malloc over
 * __libc_malloc), shorter, then by bytes.
 */
static int by_addr(const void *pa, const void *pb)
{
	const struct symtab_entry *a = pa, *b = pb;
	size_t ua, ub, la, lb;

	if (a->addr != b->addr)
		return a->addr < b->addr ? -1 : 1;
	if (a->rank != b->rank)
		return b->rank - a->rank;
	if (!a->size != !b->size)
		return a->size ? -1 : 1;
	ua = underscores(a->name);
	ub = underscores(b->name);
	if (ua != ub)
		return ua < ub ? -1 : 1;
	la = strlen(a->name);
	lb = strlen(b->name);
	if (la != lb)
		return la < lb ? -1 : 1;
	return strcmp(a->name, b->name);
}

int symtab_load(struct symtab *t, Dwfl_Module *mod)
{
	int n = dwfl_module_getsymtab(mod);

	memset(t, 0, sizeof(*t));
	if (n <= 1)
		return 0;
	t->v = calloc(n, sizeof(*t->v));
	if (!t->v)
		return -ENOMEM;
	for (int i = 1; i < n; i++) {
		GElf_Sym sym;
		GElf_Addr addr;
		GElf_Word shndx;
		const char *name = dwfl_module_getsym_info(mod, i, &sym, &addr, &shndx, NULL, NULL);
		int type = GELF_ST_TYPE(sym.st_info);

		if (!name || !*name || !addr || shndx == SHN_UNDEF ||
		    (type != STT_FUNC && type != STT_GNU_IFUNC))
			continue;
		t->v[t->n++] = (struct symtab_entry){ addr, sym.st_size, name, rank_of(&sym) };
	}
	qsort(t->v, t->n, sizeof(*t->v), by_addr);
	return 0;
}

const char *symtab_find(const struct symtab *t, uint64_t addr)
{
	size_t lo = 0, hi = t->n;

	/* lo: the first entry above @addr */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (t->v[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo, k = 0; i > 0 && k < SYMTAB_BACK; i--, k++) {
		const struct symtab_entry *e = &t->v[i - 1];
		size_t first = i - 1;

		/* the preferred alias is the first of its address */
		while (first > 0 && t->v[first - 1].addr == e->addr)
			first--;
		for (size_t j = first; j < i; j++)
			if (!t->v[j].size || addr - t->v[j].addr < t->v[j].size)
				return t->v[j].name;
		i = first + 1;
	}
	return NULL;
}

void symtab_release(struct symtab *t)
{
	free(t->v);
	memset(t, 0, sizeof(*t));
}
