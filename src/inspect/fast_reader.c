// SPDX-License-Identifier: MIT
/*
 * fast_reader.c - one process's in-process heap ring, read as untrusted
 * input; see fast_reader.h.
 */
#include <string.h>
#include <sys/mman.h>
#include "inspect/fast_reader.h"
#include "pipeline/pipeline.h"
#include "stack_id.h"

/*
 * What a process may write in its ring, by record type: only heap calls,
 * as the library records them (interpose.c).  A type without a rule is
 * refused.  The in-process unwinder's STACK records span several slots:
 * feed_stack() checks them.  The stack id a heap record names (its last
 * field) is checked apart (stack_field_ok).
 */
struct fast_rule {
	unsigned nfields; /* exactly */
	unsigned kinds;	  /* 1 << enum mt_fn_kind: the functions whose calls make it */
	bool (*fields_ok)(const __u64 *f, uint64_t va_end);
};

/* An address the process can hold (arm64's top byte is a tag: ignored). */
static uint64_t untagged(uint64_t a)
{
#ifdef __aarch64__
	return a & ((1ull << 56) - 1);
#else
	return a;
#endif
}

static bool addr_ok(uint64_t a, uint64_t va_end)
{
	return a && untagged(a) < va_end;
}

/* A block the allocator handed out: non-NULL, inside the address space. */
static bool block_ok(uint64_t addr, uint64_t size, uint64_t va_end)
{
	return addr_ok(addr, va_end) && size <= va_end - untagged(addr);
}

static bool malloc_ok(const __u64 *f, uint64_t va_end)
{
	_Static_assert((int)MALLOC_STACK == (int)CALLOC_STACK &&
			       (int)MALLOC_SIZE == (int)CALLOC_SIZE,
		       "calloc is checked as malloc");
	return block_ok(f[MALLOC_ADDR], f[MALLOC_SIZE], va_end);
}

static bool realloc_ok(const __u64 *f, uint64_t va_end)
{
	return block_ok(f[REALLOC_ADDR], f[REALLOC_SIZE], va_end) &&
	       addr_ok(f[REALLOC_OLD_ADDR], va_end);
}

static bool aligned_ok(const __u64 *f, uint64_t va_end)
{
	/* memalign takes any alignment (it rounds up), so only its range is checked */
	return block_ok(f[ALIGNED_ALLOC_ADDR], f[ALIGNED_ALLOC_SIZE], va_end) &&
	       f[ALIGNED_ALLOC_ALIGN] < va_end;
}

static bool free_ok(const __u64 *f, uint64_t va_end)
{
	return addr_ok(f[FREE_ADDR], va_end);
}

#define K(kind) (1u << MT_K_##kind)
/* realloc(NULL, n) is a malloc, realloc(p, 0) a free; an executable's
 * operator new(align) may call malloc (interpose.c's exe_caller) */
static const struct fast_rule rules[MT_TYPE_MAX] = {
	[MT_MALLOC] = { MALLOC_NFIELDS, K(MALLOC) | K(SIZE_ALIGN) | K(REALLOC) | K(REALLOCARRAY),
			malloc_ok },
	[MT_CALLOC] = { CALLOC_NFIELDS, K(CALLOC), malloc_ok },
	[MT_REALLOC] = { REALLOC_NFIELDS, K(REALLOC) | K(REALLOCARRAY), realloc_ok },
	[MT_ALIGNED_ALLOC] = { ALIGNED_ALLOC_NFIELDS,
			       K(ALIGN_SIZE) | K(SIZE_ALIGN) | K(POSIX_MEMALIGN) | K(PAGE_ALIGNED),
			       aligned_ok },
	[MT_FREE] = { FREE_NFIELDS, K(FREE) | K(REALLOC) | K(REALLOCARRAY), free_ok },
};
#undef K

