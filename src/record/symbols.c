// SPDX-License-Identifier: MIT
/* symbols.c - allocator symbols of an ELF file; see symbols.h. */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <string.h>
#include <unistd.h>
#include "schema.h"
#include "symbols.h"

/* Order in which aliases are resolved: memalign before aligned_alloc. */
static const unsigned fn_order[MT_FN_MAX] = {
	MT_FN_MALLOC, MT_FN_CALLOC, MT_FN_REALLOC, MT_FN_REALLOCARRAY,
	MT_FN_MEMALIGN, MT_FN_ALIGNED_ALLOC, MT_FN_POSIX_MEMALIGN,
	MT_FN_VALLOC, MT_FN_PVALLOC, MT_FN_FREE,
};

static int fn_by_name(const char *name)
{
	/* the probed symbols are named as the functions (schema.c) */
	for (int i = 0; i < MT_FN_MAX; i++)
		if (!strcmp(mt_fn_name(i), name))
			return i;
	return -1;
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
static void scan_symtab(Elf *elf, Elf_Scn *scn, GElf_Shdr *sh, uint64_t addr[MT_FN_MAX])
{
	Elf_Data *data = elf_getdata(scn, NULL);
	size_t count = sh->sh_entsize ? sh->sh_size / sh->sh_entsize : 0;
	GElf_Sym sym;

	for (size_t i = 0; data && i < count; i++) {
		const char *name;
		int fn;

		if (!gelf_getsym(data, i, &sym) || sym.st_shndx == SHN_UNDEF ||
		    GELF_ST_TYPE(sym.st_info) != STT_FUNC || !sym.st_value)
			continue;
		if (GELF_ST_BIND(sym.st_info) == STB_LOCAL)
			continue;
		name = elf_strptr(elf, sh->sh_link, sym.st_name);
		if (!name || (fn = fn_by_name(name)) < 0 || addr[fn])
			continue;
		addr[fn] = sym.st_value;
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
	uint64_t addr[MT_FN_MAX] = { 0 };
	Elf *elf = NULL;
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	int fd, err = 0;

	memset(out, 0, sizeof(*out));
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF) {
		err = -ENOEXEC;
		goto out;
	}
	while ((scn = elf_nextscn(elf, scn))) {
		if (gelf_getshdr(scn, &sh) &&
		    (sh.sh_type == SHT_DYNSYM || sh.sh_type == SHT_SYMTAB))
			scan_symtab(elf, scn, &sh, addr);
	}
	for (int i = 0; i < MT_FN_MAX; i++) {
		unsigned fn = fn_order[i];
		uint64_t off;
		bool alias = false;

		if (!addr[fn] || vaddr_to_offset(elf, addr[fn], &off))
			continue;
		for (unsigned j = 0; j < out->n; j++)
			alias |= out->site[j].entry == off;
		if (alias)
			continue;
		out->site[out->n].fn = fn;
		out->site[out->n].entry = off;
		out->site[out->n].offset = fn == MT_FN_FREE ? skip_null_check(fd, off) : off;
		out->n++;
	}
out:
	elf_end(elf);
	close(fd);
	return err;
}
