// SPDX-License-Identifier: MIT
/* ring.c - the producer side of this process's ring; see ring.h. */
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <linux/types.h>
#include "bpf_abi.h"
#include "fast/fast_ring.h"
#include "fast/link.h"
#include "fast/ring.h"
#include "fast/unwind.h"
#include "fast/own_map.h"
#include "fast/sampler.h"

volatile int fast_recording;
__thread uint32_t fast_vfork_flag TLS_IE;

/* Where a call is on until the answer maps memtrack's switch. */
static const uint32_t always_on = 1;
const volatile uint32_t *fast_heap_switch = &always_on;

static struct {
	void *ring;		    /* MT_FAST_RING_BYTES, shared with memtrack */
	struct mt_fast_slot *slots; /* in ring */
	struct mt_fast_hdr *hdr;    /* in ring */
	pid_t pid;		    /* the process that made it */
} R;

static __thread pid_t tls_tid TLS_IE;

/*
 * Whether memtrack stopped reading the ring: it said so in the header
 * (it unmaps or abandons it), or it hung up (link_peer_gone).
 */
static bool memtrack_gone(void)
{
	if (__atomic_load_n(&R.hdr->closed, __ATOMIC_ACQUIRE))
		return true;
	return link_peer_gone();
}

/*
 * Waits until the slot is free for position lap (the consumer read its
 * previous lap).  Returns false when memtrack is gone: recording stops.
 */
static bool wait_slot(struct mt_fast_slot *s, uint64_t lap)
{
	struct timespec nap = { 0, 20000 };

	for (unsigned i = 1;; i++) {
		if (__atomic_load_n(&s->seq, __ATOMIC_ACQUIRE) == lap)
			return true;
		if (i < 256) {
#if defined(__x86_64__)
			__builtin_ia32_pause();
#elif defined(__aarch64__)
			__asm__ __volatile__("yield" ::: "memory");
#endif
			continue;
		}
		if (i % 64 == 0) {
			link_poke();
			if (memtrack_gone()) {
				fast_recording = 0;
				return false;
			}
		}
		nanosleep(&nap, NULL);
	}
}

/* Whether the calling thread's record is ours to write (the switch, a vfork child). */
static bool may_record(void)
{
	if (__builtin_expect(!*fast_heap_switch, 0))
		return false; /* recording switched off (control socket), as in alloc.bpf.c */
	if (__builtin_expect(fast_vfork_flag, 0)) {
		if (syscall(SYS_getpid) != R.pid)
			return false; /* a vfork child: the uprobes record it */
		fast_vfork_flag = 0;  /* this thread's child has exec'd or exited since */
	}
	if (__builtin_expect(!tls_tid, 0))
		tls_tid = syscall(SYS_gettid);
	return true;
}

/* The slot of position @pos once it is free for it, or NULL (memtrack is gone). */
static struct mt_fast_slot *slot_at(uint64_t pos, uint64_t *lap)
{
	struct mt_fast_slot *s = &R.slots[pos & (MT_FAST_SLOTS - 1)];

	*lap = pos & ~(uint64_t)(MT_FAST_SLOTS - 1);
	if (__atomic_load_n(&s->seq, __ATOMIC_ACQUIRE) != *lap && !wait_slot(s, *lap))
		return NULL;
	return s;
}

static void fill_head(struct mt_fast_slot *s, uint16_t type, uint16_t fn, uint32_t nfields)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	s->h.type = type;
	s->h.fn = fn;
	s->h.pid = R.pid;
	s->h.tid = tls_tid;
	s->h.nfields = nfields;
	s->h.ts = ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

void fast_record(uint16_t type, uint16_t fn, uint32_t nfields, uint64_t a, uint64_t b, uint64_t c,
		 uint64_t stack)
{
	struct mt_fast_slot *s;
	uint64_t pos, lap;

	if (!may_record())
		return;
	pos = __atomic_fetch_add(&R.hdr->head, 1, __ATOMIC_RELAXED);
	s = slot_at(pos, &lap);
	if (!s)
		return;
	fill_head(s, type, fn, nfields);
	/* as alloc.bpf.c's emit_heap: addr, size, third field, then the stack */
	s->f[0] = a;
	s->f[1] = nfields > FREE_NFIELDS ? b : 0;
	s->f[2] = nfields == REALLOC_NFIELDS ? c : nfields == MALLOC_NFIELDS ? stack : 0;
	s->f[3] = nfields == REALLOC_NFIELDS ? stack : 0;
	__atomic_store_n(&s->seq, lap + 1, __ATOMIC_RELEASE);
	if (__builtin_expect(!(pos & (MT_FAST_WAKE_EVERY - 1)), 0))
		link_poke();
}

/*
 * Writes @len bytes of @src into the data slots after the head at @pos
 * (fast_ring.h: MT_FAST_FRAMES_PER_SLOT frames, 48 bytes, a slot; the last
 * one's tail zeroed), each published on its own.  false: memtrack is gone.
 */