/* The fn values the library records: the functions it interposes. */
static const bool interposed[MT_FN_MAX] = {
#define X_FN(id, num, name, kind, sym, where) MT_FN_IF_FAST(where, [MT_FN_##id] = true, )
	MT_FN_LIST(X_FN)
#undef X_FN
};

/* enum mt_fn_kind of each fn (schema.c's mt_fn_kind(), here without a call per record) */
static const unsigned char fn_kind[MT_FN_MAX] = {
#define X_KIND(id, num, name, kind, sym, where) [MT_FN_##id] = (kind),
	MT_FN_LIST(X_KIND)
#undef X_KIND
};

/*
 * A heap record's stack (its last field; free has none): 0, or, when the
 * library unwinds, an id as unwind.c makes them (odd).  That the process
 * wrote the stack record of the id is its own claim about itself: an id
 * without one reads as "no stack" (FORMAT.md §8.2).
 */
static bool stack_field_ok(const struct mt_rec_hdr *h, const __u64 *f, bool stacks)
{
	__u64 id;

	if (h->type == MT_FREE)
		return true;
	id = f[h->nfields - 1];
	return !id || (stacks && (id & 1));
}

bool fast_heap_valid(const struct mt_rec_hdr *h, const __u64 *f, uint64_t va_end, bool stacks)
{
	const struct fast_rule *rule = h->type < MT_TYPE_MAX ? &rules[h->type] : NULL;

	if (!rule || !rule->fields_ok || h->nfields != rule->nfields ||
	    !stack_field_ok(h, f, stacks))
		return false;
	/* MT_REC_PARKED and every other bit beyond the known functions: refused */
	if (h->fn >= MT_FN_MAX || !interposed[h->fn] || !(rule->kinds & (1u << fn_kind[h->fn])))
		return false;
	return rule->fields_ok(f, va_end);
}

bool fast_record_valid(const struct mt_rec_hdr *h, const __u64 *f, uint64_t va_end)
{
	return fast_heap_valid(h, f, va_end, false);
}

/* Whether a page can be mapped at @hint exactly (the address space reaches it). */
static bool maps_at(uint64_t hint)
{
	void *p = mmap((void *)hint, 4096, PROT_NONE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);

	if (p == MAP_FAILED)
		return false;
	munmap(p, 4096);
	return (uint64_t)(uintptr_t)p == hint; /* kernels before 4.17 take it as a hint */
}

uint64_t fast_va_end(void)
{
	/* 4-level paging ends user space below 2^47 (x86-64) or 2^48 (arm64),
	 * 5-level (and arm64's 52 bits) below 2^57 */
	return maps_at(1ull << 47) ? 1ull << 57 : 1ull << 48;
}

void fast_reader__init(struct fast_reader *r, void *ring, uint32_t pid, uint64_t opened_ns,
		       uint64_t va_end)
{
	memset(r, 0, sizeof(*r));
	r->ring = ring;
	r->pid = pid;
	r->opened_ns = opened_ns;
	r->va_end = va_end;
}

static void lie(struct fast_reader *r)
{
	r->lied = true;
	r->refused++;
}

void fast_reader_close(struct fast_reader *r)
{
	const struct mt_fast_hdr *hdr = r->ring;
	uint64_t head = __atomic_load_n(&hdr->head, __ATOMIC_ACQUIRE);

	if (r->closing || r->lied)
		return;
	r->closing = true;
	/* unsigned: a head behind the tail is as impossible as one far ahead */
	if (head - r->tail > (uint64_t)MT_FAST_SLOTS + MT_FAST_MAX_WAITERS) {
		lie(r);
		return;
	}
	r->end = head;
	/*
	 * A producer writes position p once p - slots was read: with the
	 * producers gone, nothing from one lap past the tail on was written.
	 */
	r->last = r->tail + MT_FAST_SLOTS;
}

bool fast_reader_done(const struct fast_reader *r)
{
	return r->lied || (r->closing && r->tail >= r->end);
}

/*
 * Copies slot @s into @rec: the process may rewrite the slot at any time,
 * so everything after this looks at the copy only (the barrier keeps the
 * compiler from reading the slot again instead).
 */
