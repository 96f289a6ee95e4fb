// SPDX-License-Identifier: MIT
/*
 * unwind_table.c - .eh_frame to unwind rows; see unwind_table.h.
 *
 * The FDEs are walked with dwarf_next_cfi (their pc ranges decoded here:
 * libdw does not expose them), and each FDE's rows come from
 * dwarf_cfi_addrframe, which runs the CFI program up to a pc and says for
 * which range its answer holds.  Rules the kernel unwinder cannot follow
 * become MT_CFA_NONE rows: a stack through them is marked truncated.
 */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "inspect/mapped_file.h"
#include "inspect/unwind_table.h"

#define REG_RBP 6
#define REG_RSP 7
#define REG_RA 16

struct row_vec {
	struct mt_unwind_row *v;
	size_t n, cap;
	int err;
};

static void push_row(struct row_vec *rv, const struct mt_unwind_row *r)
{
	if (rv->err)
		return;
	if (rv->n == rv->cap) {
		size_t cap = rv->cap ? rv->cap * 2 : 1024;
		struct mt_unwind_row *v = realloc(rv->v, cap * sizeof(*v));

		if (!v) {
			rv->err = -ENOMEM;
			return;
		}
		rv->v = v;
		rv->cap = cap;
	}
	rv->v[rv->n++] = *r;
}

/* A register rule "saved at CFA + N" ([DW_OP_call_frame_cfa, DW_OP_plus_uconst N]). */
static bool at_cfa(const Dwarf_Op *ops, size_t n, int64_t *off)
{
	if (n != 2 || ops[0].atom != DW_OP_call_frame_cfa || ops[1].atom != DW_OP_plus_uconst)
		return false;
	*off = (int64_t)ops[1].number;
	return true;
}

/* The CFA rule of @f into @r; leaves MT_CFA_NONE for what we cannot follow. */
static void cfa_rule(Dwarf_Frame *f, struct mt_unwind_row *r)
{
	Dwarf_Op *ops;
	size_t n;
	int64_t off;

	if (dwarf_frame_cfa(f, &ops, &n) || !n)
		return;
	if (n == 1 && ops[0].atom == DW_OP_bregx &&
	    (ops[0].number == REG_RSP || ops[0].number == REG_RBP)) {
		off = (int64_t)ops[0].number2;
		r->cfa = ops[0].number == REG_RSP ? MT_CFA_RSP : MT_CFA_RBP;
	} else if (n == 2 && ops[0].atom == DW_OP_breg0 + REG_RBP && ops[1].atom == DW_OP_deref) {
		off = (int64_t)ops[0].number;
		r->cfa = MT_CFA_DEREF_RBP;
	} else {
		return; /* a PLT's expression, a signal frame's, DRAP through r10 ... */
	}
	if (off < INT32_MIN || off > INT32_MAX) {
		r->cfa = MT_CFA_NONE;
		return;
	}
	r->cfa_off = (int32_t)off;
}

/* One row from libdw's answer for a pc. */
static void frame_row(Dwarf_Frame *f, uint32_t pc, struct mt_unwind_row *r)
{
	Dwarf_Op mem[3], *ops;
	size_t n;
	int64_t off;

	memset(r, 0, sizeof(*r));
	r->pc = pc;
	if (dwarf_frame_register(f, REG_RA, mem, &ops, &n))
		return;
	if (!n && ops == mem) { /* undefined: no caller */
		r->cfa = MT_CFA_END;
		return;
	}
	if (!at_cfa(ops, n, &off) || off != -8)
		return;
	cfa_rule(f, r);
	if (dwarf_frame_register(f, REG_RBP, mem, &ops, &n) || n == 0)
		return; /* same value (or undefined: it is not needed to go on) */
	if (at_cfa(ops, n, &off) && off >= INT16_MIN && off <= INT16_MAX) {
		r->rbp = MT_RBP_AT_CFA;
		r->rbp_off = (int16_t)off;
	} else {
		r->rbp = MT_RBP_LOST;
	}
}

/* Bytes of a DW_EH_PE-encoded pointer of format @enc, 0 when unsupported. */
static size_t encoded_len(uint8_t enc)
{
	switch (enc & 0x0f) {
	case DW_EH_PE_absptr:
	case DW_EH_PE_udata8:
	case DW_EH_PE_sdata8: return 8;
	case DW_EH_PE_udata4:
	case DW_EH_PE_sdata4: return 4;
	case DW_EH_PE_udata2:
	case DW_EH_PE_sdata2: return 2;
	default: return 0;
	}
}

