// SPDX-License-Identifier: MIT
/*
 * unwind.c - the in-process unwinder; see unwind.h.  Each function mirrors
 * one of src/bpf/unwind.bpf.c (same searches, same arithmetic), so a
 * change to the kernel's rules is a change here too: the integration test
 * test_stacks.py::test_inprocess_unwind_matches_kernel compares the two.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "fast/unwind.h"
#include "unwind_search.h"
#include "fast/own_map.h"
#include "fast/table_pages.h"

enum { RUNNING = 0, COMPLETE = 1, TRUNCATED = 2 };

struct walk {
	const struct fast_unwind_tables *t;
	uint64_t lo, hi; /* the thread's stack */
	uint64_t pc, sp, bp, hash;
	uint32_t last; /* index of the previous frame's mapping, MT_MAX_UMAPS: none */
	int status;
	struct fast_stack *out;
	bool (*skip)(uint64_t pc); /* leading frames it names are walked, not recorded */
	unsigned skipped;
};

/* Leading frames fast_unwind_skip() may leave out (an operator's own, cc1's) */
#define SKIP_MAX 4u

/* The 8 bytes at @addr when they lie inside the stack [lo, hi). */
static bool read_word(const struct walk *w, uint64_t addr, uint64_t *v)
{
	if (w->hi - w->lo < 8 || addr < w->lo || addr > w->hi - 8)
		return false;
	memcpy(v, (const void *)(uintptr_t)addr, sizeof(*v));
	return true;
}

/* frame_umap: the previous frame's mapping when it holds pc, else a search's. */
static const struct mt_umap *frame_umap(struct walk *w)
{
	const struct mt_umaps *um = w->t->maps;
	uint32_t k = w->last;

	if (!um)
		return NULL;
	if (k >= MT_MAX_UMAPS || w->pc < um->m[k].start || w->pc >= um->m[k].end)
		k = mt_find_umap(um, w->pc);
	w->last = k;
	return k < MT_MAX_UMAPS ? &um->m[k] : NULL;
}

/* The @len bytes at @p in the tables, read in first when they come a page at a time; NULL: not now. */
static const void *table_entry(const struct fast_unwind_tables *t, const void *p, size_t len)
{
	return t->pages ? fast_table_page(t->pages, p, len, t->gen) : p;
}

static int64_t bucket_row(const struct fast_unwind_tables *t, uint32_t idx)
{
	const uint64_t *e = idx < t->nindex ? table_entry(t, &t->index[idx], sizeof(*e)) : NULL;

	return e ? (int64_t)(*e & 0xffffffffu) : -1;
}

static const struct mt_unwind_row *row_at(const struct fast_unwind_tables *t, uint32_t idx)
{
	return idx < t->nrows ? table_entry(t, &t->rows[idx], sizeof(t->rows[idx])) : NULL;
}

static bool row_step(const struct fast_unwind_tables *t, uint64_t *lo, uint64_t *hi, uint64_t addr)
{
	uint32_t idx = (uint32_t)((*lo + *hi) / 2);
	const struct mt_unwind_row *row = row_at(t, idx);
	uint64_t take;

	if (!row)
		return false;
	take = mt_le_mask(row->pc, addr);
	*lo = (idx & take) | (*lo & ~take);
	*hi = (*hi & take) | (idx & ~take);
	return true;
}

/* find_row: the row of @m's object covering ELF address @addr, or NULL. */
static const struct mt_unwind_row *find_row(const struct fast_unwind_tables *t,
					    const struct mt_umap *m, uint64_t addr)
{
	uint64_t lo, hi, b;
	const struct mt_unwind_row *row;
	int64_t first, next;

	if (!m->nrows || !m->nbuckets || addr > 0xffffffffull || addr < m->text_lo)
		return NULL;
	b = (addr - m->text_lo) >> (m->shift & 31);
	if (b >= m->nbuckets)
		b = m->nbuckets - 1;
	first = bucket_row(t, m->index_start + (uint32_t)b);
	next = b + 1 < m->nbuckets ? bucket_row(t, m->index_start + (uint32_t)b + 1)
				   : (int64_t)m->nrows - 1;
	if (first < 0 || next < first)
		return NULL;
	lo = m->row_start + (uint64_t)first;
	hi = m->row_start + (uint64_t)next + 1;
	for (int k = 0; k < MT_UNWIND_BUCKET_STEPS; k++)
		if (!row_step(t, &lo, &hi, addr))
			return NULL;
	row = row_at(t, (uint32_t)lo);
	return row && row->pc <= addr ? row : NULL;
}