static void copy_slot(const struct mt_fast_slot *s, struct mt_rec *rec)
{
	memcpy(&rec->h, &s->h, sizeof(s->h) + sizeof(s->f));
	__asm__ __volatile__("" ::: "memory");
}

/*
 * A record's timestamp, held between the ring's acceptance and now: the
 * library stamps after memtrack accepted it and before it publishes (a
 * process in another time namespace stamps with an offset clock: its
 * records stay, in its ring's order).  *@now is read when first needed.
 */
static uint64_t held_ts(const struct fast_reader *r, uint64_t ts, uint64_t *now)
{
	if (ts + FAST_TS_SLACK_NS < r->opened_ns)
		return r->opened_ns;
	if (ts > *now && (*now = mono_ns()) < ts)
		return *now;
	return ts;
}

/* Feeds @rec when it is valid, else counts it.  Returns 1 (fed), 0 or -errno. */
static int feed_record(struct fast_reader *r, struct pipeline *p, struct mt_rec *rec)
{
	int err;

	if (!fast_heap_valid(&rec->h, rec->f, r->va_end, r->stacks)) {
		r->refused++;
		return 0;
	}
	rec->h.pid = r->pid; /* the peer's, whatever it wrote */
	err = pipeline_feed(p, rec, sizeof(rec->h) + rec->h.nfields * sizeof(__u64));
	if (err)
		return err;
	r->records++;
	return 1;
}

/*
 * Whether the head @h, @f and the frames of a stack are one the library
 * can have unwound: 1 to MT_STACK_MAX frames, each in an object memtrack
 * announced (or 0: no mapping), a truncation mark of 0 or 1, and the id
 * those frames and that mark give (so no process can name another's
 * stack with its own frames: readers keep the first of an id).
 */
static bool stack_valid(const struct fast_reader *r, const struct mt_rec_hdr *h, const __u64 *f,
			const struct mt_rec_frame *fr)
{
	uint32_t n = (uint32_t)f[2];

	if (!r->stacks || h->fn || h->nfields != STACK_NFIELDS || f[STACK_TRUNCATED] > 1 || f[3])
		return false;
	for (uint32_t i = 0; i < n; i++)
		if (fr[i].pad ||
		    (fr[i].object & MT_PY_FRAME ? !(fr[i].addr & 1) : fr[i].object > r->objects))
			return false; /* a Python frame's key is odd (py_key.h) */
	return f[STACK_ID] == mt_stack_id(fr, n, f[STACK_TRUNCATED]);
}

/*
 * The @len bytes in the data slots after the head at r->tail (a STACK's
 * frames, a PYCODE's fields and blob: fast_ring.h), copied into @dst.
 * Returns 1 when all are written, 0 when one is not yet, -1 for a slot out
 * of its lap (a lie), -2 for a slot that is not a data slot of this head
 * (the head is refused alone).
 */
static int data_slots(struct fast_reader *r, uint32_t len, void *dst)
{
	struct mt_fast_slot *slots = mt_fast_slots(r->ring);

	for (uint32_t j = 0; j < MT_FAST_DATA_SLOTS(len); j++) {
		uint64_t pos = r->tail + 1 + j, lap = pos & ~(uint64_t)(MT_FAST_SLOTS - 1), seq;
		const struct mt_fast_frames *src =
			(const struct mt_fast_frames *)&slots[pos & (MT_FAST_SLOTS - 1)];
		uint32_t at = j * MT_FAST_DATA_BYTES;
		struct mt_fast_frames copy;

		seq = __atomic_load_n(&src->seq, __ATOMIC_ACQUIRE);
		if (seq == lap)
			return 0;
		if (seq != lap + 1)
			return -1;
		memcpy(&copy, src, sizeof(copy));
		__asm__ __volatile__("" ::: "memory");
		if (copy.mark != MT_FAST_FRAMES_MARK || copy.index != j)
			return -2;
		memcpy((char *)dst + at, copy.fr,
		       len - at < MT_FAST_DATA_BYTES ? len - at : MT_FAST_DATA_BYTES);
	}
	return 1;
}