/* Reads a DW_EH_PE-encoded pointer at *p (the field's address is @vaddr). */
static int read_encoded(const uint8_t **p, const uint8_t *end, uint8_t enc, uint64_t vaddr,
			bool apply, uint64_t *val)
{
	size_t len = encoded_len(enc);
	int64_t v;

	if (!len)
		return -ENOTSUP;
	if ((size_t)(end - *p) < len)
		return -EBADMSG;
	if (len == 8) {
		memcpy(&v, *p, 8);
	} else if (len == 4) {
		int32_t s;
		uint32_t u;

		memcpy(&s, *p, 4);
		memcpy(&u, *p, 4);
		v = (enc & 0x08) ? s : (int64_t)u;
	} else {
		int16_t s;
		uint16_t u;

		memcpy(&s, *p, 2);
		memcpy(&u, *p, 2);
		v = (enc & 0x08) ? s : (int64_t)u;
	}
	*p += len;
	if (apply && (enc & 0x70) == DW_EH_PE_pcrel)
		v += (int64_t)vaddr;
	else if (apply && (enc & 0x70))
		return -ENOTSUP;
	*val = (uint64_t)v;
	return 0;
}

/* The FDE pointer encoding of a CIE ('R' of its augmentation), DW_EH_PE_absptr if none. */
static uint8_t cie_fde_encoding(const Dwarf_CIE *cie)
{
	const uint8_t *d = cie->augmentation_data;
	const uint8_t *end = d ? d + cie->augmentation_data_size : NULL;
	const char *a = cie->augmentation;

	if (!a || a[0] != 'z' || !d)
		return DW_EH_PE_absptr;
	for (a++; *a && d < end; a++) {
		switch (*a) {
		case 'R': return *d;
		case 'L': d++; break;
		case 'P': /* the personality routine's encoding, then its pointer */
			if (!encoded_len(*d))
				return DW_EH_PE_omit;
			d += 1 + encoded_len(*d);
			break;
		default: break; /* S, B: no data */
		}
	}
	return DW_EH_PE_absptr;
}

#define MAX_CIES 64

struct cie_enc {
	Dwarf_Off off;
	uint8_t enc;
};

/* Adds the rows of the FDE covering [lo, hi) and the gap row at its end. */
static void fde_rows(Dwarf_CFI *cfi, uint64_t lo, uint64_t hi, struct row_vec *rv)
{
	struct mt_unwind_row r;
	uint64_t pc = lo;

	if (hi > UINT32_MAX || lo >= hi)
		return;
	while (pc < hi && !rv->err) {
		Dwarf_Frame *f;
		Dwarf_Addr start, end;
		bool sig;

		if (dwarf_cfi_addrframe(cfi, pc, &f))
			break;
		if (dwarf_frame_info(f, &start, &end, &sig) < 0 || end <= pc) {
			free(f);
			break;
		}
		frame_row(f, (uint32_t)pc, &r);
		if (sig)
			r.cfa = MT_CFA_NONE; /* a signal trampoline: its caller is no call */
		free(f);
		push_row(rv, &r);
		pc = end;
	}
	memset(&r, 0, sizeof(r));
	r.pc = (uint32_t)hi;
	r.rbp = 0xff; /* a gap marker: sorts below a real row at the same pc */
	push_row(rv, &r);
}

/* Walks every FDE of @data (.eh_frame at @sh_addr). */
static void walk_eh_frame(Elf *elf, Dwarf_CFI *cfi, Elf_Data *data, uint64_t sh_addr,
			  struct row_vec *rv)
{
	const unsigned char *ident = (const unsigned char *)elf_getident(elf, NULL);
	struct cie_enc cies[MAX_CIES];
	unsigned ncies = 0;
	Dwarf_Off off = 0, next;
	Dwarf_CFI_Entry e;
	int rc;