static void add_frame(struct walk *w, uint32_t object, uint64_t addr)
{
	struct fast_stack *s = w->out;

	if (s->n >= MT_STACK_MAX)
		return;
	s->frames[s->n].object = object;
	s->frames[s->n].pad = 0;
	s->frames[s->n].addr = addr;
	s->n++;
	w->hash = (w->hash ^ object) * 0x100000001b3ull;
	w->hash = (w->hash ^ addr) * 0x100000001b3ull;
}

/* The CFA row @row gives, or false (unknown rule, unreadable). */
static bool row_cfa(const struct walk *w, const struct mt_unwind_row *row, uint64_t *cfa)
{
	switch (row->cfa) {
	case MT_CFA_RSP: *cfa = w->sp + row->cfa_off; return true;
	case MT_CFA_RBP: *cfa = w->bp + row->cfa_off; return true;
	case MT_CFA_DEREF_RBP: return read_word(w, w->bp + row->cfa_off, cfa);
	default: return false;
	}
}

/*
 * The return address @row gives (unwind.bpf.c's rules), its pac-ret
 * signature stripped; false: none (unknown rule, unreadable, x30 past the
 * first frame).
 */
static bool row_ra(const struct walk *w, const struct mt_unwind_row *row, uint64_t cfa,
		   uint64_t *ra)
{
	bool ok;

	*ra = 0;
	switch (row->ra) {
	case MT_RA_CFA_MINUS_8: ok = read_word(w, cfa - 8, ra); break;
	case MT_RA_AT_CFA: ok = read_word(w, cfa + row->ra_off, ra); break;
	/* x30 is the caller's only where a task stopped: a walk here starts at a call */
	default: ok = false; break;
	}
	*ra &= FAST_RA_MASK;
	return ok;
}

/*
 * What a pc resolves to, as the frame cache keeps it: the frame it records,
 * the row's rule, and the index of its mapping in the mappings (the next
 * search's hint).
 */
struct resolved {
	uint32_t object;
	uint64_t addr;
	struct mt_unwind_row row; /* cfa MT_CFA_NONE: no row (the walk ends, truncated) */
	uint32_t k;		  /* the mapping's index, MT_MAX_UMAPS: none */
};

/*
 * cfa_off, rbp_off, ra_off (16 bits each), then cfa (3 bits), rbp, ra (2
 * bits each) and k (9 bits).  A row whose cfa_off needs more than 16 bits
 * (a frame of 32 KiB or more) is not cached: fits_rule().
 */
static uint64_t pack_rule(const struct resolved *r)
{
	uint64_t cfa = r->row.cfa <= 7 ? r->row.cfa : MT_CFA_NONE;
	uint64_t rbp = r->row.rbp <= 3 ? r->row.rbp : 3; /* 3: no rule (as any unknown one) */
	uint64_t ra = r->row.ra <= 3 ? r->row.ra : 3;	 /* 3: no rule: the walk ends */

	_Static_assert(MT_MAX_UMAPS < 512, "k fits 9 bits");
	return (uint64_t)(uint16_t)r->row.cfa_off | (uint64_t)(uint16_t)r->row.rbp_off << 16 |
	       (uint64_t)(uint16_t)r->row.ra_off << 32 | cfa << 48 | rbp << 51 | ra << 53 |
	       (uint64_t)r->k << 55;
}

static bool fits_rule(const struct resolved *r)
{
	return r->row.cfa_off >= INT16_MIN && r->row.cfa_off <= INT16_MAX;
}

static void unpack_rule(uint64_t w, struct resolved *r)
{
	r->row = (struct mt_unwind_row){ .cfa_off = (int16_t)(uint16_t)w,
					 .rbp_off = (int16_t)(uint16_t)(w >> 16),
					 .ra_off = (int16_t)(uint16_t)(w >> 32),
					 .cfa = (uint8_t)(w >> 48 & 7),
					 .rbp = (uint8_t)(w >> 51 & 3),
					 .ra = (uint8_t)(w >> 53 & 3) };
	r->k = (uint32_t)(w >> 55);
}

/* Three independent products: a torn entry (two writers) fails it, at one multiply's latency. */
static uint64_t cache_chk(uint64_t key, uint64_t frame, uint64_t rule, uint64_t gen)
{
	return (key * 0xff51afd7ed558ccdull) ^ (frame * 0xc4ceb9fe1a85ec53ull) ^
	       (rule * 0x9e3779b97f4a7c15ull) ^ (gen * 0xd6e8feb86659fd93ull) ^ 0x5bd1e995ull;
}