static bool put_data_slots(uint64_t pos, const void *src, uint32_t len)
{
	uint32_t k = MT_FAST_DATA_SLOTS(len);
	uint64_t lap;

	for (uint32_t j = 0; j < k; j++) {
		struct mt_fast_frames *f = (struct mt_fast_frames *)slot_at(pos + 1 + j, &lap);
		uint32_t at = j * (uint32_t)sizeof(f->fr),
			 n = len - at < sizeof(f->fr) ? len - at : sizeof(f->fr);

		if (!f)
			return false;
		f->mark = MT_FAST_FRAMES_MARK;
		f->index = j;
		memcpy(f->fr, (const char *)src + at, n);
		memset((char *)f->fr + n, 0, sizeof(f->fr) - n);
		__atomic_store_n(&f->seq, lap + 1, __ATOMIC_RELEASE);
	}
	return true;
}

/* Pokes memtrack when positions [@pos, @pos + @k] cross a wake-up boundary. */
static void poke_across(uint64_t pos, uint32_t k)
{
	if (__builtin_expect((pos & ~(uint64_t)(MT_FAST_WAKE_EVERY - 1)) !=
					     ((pos + k) & ~(uint64_t)(MT_FAST_WAKE_EVERY - 1)) ||
				     !(pos & (MT_FAST_WAKE_EVERY - 1)),
			     0))
		link_poke();
}

bool fast_record_stack(const struct fast_stack *st)
{
	uint32_t n = st->n, k = MT_FAST_FRAME_SLOTS(n);
	struct mt_fast_slot *s;
	uint64_t pos, lap;

	if (!n || n > MT_STACK_MAX || !may_record())
		return false;
	pos = __atomic_fetch_add(&R.hdr->head, 1 + k, __ATOMIC_RELAXED);
	s = slot_at(pos, &lap);
	if (!s)
		return false;
	fill_head(s, MT_STACK, 0, STACK_NFIELDS);
	s->f[STACK_ID] = st->id;
	s->f[STACK_TRUNCATED] = st->truncated;
	s->f[2] = n;
	s->f[3] = 0;
	__atomic_store_n(&s->seq, lap + 1, __ATOMIC_RELEASE);
	if (!put_data_slots(pos, st->frames, n * (uint32_t)sizeof(st->frames[0])))
		return false;
	poke_across(pos, k);
	return true;
}

bool fast_record_pycode(const struct mt_rec_pycode *c)
{
	uint32_t len = (uint32_t)(sizeof(c->f) + mt_pycode_blob_len(c->f)),
		 k = MT_FAST_DATA_SLOTS(len);
	struct mt_fast_slot *s;
	uint64_t pos, lap;

	if (len > sizeof(c->f) + MT_PYCODE_BLOB_MAX || !may_record())
		return false;
	pos = __atomic_fetch_add(&R.hdr->head, 1 + k, __ATOMIC_RELAXED);
	s = slot_at(pos, &lap);
	if (!s)
		return false;
	fill_head(s, MT_PYCODE, 0, PYCODE_NFIELDS);
	s->f[0] = len;
	s->f[1] = s->f[2] = s->f[3] = 0;
	__atomic_store_n(&s->seq, lap + 1, __ATOMIC_RELEASE);
	if (!put_data_slots(pos, c->f, len))
		return false;
	poke_across(pos, k);
	return true;
}

uint32_t fast_ring_pid(void)
{
	return (uint32_t)R.pid;
}

int ring_create(void)
{
	int memfd = memfd_create("memtrack-fast", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	void *ring;

	/* sealed at its size: memtrack maps no ring that could shrink under it */
	if (memfd < 0 || ftruncate(memfd, MT_FAST_RING_BYTES) ||
	    fcntl(memfd, F_ADD_SEALS, MT_FAST_SEALS))
		goto fail;
	ring = mmap(own_map_hint(MT_FAST_RING_BYTES), MT_FAST_RING_BYTES, PROT_READ | PROT_WRITE,
		    MAP_SHARED, memfd, 0);
	if (ring == MAP_FAILED)
		goto fail;
	R.ring = ring;
	R.hdr = ring;
	R.slots = mt_fast_slots(ring);
	R.hdr->magic = MT_FAST_MAGIC;
	R.hdr->version = MT_FAST_VERSION;
	R.hdr->slots = MT_FAST_SLOTS;
	R.pid = syscall(SYS_getpid);
	return memfd;
fail:
	if (memfd >= 0)
		close(memfd);
	return -1;
}

void ring_start(const volatile uint32_t *heap_switch)
{
	fast_heap_switch = heap_switch;
	sampler_start(R.hdr); /* memtrack wrote the period before its answer */
	fast_recording = 1;
}

void ring_drop(void)
{
	fast_recording = 0;
	fast_heap_switch = &always_on;
	sampler_drop();
	if (R.ring)
		munmap(R.ring, MT_FAST_RING_BYTES);
	R.ring = NULL;
	R.slots = NULL;
	R.hdr = NULL;
	tls_tid = 0;
	fast_vfork_flag = 0;
}

void ring_note_env_overflow(void)
{
	if (R.hdr)
		__atomic_add_fetch(&R.hdr->env_overflow, 1, __ATOMIC_RELAXED);
}