	while (!rv->err && (rc = dwarf_next_cfi(ident, data, true, off, &next, &e)) != 1) {
		if (rc == 0 && dwarf_cfi_cie_p(&e)) {
			if (ncies < MAX_CIES)
				cies[ncies++] = (struct cie_enc){ off, cie_fde_encoding(&e.cie) };
		} else if (rc == 0) {
			uint8_t enc = DW_EH_PE_omit;
			const uint8_t *p = e.fde.start;
			uint64_t lo, len;

			for (unsigned i = 0; i < ncies; i++)
				if (cies[i].off == e.fde.CIE_pointer)
					enc = cies[i].enc;
			if (enc != DW_EH_PE_omit &&
			    !read_encoded(&p, e.fde.end, enc,
					  sh_addr + (uint64_t)(p - (const uint8_t *)data->d_buf),
					  true, &lo) &&
			    !read_encoded(&p, e.fde.end, enc & 0x0f, 0, false, &len))
				fde_rows(cfi, lo, lo + len, rv);
		}
		if (next == (Dwarf_Off)-1 || next <= off)
			break;
		off = next;
	}
}

static int row_cmp(const void *a, const void *b)
{
	const struct mt_unwind_row *x = a, *y = b;

	if (x->pc != y->pc)
		return x->pc < y->pc ? -1 : 1;
	/* a gap marker (rbp 0xff) first: the FDE starting there wins */
	return (y->rbp == 0xff) - (x->rbp == 0xff);
}

static bool same_rule(const struct mt_unwind_row *a, const struct mt_unwind_row *b)
{
	return a->cfa == b->cfa && a->cfa_off == b->cfa_off && a->rbp == b->rbp &&
	       a->rbp_off == b->rbp_off;
}

/* Sorts, lets an FDE win over a gap at the same pc, merges equal neighbours. */
static void compact(struct row_vec *rv)
{
	size_t out = 0;

	if (!rv->n)
		return;
	qsort(rv->v, rv->n, sizeof(*rv->v), row_cmp);
	for (size_t i = 0; i < rv->n; i++) {
		struct mt_unwind_row r = rv->v[i];

		if (i + 1 < rv->n && rv->v[i + 1].pc == r.pc)
			continue; /* the last one at a pc is the real row, if any */
		if (r.rbp == 0xff) {
			r.rbp = 0;
			r.cfa = MT_CFA_NONE;
		}
		if (out && same_rule(&rv->v[out - 1], &r))
			continue;
		rv->v[out++] = r;
	}
	rv->n = out;
}

/*
 * The ELF entry point (_start) is the outermost frame of the main thread.
 * An executable's _start says so in its CFI (return address undefined);
 * the dynamic loader's has no FDE at all: the gap around the entry point
 * becomes an END row, so loader stacks count as complete.
 */
static void mark_entry(Elf *elf, struct row_vec *rv)
{
	GElf_Ehdr eh;
	size_t lo = 0, hi = rv->n;

	if (!gelf_getehdr(elf, &eh) || !eh.e_entry || eh.e_entry > UINT32_MAX || !rv->n)
		return;
	while (hi - lo > 1) { /* the last row at or below the entry point */
		size_t mid = (lo + hi) / 2;

		if (rv->v[mid].pc <= eh.e_entry)
			lo = mid;
		else
			hi = mid;
	}
	if (rv->v[lo].pc <= eh.e_entry && rv->v[lo].cfa == MT_CFA_NONE)
		rv->v[lo].cfa = MT_CFA_END;
}

/*
 * Fills @idx (@nb buckets of 1 << @shift bytes from the first row's pc);
 * returns false when a bucket would span more than MT_UNWIND_BUCKET_ROWS
 * rows.
 */
static bool fill_index(const struct unwind_table *t, uint32_t *idx, size_t nb, unsigned shift)
{
	size_t r = 0;

	for (size_t b = 0; b < nb; b++) {
		uint64_t start = t->rows[0].pc + ((uint64_t)b << shift);

		while (r + 1 < t->nrows && t->rows[r + 1].pc <= start)
			r++;
		idx[b] = (uint32_t)r;
		if (b && idx[b] - idx[b - 1] + 1 > MT_UNWIND_BUCKET_ROWS)
			return false;
	}
	return t->nrows - idx[nb - 1] <= MT_UNWIND_BUCKET_ROWS;
}