static struct fast_frame_cache *cache_slot(const struct walk *w)
{
	return &w->t->cache[(w->pc * 0x9e3779b97f4a7c15ull) >> 52 & (FAST_CACHE_SLOTS - 1)];
}

/* What w->pc resolves to, from the cache; false: a miss. */
static bool cache_get(const struct walk *w, struct resolved *r)
{
	const struct fast_frame_cache *c = cache_slot(w);
	uint64_t key = __atomic_load_n(&c->key, __ATOMIC_RELAXED);
	uint64_t frame = __atomic_load_n(&c->frame, __ATOMIC_RELAXED);
	uint64_t rule = __atomic_load_n(&c->rule, __ATOMIC_RELAXED);
	uint64_t chk = __atomic_load_n(&c->chk, __ATOMIC_RELAXED);

	if (key != w->pc || chk != cache_chk(key, frame, rule, w->t->gen))
		return false;
	r->object = (uint32_t)(frame >> 32);
	r->addr = (uint32_t)frame;
	unpack_rule(rule, r);
	return true;
}

static void cache_put(const struct walk *w, const struct resolved *r)
{
	struct fast_frame_cache *c = cache_slot(w);
	uint64_t frame = (uint64_t)r->object << 32 | r->addr, rule = pack_rule(r);

	__atomic_store_n(&c->key, w->pc, __ATOMIC_RELAXED);
	__atomic_store_n(&c->frame, frame, __ATOMIC_RELAXED);
	__atomic_store_n(&c->rule, rule, __ATOMIC_RELAXED);
	__atomic_store_n(&c->chk, cache_chk(w->pc, frame, rule, w->t->gen), __ATOMIC_RELAXED);
}

/*
 * What w->pc resolves to: the cache's entry, or frame_umap's and find_row's
 * (then cached, unless no mapping holds the pc or its ELF address needs more
 * than 32 bits: such a frame ends the walk anyway).  An entry holds no index
 * the walk trusts (k is only a hint frame_umap checks): a wrong entry gives
 * a wrong frame or rule, whose reads stay inside the stack.
 */
static void resolve(struct walk *w, struct resolved *r)
{
	const struct mt_unwind_row *row;
	const struct mt_umap *m;
	bool cache = w->t->cache && w->t->maps;

	if (cache && cache_get(w, r)) {
		w->last = r->k;
		return;
	}
	m = frame_umap(w);
	row = m ? find_row(w->t, m, w->pc - m->bias - 1) : NULL;
	r->object = m ? m->object : 0;
	r->addr = m ? w->pc - m->bias : w->pc;
	r->row = row ? *row : (struct mt_unwind_row){ .cfa = MT_CFA_NONE };
	r->k = m ? (uint32_t)(m - w->t->maps->m) : MT_MAX_UMAPS;
	if (cache && m && r->addr <= 0xffffffffull && fits_rule(r))
		cache_put(w, r);
}

/* unwind_step: one frame; returns false once the walk has ended. */
static bool step(struct walk *w)
{
	struct resolved r;
	uint64_t cfa, ra;

	if (w->out->n >= MT_STACK_MAX)
		goto truncated;
	resolve(w, &r);
	if (w->skip && !w->out->n && w->skipped < SKIP_MAX && w->skip(w->pc))
		w->skipped++;
	else
		add_frame(w, r.object, r.addr);
	if (r.row.cfa == MT_CFA_END) {
		w->status = COMPLETE;
		return false;
	}
	if (!row_cfa(w, &r.row, &cfa) || !row_ra(w, &r.row, cfa, &ra))
		goto truncated;
	if (r.row.rbp == MT_RBP_AT_CFA) {
		if (!read_word(w, cfa + r.row.rbp_off, &w->bp))
			goto truncated;
	} else if (r.row.rbp == MT_RBP_LOST) {
		w->bp = 0;
	}
	if (!ra) {
		w->status = COMPLETE;
		return false;
	}
	w->sp = cfa;
	w->pc = ra;
	return true;
truncated:
	w->status = TRUNCATED;
	return false;
}

#if defined(__aarch64__)
/*
 * The caller's frame at an allocator's entry: @entry_sp is sp there (the
 * caller's), w->bp the entry point's own frame record {caller's x29, x30},
 * so the return address is the record's second word (its pac-ret
 * signature stripped).
 */
