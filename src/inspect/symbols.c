// SPDX-License-Identifier: MIT
/* symbols.c - allocator symbols of an ELF file; see symbols.h. */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <gelf.h>
#include <pthread.h>
#include <stdint.h>
#include <libelf.h>
#include <string.h>
#include <unistd.h>
#include "fnv1a.h"
#include "inspect/mapped_file.h"
#include "inspect/symbols.h"
#include "util/hash_index.h"

/*
 * The allocator symbols memtrack probes, and the function each one records:
 * MT_FN_LIST's (event.h), in its order of preference, then the other names
 * of those functions.  Several names of one library often share one
 * address (glibc's aligned_alloc is memalign; tcmalloc's free is also
 * tc_free, operator delete and operator delete[]; mimalloc's malloc is
 * mi_malloc): such a site is probed once, under the name that comes first
 * here, so standard C names win over C++ operators, which win over vendor
 * names.
 */
static const struct {
	const char *name;
	unsigned fn;
	bool vendor; /* part of an allocator library's own API */
} sym_names[] = {
#define X_SYM(id, num, name, kind, sym, where) { sym, MT_FN_##id, MT_FN_IS_VENDOR(where) },
	MT_FN_LIST(X_SYM)
#undef X_SYM
		{ "cfree", MT_FN_FREE, false },
	/* mimalloc's names of the standard functions */
	{ "mi_malloc", MT_FN_MALLOC, true },
	{ "mi_calloc", MT_FN_CALLOC, true },
	{ "mi_realloc", MT_FN_REALLOC, true },
	{ "mi_reallocarray", MT_FN_REALLOCARRAY, true },
	{ "mi_memalign", MT_FN_MEMALIGN, true },
	{ "mi_aligned_alloc", MT_FN_ALIGNED_ALLOC, true },
	{ "mi_posix_memalign", MT_FN_POSIX_MEMALIGN, true },
	{ "mi_free", MT_FN_FREE, true },
	{ "mi_new", MT_FN_NEW, true },
	{ "mi_new_nothrow", MT_FN_NEW_NOTHROW, true },
	{ "mi_new_aligned", MT_FN_NEW_ALIGNED, true },
	{ "mi_new_aligned_nothrow", MT_FN_NEW_ALIGNED_NOTHROW, true },
	/* tcmalloc's own API */
	{ "tc_malloc", MT_FN_MALLOC, true },
	{ "tc_calloc", MT_FN_CALLOC, true },
	{ "tc_realloc", MT_FN_REALLOC, true },
	{ "tc_memalign", MT_FN_MEMALIGN, true },
	{ "tc_posix_memalign", MT_FN_POSIX_MEMALIGN, true },
	{ "tc_valloc", MT_FN_VALLOC, true },
	{ "tc_pvalloc", MT_FN_PVALLOC, true },
	{ "tc_free", MT_FN_FREE, true },
	{ "tc_cfree", MT_FN_FREE, true },
	{ "tc_free_sized", MT_FN_FREE_SIZED, true },
	{ "tc_new", MT_FN_NEW, true },
	{ "tc_newarray", MT_FN_NEW_ARRAY, true },
	{ "tc_new_nothrow", MT_FN_NEW_NOTHROW, true },
	{ "tc_newarray_nothrow", MT_FN_NEW_ARRAY_NOTHROW, true },
	{ "tc_new_aligned", MT_FN_NEW_ALIGNED, true },
	{ "tc_newarray_aligned", MT_FN_NEW_ARRAY_ALIGNED, true },
	{ "tc_delete", MT_FN_DELETE, true },
	{ "tc_deletearray", MT_FN_DELETE_ARRAY, true },
	{ "tc_delete_sized", MT_FN_DELETE_SIZED, true },
	{ "tc_deletearray_sized", MT_FN_DELETE_ARRAY_SIZED, true },
	{ "tc_delete_nothrow", MT_FN_DELETE_NOTHROW, true },
	{ "tc_deletearray_nothrow", MT_FN_DELETE_ARRAY_NOTHROW, true },
	{ "tc_delete_aligned", MT_FN_DELETE_ALIGNED, true },
	{ "tc_deletearray_aligned", MT_FN_DELETE_ARRAY_ALIGNED, true },
};

#define NSYMS (sizeof(sym_names) / sizeof(sym_names[0]))
_Static_assert(NSYMS <= MT_MAX_SITES, "MT_MAX_SITES too small for sym_names");

/*
 * jemalloc built with a prefix names its API je_malloc ... (--with-
 * jemalloc-prefix=je_) or _rjem_malloc ... (Rust's jemalloc-sys crate):
 * the same functions, recorded under their unprefixed names.
 */
static const char *strip_prefix(const char *name)
{
	if (!strncmp(name, "je_", 3))
		return name + 3;
	if (!strncmp(name, "_rjem_", 6))
		return name + 6;
	return name;
}

/*
 * sym_names in a hash index, built once: an executable
 * such as gcc's cc1 has 29,000 dynamic symbols, and comparing each with
 * every name took 10 ms, paid while the process is parked.
 */
