// SPDX-License-Identifier: MIT
/*
 * python_elf.c - CPython interpreters in ELF files, and the offsets of the
 * versions memtrack takes frames of; see python_elf.h.
 *
 * The table's offsets were printed by a program built against each
 * version's own headers (Include/internal: pycore_runtime.h, pycore_frame.h,
 * pycore_code.h; offsetof of every field used) for 3.10.13, 3.11.2 (Debian
 * 12), 3.11.7, 3.12.1 and 3.13.0; CPython keeps these structures' layout
 * within a minor version.  tests/integration/test_python.py checks the
 * frames against each interpreter present.
 */
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "inspect/mapped_file.h"
#include "inspect/python_elf.h"

/* 3.10 to 3.13, by minor version (PY_VERSION_HEX >> 16) */
static const struct mt_py table[] = {
	{
		/* 3.10: PyFrameObject chain, f_lasti in code units */
		.version = 0x30a,
		.chain = MT_PY_CHAIN_310,
		.lines = MT_PY_LINES_310,
		.tss_key = 588,
		.ts_frame = 24,
		.fr_code = 32,
		.fr_instr = 96,
		.fr_back = 24,
		.co_first = 40,
		.co_name = 112,
		.co_qual = 112,
		.co_file = 104,
		.co_lines = 120,
		.str_ascii = 48,
		.str_compact = 72,
		.str_state = 32,
		.str_length = 16,
		.bytes_data = 32,
	},
	{
		.version = 0x30b,
		.chain = MT_PY_CHAIN_311,
		.lines = MT_PY_LINES_311,
		.tss_key = 596,
		.ts_frame = 56,
		.cf_frame = 8,
		.fr_code = 32,
		.fr_instr = 56,
		.fr_back = 48,
		.fr_owner = 69,
		.fr_entry = 68,
		.co_first = 72,
		.co_name = 120,
		.co_qual = 128,
		.co_code = 184,
		.co_traceable = 168,
		.co_file = 112,
		.co_lines = 136,
		.str_ascii = 48,
		.str_compact = 72,
		.str_state = 32,
		.str_length = 16,
		.bytes_data = 32,
	},
	{
		.version = 0x30c,
		.chain = MT_PY_CHAIN_312,
		.lines = MT_PY_LINES_311,
		.tss_key = 1548,
		.ts_frame = 56,
		.cf_frame = 0,
		.fr_code = 0,
		.fr_instr = 56,
		.fr_back = 8,
		.fr_owner = 70,
		.fr_entry = 70,
		.co_first = 68,
		.co_name = 120,
		.co_qual = 128,
		.co_code = 192,
		.co_traceable = 176,
		.co_file = 112,
		.co_lines = 136,
		.str_ascii = 40,
		.str_compact = 56,
		.str_state = 32,
		.str_length = 16,
		.bytes_data = 32,
	},
	{
		.version = 0x30d,
		.chain = MT_PY_CHAIN_313,
		.lines = MT_PY_LINES_311,
		.tss_key = 2164,
		.ts_frame = 72,
		.fr_code = 0,
		.fr_instr = 56,
		.fr_back = 8,
		.fr_owner = 70,
		.fr_entry = 70,
		.co_first = 68,
		.co_name = 120,
		.co_qual = 128,
		.co_code = 200,
		.co_traceable = 184,
		.co_file = 112,
		.co_lines = 136,
		.str_ascii = 40,
		.str_compact = 56,
		.str_state = 32,
		.str_length = 16,
		.bytes_data = 32,
	},
};

bool py_interp_candidate(const char *path)
{
	const char *b = strrchr(path, '/');

	b = b ? b + 1 : path;
	return !strncmp(b, "python", 6) || !strncmp(b, "libpython", 9);
}

struct elf_syms {
	GElf_Sym runtime, code_type, version; /* st_value 0: not found */
};

static void find_syms(Elf *elf, struct elf_syms *s)
{
	Elf_Scn *scn = NULL;

	memset(s, 0, sizeof(*s));
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) ||
		    (sh.sh_type != SHT_DYNSYM && sh.sh_type != SHT_SYMTAB) || !sh.sh_entsize ||
		    !(d = elf_getdata(scn, NULL)))
			continue;
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym sym;
			const char *name;

			if (!gelf_getsym(d, (int)i, &sym) || !sym.st_value ||
			    sym.st_shndx == SHN_UNDEF)
				continue;
			name = elf_strptr(elf, sh.sh_link, sym.st_name);
			if (!name)
				continue;
			if (!strcmp(name, "_PyRuntime"))
				s->runtime = sym;
			else if (!strcmp(name, "PyCode_Type"))
				s->code_type = sym;
			else if (!strcmp(name, "Py_Version"))
				s->version = sym;
		}
	}
}

/* @len bytes at ELF address @sym's value (+ @off) from its section's data; false: not there. */
static bool sym_bytes(Elf *elf, const GElf_Sym *sym, uint64_t off, void *dst, size_t len)
{
	Elf_Scn *scn = elf_getscn(elf, sym->st_shndx);
	GElf_Shdr sh;
	Elf_Data *d;
	uint64_t at;

	if (!scn || !gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS ||
	    !(d = elf_getdata(scn, NULL)) || sym->st_value < sh.sh_addr)
		return false;
	at = sym->st_value - sh.sh_addr + off;
	if (at > d->d_size || len > d->d_size - at)
		return false;
	memcpy(dst, (const char *)d->d_buf + at, len);
	return true;
}