/*
 * A STACK head at r->tail (copied in @rec): feeds the stack when all its
 * frame slots are written and it is valid.  Returns the positions it used
 * (its slots, consumed by the caller), 0 to wait for the rest, or the
 * pipeline's -errno; a lie sets r->lied.
 */
static int feed_stack(struct fast_reader *r, struct pipeline *p, const struct mt_rec *rec)
{
	struct mt_rec_stack s;
	uint32_t n = (uint32_t)rec->f[2];
	int got, err;

	memset(&s, 0, sizeof(s)); /* once per distinct stack of a process */
	if (!r->stacks || n < 1 || n > MT_STACK_MAX) {
		r->refused++;
		return 1;
	}
	_Static_assert(MT_FAST_DATA_BYTES == MT_FAST_FRAMES_PER_SLOT * sizeof(s.frames[0]),
		       "frame slots are data slots");
	got = data_slots(r, n * (uint32_t)sizeof(s.frames[0]), s.frames);
	if (got == 0 && !r->closing)
		return 0;
	if (got == -1) {
		lie(r);
		return 1;
	}
	if (got <= 0 || (r->closing && r->tail + 1 + MT_FAST_FRAME_SLOTS(n) > r->end)) {
		r->refused += got < 0;
		r->lost += got == 0;
		return 1; /* the head alone: its frame slots, written or not, are refused */
	}
	if (!stack_valid(r, &rec->h, rec->f, s.frames)) {
		r->refused++;
		return 1 + (int)MT_FAST_FRAME_SLOTS(n);
	}
	s.h = rec->h;
	s.h.pid = r->pid;
	s.f[STACK_ID] = rec->f[STACK_ID];
	s.f[STACK_TRUNCATED] = rec->f[STACK_TRUNCATED];
	s.nframes = n;
	s.pad = 0;
	err = pipeline_feed(
		p, &s, __builtin_offsetof(struct mt_rec_stack, frames) + n * sizeof(s.frames[0]));
	if (err)
		return err;
	r->records++;
	r->stacks_fed++;
	return 1 + (int)MT_FAST_FRAME_SLOTS(n);
}

/*
 * Whether @c, a PYCODE record of the ring's, is one the library can have
 * written (python.c): an odd key, string lengths and kinds it copies, a
 * line table of a known format no longer than it keeps.
 */
static bool pycode_valid(const struct mt_rec_pycode *c)
{
	uint64_t str = c->f[PYCODE_STRINGS], lines = c->f[PYCODE_LINES];
	const uint32_t cap[3] = { MT_PYCODE_NAME_MAX, MT_PYCODE_QUAL_MAX, MT_PYCODE_FILE_MAX };

	if (!(c->f[PYCODE_KEY] & 1) || str >> 39 || lines >> 34 ||
	    (lines & 0xffffffffu) > MT_PYCODE_LINES_MAX || c->f[PYCODE_FIRSTLINE] > INT32_MAX)
		return false;
	for (int i = 0; i < 3; i++) {
		uint32_t k = MT_PYCODE_STR_KIND(str, i);

		if (MT_PYCODE_STR_LEN(str, i) > cap[i] || (k != 0 && k != 1 && k != 2 && k != 4))
			return false;
	}
	return (lines >> 32) <= MT_PY_LINES_311;
}

/*
 * A PYCODE head at r->tail (copied in @rec): as feed_stack(), for the
 * record's fields and blob in the data slots after it.
 */
