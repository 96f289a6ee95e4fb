// SPDX-License-Identifier: MIT
/*
 * unwind_table.c - .eh_frame to unwind rows; see unwind_table.h.
 *
 * The FDEs are walked with dwarf_next_cfi (their pc ranges decoded here:
 * libdw does not expose them).  Each FDE's rows come from the native
 * interpreter below, which runs the CIE's and the FDE's programs once; the
 * reference (and fallback) is dwarf_cfi_addrframe, which reruns the program
 * from the FDE's start for every row (quadratic: ~5x slower on cc1).  Rules
 * the kernel unwinder cannot follow become MT_CFA_NONE rows: a stack
 * through them is marked truncated.
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
#include "util/pread_all.h"

/*
 * The DWARF registers a row follows, by the object's machine.  On aarch64
 * the return address column is x30, saved wherever the prologue puts it or
 * still in x30, and the ABI's default rule for x29 and x30 (libdw's
 * aarch64_cfi.c) is "same value".
 */
struct cfi_arch {
	unsigned sp, fp, ra; /* DWARF numbers: stack pointer, frame pointer, return address */
	bool lr;	     /* aarch64: the return address has its own rules (enum mt_ra_rule) */
};

static const struct cfi_arch arch_x86_64 = { .sp = 7, .fp = 6, .ra = 16 };
static const struct cfi_arch arch_aarch64 = { .sp = 31, .fp = 29, .ra = 30, .lr = true };

