// SPDX-License-Identifier: MIT
/*
 * interpose.c - the allocator entry points libmemtrack-fast.so defines.
 *
 * Each forwards to the next definition in the search order (libc's, or
 * another interposer's) and, for a thread's outermost allocator call made
 * after the handover, records what the uprobe path records for it
 * (alloc.bpf.c): the record type by the call's kind, `fn` the function the
 * program called (or the first of MT_FN_LIST's names that shares its
 * address, as the uprobes see it), the sizes asked for, the addresses, the
 * result.  free-kind calls are recorded before the block is released (as
 * the uprobes record them at entry), so another thread's malloc of the same
 * address cannot come first.
 *
 * A thread-local depth counts the allocator calls in progress: calls made
 * inside another one (operator new calling malloc, the next interposer's
 * own calls) are not recorded.  C++ operators may throw through here: the
 * library is built with -fexceptions and the depth is restored by a cleanup.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <linux/types.h>
#include "event.h"
#include "fast/interpose.h"
#include "fast/next_sym.h"
#include "fast/ring.h"
#include "fast/unwind.h"
#include "fast/own_map.h"
#include "fast/sampler.h"

#define EXPORT __attribute__((visibility("default")))

/* The functions interposed, in MT_FN_LIST's order (of preference: see resolve_one). */
enum {
#define X_ENUM(id, num, name, kind, sym, where) MT_FN_IF_FAST(where, I_##id, )
	MT_FN_LIST(X_ENUM)
#undef X_ENUM
		I_COUNT,
	I_FIRST_CXX = I_NEW,
};
/* C names, then operator new forms, then operator delete forms (resolve_one, delete_hooks) */
_Static_assert(I_FREE < I_FIRST_CXX && I_NEW < I_DELETE &&
		       I_DELETE_ARRAY_ALIGNED_NOTHROW == I_COUNT - 1,
	       "MT_FN_LIST's interposed functions out of order");

static const char *const names[I_COUNT] = {
#define X_NAME(id, num, name, kind, sym, where) MT_FN_IF_FAST(where, sym, )
	MT_FN_LIST(X_NAME)
#undef X_NAME
};

static const uint16_t natural_fn[I_COUNT] = {
#define X_FN(id, num, name, kind, sym, where) MT_FN_IF_FAST(where, MT_FN_##id, )
	MT_FN_LIST(X_FN)
#undef X_FN
};

static void *real[I_COUNT];	/* the next definitions */
static uint16_t fn_id[I_COUNT]; /* what a record of each calls it */

static __thread unsigned tls_depth TLS_IE;

long interpose_depth_offset(void)
{
	return (char *)&tls_depth - (char *)__builtin_thread_pointer();
}

void *interpose_own_map(size_t len)
{
	void *p;

	tls_depth++;
	p = mmap(own_map_hint(len), len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
		 0);
	tls_depth--;
	return p == MAP_FAILED ? NULL : p;
}

void *interpose_own_map_fd(size_t len, int fd)
{
	void *p;

	tls_depth++;
	p = mmap(own_map_hint(len), len, PROT_READ, MAP_SHARED, fd, 0);
	tls_depth--;
	return p == MAP_FAILED ? NULL : p;
}

/*
 * The entry of an exported allocator function, for the unwinder: its
 * return-address slot and rbp at its entry.  Every entry point has a frame
 * (__builtin_frame_address makes gcc set one up: push rbp; mov rsp, rbp
 * first), so the slot is the word above the saved rbp.  Taken in the
 * exported function itself (a helper's frame would be one more).
 */
#if defined(__aarch64__)
/*
 * aarch64: sp at the entry (the CFA, unchanged by the call) and the entry
 * point's own frame record {caller's x29, return address}: unwind.h.
 */
#define ENTRY_SP() ((uint64_t)(uintptr_t)__builtin_dwarf_cfa())
#define ENTRY_BP() ((uint64_t)(uintptr_t)__builtin_frame_address(0))
#else
#define ENTRY_SP() ((uint64_t)(uintptr_t)__builtin_frame_address(0) + 8)
#define ENTRY_BP() (*(const uint64_t *)__builtin_frame_address(0))
#endif /* __aarch64__ */