static int feed_pycode(struct fast_reader *r, struct pipeline *p, const struct mt_rec *rec)
{
	uint64_t len = rec->f[0];
	struct mt_rec_pycode c;
	int got, err, used;

	if (!r->stacks || rec->h.fn || rec->h.nfields != PYCODE_NFIELDS || rec->f[1] || rec->f[2] ||
	    rec->f[3] || len < sizeof(c.f) || len > sizeof(c.f) + MT_PYCODE_BLOB_MAX) {
		r->refused++;
		return 1;
	}
	used = 1 + (int)MT_FAST_DATA_SLOTS((uint32_t)len);
	memset(c.f, 0, sizeof(c.f)); /* data_slots() fills them when it returns > 0 */
	got = data_slots(r, (uint32_t)len, c.f);
	if (got == 0 && !r->closing)
		return 0;
	if (got == -1) {
		lie(r);
		return 1;
	}
	if (got <= 0 || (r->closing && r->tail + (uint64_t)used > r->end)) {
		r->refused += got < 0;
		r->lost += got == 0;
		return 1;
	}
	if (!pycode_valid(&c) || sizeof(c.f) + mt_pycode_blob_len(c.f) != len) {
		r->refused++;
		return used;
	}
	c.h = rec->h;
	c.h.pid = r->pid;
	err = pipeline_feed(p, &c, (size_t)len + sizeof(c.h));
	if (err)
		return err;
	r->records++;
	return used;
}

/* Marks @k positions from the tail consumed. */
static void consume(struct fast_reader *r, unsigned k)
{
	struct mt_fast_slot *slots = mt_fast_slots(r->ring);

	for (unsigned j = 0; j < k; j++, r->tail++) {
		uint64_t lap = r->tail & ~(uint64_t)(MT_FAST_SLOTS - 1);

		__atomic_store_n(&slots[r->tail & (MT_FAST_SLOTS - 1)].seq, lap + MT_FAST_SLOTS,
				 __ATOMIC_RELEASE);
	}
}

int fast_reader_feed(struct fast_reader *r, struct pipeline *p, uint64_t until, uint64_t *next)
{
	struct mt_fast_slot *slots = mt_fast_slots(r->ring);
	struct mt_fast_hdr *hdr = r->ring;
	uint64_t now = 0;
	struct mt_rec rec;
	int n = 0, err;

	*next = UINT64_MAX;
	for (unsigned i = 0; !r->lied && !fast_reader_done(r); i++) {
		struct mt_fast_slot *s = &slots[r->tail & (MT_FAST_SLOTS - 1)];
		uint64_t lap = r->tail & ~(uint64_t)(MT_FAST_SLOTS - 1), seq;

		if (i == FAST_READ_MAX) {
			*next = 0; /* more may be ready: the caller comes back */
			break;
		}
		if (r->closing && r->tail >= r->last) {
			r->lost += r->end - r->tail; /* taken, never written */
			r->tail = r->end;
			break;
		}
		seq = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);
		if (seq == lap) { /* not written (yet) */
			if (!r->closing)
				break;
			r->lost++; /* reserved by a thread that died in a call */
		} else if (seq != lap + 1) {
			lie(r); /* a seq no producer writes for this position */
			break;
		} else {
			copy_slot(s, &rec);
			rec.h.ts = held_ts(r, rec.h.ts, &now);
			if (rec.h.ts > until) {
				*next = rec.h.ts;
				break;
			}
			if (rec.h.type == MT_STACK || rec.h.type == MT_PYCODE) {
				uint64_t before = r->records;

				err = rec.h.type == MT_STACK ? feed_stack(r, p, &rec)
							     : feed_pycode(r, p, &rec);
				if (err < 0)
					return err;
				if (!err) { /* its frames are being written */
					*next = rec.h.ts;
					break;
				}
				n += (int)(r->records - before);
				i += (unsigned)err - 1;
				consume(r, (unsigned)err);
				continue;
			}
			err = feed_record(r, p, &rec);
			if (err < 0)
				return err;
			n += err;
		}
		__atomic_store_n(&s->seq, lap + MT_FAST_SLOTS, __ATOMIC_RELEASE);
		r->tail++;
	}
	hdr->tail = r->tail;
	return n;
}
