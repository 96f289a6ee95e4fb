// SPDX-License-Identifier: MIT
/*
 * test_symbols.c - the allocator symbol reader (symbols.c) on real files:
 * this machine's libc (offsets checked against where the dynamic loader put
 * its malloc and free), a program that only imports them, a file that is
 * not ELF, and one that does not exist.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include "harness.h"
#include "inspect/symbols.h"

static const struct alloc_site *site_of(const struct alloc_syms *s, unsigned fn)
{
	for (unsigned i = 0; i < s->n; i++)
		if (s->site[i].fn == fn)
			return &s->site[i];
	return NULL;
}

/*
 * libc's own malloc (not an interposer's, as under ASan) and its file offset:
 * glibc's text is mapped at p_vaddr == p_offset, so address - load base.
 */
static int libc_symbol(const char *name, Dl_info *info, uint64_t *off)
{
	void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	void *sym = libc ? dlsym(libc, name) : NULL;

	if (!sym || !dladdr(sym, info))
		return -1;
	*off = (uintptr_t)sym - (uintptr_t)info->dli_fbase;
	return 0;
}

static void test_libc(void)
{
	struct alloc_syms s = { 0 };
	const struct alloc_site *m, *f;
	uint64_t malloc_off = 0, free_off = 0;
	Dl_info info;

	CHECK_EQ(libc_symbol("malloc", &info, &malloc_off), 0);
	CHECK_EQ(libc_symbol("free", &info, &free_off), 0);
	CHECK_EQ(alloc_syms_read(info.dli_fname, &s), 0);
	m = site_of(&s, MT_FN_MALLOC);
	f = site_of(&s, MT_FN_FREE);
	CHECK(m && f);
	if (!m || !f)
		return;
	CHECK_U64(m->entry, malloc_off);
	CHECK_U64(m->offset, malloc_off);
	CHECK_U64(f->entry, free_off);
	/* free's probe may sit past its NULL check, never far */
	CHECK(f->offset >= f->entry && f->offset - f->entry < 16);
	CHECK(site_of(&s, MT_FN_CALLOC) != NULL);
	CHECK(site_of(&s, MT_FN_REALLOC) != NULL);
	CHECK(s.n <= MT_FN_MAX);
}

/* A program that calls malloc but does not define it has no sites. */
static void test_importer_has_none(void)
{
	struct alloc_syms s = { 0 };
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	CHECK(n > 0);
	if (n <= 0)
		return;
	self[n] = 0;
	free(malloc(1)); /* imported, certainly */
	CHECK_EQ(alloc_syms_read(self, &s), 0);
	CHECK_EQ(s.n, 0);
}

static void test_not_elf_and_missing(void)
{
	struct alloc_syms s = { 0 };

	CHECK_EQ(alloc_syms_read(MT_SOURCE_DIR "/docs/FORMAT.md", &s), -ENOEXEC);
	CHECK_EQ(s.n, 0);
	CHECK_EQ(alloc_syms_read("/nonexistent/libc.so.6", &s), -ENOENT);
	CHECK_EQ(s.n, 0);
}

int main(void)
{
	RUN(test_libc);
	RUN(test_importer_has_none);
	RUN(test_not_elf_and_missing);
	HARNESS_EXIT();
}
