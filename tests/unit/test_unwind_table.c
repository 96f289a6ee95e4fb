// SPDX-License-Identifier: MIT
/*
 * test_unwind_table.c - .eh_frame to unwind rows (unwind_table.c) on real
 * files: this machine's libc (malloc's entry row, the load bias of its text
 * mapping checked against where the dynamic loader put it), the outermost
 * frame at the ELF entry point of this program and of the dynamic loader,
 * the address index against a plain binary search at every row, and files
 * that are not ELF or do not exist.
 */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "harness.h"
#include "inspect/unwind_table.h"

/* The last row at or below @addr by plain binary search, -1 if none. */
static long plain_search(const struct unwind_table *t, uint64_t addr)
{
	long lo = 0, hi = (long)t->nrows - 1, found = -1;

	while (lo <= hi) {
		long mid = (lo + hi) / 2;

		if (t->rows[mid].pc <= addr) {
			found = mid;
			lo = mid + 1;
		} else {
			hi = mid - 1;
		}
	}
	return found;
}

/* What unwind.bpf.h's find_row does with the index: bucket, then 5 steps. */
static long index_search(const struct unwind_table *t, uint64_t addr)
{
	uint64_t b, lo, hi;

	if (addr < t->text_lo)
		return -1;
	b = (addr - t->text_lo) >> t->shift;
	if (b >= t->nindex)
		b = t->nindex - 1;
	lo = t->index[b];
	hi = (b + 1 < t->nindex ? t->index[b + 1] : t->nrows - 1) + 1;
	for (int k = 0; k < MT_UNWIND_BUCKET_STEPS; k++) {
		uint64_t mid = (lo + hi) / 2;

		if (t->rows[mid].pc <= addr)
			lo = mid;
		else
			hi = mid;
	}
	return t->rows[lo].pc <= addr ? (long)lo : -1;
}

static const struct mt_unwind_row *row_at(const struct unwind_table *t, uint64_t addr)
{
	long i = plain_search(t, addr);

	return i < 0 ? NULL : &t->rows[i];
}

static const char *libc_path(uint64_t *malloc_off, uint64_t *base)
{
	void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	void *sym = libc ? dlsym(libc, "malloc") : NULL;
	static Dl_info info;

	if (!sym || !dladdr(sym, &info))
		return NULL;
	*malloc_off = (uintptr_t)sym - (uintptr_t)info.dli_fbase;
	*base = (uintptr_t)info.dli_fbase;
	return info.dli_fname;
}

static void test_libc(void)
{
	uint64_t off = 0, base = 0;
	const char *path = libc_path(&off, &base);
	const struct mt_unwind_row *r;
	struct unwind_table *t = NULL;

	CHECK(path != NULL);
	if (!path)
		return;
	CHECK_EQ(unwind_table_build(path, &t), 0);
	if (!t)
		return;
	CHECK(t->nrows > 1000);
	CHECK_EQ(t->build_id_len, 20);
	for (size_t i = 1; i < t->nrows; i++) {
		CHECK(t->rows[i - 1].pc < t->rows[i].pc);
		CHECK(memcmp(&t->rows[i - 1].cfa_off, &t->rows[i].cfa_off, 8) != 0);
	}
	/* at any function's first instruction the CFA is rsp + 8 (the call) */
	r = row_at(t, off);
	CHECK(r != NULL);
	if (r) {
		CHECK_EQ(r->cfa, MT_CFA_RSP);
		CHECK_EQ(r->cfa_off, 8);
	}
	unwind_table_free(t);
}

/* The load bias of libc's text mapping is where the loader put libc. */
static void test_bias(void)
{
	uint64_t off = 0, base = 0, start, foff;
	const char *path = libc_path(&off, &base);
	char line[4096], perms[8], mpath[4096];
	struct unwind_table *t = NULL;
	__u64 bias = 0;
	bool found = false;
	FILE *f;

	if (!path || unwind_table_build(path, &t))
		CHECK(0);
	f = fopen("/proc/self/maps", "re");
	while (t && f && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%*x %7s %lx %*x:%*x %*u %4095s", &start, perms, &foff,
			   mpath) != 4)
			continue;
		if (perms[2] != 'x' || !strstr(mpath, "libc.so.6"))
			continue;
		CHECK_EQ(unwind_table_bias(t, start, foff, &bias), 0);
		CHECK_U64(bias, base);
		found = true;
	}
	CHECK(found);
	if (f)
		fclose(f);
	unwind_table_free(t);
}

/* The ELF entry point of @path. */
static uint64_t entry_of(const char *path)
{
	Elf64_Ehdr eh;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, &eh, sizeof(eh)) : -1;

	if (fd >= 0)
		close(fd);
	return n == (ssize_t)sizeof(eh) ? eh.e_entry : 0;
}

/* _start is the outermost frame: by its CFI (a program) or by the gap (the loader). */
static void test_entry_is_outermost(void)
{
	const char *paths[] = { "/proc/self/exe", "/lib64/ld-linux-x86-64.so.2" };

	for (unsigned i = 0; i < 2; i++) {
		struct unwind_table *t = NULL;
		const struct mt_unwind_row *r;
		uint64_t entry = entry_of(paths[i]);

		CHECK(entry != 0);
		CHECK_EQ(unwind_table_build(paths[i], &t), 0);
		if (!t)
			continue;
		/* a return address into _start: after its call, entry + some bytes */
		r = row_at(t, entry + 1);
		CHECK(r != NULL);
		if (r)
			CHECK_EQ(r->cfa, MT_CFA_END);
		unwind_table_free(t);
	}
}

/* The index finds the same row as a plain search, at and around every row. */
static void test_index(void)
{
	uint64_t off = 0, base = 0;
	const char *path = libc_path(&off, &base);
	const char *paths[] = { path, "/proc/self/exe", "/lib64/ld-linux-x86-64.so.2" };

	for (unsigned p = 0; p < 3; p++) {
		struct unwind_table *t = NULL;
		unsigned bad = 0;

		CHECK(paths[p] != NULL);
		if (!paths[p] || unwind_table_build(paths[p], &t) || !t) {
			CHECK(0);
			continue;
		}
		CHECK(t->index != NULL);
		for (size_t b = 0; b + 1 < t->nindex; b++)
			CHECK(t->index[b + 1] - t->index[b] + 1 <= MT_UNWIND_BUCKET_ROWS);
		for (size_t i = 0; i < t->nrows; i++)
			for (int64_t d = -2; d <= 2; d++) {
				uint64_t a = t->rows[i].pc + d;

				bad += index_search(t, a) != plain_search(t, a);
			}
		CHECK_EQ(bad, 0);
		unwind_table_free(t);
	}
}

static void test_not_elf_and_missing(void)
{
	struct unwind_table *t = (void *)1;
	char path[] = "/tmp/memtrack-unwind-XXXXXX";
	int fd = mkstemp(path);

	CHECK(fd >= 0);
	CHECK_EQ(write(fd, "not an ELF file\n", 16), 16);
	close(fd);
	CHECK_EQ(unwind_table_build(path, &t), -ENOEXEC);
	CHECK(t == NULL);
	unlink(path);
	CHECK_EQ(unwind_table_build("/nonexistent/memtrack", &t), -ENOENT);
	CHECK(t == NULL);
}

int main(void)
{
	RUN(test_libc);
	RUN(test_bias);
	RUN(test_entry_is_outermost);
	RUN(test_index);
	RUN(test_not_elf_and_missing);
	HARNESS_EXIT();
}
