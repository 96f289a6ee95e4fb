// SPDX-License-Identifier: MIT
/*
 * next_sym.c - symbol lookup over dl_iterate_phdr() and each object's
 * DT_GNU_HASH table; see next_sym.h.  dl_iterate_phdr() lists objects in
 * load order, which for the objects loaded at start (the program, the
 * LD_PRELOAD libraries, their dependencies) is the global search order.
 * Only default-version (not hidden) STT_FUNC definitions count.  64-bit
 * objects only (x86_64, arm64: the architectures memtrack builds for).
 */
#include <elf.h>
#include <link.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "fast/next_sym.h"

struct lookup {
	const char *name;
	uint32_t hash;
	const void *self; /* NULL: search from the first object */
	bool past_self;
	void *found;
	const char *also; /* one_object_defines(): the second name */
	bool both;
};

static uint32_t gnu_hash(const char *s)
{
	uint32_t h = 5381;

	for (; *s; s++)
		h = h * 33 + (unsigned char)*s;
	return h;
}

/* A dynamic entry's address: relocated in place by ld.so, except read-only ones (vDSO). */
static uintptr_t dyn_ptr(const struct dl_phdr_info *info, Elf64_Addr v)
{
	return v < info->dlpi_addr ? info->dlpi_addr + v : v;
}

static bool contains(const struct dl_phdr_info *info, const void *addr)
{
	uintptr_t a = (uintptr_t)addr;

	for (int i = 0; i < info->dlpi_phnum; i++) {
		const Elf64_Phdr *ph = &info->dlpi_phdr[i];
		uintptr_t start = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type == PT_LOAD && a >= start && a < start + ph->p_memsz)
			return true;
	}
	return false;
}

/*
 * @name's default-version function definition in one object, or NULL
 * (its size in *@size when not NULL).
 */
static void *object_lookup_sized(const struct dl_phdr_info *info, const char *name, uint32_t h,
				 unsigned long *size)
{
	const Elf64_Dyn *dyn = NULL;
	const Elf64_Sym *symtab = NULL;
	const char *strtab = NULL;
	const uint32_t *gh = NULL;
	const Elf64_Half *versym = NULL;

	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
			dyn = (const void *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
	for (; dyn && dyn->d_tag != DT_NULL; dyn++) {
		if (dyn->d_tag == DT_SYMTAB)
			symtab = (const void *)dyn_ptr(info, dyn->d_un.d_ptr);
		else if (dyn->d_tag == DT_STRTAB)
			strtab = (const void *)dyn_ptr(info, dyn->d_un.d_ptr);
		else if (dyn->d_tag == DT_GNU_HASH)
			gh = (const void *)dyn_ptr(info, dyn->d_un.d_ptr);
		else if (dyn->d_tag == DT_VERSYM)
			versym = (const void *)dyn_ptr(info, dyn->d_un.d_ptr);
	}
	if (!symtab || !strtab || !gh || !gh[0])
		return NULL;
	{
		uint32_t nbuckets = gh[0], symoffset = gh[1], bloom_size = gh[2];
		const uint32_t *buckets =
			(const uint32_t *)((const Elf64_Addr *)(gh + 4) + bloom_size);
		const uint32_t *chain = buckets + nbuckets;
		uint32_t i = buckets[h % nbuckets];

		if (i < symoffset)
			return NULL;
		for (;; i++) {
			uint32_t h2 = chain[i - symoffset];
			const Elf64_Sym *s = &symtab[i];

			if ((h | 1) == (h2 | 1) && s->st_shndx != SHN_UNDEF && s->st_value &&
			    ELF64_ST_TYPE(s->st_info) == STT_FUNC &&
			    !(versym && (versym[i] & 0x8000)) &&
			    !strcmp(strtab + s->st_name, name)) {
				if (size)
					*size = s->st_size;
				return (void *)(info->dlpi_addr + s->st_value);
			}
			if (h2 & 1)
				return NULL;
		}
	}
}

static void *object_lookup(const struct dl_phdr_info *info, const char *name, uint32_t h)
{
	return object_lookup_sized(info, name, h, NULL);
}

struct exe_lookup {
	const char *name;
	void *found;
	unsigned long size, lo, hi;
};

/* Only the first object: the program. */
static int exe_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct exe_lookup *l = arg;

	l->lo = ~0ul;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const Elf64_Phdr *ph = &info->dlpi_phdr[i];
		unsigned long start = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		if (start < l->lo)
			l->lo = start;
		if (start + ph->p_memsz > l->hi)
			l->hi = start + ph->p_memsz;
	}
	l->found = object_lookup_sized(info, l->name, gnu_hash(l->name), &l->size);
	return 1;
}

void *exe_sym(const char *name, unsigned long *size, unsigned long *lo, unsigned long *hi)
{
	struct exe_lookup l = { .name = name };

	dl_iterate_phdr(exe_cb, &l);
	*size = l.size;
	if (lo)
		*lo = l.lo;
	if (hi)
		*hi = l.hi;
	return l.found;
}

static int lookup_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct lookup *l = arg;

	if (l->self && !l->past_self) {
		l->past_self = contains(info, l->self);
		return 0;
	}
	l->found = object_lookup(info, l->name, l->hash);
	if (l->found && l->also) {
		l->both = object_lookup(info, l->also, gnu_hash(l->also)) != NULL;
		return l->both;
	}
	return l->found != NULL;
}

void *next_sym(const char *name, const void *self)
{
	struct lookup l = { .name = name, .hash = gnu_hash(name), .self = self };

	dl_iterate_phdr(lookup_cb, &l);
	return l.found;
}

bool one_object_defines(const char *a, const char *b)
{
	struct lookup l = { .name = a, .hash = gnu_hash(a), .also = b };

	dl_iterate_phdr(lookup_cb, &l);
	return l.both;
}