static bool entry_frame(struct walk *w, uint64_t entry_sp)
{
	uint64_t rec = w->bp;

	if (!read_word(w, rec, &w->bp) || !read_word(w, rec + 8, &w->pc))
		return false;
	w->pc &= FAST_RA_MASK;
	w->sp = entry_sp;
	return true;
}
#else
/* The caller's frame at an allocator's entry: @entry_sp holds the return address. */
static bool entry_frame(struct walk *w, uint64_t entry_sp)
{
	if (!read_word(w, entry_sp, &w->pc))
		return false;
	w->sp = entry_sp + 8;
	return true;
}
#endif /* __aarch64__ */

uint64_t fast_unwind(const struct fast_unwind_tables *t, uint64_t entry_sp, uint64_t bp,
		     uint64_t lo, uint64_t hi, struct fast_stack *out)
{
	return fast_unwind_skip(t, entry_sp, bp, lo, hi, NULL, out);
}

uint64_t fast_unwind_skip(const struct fast_unwind_tables *t, uint64_t entry_sp, uint64_t bp,
			  uint64_t lo, uint64_t hi, bool (*skip)(uint64_t pc),
			  struct fast_stack *out)
{
	struct walk w = {
		.t = t, .lo = lo, .hi = hi, .bp = bp, .last = MT_MAX_UMAPS, .out = out, .skip = skip
	};

	out->id = 0;
	out->n = 0;
	out->truncated = 0;
	w.hash = 0xcbf29ce484222325ull;
	if (!entry_frame(&w, entry_sp))
		return 0;
	for (unsigned i = 0; i < MT_STACK_MAX + 1 + w.skipped && step(&w); i++)
		;
	if (w.status == RUNNING)
		w.status = TRUNCATED;
	if (!out->n)
		return 0;
	out->truncated = w.status != COMPLETE;
	out->id = (w.hash ^ (w.status == COMPLETE ? 0 : 0x9e3779b97f4a7c15ull)) | 1;
	return out->id;
}

/*
 * /proc/self/maps, a line at a time, without allocating: the first five
 * fields (range, perms, offset, device, inode) of each line are kept, the
 * path is skipped.
 */
struct maps_line {
	char field[5][40];
	unsigned nf, len; /* the field being read, its length so far */
	bool overflow;	  /* a field too long for field[]: the line is no stack */
};

static uint64_t parse_hex(const char *s, const char **end)
{
	uint64_t v = 0;

	for (; *s; s++) {
		unsigned d = *s >= '0' && *s <= '9'   ? (unsigned)(*s - '0')
			     : *s >= 'a' && *s <= 'f' ? (unsigned)(*s - 'a' + 10)
						      : 16;
		if (d == 16)
			break;
		v = v << 4 | d;
	}
	*end = s;
	return v;
}

/* Whether the line in @l is a readable, writable anonymous mapping holding @sp. */
static bool line_holds(const struct maps_line *l, uint64_t sp, uint64_t *lo, uint64_t *hi)
{
	const char *p;
	uint64_t start, end;

	if (l->overflow || l->nf < 5)
		return false;
	start = parse_hex(l->field[0], &p);
	if (*p != '-')
		return false;
	end = parse_hex(p + 1, &p);
	if (*p || sp < start || sp >= end)
		return false;
	/* file-backed memory can fault (SIGBUS past a truncated file's end) */
	if (l->field[1][0] != 'r' || l->field[1][1] != 'w' || strcmp(l->field[4], "0") != 0)
		return false;
	*lo = start;
	*hi = end;
	return true;
}

/* Feeds one character of the file; returns true once the line holding sp was found. */
static bool maps_char(struct maps_line *l, char c, uint64_t sp, uint64_t *lo, uint64_t *hi)
{
	if (c == '\n') {
		bool found = false;

		if (l->nf < 5 && l->len)
			l->field[l->nf++][l->len] = 0;
		found = line_holds(l, sp, lo, hi);
		memset(l, 0, sizeof(*l));
		return found;
	}
	if (l->nf >= 5)
		return false; /* the path */
	if (c == ' ') {
		if (l->len)
			l->field[l->nf++][l->len] = 0;
		l->len = 0;
		return false;
	}
	if (l->len + 1 >= sizeof(l->field[0])) {
		l->overflow = true;
		return false;
	}
	l->field[l->nf][l->len++] = c;
	return false;
}