#define NAME_SLOTS 512 /* a power of two, well above NSYMS */
_Static_assert(NSYMS < NAME_SLOTS / 2, "NAME_SLOTS too small for sym_names");

/* a fixed table: never reserved (it has room for every name), never released */
static uint64_t name_slots[NAME_SLOTS];
static struct hash_index names = { .slots = name_slots, .nslots = NAME_SLOTS };
static pthread_once_t names_once = PTHREAD_ONCE_INIT;

static bool name_is(const void *ctx, uint64_t pos, const void *name)
{
	return !strcmp(sym_names[pos].name, name);
}

static void names_init(void)
{
	/* a name listed twice: the first is found first */
	for (unsigned i = 0; i < NSYMS; i++)
		hash_index_add(&names, fnv1a_str(sym_names[i].name), i);
}

/* Index of @name in sym_names, or -1. */
static int sym_by_name(const char *name)
{
	pthread_once(&names_once, names_init);
	name = strip_prefix(name);
	return (int)hash_index_find(&names, fnv1a_str(name), name_is, NULL, name) - 1;
}

/* Converts a virtual address to its file offset through the PT_LOAD headers. */
static int vaddr_to_offset(Elf *elf, uint64_t vaddr, uint64_t *off)
{
	size_t n;
	GElf_Phdr ph;

	if (elf_getphdrnum(elf, &n))
		return -ENOEXEC;
	for (size_t i = 0; i < n; i++) {
		if (!gelf_getphdr(elf, i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (vaddr >= ph.p_vaddr && vaddr < ph.p_vaddr + ph.p_filesz) {
			*off = vaddr - ph.p_vaddr + ph.p_offset;
			return 0;
		}
	}
	return -ENOENT;
}

/* Collects defined FUNC symbols of one symbol table into @addr (0 = none). */
static void scan_symtab(Elf *elf, Elf_Scn *scn, GElf_Shdr *sh, uint64_t addr[NSYMS])
{
	Elf_Data *data = elf_getdata(scn, NULL);
	size_t count = sh->sh_entsize ? sh->sh_size / sh->sh_entsize : 0;
	GElf_Sym sym;

	for (size_t i = 0; data && i < count; i++) {
		const char *name;
		int idx;

		if (!gelf_getsym(data, i, &sym) || sym.st_shndx == SHN_UNDEF ||
		    GELF_ST_TYPE(sym.st_info) != STT_FUNC || !sym.st_value)
			continue;
		if (GELF_ST_BIND(sym.st_info) == STB_LOCAL)
			continue;
		name = elf_strptr(elf, sh->sh_link, sym.st_name);
		if (!name || (idx = sym_by_name(name)) < 0 || addr[idx])
			continue;
		addr[idx] = sym.st_value;
	}
}

/*
 * Probe offset for free: skip `test %rdi,%rdi` (48 85 ff) + `je rel8/rel32`.
 * Only the non-NULL path reaches the instruction after the jump.
 */
static uint64_t skip_null_check(int fd, uint64_t off)
{
	unsigned char b[9];

	if (pread(fd, b, sizeof(b), off) != sizeof(b))
		return off;
	if (b[0] != 0x48 || b[1] != 0x85 || b[2] != 0xff)
		return off;
	if (b[3] == 0x74)
		return off + 5;
	if (b[3] == 0x0f && b[4] == 0x84)
		return off + 9;
	return off;
}

int alloc_syms_read(const char *path, struct alloc_syms *out)
{
	uint64_t addr[NSYMS] = { 0 };
	Elf *elf = NULL;
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	int fd, err = 0;

	memset(out, 0, sizeof(*out));
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	fd = mapped_file_open(path);
	if (fd < 0)
		return fd;
	elf = elf_begin(fd, ELF_C_READ, NULL); /* read, never mapped: mapped_file.h */
	if (!elf || elf_kind(elf) != ELF_K_ELF) {
		err = -ENOEXEC;
		goto out;
	}
	while ((scn = elf_nextscn(elf, scn))) {
		if (gelf_getshdr(scn, &sh) &&
		    (sh.sh_type == SHT_DYNSYM || sh.sh_type == SHT_SYMTAB))
			scan_symtab(elf, scn, &sh, addr);
	}
	for (unsigned i = 0; i < NSYMS; i++) {
		unsigned fn = sym_names[i].fn;
		uint64_t off;
		bool alias = false;

		if (!addr[i] || vaddr_to_offset(elf, addr[i], &off))
			continue;
		/* tcmalloc's tc_* are all aliases of standard names: still its own API */
		out->vendor |= sym_names[i].vendor;
		for (unsigned j = 0; j < out->n; j++)
			alias |= out->site[j].entry == off;
		if (alias)
			continue;
		out->site[out->n].fn = fn;
		out->site[out->n].entry = off;
		out->site[out->n].vendor = sym_names[i].vendor;
		out->site[out->n].offset = fn == MT_FN_FREE ? skip_null_check(fd, off) : off;
		out->n++;
	}
out:
	elf_end(elf);
	close(fd);
	return err;
}