/*
 * An operator new of the C++ runtime waiting for its result.  As on the
 * uprobe path (which cannot put a return probe on it), operator new is not
 * a call the depth counts: it takes its result from the first allocator
 * call it makes (libstdc++'s calls malloc or aligned_alloc), and what it
 * does after that (__cxa_allocate_exception's malloc when it throws) is
 * the thread's own outermost call again.
 */
struct pending_new {
	bool active;
	uint16_t fn;   /* the operator's */
	uint16_t type; /* MT_MALLOC, or MT_ALIGNED_ALLOC for the align_val_t forms */
	uint64_t size; /* asked of operator new */
	uint64_t align;
	uint64_t stack; /* at the operator's entry */
	bool sampled;	/* its draw (sampler.h): recorded, or only counted */
};
static __thread struct pending_new tls_new TLS_IE;

/* glibc's own names, for the calls made before the lookup is possible */
/* NOLINTBEGIN(bugprone-reserved-identifier): libc's and the C++ ABI's names are the point */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);
/* NOLINTEND(bugprone-reserved-identifier) */

/* Our own malloc, whatever the search order resolves `malloc` to. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-attributes"
extern void *own_malloc(size_t)
HIDDEN __attribute__((alias("malloc")));
#pragma GCC diagnostic pop

/* Looks up function @i; an alias of an earlier one is recorded under its name. */
static void resolve_one(int i)
{
	void *p = next_sym(names[i], (const void *)own_malloc);

	fn_id[i] = natural_fn[i];
	for (int j = i < I_FIRST_CXX ? 0 : I_FIRST_CXX; p && j < i; j++)
		if (real[j] == p) {
			fn_id[i] = fn_id[j];
			break;
		}
	__atomic_store_n(&real[i], p, __ATOMIC_RELEASE);
}

/*
 * The executable's own C++ operators: a program that links the C++
 * runtime statically (gcc's cc1) calls them inside the executable, past
 * this library, and they call malloc and free (through the PLT: ours).
 * The uprobe path records such a call under the operator's name, so the
 * malloc or free it makes is recorded here under the operator the program
 * called: found from the return addresses (see exe_caller).
 */
struct exe_op {
	uintptr_t start, end; /* the function's code */
	uint16_t fn;	      /* enum mt_fn */
	uint16_t delete_idx;  /* operator delete forms: its position from I_DELETE */
	bool is_new;	      /* an operator new form (else delete) */
};
static struct exe_op exe_ops[I_COUNT - I_FIRST_CXX];
static unsigned n_exe_ops;
static uintptr_t exe_lo, exe_hi; /* the executable's code */

static void find_exe_ops(void)
{
	for (int i = I_FIRST_CXX; i < I_COUNT; i++) {
		unsigned long size, lo, hi;
		void *p = exe_sym(names[i], &size, &lo, &hi);

		if (!p)
			continue;
		exe_lo = lo;
		exe_hi = hi;
		exe_ops[n_exe_ops++] =
			(struct exe_op){ (uintptr_t)p, (uintptr_t)p + (size ? size : 1),
					 natural_fn[i], (uint16_t)(i < I_DELETE ? 0 : i - I_DELETE),
					 i < I_DELETE };
	}
}

void interpose_resolve(void)
{
	if (__atomic_load_n(&real[I_MALLOC], __ATOMIC_ACQUIRE))
		return;
	for (int i = 0; i < I_FIRST_CXX; i++)
		if (i != I_MALLOC)
			resolve_one(i);
	find_exe_ops();
	resolve_one(I_MALLOC); /* last: its pointer says all are done */
}

static bool in_code(uintptr_t a)
{
	return a >= exe_lo + 5 && a < exe_hi;
}

/* The operator whose body holds @a, or NULL. */
static const struct exe_op *op_at(uintptr_t a)
{
	for (unsigned i = 0; i < n_exe_ops; i++)
		if (a >= exe_ops[i].start && a < exe_ops[i].end)
			return &exe_ops[i];
	return NULL;
}