/*
 * Before 3.11 there is no Py_Version: the version string "3.N.P" ending a
 * string of .rodata, for the minor version N the file is named for
 * (python3.N, libpython3.N.so).  0: not found.
 */
static uint32_t version_in_rodata(Elf *elf, const char *path)
{
	const char *at = strstr(path, "python3.");
	char want[8];
	unsigned minor;
	Elf_Scn *scn = NULL;
	size_t shstr, wl;

	if (!at || sscanf(at + 8, "%2u", &minor) != 1 || elf_getshdrstrndx(elf, &shstr))
		return 0;
	wl = (size_t)snprintf(want, sizeof(want), "3.%u.", minor);
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;
		const char *name;

		if (!gelf_getshdr(scn, &sh) || !(name = elf_strptr(elf, shstr, sh.sh_name)) ||
		    strcmp(name, ".rodata") != 0 || !(d = elf_getdata(scn, NULL)) || d->d_size < 16)
			continue;
		/* "3.N.P" ends a string (the linker may merge it into a longer one's tail) */
		for (const char *p = d->d_buf, *end = p + d->d_size - 16;
		     (p = memmem(p, (size_t)(end - p), want, wl)); p++) {
			size_t k = wl;

			while (k < wl + 3 && p[k] >= '0' && p[k] <= '9')
				k++;
			if (k > wl && !p[k])
				return 0x03000000u | minor << 16 | (uint32_t)atoi(p + wl) << 8;
		}
	}
	return 0;
}

/*
 * 3.13 publishes its offsets: _PyRuntime starts with _Py_DebugOffsets
 * ("xdebugpy", the version, then the offsets; positions from 3.13.0's
 * pycore_runtime.h).  The table's must be the interpreter's own.
 */
static bool debug_offsets_agree(Elf *elf, const GElf_Sym *rt, const struct mt_py *py,
				uint32_t version)
{
	static const struct {
		uint16_t at;  /* in _Py_DebugOffsets */
		uint16_t off; /* in struct mt_py */
	} checks[] = {
		{ 184, offsetof(struct mt_py, ts_frame) },
		{ 232, offsetof(struct mt_py, fr_back) },
		{ 240, offsetof(struct mt_py, fr_code) },
		{ 248, offsetof(struct mt_py, fr_instr) },
		{ 264, offsetof(struct mt_py, fr_owner) },
		{ 280, offsetof(struct mt_py, co_file) },
		{ 288, offsetof(struct mt_py, co_name) },
		{ 296, offsetof(struct mt_py, co_qual) },
		{ 304, offsetof(struct mt_py, co_lines) },
		{ 312, offsetof(struct mt_py, co_first) },
		{ 344, offsetof(struct mt_py, co_code) },
		{ 544, offsetof(struct mt_py, str_state) },
		{ 552, offsetof(struct mt_py, str_length) },
		{ 560, offsetof(struct mt_py, str_ascii) },
	};
	uint64_t head[2], v;

	if (!sym_bytes(elf, rt, 0, head, sizeof(head)) || memcmp(head, "xdebugpy", 8) != 0 ||
	    head[1] != version)
		return false;
	for (size_t i = 0; i < sizeof(checks) / sizeof(checks[0]); i++) {
		uint16_t want;

		memcpy(&want, (const char *)py + checks[i].off, sizeof(want));
		if (!sym_bytes(elf, rt, checks[i].at, &v, sizeof(v)) || v != want)
			return false;
	}
	return true;
}

static void choose(Elf *elf, const struct elf_syms *s, struct py_interp *out)
{
	out->verdict = MT_PY_UNSUPPORTED;
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		if (table[i].version != out->version >> 16)
			continue;
		if (table[i].chain == MT_PY_CHAIN_313 &&
		    !debug_offsets_agree(elf, &s->runtime, &table[i], out->version))
			return;
		out->py = table[i];
		out->py.version = out->version;
		out->py.runtime = s->runtime.st_value;
		out->py.code_type = s->code_type.st_value;
		out->verdict = MT_PY_ON;
		return;
	}
}

int py_interp_read(const char *path, struct py_interp *out)
{
	struct elf_syms s;
	uint32_t v = 0;
	Elf *elf = NULL;
	int fd, ret = 0;

	memset(out, 0, sizeof(*out));
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	fd = mapped_file_open(path);
	if (fd < 0)
		return fd;
	elf = elf_begin(fd, ELF_C_READ, NULL); /* read, never mapped: mapped_file.h */
	if (!elf || elf_kind(elf) != ELF_K_ELF)
		goto out;
	find_syms(elf, &s);
	if (!s.runtime.st_value)
		goto out; /* no interpreter */
	ret = 1;
	out->verdict = MT_PY_UNREADABLE;
	if (s.version.st_value && sym_bytes(elf, &s.version, 0, &v, sizeof(v)))
		out->version = v;
	else if (!s.version.st_value)
		out->version = version_in_rodata(elf, path);
	if (out->version && s.code_type.st_value)
		choose(elf, &s, out);
out:
	elf_end(elf);
	close(fd);
	return ret;
}