static const struct cfi_arch *elf_cfi_arch(Elf *elf)
{
	GElf_Ehdr eh;

	return gelf_getehdr(elf, &eh) && eh.e_machine == EM_AARCH64 ? &arch_aarch64 : &arch_x86_64;
}

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
static void cfa_rule(const struct cfi_arch *a, Dwarf_Frame *f, struct mt_unwind_row *r)
{
	Dwarf_Op *ops;
	size_t n;
	int64_t off;

	if (dwarf_frame_cfa(f, &ops, &n) || !n)
		return;
	if (n == 1 && ops[0].atom == DW_OP_bregx &&
	    (ops[0].number == a->sp || ops[0].number == a->fp)) {
		off = (int64_t)ops[0].number2;
		r->cfa = ops[0].number == a->sp ? MT_CFA_RSP : MT_CFA_RBP;
	} else if (n == 2 && ops[0].atom == DW_OP_breg0 + a->fp && ops[1].atom == DW_OP_deref) {
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

/*
 * The return address rule of libdw's answer into @r: false when no row can
 * follow it (x86-64: anything but CFA-8; aarch64: anything but saved at
 * CFA + N or the same value, still in x30).
 */
static bool ra_rule(const struct cfi_arch *a, const Dwarf_Op *ops, size_t n,
		    struct mt_unwind_row *r)
{
	int64_t off;

	if (a->lr && !n && !ops) {
		r->ra = MT_RA_LR;
		return true;
	}
	if (!at_cfa(ops, n, &off))
		return false;
	if (!a->lr)
		return off == -8;
	if (off < INT16_MIN || off > INT16_MAX)
		return false;
	r->ra = MT_RA_AT_CFA;
	r->ra_off = (int16_t)off;
	return true;
}

/* One row from libdw's answer for a pc. */
static void frame_row(const struct cfi_arch *a, Dwarf_Frame *f, uint32_t pc,
		      struct mt_unwind_row *r)
{
	Dwarf_Op mem[3], *ops;
	size_t n;
	int64_t off;

	memset(r, 0, sizeof(*r));
	r->pc = pc;
	if (dwarf_frame_register(f, a->ra, mem, &ops, &n))
		return;
	if (!n && ops == mem) { /* undefined: no caller */
		r->cfa = MT_CFA_END;
		return;
	}
	if (!ra_rule(a, ops, n, r)) {
		r->ra = MT_RA_CFA_MINUS_8;
		r->ra_off = 0;
		return;
	}
	cfa_rule(a, f, r);
	if (dwarf_frame_register(f, a->fp, mem, &ops, &n) || n == 0)
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

/*
 * The native CFI interpreter: each FDE's program (after its CIE's initial
 * instructions) runs once, a row at each location advance.  It follows
 * libdw's answers exactly for what it knows; anything else (an opcode or
 * rule it does not model, malformed bytes, overlapping FDEs) makes the
 * whole object fall back to the libdw path, so the rows never differ.
 */
enum nreg { NR_UNSPEC, NR_SAME, NR_UNDEF, NR_OFFSET, NR_OTHER };
/* NC_INVALID: libdw's cfa_invalid, a register or offset change of a non-register rule */
enum ncfa { NC_UNSET, NC_REG, NC_EXPR_RSP, NC_EXPR_RBP, NC_EXPR_DEREF, NC_EXPR_OTHER, NC_INVALID };

struct nstate {
	uint8_t rbp, ra, cfa;
	uint64_t cfa_reg;
	int64_t rbp_v, ra_v, cfa_off;
};

#define NATIVE_STACK 16

struct nprog {
	const uint8_t *p, *end;
};

static int uleb(struct nprog *g, uint64_t *v)
{
	unsigned shift = 0;

	*v = 0;
	while (g->p < g->end) {
		uint8_t b = *g->p++;

		if (shift < 64)
			*v |= (uint64_t)(b & 0x7f) << shift;
		else if (b & 0x7f)
			return -ENOTSUP;
		shift += 7;
		if (!(b & 0x80))
			return shift > 70 ? -ENOTSUP : 0;
	}
	return -ENOTSUP;
}

static int sleb(struct nprog *g, int64_t *v)
{
	unsigned shift = 0;
	uint64_t u = 0;

	while (g->p < g->end) {
		uint8_t b = *g->p++;

		if (shift < 64)
			u |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
		if (!(b & 0x80)) {
			if (shift > 70)
				return -ENOTSUP;
			if (shift < 64 && (b & 0x40))
				u |= ~(uint64_t)0 << shift;
			*v = (int64_t)u;
			return 0;
		}
	}
	return -ENOTSUP;
}

/* A def_cfa_expression block: the two forms cfa_rule() follows, else "other". */
static void cfa_expr(const struct cfi_arch *a, const uint8_t *b, uint64_t len, struct nstate *s)
{
	struct nprog g = { b, b + len };
	uint64_t reg;
	int64_t off;

	s->cfa = NC_EXPR_OTHER;
	if (len && b[0] == DW_OP_bregx) {
		g.p++;
		if (!uleb(&g, &reg) && !sleb(&g, &off) && g.p == g.end &&
		    (reg == a->sp || reg == a->fp)) {
			s->cfa = reg == a->sp ? NC_EXPR_RSP : NC_EXPR_RBP;
			s->cfa_off = off;
		}
	} else if (len && b[0] == DW_OP_breg0 + a->fp) {
		g.p++;
		if (!sleb(&g, &off) && g.end - g.p == 1 && *g.p == DW_OP_deref) {
			s->cfa = NC_EXPR_DEREF;
			s->cfa_off = off;
		}
	}
}

/* A register's (val_)expression block libdw turns into no at_cfa form: one bregN. */
static bool plain_breg(const uint8_t *b, uint64_t len)
{
	struct nprog g = { b + 1, b + len };
	int64_t off;

	return len && b[0] >= DW_OP_breg0 && b[0] <= DW_OP_breg0 + 31 && !sleb(&g, &off) &&
	       g.p == g.end;
}

/* libdw's offset * data alignment factor, wrapping (untrusted operands: no UB). */
static int64_t wrap_mul(uint64_t v, int64_t daf)
{
	return (int64_t)(v * (uint64_t)daf);
}

static void set_reg(const struct cfi_arch *a, struct nstate *s, uint64_t reg, uint8_t rule,
		    int64_t v)
{
	if (reg == a->fp) {
		s->rbp = rule;
		s->rbp_v = v;
	} else if (reg == a->ra) {
		s->ra = rule;
		s->ra_v = v;
	}
}

struct ncie {
	int64_t daf;
	uint64_t caf;
	const struct nstate *init; /* NULL while running the CIE's own instructions */
};

/* The return address rule of @s into @r, as ra_rule() makes libdw's; false: none. */
static bool native_ra(const struct cfi_arch *a, const struct nstate *s, struct mt_unwind_row *r)
{
	if (!a->lr)
		return s->ra == NR_OFFSET && s->ra_v == -8;
	if (s->ra == NR_SAME) {
		r->ra = MT_RA_LR;
		return true;
	}
	/* offset 0 is libdw's one-op [DW_OP_call_frame_cfa]: no at_cfa() form */
	if (s->ra != NR_OFFSET || !s->ra_v || s->ra_v < INT16_MIN || s->ra_v > INT16_MAX)
		return false;
	r->ra = MT_RA_AT_CFA;
	r->ra_off = (int16_t)s->ra_v;
	return true;
}

/* The row libdw's frame_row() makes of @s at @pc (signal frame: MT_CFA_NONE). */
static int native_row(const struct cfi_arch *a, const struct nstate *s, uint64_t pc, bool sig,
		      struct mt_unwind_row *r)
{
	int64_t off;

	memset(r, 0, sizeof(*r));
	r->pc = (uint32_t)pc;
	if (s->ra == NR_UNSPEC)
		return -ENOTSUP; /* the ABI default: not modelled */
	if (s->ra == NR_UNDEF) {
		r->cfa = MT_CFA_END;
		goto sig;
	}
	if (!native_ra(a, s, r)) {
		r->ra = MT_RA_CFA_MINUS_8;
		r->ra_off = 0;
		goto sig;
	}
	switch (s->cfa) {
	case NC_UNSET: return -ENOTSUP;
	case NC_REG:
		if (s->cfa_reg != a->sp && s->cfa_reg != a->fp)
			goto rbp;
		r->cfa = s->cfa_reg == a->sp ? MT_CFA_RSP : MT_CFA_RBP;
		break;
	case NC_EXPR_RSP: r->cfa = MT_CFA_RSP; break;
	case NC_EXPR_RBP: r->cfa = MT_CFA_RBP; break;
	case NC_EXPR_DEREF: r->cfa = MT_CFA_DEREF_RBP; break;
	default: goto rbp;
	}
	off = s->cfa_off;
	if (off < INT32_MIN || off > INT32_MAX)
		r->cfa = MT_CFA_NONE;
	else
		r->cfa_off = (int32_t)off;
rbp:
	if (s->rbp == NR_OFFSET && s->rbp_v != 0 && s->rbp_v >= INT16_MIN &&
	    s->rbp_v <= INT16_MAX) {
		r->rbp = MT_RBP_AT_CFA;
		r->rbp_off = (int16_t)s->rbp_v;
	} else if (s->rbp == NR_OFFSET || s->rbp == NR_OTHER) {
		r->rbp = MT_RBP_LOST;
	}
sig:
	if (sig)
		r->cfa = MT_CFA_NONE;
	return 0;
}

struct nrun {
	const struct cfi_arch *arch;
	struct nstate st, stack[NATIVE_STACK];
	unsigned depth;
	uint64_t loc, pc, hi;
	bool sig, emit;
	struct row_vec *rv;
};

/* A location advance to @loc: the row up to it, as libdw's [start, end) splits them. */
static int advance(struct nrun *n, uint64_t loc)
{
	struct mt_unwind_row r;

	if (loc < n->loc || !n->emit) /* libdw: no advance in a CIE */
		return -ENOTSUP;
	n->loc = loc;
	if (loc <= n->pc)
		return 0;
	if (n->pc < n->hi) {
		if (native_row(n->arch, &n->st, n->pc, n->sig, &r))
			return -ENOTSUP;
		push_row(n->rv, &r);
	}
	n->pc = loc;
	return 0;
}

/* Register rules: offset, restore, undefined, same_value, register, expressions. */
static int reg_op(struct nrun *n, const struct ncie *c, uint8_t op, uint64_t reg, struct nprog *g)
{
	uint64_t u;
	int64_t sv;

	if (reg > 255)
		return -ENOTSUP;
	switch (op) {
	case DW_CFA_offset:
	case DW_CFA_offset_extended:
		if (uleb(g, &u))
			return -ENOTSUP;
		set_reg(n->arch, &n->st, reg, NR_OFFSET, wrap_mul(u, c->daf));
		return 0;
	case DW_CFA_offset_extended_sf:
	case DW_CFA_GNU_negative_offset_extended:
		if (op == DW_CFA_offset_extended_sf ? sleb(g, &sv) : uleb(g, &u))
			return -ENOTSUP;
		if (op == DW_CFA_GNU_negative_offset_extended)
			sv = (int64_t)(0 - u);
		set_reg(n->arch, &n->st, reg, NR_OFFSET, wrap_mul((uint64_t)sv, c->daf));
		return 0;
	case DW_CFA_val_offset:
	case DW_CFA_val_offset_sf:
		if (op == DW_CFA_val_offset ? uleb(g, &u) : sleb(g, &sv))
			return -ENOTSUP;
		set_reg(n->arch, &n->st, reg, NR_OTHER, 0);
		return 0;
	case DW_CFA_restore:
	case DW_CFA_restore_extended:
		if (!c->init)
			return -ENOTSUP;
		if (reg == n->arch->fp)
			set_reg(n->arch, &n->st, reg, c->init->rbp, c->init->rbp_v);
		else if (reg == n->arch->ra)
			set_reg(n->arch, &n->st, reg, c->init->ra, c->init->ra_v);
		return 0;
	case DW_CFA_undefined: set_reg(n->arch, &n->st, reg, NR_UNDEF, 0); return 0;
	case DW_CFA_same_value: set_reg(n->arch, &n->st, reg, NR_SAME, 0); return 0;
	case DW_CFA_register:
		if (uleb(g, &u))
			return -ENOTSUP;
		set_reg(n->arch, &n->st, reg, NR_OTHER, 0);
		return 0;
	case DW_CFA_expression:
	case DW_CFA_val_expression:
		if (uleb(g, &u) || u > (uint64_t)(g->end - g->p))
			return -ENOTSUP;
		if ((reg == n->arch->fp || reg == n->arch->ra) && !plain_breg(g->p, u))
			return -ENOTSUP;
		set_reg(n->arch, &n->st, reg, NR_OTHER, 0);
		g->p += u;
		return 0;
	default: return -ENOTSUP;
	}
}

/* The CFA rules. */
static int cfa_op(struct nrun *n, const struct ncie *c, uint8_t op, struct nprog *g)
{
	uint64_t u, reg;
	int64_t sv;

	switch (op) {
	case DW_CFA_def_cfa:
	case DW_CFA_def_cfa_sf:
		if (uleb(g, &reg) || (op == DW_CFA_def_cfa ? uleb(g, &u) : sleb(g, &sv)))
			return -ENOTSUP;
		n->st.cfa = NC_REG;
		n->st.cfa_reg = reg;
		n->st.cfa_off = op == DW_CFA_def_cfa ? (int64_t)u : wrap_mul((uint64_t)sv, c->daf);
		return 0;
	case DW_CFA_def_cfa_register:
		if (uleb(g, &reg))
			return -ENOTSUP;
		if (n->st.cfa != NC_REG) /* libdw's require_cfa_offset() (libgcrypt has this) */
			n->st.cfa = NC_INVALID;
		n->st.cfa_reg = reg;
		return 0;
	case DW_CFA_def_cfa_offset:
	case DW_CFA_def_cfa_offset_sf:
		if (op == DW_CFA_def_cfa_offset ? uleb(g, &u) : sleb(g, &sv))
			return -ENOTSUP;
		if (n->st.cfa != NC_REG) /* libdw's require_cfa_offset() */
			n->st.cfa = NC_INVALID;
		n->st.cfa_off =
			op == DW_CFA_def_cfa_offset ? (int64_t)u : wrap_mul((uint64_t)sv, c->daf);
		return 0;
	case DW_CFA_def_cfa_expression:
		if (uleb(g, &u) || u > (uint64_t)(g->end - g->p))
			return -ENOTSUP;
		cfa_expr(n->arch, g->p, u, &n->st);
		g->p += u;
		return 0;
	default: return -ENOTSUP;
	}
}

/* Runs one CFI program (a CIE's initial instructions or an FDE's). */
static int run_cfi(struct nrun *n, const struct ncie *c, const uint8_t *p, const uint8_t *end)
{
	struct nprog g = { p, end };
	uint64_t u, reg;
	int err = 0;

	while (!err && g.p < g.end) {
		uint8_t op = *g.p++, hi2 = op & 0xc0, low = op & 0x3f;

		if (hi2 == DW_CFA_advance_loc) {
			err = advance(n, n->loc + low * c->caf);
		} else if (hi2 == DW_CFA_offset || hi2 == DW_CFA_restore) {
			err = reg_op(n, c, hi2, low, &g);
		} else if (op == DW_CFA_advance_loc1 || op == DW_CFA_advance_loc2 ||
			   op == DW_CFA_advance_loc4) {
			size_t len = op == DW_CFA_advance_loc1	 ? 1
				     : op == DW_CFA_advance_loc2 ? 2
								 : 4;
			uint32_t d = 0;

			if ((size_t)(g.end - g.p) < len)
				return -ENOTSUP;
			memcpy(&d, g.p, len); /* little endian: x86-64 and arm64 */
			g.p += len;
			if (d > UINT32_MAX / (c->caf ? c->caf : 1))
				return -ENOTSUP;
			err = advance(n, n->loc + d * c->caf);
		} else if (op == DW_CFA_nop ||
			   (op == DW_CFA_AARCH64_negate_ra_state && n->arch->lr)) {
			continue; /* negate_ra_state, PAC: libdw ignores it too; the unwinders strip the bits */
		} else if (op == DW_CFA_GNU_args_size) {
			err = uleb(&g, &u);
		} else if (op == DW_CFA_remember_state) {
			if (n->depth == NATIVE_STACK)
				return -ENOTSUP;
			n->stack[n->depth++] = n->st;
		} else if (op == DW_CFA_restore_state) {
			if (!n->depth)
				return -ENOTSUP;
			n->st = n->stack[--n->depth];
		} else if ((op >= DW_CFA_def_cfa && op <= DW_CFA_def_cfa_expression) ||
			   op == DW_CFA_def_cfa_sf || op == DW_CFA_def_cfa_offset_sf) {
			err = cfa_op(n, c, op, &g);
		} else if (op == DW_CFA_offset_extended || op == DW_CFA_restore_extended ||
			   op == DW_CFA_undefined || op == DW_CFA_same_value ||
			   op == DW_CFA_register || op == DW_CFA_expression ||
			   op == DW_CFA_offset_extended_sf || op == DW_CFA_val_offset ||
			   op == DW_CFA_val_offset_sf || op == DW_CFA_val_expression ||
			   op == DW_CFA_GNU_negative_offset_extended) {
			err = uleb(&g, &reg) ? -ENOTSUP : reg_op(n, c, op, reg, &g);
		} else {
			return -ENOTSUP; /* set_loc, window_save, ...: libdw decides */
		}
	}
	return err ? -ENOTSUP : 0;
}

/* A CIE as the native path sees it. */
struct cie_enc {
	Dwarf_Off off;
	uint8_t enc;
	bool native; /* its augmentation and initial instructions are modelled */
	bool z, sig;
	struct ncie c;
	struct nstate init;
};

/*
 * The state after the ABI's defaults (rbp same value; aarch64: x29 and x30
 * same value) and @e's initial instructions.
 */
static void native_cie(const struct cfi_arch *arch, const Dwarf_CIE *e, struct cie_enc *ce)
{
	const char *a = e->augmentation;
	struct nrun n = { .arch = arch,
			  .st = { .rbp = NR_SAME, .ra = arch->lr ? NR_SAME : NR_UNSPEC } };

	ce->native = false;
	if (!a || (a[0] && a[0] != 'z') || !e->code_alignment_factor)
		return;
	ce->z = a[0] == 'z';
	ce->sig = ce->z && strchr(a, 'S');
	ce->c = (struct ncie){ .daf = e->data_alignment_factor, .caf = e->code_alignment_factor };
	if (run_cfi(&n, &ce->c, e->initial_instructions, e->initial_instructions_end) || n.depth)
		return;
	ce->init = n.st;
	ce->native = true;
}

/* The rows of one FDE (@p: its address range's field) the native way. */
static int native_fde(const struct cfi_arch *a, const struct cie_enc *ce, const uint8_t *p,
		      const uint8_t *end, uint64_t lo, uint64_t hi, struct row_vec *rv)
{
	struct ncie c = ce->c;
	struct nrun n = {
		.arch = a, .loc = lo, .pc = lo, .hi = hi, .sig = ce->sig, .emit = true, .rv = rv
	};
	struct nprog g;
	uint64_t alen;
	struct mt_unwind_row r;
	size_t len = encoded_len(ce->enc);

	if (!ce->native || !len || (size_t)(end - p) < 2 * len)
		return -ENOTSUP;
	g = (struct nprog){ p + 2 * len, end };
	if (ce->z && (uleb(&g, &alen) || alen > (uint64_t)(g.end - g.p)))
		return -ENOTSUP;
	if (ce->z)
		g.p += alen;
	if (hi > UINT32_MAX || lo >= hi)
		return 0;
	c.init = &ce->init;
	n.st = ce->init;
	if (run_cfi(&n, &c, g.p, g.end))
		return -ENOTSUP;
	if (n.pc < hi) {
		if (native_row(a, &n.st, n.pc, n.sig, &r))
			return -ENOTSUP;
		push_row(rv, &r);
	}
	memset(&r, 0, sizeof(r));
	r.pc = (uint32_t)hi;
	r.rbp = 0xff;
	push_row(rv, &r);
	return 0;
}


/* Adds the rows of the FDE covering [lo, hi) and the gap row at its end. */
static void fde_rows(const struct cfi_arch *a, Dwarf_CFI *cfi, uint64_t lo, uint64_t hi,
		     struct row_vec *rv)
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
		frame_row(a, f, (uint32_t)pc, &r);
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

struct walk {
	const struct cfi_arch *arch;
	bool native;	       /* the native interpreter; false: libdw's */
	bool failed;	       /* the native path met what it does not model */
	uint64_t (*ranges)[2]; /* each FDE's [lo, hi): overlaps go to libdw */
	size_t nranges, cap;
};

static void add_range(struct walk *w, uint64_t lo, uint64_t hi)
{
	if (w->nranges == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 256;
		uint64_t(*v)[2] = realloc(w->ranges, cap * sizeof(*v));

		if (!v) {
			w->failed = true;
			return;
		}
		w->ranges = v;
		w->cap = cap;
	}
	w->ranges[w->nranges][0] = lo;
	w->ranges[w->nranges++][1] = hi;
}

static int range_cmp(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;

	if (x[0] != y[0])
		return x[0] < y[0] ? -1 : 1;
	return (x[1] > y[1]) - (x[1] < y[1]);
}

/* Whether two FDEs share a pc or a start: libdw's lookup might pick either. */
static bool ranges_overlap(struct walk *w)
{
	if (w->nranges < 2)
		return false;
	qsort(w->ranges, w->nranges, sizeof(*w->ranges), range_cmp);
	for (size_t i = 1; i < w->nranges; i++)
		if (w->ranges[i][0] == w->ranges[i - 1][0] || w->ranges[i][0] < w->ranges[i - 1][1])
			return true;
	return false;
}

/* One FDE's rows, the native way or libdw's. */
static void walk_fde(Dwarf_CFI *cfi, const struct cie_enc *ce, const Dwarf_CFI_Entry *e,
		     uint64_t addr, struct walk *w, struct row_vec *rv)
{
	const uint8_t *p = e->fde.start;
	uint64_t lo, len;

	if (read_encoded(&p, e->fde.end, ce->enc, addr, true, &lo) ||
	    read_encoded(&p, e->fde.end, ce->enc & 0x0f, 0, false, &len))
		return;
	if (!w->native) {
		fde_rows(w->arch, cfi, lo, lo + len, rv);
		return;
	}
	add_range(w, lo, lo + len);
	if (lo + len < lo || native_fde(w->arch, ce, e->fde.start, e->fde.end, lo, lo + len, rv))
		w->failed = true;
}

/* Walks every FDE of @data (.eh_frame at @sh_addr). */
static void walk_eh_frame(Elf *elf, Dwarf_CFI *cfi, Elf_Data *data, uint64_t sh_addr,
			  struct walk *w, struct row_vec *rv)
{
	const unsigned char *ident = (const unsigned char *)elf_getident(elf, NULL);
	struct cie_enc cies[MAX_CIES];
	unsigned ncies = 0;
	Dwarf_Off off = 0, next;
	Dwarf_CFI_Entry e;
	int rc;

	while (!rv->err && !w->failed &&
	       (rc = dwarf_next_cfi(ident, data, true, off, &next, &e)) != 1) {
		if (rc == 0 && dwarf_cfi_cie_p(&e)) {
			if (ncies < MAX_CIES) {
				cies[ncies] = (struct cie_enc){ .off = off,
								.enc = cie_fde_encoding(&e.cie) };
				if (w->native)
					native_cie(w->arch, &e.cie, &cies[ncies]);
				ncies++;
			}
		} else if (rc == 0) {
			const struct cie_enc *ce = NULL;

			for (unsigned i = 0; i < ncies; i++)
				if (cies[i].off == e.fde.CIE_pointer)
					ce = &cies[i];
			if (ce && ce->enc != DW_EH_PE_omit)
				walk_fde(cfi, ce, &e,
					 sh_addr + (uint64_t)(e.fde.start -
							      (const uint8_t *)data->d_buf),
					 w, rv);
		}
		if (next == (Dwarf_Off)-1 || next <= off)
			break;
		off = next;
	}
}

/*
 * The rows of .eh_frame: native first (@mode permitting), libdw's when the
 * native path gives up on anything in the object.
 */
static void eh_frame_rows(Elf *elf, Dwarf_CFI *cfi, Elf_Data *data, uint64_t sh_addr,
			  enum unwind_cfi_mode mode, struct row_vec *rv, bool *fell_back)
{
	struct walk w = { .arch = elf_cfi_arch(elf), .native = mode != UNWIND_CFI_LIBDW };

	if (w.native) {
		walk_eh_frame(elf, cfi, data, sh_addr, &w, rv);
		if (!w.failed && !rv->err && !ranges_overlap(&w))
			goto out;
		*fell_back = true;
		rv->n = 0;
		rv->err = 0;
		free(w.ranges);
		w = (struct walk){ .arch = w.arch, .native = false };
	}
	walk_eh_frame(elf, cfi, data, sh_addr, &w, rv);
out:
	free(w.ranges);
}

static int row_cmp(const void *a, const void *b)
{
	const struct mt_unwind_row *x = a, *y = b;

	if (x->pc != y->pc)
		return x->pc < y->pc ? -1 : 1;
	/* a gap marker (rbp 0xff) first: the FDE starting there wins */
	return (y->rbp == 0xff) - (x->rbp == 0xff);
}

/* An ascending run of rows (an FDE's, with its gap marker): where it starts, how many. */
struct row_run {
	const struct mt_unwind_row *first;
	size_t start, n;
};

static int run_cmp(const void *a, const void *b)
{
	const struct row_run *x = a, *y = b;
	int c = row_cmp(x->first, y->first);

	return c ? c : (x->start > y->start) - (x->start < y->start);
}

/* Whether row @i (> 0) starts a run: after an FDE's gap marker, or below its predecessor. */
static bool run_starts(const struct row_vec *rv, size_t i)
{
	return rv->v[i - 1].rbp == 0xff || row_cmp(&rv->v[i - 1], &rv->v[i]) > 0;
}

/*
 * Sorts @rv as a stable sort by row_cmp would, in a fraction of its time:
 * the rows arrive as ascending runs, one per FDE, and FDEs do not overlap,
 * so sorting the runs by their first row and laying them end to end is the
 * whole sort (cc1, 489K rows: its build takes 55 ms instead of 88, 48 of
 * which were qsort).  False, with @rv untouched: runs that overlap (or no
 * memory); qsort is the answer.
 */
static bool sort_runs(struct row_vec *rv)
{
	struct mt_unwind_row *out = NULL;
	struct row_run *runs = NULL;
	size_t nruns = 1, k = 0, at = 0;
	bool ok = false;

	for (size_t i = 1; i < rv->n; i++)
		nruns += run_starts(rv, i);
	if (nruns == 1)
		return true;
	runs = malloc(nruns * sizeof(*runs));
	out = malloc(rv->n * sizeof(*out));
	if (!runs || !out)
		goto out;
	for (size_t i = 0; i < rv->n; i++)
		if (!i || run_starts(rv, i))
			runs[k++] = (struct row_run){ .first = &rv->v[i], .start = i };
	for (k = 0; k < nruns; k++)
		runs[k].n = (k + 1 < nruns ? runs[k + 1].start : rv->n) - runs[k].start;
	qsort(runs, nruns, sizeof(*runs), run_cmp);
	for (k = 1; k < nruns; k++) { /* each run ends before the next begins (ties: in order) */
		int c = row_cmp(runs[k - 1].first + runs[k - 1].n - 1, runs[k].first);

		if (c > 0 || (c == 0 && runs[k - 1].start > runs[k].start))
			goto out;
	}
	for (k = 0; k < nruns; k++) {
		memcpy(out + at, runs[k].first, runs[k].n * sizeof(*out));
		at += runs[k].n;
	}
	free(rv->v);
	rv->v = out;
	rv->cap = rv->n;
	out = NULL;
	ok = true;
out:
	free(runs);
	free(out);
	return ok;
}

static bool same_rule(const struct mt_unwind_row *a, const struct mt_unwind_row *b)
{
	return a->cfa == b->cfa && a->cfa_off == b->cfa_off && a->rbp == b->rbp &&
	       a->rbp_off == b->rbp_off && a->ra == b->ra && a->ra_off == b->ra_off;
}

/* Sorts, lets an FDE win over a gap at the same pc, merges equal neighbours. */
static void compact(struct row_vec *rv)
{
	size_t out = 0;

	if (!rv->n)
		return;
	if (!sort_runs(rv))
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

/*
 * The coarsest bucket (256 bytes or finer) that holds few enough rows.
 * fill_index's check for bucket b counts the rows starting in (start of
 * b - 1, start of b], the rows i >= 1 whose ceil(d_i >> shift) is b (d_i:
 * pc - first pc), so a shift fails when B = MT_UNWIND_BUCKET_ROWS rows in a
 * row share that value: when ceil(d_i >> shift) == ceil(d_(i+B-1) >> shift)
 * for some i.  For d >= 1 that ceiling is ((d - 1) >> shift) + 1, so the two
 * differ exactly for the shifts up to the highest bit in which d_i - 1 and
 * d_(i+B-1) - 1 differ: the answer is the least such bit over all i, one
 * pass.  (Counting runs at each of the nine shifts took cc1 6 ms.)
 */
static unsigned index_shift(const struct unwind_table *t)
{
	const size_t span = MT_UNWIND_BUCKET_ROWS - 1;
	const uint32_t first = t->rows[0].pc;
	unsigned s = 8;

	for (size_t i = 1; i + span < t->nrows && s; i++) {
		uint32_t x = (t->rows[i].pc - first - 1) ^ (t->rows[i + span].pc - first - 1);
		unsigned top = x ? 31 - (unsigned)__builtin_clz(x) : 0;

		if (top < s)
			s = top;
	}
	return s; /* rows have distinct pcs (compact): 1-byte buckets hold one each */
}

static int build_index(struct unwind_table *t)
{
	unsigned shift;
	uint32_t span;
	uint32_t *idx;
	size_t nb;

	if (!t->nrows)
		return 0;
	span = t->rows[t->nrows - 1].pc - t->rows[0].pc;
	shift = index_shift(t);
	nb = ((size_t)span >> shift) + 1;
	idx = malloc(nb * sizeof(*idx));
	if (!idx)
		return -ENOMEM;
	if (!fill_index(t, idx, nb, shift) && shift) {
		free(idx); /* index_shift's promise broken: an invariant, not input */
		return -EINVAL;
	}
	t->index = idx;
	t->nindex = nb;
	t->shift = shift;
	t->text_lo = t->rows[0].pc;
	return 0;
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
	return unwind_table_build_mode(path, UNWIND_CFI_NATIVE, out);
}

int unwind_table_build_mode(const char *path, enum unwind_cfi_mode mode, struct unwind_table **out)
{
	int err, fd = mapped_file_open(path);

	*out = NULL;
	if (fd < 0)
		return fd;
	err = unwind_table_build_fd(fd, mode, out);
	close(fd);
	return err;
}

int unwind_table_build_fd(int fd, enum unwind_cfi_mode mode, struct unwind_table **out)
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
	int err = 0;

	*out = NULL;
	elf_version(EV_CURRENT);
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
		eh_frame_rows(elf, cfi, data, sh.sh_addr, mode, &rv, &t->libdw_fallback);
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

/* Entries [@first, @first + @n) of @t's array @mem (@total of @elem bytes, at @off in its file). */
static const void *entries_at(const struct unwind_table *t, const void *mem, uint64_t off,
			      size_t total, size_t elem, size_t first, size_t n, void *buf)
{
	if (first > total || n > total - first)
		return NULL;
	if (!t->in_file)
		return mem ? (const char *)mem + first * elem : NULL;
	return pread_all(t->file_fd, buf, n * elem, (off_t)(off + first * elem)) ? NULL : buf;
}

const struct mt_unwind_row *unwind_table_rows_at(const struct unwind_table *t, size_t first,
						 size_t n, struct mt_unwind_row *buf)
{
	return entries_at(t, t->rows, t->file_rows_off, t->nrows, sizeof(*buf), first, n, buf);
}

const uint32_t *unwind_table_index_at(const struct unwind_table *t, size_t first, size_t n,
				      uint32_t *buf)
{
	return entries_at(t, t->index, t->file_index_off, t->nindex, sizeof(*buf), first, n, buf);
}

void unwind_table_drop_rows(struct unwind_table *t)
{
	free(t->rows);
	free(t->index);
	t->rows = NULL;
	t->index = NULL;
	if (t->in_file)
		close(t->file_fd);
	t->in_file = false;
}

void unwind_table_free(struct unwind_table *t)
{
	if (!t)
		return;
	unwind_table_drop_rows(t);
	free(t);
}