static const struct exe_op *op_starting(uintptr_t a)
{
	for (unsigned i = 0; i < n_exe_ops; i++)
		if (exe_ops[i].start == a)
			return &exe_ops[i];
	return NULL;
}

/* Bytes of a called function searched for a tail jump to an operator. */
#define TAIL_SCAN 64

/*
 * The operator a `call rel32` that returns to @ra (in the code) called, or
 * NULL.  A small function that ends in a tail jump to an operator (`void
 * destroy(T *p) { delete p; }`) counts as a call of that operator: its
 * first TAIL_SCAN bytes are searched for a `jmp rel32` to one.
 */
static const struct exe_op *call_target(uintptr_t ra)
{
	const unsigned char *c = (const unsigned char *)(ra - 5);
	const struct exe_op *op;
	uintptr_t fn;
	int32_t rel;

	if (c[0] != 0xe8)
		return NULL;
	memcpy(&rel, c + 1, sizeof(rel));
	fn = ra + (intptr_t)rel;
	op = op_starting(fn);
	if (op || fn < exe_lo || fn + TAIL_SCAN + 5 > exe_hi)
		return op;
	for (const unsigned char *b = (const unsigned char *)fn;
	     b < (const unsigned char *)fn + TAIL_SCAN; b++) {
		if (*b != 0xe9)
			continue;
		memcpy(&rel, b + 1, sizeof(rel));
		op = op_starting((uintptr_t)b + 5 + (intptr_t)rel);
		if (op)
			return op;
	}
	return NULL;
}

/*
 * The executable's operator the program called, when our caller (return
 * address slot[0]) is one or was jumped to from one, else NULL.  The
 * operators tail-jump to each other and to free (operator delete[](size)
 * -> operator delete[] -> operator delete -> free): then our return
 * address is the program's, right after its call of the operator.  An
 * operator new calls malloc: then the program's call is a few words up
 * its frame, the first return address there that is not inside an
 * operator.  Only the code's own direct calls are recognised; a call
 * through a pointer is recorded as plain malloc or free.
 */
static const struct exe_op *exe_caller(const uintptr_t *slot, bool is_new)
{
	const struct exe_op *op = NULL;
	uintptr_t ra = slot[0];

	if (!in_code(ra))
		return NULL;
	if (!op_at(ra)) {
		op = call_target(ra);
	} else {
		for (int k = 1; k <= 8 && !op; k++)
			if (in_code(slot[k]) && !op_at(slot[k]))
				op = call_target(slot[k]);
	}
	return op && op->is_new == is_new ? op : NULL;
}

#define CALLER_SLOT() ((const uintptr_t *)__builtin_frame_address(0) + 1)

static bool exe_deletes_patched; /* see interpose_patch_exe() */


/* The C++ runtime may be loaded later (dlopen): resolved at first use. */
static void *cxx_real(int i)
{
	void *p = __atomic_load_n(&real[i], __ATOMIC_ACQUIRE);

	if (__builtin_expect(!p, 0)) {
		resolve_one(i);
		p = real[i];
		if (!p)
			abort(); /* a call to an operator no loaded object defines */
	}
	return p;
}

bool interpose_owns_malloc(void)
{
	/* the program (or an earlier preload) defines malloc: ours is never called */
	if (next_sym("malloc", NULL) != (void *)own_malloc)
		return false;
	/* jemalloc, tcmalloc, mimalloc loaded as malloc: their calls stay with the uprobes */
	return !one_object_defines("malloc", "mallocx") &&
	       !one_object_defines("malloc", "tc_malloc") &&
	       !one_object_defines("malloc", "mi_malloc");
}

/* Enters an allocator call; returns whether it is the thread's outermost one to record. */
static inline bool enter(void)
{
	/* a call that starts while recording is off is not recorded (alloc_enter) */
	return tls_depth++ == 0 && fast_recording && *fast_heap_switch;
}

static inline void leave(unsigned *unused)
{
	tls_depth--;
}

#define REAL(i, type) ((type)real[i])

static inline uint32_t nfields_of(uint16_t type)
{
	return type == MT_FREE				? FREE_NFIELDS
	       : type == MT_MALLOC || type == MT_CALLOC ? MALLOC_NFIELDS
							: REALLOC_NFIELDS;
}