int fast_stack_bounds(uint64_t sp, uint64_t *lo, uint64_t *hi)
{
	struct maps_line line;
	char buf[4096];
	bool found = false;
	int saved = errno; /* a signal handler's caller may be looking at it */
	long fd, n;

	fd = syscall(SYS_openat, AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		errno = saved;
		return -1;
	}
	memset(&line, 0, sizeof(line));
	while (!found && (n = syscall(SYS_read, fd, buf, sizeof(buf))) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		for (long i = 0; i < n && !found; i++)
			found = maps_char(&line, buf[i], sp, lo, hi);
	}
	syscall(SYS_close, fd);
	errno = saved;
	return found ? 0 : -1;
}

/* The thread's stack and the last other range (an alternate signal stack). */
static __thread struct {
	uint64_t lo, hi;
} tls_stacks[2] TLS_IE;

/*
 * The MiB of the last sp no stack mapping held (+1; 0: none): a thread
 * running on memory that is not an anonymous mapping (a file-backed
 * coroutine stack) would otherwise read /proc/self/maps at every call;
 * it is read again every 1024th call there.
 */
static __thread uint64_t tls_miss TLS_IE;
static __thread uint32_t tls_miss_calls TLS_IE; /* since: read again every 1024 */

int fast_thread_stack(uint64_t sp, uint64_t *lo, uint64_t *hi)
{
	for (int i = 0; i < 2; i++)
		if (sp >= tls_stacks[i].lo && sp < tls_stacks[i].hi) {
			*lo = tls_stacks[i].lo;
			*hi = tls_stacks[i].hi;
			return 0;
		}
	if (tls_miss == (sp >> 20) + 1 && ++tls_miss_calls % 1024)
		return -1; /* a stack mapped there since is found at the next read */
	if (fast_stack_bounds(sp, lo, hi)) {
		tls_miss = (sp >> 20) + 1;
		return -1;
	}
	/* the first range found is the thread's own; later ones share slot 1 */
	tls_stacks[tls_stacks[0].hi ? 1 : 0].lo = *lo;
	tls_stacks[tls_stacks[0].hi ? 1 : 0].hi = *hi;
	return 0;
}

/*
 * The set is mapped at the first mark, not kept in .bss: 128 KiB of .bss
 * is an anonymous mapping ld.so makes, counted as the program's mapped
 * memory.  The first mark is made inside an allocator call (the depth
 * raised), so vm.bpf.c marks this mapping the allocator's.  Two threads
 * racing to map it: one mapping wins, the other is unmapped.
 */
static uint64_t *seen;

static uint64_t *seen_table(bool make)
{
	uint64_t *t = __atomic_load_n(&seen, __ATOMIC_ACQUIRE), *expect = NULL;
	void *p;

	if (t || !make)
		return t;
	p = mmap(own_map_hint(FAST_SEEN_SLOTS * sizeof(*t)), FAST_SEEN_SLOTS * sizeof(*t),
		 PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL; /* unmarked: the stack is written again, as after an eviction */
	if (__atomic_compare_exchange_n(&seen, &expect, (uint64_t *)p, false, __ATOMIC_ACQ_REL,
					__ATOMIC_ACQUIRE))
		return p;
	munmap(p, FAST_SEEN_SLOTS * sizeof(*t));
	return expect;
}

static uint32_t seen_slot(uint64_t id, uint32_t probe)
{
	return ((uint32_t)((id >> 1) * 0x9e3779b97f4a7c15ull >> 40) + probe) &
	       (FAST_SEEN_SLOTS - 1);
}

bool fast_stack_seen(uint64_t id)
{
	const uint64_t *t = seen_table(false);

	for (uint32_t i = 0; t && i < FAST_SEEN_PROBES; i++) {
		uint64_t v = __atomic_load_n(&t[seen_slot(id, i)], __ATOMIC_ACQUIRE);

		if (v == id)
			return true;
		if (!v)
			return false;
	}
	return false;
}

void fast_stack_mark(uint64_t id)
{
	uint64_t *t = seen_table(true);

	for (uint32_t i = 0; t && i < FAST_SEEN_PROBES; i++) {
		uint64_t *slot = &t[seen_slot(id, i)], v = 0;

		if (__atomic_compare_exchange_n(slot, &v, id, false, __ATOMIC_RELEASE,
						__ATOMIC_ACQUIRE) ||
		    v == id)
			return;
	}
}

void fast_stack_forget_all(void)
{
	uint64_t *t = seen_table(false);

	for (uint32_t i = 0; t && i < FAST_SEEN_SLOTS; i++)
		__atomic_store_n(&t[i], 0, __ATOMIC_RELAXED);
}
