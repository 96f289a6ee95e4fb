/* SPDX-License-Identifier: MIT */
/*
 * unwind_table.h - an ELF file's .eh_frame as compact unwind rows for the
 * kernel unwinder (src/bpf/unwind.bpf.h, struct mt_unwind_row in bpf_abi.h).
 *
 * Each row holds from its pc up to the next row's: how to find the CFA
 * (rsp+N, rbp+N, *(rbp+N)), where rbp was saved, or that the return address
 * is undefined there (the outermost frame).  Rows are sorted by pc; a gap
 * between FDEs is a MT_CFA_NONE row.  Built once per file by a native CFI
 * interpreter (one pass over each FDE's program), or, for an object using
 * CFI it does not model, with elfutils' libdw (dwarf_cfi_addrframe at every
 * row); both give the same rows (tests/unit/test_unwind_cfi_diff.c).
 *
 * Ownership: unwind_table_build() returns a table the caller frees with
 * unwind_table_free() (NULL is fine).
 */
#ifndef MEMTRACK_UNWIND_TABLE_H
#define MEMTRACK_UNWIND_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/types.h>
#include "bpf_abi.h"
#include "event.h"

#define UNWIND_MAX_LOADS 16 /* PT_LOAD segments we keep per file */

struct unwind_load {
	uint64_t vaddr, offset, filesz; /* of one PT_LOAD */
};

struct unwind_table {
	struct mt_unwind_row *rows; /* sorted by pc */
	size_t nrows;
	uint8_t build_id[MT_BUILD_ID_MAX];
	uint8_t build_id_len; /* 0: no GNU build-id note */
	struct unwind_load loads[UNWIND_MAX_LOADS];
	unsigned nloads;
	uint64_t build_ns; /* time the build took */
	/* the rows by address (bpf_abi.h): index[b] is the last row at or
	 * below text_lo + (b << shift); NULL when there are no rows */
	uint32_t *index;
	size_t nindex;
	uint32_t text_lo;
	unsigned shift;
	bool libdw_fallback; /* the native CFI path gave this object to libdw */
	bool from_cache;     /* read from the unwind cache (unwind_cache.h), not built */
	/* a large table from the cache leaves its rows and index there (rows and
	 * index NULL): unwind_table_rows_at() and _index_at() read them */
	bool in_file;
	int file_fd; /* the cache entry, open while in_file */
	uint64_t file_rows_off, file_index_off;
};

/*
 * Reads @path's .eh_frame (or .debug_frame) into rows, its build-id and its
 * PT_LOAD segments.  A file without CFI gives a table of 0 rows (its stacks
 * are truncated).  Returns 0, or -errno when the file is not a readable ELF
 * file (-ENOEXEC) or memory ran out.
 */
int unwind_table_build(const char *path, struct unwind_table **out);

/*
 * How the rows are made: UNWIND_CFI_NATIVE runs each FDE's CFI program once
 * (falling back to libdw for the whole object on anything it does not
 * model); UNWIND_CFI_LIBDW asks libdw at every row (the reference).  Both
 * give the same rows.  unwind_table_build() is the native mode.
 */
enum unwind_cfi_mode { UNWIND_CFI_NATIVE, UNWIND_CFI_LIBDW };
int unwind_table_build_mode(const char *path, enum unwind_cfi_mode mode, struct unwind_table **out);

/* As unwind_table_build_mode(), of the file open at @fd (mapped_file_open(); not closed). */
int unwind_table_build_fd(int fd, enum unwind_cfi_mode mode, struct unwind_table **out);

/*
 * Load bias of a mapping of file offset @offset at @start: ELF vaddr =
 * pc - bias.  Returns 0 and sets @bias, or -ENOENT when no PT_LOAD holds the
 * offset.
 */
int unwind_table_bias(const struct unwind_table *t, uint64_t start, uint64_t offset, __u64 *bias);

/*
 * Rows [@first, @first + @n) of @t (within nrows): in place, or read into
 * @buf (@n rows) when the table is in_file.  NULL when that read fails.
 */
const struct mt_unwind_row *unwind_table_rows_at(const struct unwind_table *t, size_t first,
						 size_t n, struct mt_unwind_row *buf);

/* As unwind_table_rows_at(), for index entries [@first, @first + @n). */
const uint32_t *unwind_table_index_at(const struct unwind_table *t, size_t first, size_t n,
				      uint32_t *buf);

/* Lets go of @t's rows and index (stored elsewhere); its scalars stay. */
void unwind_table_drop_rows(struct unwind_table *t);

void unwind_table_free(struct unwind_table *t);

#endif /* MEMTRACK_UNWIND_TABLE_H */