/*
 * Records the block @p (not NULL) an outermost call allocated; with
 * --sample-bytes counts it, and records it only when @sampled (sampler.h).
 */
static inline void record_block(uint16_t type, uint16_t fn, void *p, uint64_t size, uint64_t third,
				uint64_t stack, bool sampled)
{
	if (!sampler_period || sampler_alloc((uintptr_t)p, size, sampled))
		fast_record(type, fn, nfields_of(type), (uintptr_t)p, size, third, stack);
}

/* Records the free of @p (not NULL); with --sample-bytes only a sampled block's. */
static inline void record_freed(uint16_t fn, void *p)
{
	if (!sampler_period || sampler_free((uintptr_t)p))
		fast_record(MT_FREE, fn, FREE_NFIELDS, (uintptr_t)p, 0, 0, 0);
}

/*
 * Records an outermost allocating call's result: its own, or, when it is
 * the call an operator new delegated to, the operator's.
 */
static inline void record_alloc(int i, uint16_t type, void *p, uint64_t size, uint64_t third,
				uint64_t stack, bool sampled)
{
	if (__builtin_expect(tls_new.active, 0)) {
		tls_new.active = false;
		if (p)
			record_block(tls_new.type, tls_new.fn, p, tls_new.size, tls_new.align,
				     tls_new.stack, tls_new.sampled);
		return;
	}
	if (p)
		record_block(type, fn_id[i], p, size, third, stack, sampled);
}

static inline void record_as(uint16_t fn, uint16_t type, void *p, uint64_t size, uint64_t third,
			     uint64_t stack, bool sampled)
{
	if (p)
		record_block(type, fn, p, size, third, stack, sampled);
}

/* A free inside an operator new (not a program's call) is not recorded. */
static inline void record_free(int i, void *p)
{
	if (p && !tls_new.active)
		record_freed(fn_id[i], p);
}

/*
 * The stack of a recorded outermost call (@rec) at its entry (@sp, @bp),
 * unless it is an operator new's delegate (the operator's was taken).
 * @skip: the leading frames it names are the executable's operator new,
 * whose entry is where the uprobes take the stack (exe_caller).
 */
static inline uint64_t stack_of(bool rec, uint64_t sp, uint64_t bp, bool (*skip)(uint64_t))
{
	if (!rec || tls_new.active || !fast_unwinding())
		return 0;
	return fast_take_stack(sp, bp, skip);
}

/*
 * The executable's operator delete forms jump to one another and to free,
 * often from a tail jump of the program's own (a destructor ending in
 * `jmp operator delete`): return addresses cannot say which one the
 * program called.  Once memtrack accepted the process, each one's entry is
 * overwritten with a jump to a hook of ours that records the free under
 * its name and frees: exactly what the runtime's operator delete does on
 * glibc (the aligned forms too: aligned_alloc's blocks are freed by free).
 */
static void hooked_delete(int i, void *p)
{
	if (enter() && p && !tls_new.active)
		record_freed(natural_fn[i], p);
	REAL(I_FREE, void (*)(void *))(p);
	tls_depth--;
}