/* The coarsest index (256-byte buckets or finer) whose buckets are small enough. */
static int build_index(struct unwind_table *t)
{
	uint32_t span;

	if (!t->nrows)
		return 0;
	span = t->rows[t->nrows - 1].pc - t->rows[0].pc;
	for (unsigned shift = 8;; shift--) {
		size_t nb = ((size_t)span >> shift) + 1;
		uint32_t *idx = malloc(nb * sizeof(*idx));

		if (!idx)
			return -ENOMEM;
		/* 1-byte buckets hold at most 2 rows: the loop ends */
		if (fill_index(t, idx, nb, shift) || !shift) {
			t->index = idx;
			t->nindex = nb;
			t->shift = shift;
			t->text_lo = t->rows[0].pc;
			return 0;
		}
		free(idx);
	}
}

static void read_loads(Elf *elf, struct unwind_table *t)
{
	size_t n;

	if (elf_getphdrnum(elf, &n))
		return;
	for (size_t i = 0; i < n && t->nloads < UNWIND_MAX_LOADS; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD)
			t->loads[t->nloads++] =
				(struct unwind_load){ ph.p_vaddr, ph.p_offset, ph.p_filesz };
	}
}

static Elf_Scn *find_section(Elf *elf, const char *name, GElf_Shdr *sh)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	if (elf_getshdrstrndx(elf, &shstrndx))
		return NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		const char *n;

		if (!gelf_getshdr(scn, sh))
			continue;
		n = elf_strptr(elf, shstrndx, sh->sh_name);
		if (n && !strcmp(n, name) && sh->sh_type == SHT_PROGBITS)
			return scn;
	}
	return NULL;
}

static uint64_t mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int unwind_table_build(const char *path, struct unwind_table **out)
{
	uint64_t t0 = mono_now();
	struct row_vec rv = { 0 };
	struct unwind_table *t;
	const void *bid = NULL;
	Dwarf_CFI *cfi = NULL;
	Elf_Data *data;
	Elf_Scn *scn;
	GElf_Shdr sh;
	Elf *elf = NULL;
	ssize_t bl;
	int fd, err = 0;

	*out = NULL;
	elf_version(EV_CURRENT);
	fd = mapped_file_open(path);
	if (fd < 0)
		return fd;
	t = calloc(1, sizeof(*t));
	elf = elf_begin(fd, ELF_C_READ, NULL); /* read, never mapped: mapped_file.h */
	if (!t || !elf || elf_kind(elf) != ELF_K_ELF) {
		err = t ? -ENOEXEC : -ENOMEM;
		goto out;
	}
	bl = dwelf_elf_gnu_build_id(elf, &bid);
	if (bl > 0 && bid) {
		t->build_id_len = bl > MT_BUILD_ID_MAX ? MT_BUILD_ID_MAX : (uint8_t)bl;
		memcpy(t->build_id, bid, t->build_id_len);
	}
	read_loads(elf, t);
	scn = find_section(elf, ".eh_frame", &sh);
	cfi = scn ? dwarf_getcfi_elf(elf) : NULL;
	data = scn ? elf_getdata(scn, NULL) : NULL;
	if (cfi && data && data->d_buf)
		walk_eh_frame(elf, cfi, data, sh.sh_addr, &rv);
	if (rv.err) {
		err = rv.err;
		goto out;
	}
	compact(&rv);
	mark_entry(elf, &rv);
	t->rows = rv.v;
	t->nrows = rv.n;
	rv.v = NULL;
	err = build_index(t);
	if (err)
		goto out;
	t->build_ns = mono_now() - t0;
	*out = t;
	t = NULL;
out:
	if (cfi)
		dwarf_cfi_end(cfi);
	free(rv.v);
	if (elf)
		elf_end(elf);
	close(fd);
	unwind_table_free(t);
	return err;
}

int unwind_table_bias(const struct unwind_table *t, uint64_t start, uint64_t offset, __u64 *bias)
{
	for (unsigned i = 0; i < t->nloads; i++) {
		const struct unwind_load *l = &t->loads[i];

		/* the mapping's page may start below the segment's first byte */
		if (offset >= (l->offset & ~(uint64_t)0xfff) && offset < l->offset + l->filesz) {
			*bias = start - (l->vaddr - l->offset + offset);
			return 0;
		}
	}
	return -ENOENT;
}

void unwind_table_free(struct unwind_table *t)
{
	if (!t)
		return;
	free(t->rows);
	free(t->index);
	free(t);
}