#define DELETE_HOOK(id)                   \
	static void hook_##id(void *p)    \
	{                                 \
		hooked_delete(I_##id, p); \
	}
DELETE_HOOK(DELETE)
DELETE_HOOK(DELETE_ARRAY)
DELETE_HOOK(DELETE_SIZED)
DELETE_HOOK(DELETE_ARRAY_SIZED)
DELETE_HOOK(DELETE_ALIGNED)
DELETE_HOOK(DELETE_ARRAY_ALIGNED)
DELETE_HOOK(DELETE_SIZED_ALIGNED)
DELETE_HOOK(DELETE_ARRAY_SIZED_ALIGNED)
DELETE_HOOK(DELETE_NOTHROW)
DELETE_HOOK(DELETE_ARRAY_NOTHROW)
DELETE_HOOK(DELETE_ALIGNED_NOTHROW)
DELETE_HOOK(DELETE_ARRAY_ALIGNED_NOTHROW)

static void (*const delete_hooks[])(void *) = {
	hook_DELETE,
	hook_DELETE_ARRAY,
	hook_DELETE_SIZED,
	hook_DELETE_ARRAY_SIZED,
	hook_DELETE_ALIGNED,
	hook_DELETE_ARRAY_ALIGNED,
	hook_DELETE_SIZED_ALIGNED,
	hook_DELETE_ARRAY_SIZED_ALIGNED,
	hook_DELETE_NOTHROW,
	hook_DELETE_ARRAY_NOTHROW,
	hook_DELETE_ALIGNED_NOTHROW,
	hook_DELETE_ARRAY_ALIGNED_NOTHROW,
};
_Static_assert(sizeof(delete_hooks) / sizeof(delete_hooks[0]) == I_COUNT - I_DELETE,
	       "a hook per operator delete form");

/* Writes `movabs $hook, %rax; jmp *%rax` (12 bytes) at @at.  Returns 0 or -1. */
static int write_jump(uintptr_t at, void (*hook)(void *))
{
	unsigned char code[12] = { 0x48, 0xb8 };
	uintptr_t page = at & ~(uintptr_t)4095, end = (at + sizeof(code) + 4095) & ~(uintptr_t)4095;
	uint64_t target = (uintptr_t)hook;

	memcpy(code + 2, &target, sizeof(target));
	code[10] = 0xff;
	code[11] = 0xe0;
	if (mprotect((void *)page, end - page, PROT_READ | PROT_WRITE | PROT_EXEC))
		return -1;
	memcpy((void *)at, code, sizeof(code));
	mprotect((void *)page, end - page, PROT_READ | PROT_EXEC);
	return 0;
}

void interpose_patch_exe(void)
{
	for (unsigned k = 0; k < n_exe_ops; k++) {
		const struct exe_op *op = &exe_ops[k];

		/* functions start 16-byte aligned: 12 bytes never reach the next one */
		if (op->is_new || op->start % 16 || op->delete_idx >= I_COUNT - I_DELETE)
			continue;
		if (write_jump(op->start, delete_hooks[op->delete_idx]))
			return; /* not allowed (W^X policy): the return-address heuristics remain */
	}
	exe_deletes_patched = n_exe_ops > 0;
}

/* Whether @pc lies in one of the executable's operators (its frame is the operator's). */
static bool in_exe_op(uint64_t pc)
{
	return op_at((uintptr_t)pc) != NULL;
}

EXPORT void *malloc(size_t n)
{
	bool rec = enter(), smp = rec && sampler_take(n);
	const struct exe_op *op = NULL;
	uint64_t stack;
	void *p;

	if (rec && n_exe_ops && !tls_new.active)
		op = exe_caller(CALLER_SLOT(), true);
	stack = stack_of(smp, ENTRY_SP(), ENTRY_BP(), op ? in_exe_op : NULL);
	if (__builtin_expect(!real[I_MALLOC], 0))
		interpose_resolve();
	p = real[I_MALLOC] ? REAL(I_MALLOC, void *(*)(size_t))(n) : __libc_malloc(n);
	if (op) {
		record_as(op->fn, MT_MALLOC, p, n, 0, stack, smp);
		rec = false;
	}
	if (rec)
		record_alloc(I_MALLOC, MT_MALLOC, p, n, 0, stack, smp);
	tls_depth--;
	return p;
}

EXPORT void *calloc(size_t n, size_t size)
{
	bool rec = enter(), smp = rec && sampler_take((uint64_t)n * size);
	uint64_t stack = stack_of(smp, ENTRY_SP(), ENTRY_BP(), NULL);
	void *p;

	if (__builtin_expect(!real[I_MALLOC], 0))
		interpose_resolve();
	p = real[I_CALLOC] ? REAL(I_CALLOC, void *(*)(size_t, size_t))(n, size)
			   : __libc_calloc(n, size);
	if (rec)
		record_alloc(I_CALLOC, MT_CALLOC, p, (uint64_t)n * size, 0, stack, smp);
	tls_depth--;
	return p;
}

/* realloc-like results: realloc(NULL, n) allocates, realloc(p, 0) frees p. */
static void record_realloc(int i, void *old, void *p, uint64_t size, uint64_t stack, bool smp)
{
	bool was;

	if (!old) {
		record_alloc(i, MT_MALLOC, p, size, 0, stack, smp);
	} else if (p && !sampler_period) {
		fast_record(MT_REALLOC, fn_id[i], REALLOC_NFIELDS, (uintptr_t)p, size,
			    (uintptr_t)old, stack);
	} else if (p) {
		/* sampled: a realloc from or to a sampled block, or the free of the old one */
		was = sampler_free((uintptr_t)old);
		if (sampler_alloc((uintptr_t)p, size, smp))
			fast_record(MT_REALLOC, fn_id[i], REALLOC_NFIELDS, (uintptr_t)p, size,
				    (uintptr_t)old, stack);
		else if (was)
			fast_record(MT_FREE, fn_id[i], FREE_NFIELDS, (uintptr_t)old, 0, 0, 0);
	} else if (!size) {
		record_freed(fn_id[i], old);
	}
}

EXPORT void *realloc(void *old, size_t n)
{
	bool rec = enter(), smp = rec && sampler_take(n);
	uint64_t stack = stack_of(smp, ENTRY_SP(), ENTRY_BP(), NULL);
	void *p;

	if (__builtin_expect(!real[I_MALLOC], 0))
		interpose_resolve();
	p = real[I_REALLOC] ? REAL(I_REALLOC, void *(*)(void *, size_t))(old, n)
			    : __libc_realloc(old, n);
	if (rec)
		record_realloc(I_REALLOC, old, p, n, stack, smp);
	tls_depth--;
	return p;
}

EXPORT void *reallocarray(void *old, size_t n, size_t size)
{
	bool rec = enter(), smp = rec && sampler_take((uint64_t)n * size);
	uint64_t stack = stack_of(smp, ENTRY_SP(), ENTRY_BP(), NULL);
	void *p;

	interpose_resolve();
	p = REAL(I_REALLOCARRAY, void *(*)(void *, size_t, size_t))(old, n, size);
	if (rec)
		record_realloc(I_REALLOCARRAY, old, p, (uint64_t)n * size, stack, smp);
	tls_depth--;
	return p;
}

EXPORT void free(void *p)
{
	if (enter()) {
		const struct exe_op *op =
			n_exe_ops && !exe_deletes_patched ? exe_caller(CALLER_SLOT(), false) : NULL;

		if (op && p && !tls_new.active)
			record_freed(op->fn, p);
		else
			record_free(I_FREE, p);
	}
	if (__builtin_expect(!real[I_MALLOC], 0))
		interpose_resolve();
	if (real[I_FREE])
		REAL(I_FREE, void (*)(void *))(p);
	else
		__libc_free(p);
	tls_depth--;
}

/* @sp, @bp: the exported entry point's (ENTRY_SP, ENTRY_BP) */
static void *aligned(int i, size_t align, size_t n, uint64_t sp, uint64_t bp)
{
	bool rec = enter(), smp = rec && sampler_take(n);
	uint64_t stack = stack_of(smp, sp, bp, NULL);
	void *p;

	interpose_resolve();
	p = real[i] ? REAL(i, void *(*)(size_t, size_t))(align, n) : __libc_memalign(align, n);
	if (rec)
		record_alloc(i, MT_ALIGNED_ALLOC, p, n, align, stack, smp);
	tls_depth--;
	return p;
}

EXPORT void *memalign(size_t align, size_t n)
{
	return aligned(I_MEMALIGN, align, n, ENTRY_SP(), ENTRY_BP());
}

/*
 * glibc's aligned_alloc is its memalign (one address): the uprobes record
 * both as memalign (symbols.c), and so does fn_id (resolve_one).  Another
 * allocator's distinct aligned_alloc is forwarded to as itself.
 */
EXPORT void *aligned_alloc(size_t align, size_t n)
{
	return aligned(I_ALIGNED_ALLOC, align, n, ENTRY_SP(), ENTRY_BP());
}

EXPORT int posix_memalign(void **pp, size_t align, size_t n)
{
	bool rec = enter(), smp = rec && sampler_take(n);
	uint64_t stack = stack_of(smp, ENTRY_SP(), ENTRY_BP(), NULL);
	int ret;

	interpose_resolve();
	ret = REAL(I_POSIX_MEMALIGN, int (*)(void **, size_t, size_t))(pp, align, n);
	if (rec && tls_new.active)
		tls_new.active = false; /* an operator new's delegate that returns no pointer */
	else if (rec && !ret)
		record_alloc(I_POSIX_MEMALIGN, MT_ALIGNED_ALLOC, *pp, n, align, stack, smp);
	tls_depth--;
	return ret;
}

static void *page_aligned(int i, size_t n, uint64_t sp, uint64_t bp)
{
	bool rec = enter(), smp = rec && sampler_take(n);
	uint64_t stack = stack_of(smp, sp, bp, NULL);
	void *p;

	interpose_resolve();
	p = REAL(i, void *(*)(size_t))(n);
	if (rec)
		record_alloc(i, MT_ALIGNED_ALLOC, p, n, (uint64_t)sysconf(_SC_PAGESIZE), stack,
			     smp);
	tls_depth--;
	return p;
}

EXPORT void *valloc(size_t n)
{
	return page_aligned(I_VALLOC, n, ENTRY_SP(), ENTRY_BP());
}

EXPORT void *pvalloc(size_t n)
{
	return page_aligned(I_PVALLOC, n, ENTRY_SP(), ENTRY_BP());
}

/*
 * C++ operators.  operator new may throw (bad_alloc, or a new_handler's
 * exception): the cleanups restore the thread's state as it passes.
 */
typedef struct {
	unsigned char v;
} nothrow_t; /* std::nothrow_t, passed by reference */

static inline void new_done(bool *mine)
{
	if (*mine)
		tls_new.active = false;
}

/*
 * Starts an outermost operator new: its delegate records it (see
 * pending_new).  Returns whether this call is the pending one.
 */
static inline bool new_begin(int i, uint16_t type, size_t n, size_t align, uint64_t sp, uint64_t bp)
{
	uint64_t stack = 0;
	bool smp;

	if (tls_depth || tls_new.active || !fast_recording || !*fast_heap_switch)
		return false;
	smp = sampler_take(n);
	if (smp && fast_unwinding()) { /* with the depth raised: see fast_take_stack */
		tls_depth++;
		stack = fast_take_stack(sp, bp, NULL);
		tls_depth--;
	}
	tls_new = (struct pending_new){ true, fn_id[i], type, n, align, stack, smp };
	return true;
}

/* @sp, @bp: the exported operator's entry (ENTRY_SP, ENTRY_BP) */
#define NEW_GUARD(i, type, n, align) \
	void *real_fn = cxx_real(i); \
	bool mine __attribute__((cleanup(new_done))) = new_begin(i, type, n, align, sp, bp)

static void *cxx_new(int i, size_t n, uint64_t sp, uint64_t bp)
{
	NEW_GUARD(i, MT_MALLOC, n, 0);
	return ((void *(*)(size_t))real_fn)(n);
}

static void *cxx_new_nothrow(int i, size_t n, const nothrow_t *nt, uint64_t sp, uint64_t bp)
{
	NEW_GUARD(i, MT_MALLOC, n, 0);
	return ((void *(*)(size_t, const nothrow_t *))real_fn)(n, nt);
}

static void *cxx_new_aligned(int i, size_t n, size_t align, uint64_t sp, uint64_t bp)
{
	NEW_GUARD(i, MT_ALIGNED_ALLOC, n, align);
	return ((void *(*)(size_t, size_t))real_fn)(n, align);
}

static void *cxx_new_aligned_nothrow(int i, size_t n, size_t align, const nothrow_t *nt,
				     uint64_t sp, uint64_t bp)
{
	NEW_GUARD(i, MT_ALIGNED_ALLOC, n, align);
	return ((void *(*)(size_t, size_t, const nothrow_t *))real_fn)(n, align, nt);
}

/* Every operator delete form: (ptr, up to two more word-sized arguments). */
static void cxx_delete(int i, void *p, uintptr_t a1, uintptr_t a2)
{
	void *real_fn = cxx_real(i);
	unsigned guard __attribute__((cleanup(leave))) = 0;

	if (enter())
		record_free(i, p);
	((void (*)(void *, uintptr_t, uintptr_t))real_fn)(p, a1, a2);
}

// clang-format off
/* NOLINTBEGIN(bugprone-reserved-identifier): the C++ ABI's mangled names */
EXPORT void *_Znwm(size_t n) { return cxx_new(I_NEW, n, ENTRY_SP(), ENTRY_BP()); }
EXPORT void *_Znam(size_t n) { return cxx_new(I_NEW_ARRAY, n, ENTRY_SP(), ENTRY_BP()); }
EXPORT void *_ZnwmRKSt9nothrow_t(size_t n, const nothrow_t *t) { return cxx_new_nothrow(I_NEW_NOTHROW, n, t, ENTRY_SP(), ENTRY_BP()); }
EXPORT void *_ZnamRKSt9nothrow_t(size_t n, const nothrow_t *t) { return cxx_new_nothrow(I_NEW_ARRAY_NOTHROW, n, t, ENTRY_SP(), ENTRY_BP()); }
EXPORT void *_ZnwmSt11align_val_t(size_t n, size_t a) { return cxx_new_aligned(I_NEW_ALIGNED, n, a, ENTRY_SP(), ENTRY_BP()); }
EXPORT void *_ZnamSt11align_val_t(size_t n, size_t a) { return cxx_new_aligned(I_NEW_ARRAY_ALIGNED, n, a, ENTRY_SP(), ENTRY_BP()); }
EXPORT void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t n, size_t a, const nothrow_t *t) { return cxx_new_aligned_nothrow(I_NEW_ALIGNED_NOTHROW, n, a, t, ENTRY_SP(), ENTRY_BP()); }
EXPORT void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t n, size_t a, const nothrow_t *t) { return cxx_new_aligned_nothrow(I_NEW_ARRAY_ALIGNED_NOTHROW, n, a, t, ENTRY_SP(), ENTRY_BP()); }
EXPORT void _ZdlPv(void *p) { cxx_delete(I_DELETE, p, 0, 0); }
EXPORT void _ZdaPv(void *p) { cxx_delete(I_DELETE_ARRAY, p, 0, 0); }
EXPORT void _ZdlPvm(void *p, size_t n) { cxx_delete(I_DELETE_SIZED, p, n, 0); }
EXPORT void _ZdaPvm(void *p, size_t n) { cxx_delete(I_DELETE_ARRAY_SIZED, p, n, 0); }
EXPORT void _ZdlPvSt11align_val_t(void *p, size_t a) { cxx_delete(I_DELETE_ALIGNED, p, a, 0); }
EXPORT void _ZdaPvSt11align_val_t(void *p, size_t a) { cxx_delete(I_DELETE_ARRAY_ALIGNED, p, a, 0); }
EXPORT void _ZdlPvmSt11align_val_t(void *p, size_t n, size_t a) { cxx_delete(I_DELETE_SIZED_ALIGNED, p, n, a); }
EXPORT void _ZdaPvmSt11align_val_t(void *p, size_t n, size_t a) { cxx_delete(I_DELETE_ARRAY_SIZED_ALIGNED, p, n, a); }
EXPORT void _ZdlPvRKSt9nothrow_t(void *p, const nothrow_t *t) { cxx_delete(I_DELETE_NOTHROW, p, (uintptr_t)t, 0); }
EXPORT void _ZdaPvRKSt9nothrow_t(void *p, const nothrow_t *t) { cxx_delete(I_DELETE_ARRAY_NOTHROW, p, (uintptr_t)t, 0); }
EXPORT void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *p, size_t a, const nothrow_t *t) { cxx_delete(I_DELETE_ALIGNED_NOTHROW, p, a, (uintptr_t)t); }
EXPORT void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *p, size_t a, const nothrow_t *t) { cxx_delete(I_DELETE_ARRAY_ALIGNED_NOTHROW, p, a, (uintptr_t)t); }
/* NOLINTEND(bugprone-reserved-identifier) */
// clang-format on
