// SPDX-License-Identifier: MIT
/*
 * test_queue.c - the bounded blocking FIFO (src/queue.h).
 *
 * Blocking is tested with a second thread and a handshake that needs no
 * sleep: the main thread waits until the other thread is either done or
 * parked in a futex wait (its /proc/self/task/TID/syscall), and only then
 * looks.  While the main thread holds no queue lock, the only futex the
 * other thread can be in is the queue's condition variable.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "harness.h"
#include "waits.h"
#include "pipeline/queue.h"

/* Items are small integers; NULL is what pop returns once closed. */
#define ITEM(i) ((void *)(uintptr_t)(i))
#define VAL(p) ((uintptr_t)(p))

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* One blocking call made by a helper thread. */
struct op {
	struct queue *q;
	bool push; /* push item, else pop */
	void *item;
	pthread_t th;
	_Atomic pid_t tid;
	_Atomic bool done;
	int ret;   /* push's return */
	void *got; /* pop's return */
};

static void *op_main(void *arg)
{
	struct op *o = arg;

	atomic_store(&o->tid, gettid());
	if (o->push)
		o->ret = queue__push(o->q, o->item);
	else
		o->got = queue__pop(o->q);
	atomic_store(&o->done, true);
	return NULL;
}

/*
 * Joins the op's thread.  One that never returns is a failure the binary
 * cannot go on from (the thread is blocked inside the queue): exit.
 */
static bool op_join(struct op *o)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 20; /* only against a hang */
	if (pthread_timedjoin_np(o->th, NULL, &ts)) {
		fprintf(stderr, "  a thread is still blocked in the queue after 20 s: giving up\n");
		printf("FAIL (hung)\n");
		exit(1);
	}
	return true;
}

static int op_start(struct op *o, struct queue *q, bool push, void *item)
{
	memset(o, 0, sizeof(*o));
	o->q = q;
	o->push = push;
	o->item = item;
	return pthread_create(&o->th, NULL, op_main, o);
}

/*
 * Waits until the op's thread is done or blocked; returns true when it is
 * blocked (still not done after it was seen in the futex wait).
 */
static bool op_blocked(struct op *o)
{
	uint64_t deadline = now_ns() + 20000000000ull; /* only against a hang */
	pid_t tid;

	while (!atomic_load(&o->done)) {
		tid = atomic_load(&o->tid);
		if (tid && in_futex(tid))
			return !atomic_load(&o->done);
		if (now_ns() > deadline) {
			fprintf(stderr, "  thread neither blocked nor done\n");
			return false;
		}
		sched_yield();
	}
	return false;
}

static void test_fifo_wraparound(void)
{
	struct queue *q = queue__new(3);
	uintptr_t next_in = 1, next_out = 1;

	CHECK(q != NULL);
	if (!q)
		return;
	CHECK_EQ(queue__len(q), 0);
	/* push 2 / pop 1 / push 1 / pop 2 ... walks head round the ring */
	for (int round = 0; round < 100; round++) {
		size_t len = queue__len(q);
		int pushes = (int)(3 - len), pops = 1 + round % 3;

		for (int i = 0; i < pushes; i++)
			CHECK_EQ(queue__push(q, ITEM(next_in++)), 0);
		CHECK_EQ(queue__len(q), 3);
		for (int i = 0; i < pops; i++)
			CHECK_EQ(VAL(queue__pop(q)), next_out++);
		CHECK_EQ(queue__len(q), 3 - pops);
	}
	CHECK_EQ(queue__max_len(q), 3);
	queue__free(q);
}

static void test_capacity_one(void)
{
	struct queue *q = queue__new(1);
	struct op o;

	CHECK(q != NULL);
	if (!q)
		return;
	for (uintptr_t i = 1; i <= 10; i++) {
		CHECK_EQ(queue__push(q, ITEM(i)), 0);
		CHECK_EQ(queue__len(q), 1);
		CHECK_EQ(VAL(queue__pop(q)), i);
	}
	CHECK_EQ(queue__push(q, ITEM(11)), 0);
	CHECK_EQ(op_start(&o, q, true, ITEM(12)), 0);
	CHECK(op_blocked(&o));
	CHECK_EQ(VAL(queue__pop(q)), 11);
	CHECK(op_join(&o));
	CHECK_EQ(o.ret, 0);
	CHECK_EQ(VAL(queue__pop(q)), 12);
	CHECK_EQ(queue__max_len(q), 1);
	queue__free(q);
}

static void test_max_len(void)
{
	struct queue *q = queue__new(8);

	CHECK(q != NULL);
	if (!q)
		return;
	CHECK_EQ(queue__max_len(q), 0);
	for (uintptr_t i = 1; i <= 5; i++)
		CHECK_EQ(queue__push(q, ITEM(i)), 0);
	CHECK_EQ(queue__max_len(q), 5);
	for (int i = 0; i < 4; i++)
		queue__pop(q);
	CHECK_EQ(queue__len(q), 1);
	CHECK_EQ(queue__max_len(q), 5); /* the peak, not the present */
	for (uintptr_t i = 6; i <= 9; i++)
		CHECK_EQ(queue__push(q, ITEM(i)), 0);
	CHECK_EQ(queue__max_len(q), 5);
	for (uintptr_t i = 10; i <= 12; i++)
		CHECK_EQ(queue__push(q, ITEM(i)), 0);
	CHECK_EQ(queue__len(q), 8);
	CHECK_EQ(queue__max_len(q), 8);
	queue__free(q);
}

/* push on a full queue waits until a pop makes room, and lands last. */
static void test_push_blocks_when_full(void)
{
	struct queue *q = queue__new(2);
	struct op o;

	CHECK(q != NULL);
	if (!q)
		return;
	CHECK_EQ(queue__push(q, ITEM(1)), 0);
	CHECK_EQ(queue__push(q, ITEM(2)), 0);
	CHECK_EQ(op_start(&o, q, true, ITEM(3)), 0);
	CHECK(op_blocked(&o));
	CHECK(!atomic_load(&o.done));
	CHECK_EQ(queue__len(q), 2);
	CHECK_EQ(VAL(queue__pop(q)), 1); /* makes room */
	CHECK(op_join(&o));
	CHECK_EQ(o.ret, 0);
	CHECK_EQ(queue__len(q), 2);
	CHECK_EQ(VAL(queue__pop(q)), 2);
	CHECK_EQ(VAL(queue__pop(q)), 3);
	CHECK_EQ(queue__max_len(q), 2);
	queue__free(q);
}

/* pop on an empty queue waits for a push. */
static void test_pop_blocks_when_empty(void)
{
	struct queue *q = queue__new(2);
	struct op o;

	CHECK(q != NULL);
	if (!q)
		return;
	CHECK_EQ(op_start(&o, q, false, NULL), 0);
	CHECK(op_blocked(&o));
	CHECK_EQ(queue__push(q, ITEM(42)), 0);
	CHECK(op_join(&o));
	CHECK_EQ(VAL(o.got), 42);
	CHECK_EQ(queue__len(q), 0);
	queue__free(q);
}

/* close wakes a blocked pusher (-EPIPE); what was queued still pops. */
static void test_close_wakes_pusher(void)
{
	struct queue *q = queue__new(2);
	struct op o;

	CHECK(q != NULL);
	if (!q)
		return;
	CHECK_EQ(queue__push(q, ITEM(1)), 0);
	CHECK_EQ(queue__push(q, ITEM(2)), 0);
	CHECK_EQ(op_start(&o, q, true, ITEM(3)), 0);
	CHECK(op_blocked(&o));
	queue__close(q);
	CHECK(op_join(&o));
	CHECK_EQ(o.ret, -EPIPE);
	CHECK_EQ(queue__len(q), 2);
	CHECK_EQ(VAL(queue__pop(q)), 1);
	CHECK_EQ(VAL(queue__pop(q)), 2);
	CHECK(queue__pop(q) == NULL); /* closed and empty: no wait */
	queue__free(q);
}

/* close wakes every blocked popper with NULL. */
static void test_close_wakes_poppers(void)
{
	struct queue *q = queue__new(4);
	struct op o[3];

	CHECK(q != NULL);
	if (!q)
		return;
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(op_start(&o[i], q, false, NULL), 0);
		CHECK(op_blocked(&o[i]));
	}
	queue__close(q);
	for (int i = 0; i < 3; i++) {
		CHECK(op_join(&o[i]));
		CHECK(o[i].got == NULL);
	}
	queue__free(q);
}

/* After close: pushes fail at once, pops drain in order, then NULL. */
static void test_close_drains(void)
{
	struct queue *q = queue__new(4);

	CHECK(q != NULL);
	if (!q)
		return;
	CHECK_EQ(queue__push(q, ITEM(1)), 0);
	CHECK_EQ(queue__push(q, ITEM(2)), 0);
	queue__close(q);
	CHECK_EQ(queue__push(q, ITEM(3)), -EPIPE);
	CHECK_EQ(queue__len(q), 2);
	CHECK_EQ(VAL(queue__pop(q)), 1);
	CHECK_EQ(VAL(queue__pop(q)), 2);
	CHECK(queue__pop(q) == NULL);
	CHECK(queue__pop(q) == NULL);
	queue__close(q); /* twice is fine */
	CHECK_EQ(queue__max_len(q), 2);
	queue__free(q);
	queue__free(NULL);
}

/*
 * The pipeline's pattern: N buffers circulate between an "empty" and a
 * "full" queue; a producer never holds more than N, whatever the speeds.
 */
#define CIRC_N 3
#define CIRC_ROUNDS 20000

struct circ {
	struct queue *full, *empty;
	_Atomic int in_flight; /* buffers out of the empty queue */
	_Atomic int max_in_flight;
	uintptr_t consumed_sum;
	unsigned consumed;
	bool order_ok;
};

static void *circ_consumer(void *arg)
{
	struct circ *c = arg;
	unsigned *b;
	unsigned expect = 0;

	while ((b = queue__pop(c->full))) {
		if (*b != expect++)
			c->order_ok = false;
		c->consumed_sum += *b;
		c->consumed++;
		atomic_fetch_sub(&c->in_flight, 1);
		queue__push(c->empty, b);
	}
	return NULL;
}

static void test_bounded_circulation(void)
{
	struct circ c = { .order_ok = true };
	unsigned bufs[CIRC_N];
	uintptr_t want_sum = 0;
	pthread_t th;

	c.full = queue__new(CIRC_N);
	c.empty = queue__new(CIRC_N);
	CHECK(c.full && c.empty);
	if (!c.full || !c.empty)
		goto out;
	for (int i = 0; i < CIRC_N; i++)
		CHECK_EQ(queue__push(c.empty, &bufs[i]), 0);
	CHECK_EQ(pthread_create(&th, NULL, circ_consumer, &c), 0);
	for (unsigned i = 0; i < CIRC_ROUNDS; i++) {
		unsigned *b = queue__pop(c.empty);
		int n = atomic_fetch_add(&c.in_flight, 1) + 1;

		if (n > atomic_load(&c.max_in_flight))
			atomic_store(&c.max_in_flight, n);
		*b = i;
		want_sum += i;
		CHECK_EQ(queue__push(c.full, b), 0);
	}
	queue__close(c.full);
	pthread_join(th, NULL);
	CHECK(c.order_ok);
	CHECK_EQ(c.consumed, CIRC_ROUNDS);
	CHECK_U64(c.consumed_sum, want_sum);
	CHECK(atomic_load(&c.max_in_flight) <= CIRC_N);
	CHECK(queue__max_len(c.full) <= CIRC_N);
	CHECK_EQ(queue__len(c.empty), CIRC_N);
out:
	queue__free(c.full);
	queue__free(c.empty);
}

/* Several producers and consumers: every item arrives exactly once. */
#define MP_PRODUCERS 3
#define MP_CONSUMERS 3
#define MP_ITEMS 30000

struct mp {
	struct queue *q;
	unsigned char *seen; /* indexed by item - 1 */
	_Atomic unsigned dup;
};

struct mp_arg {
	struct mp *m;
	int id;
	unsigned got;
	bool order_ok;
	uintptr_t last[MP_PRODUCERS]; /* per producer, the last item seen + 1 */
};

static void *mp_producer(void *arg)
{
	struct mp_arg *a = arg;

	for (uintptr_t i = 0; i < MP_ITEMS; i++)
		queue__push(a->m->q, ITEM(1 + (uintptr_t)a->id * MP_ITEMS + i));
	return NULL;
}

static void *mp_consumer(void *arg)
{
	struct mp_arg *a = arg;
	void *it;

	a->order_ok = true;
	while ((it = queue__pop(a->m->q))) {
		uintptr_t v = VAL(it) - 1;
		unsigned prod = (unsigned)(v / MP_ITEMS);

		if (__atomic_exchange_n(&a->m->seen[v], 1, __ATOMIC_RELAXED))
			atomic_fetch_add(&a->m->dup, 1);
		/* one FIFO: a consumer sees each producer's items in order */
		if (a->last[prod] && v + 1 <= a->last[prod])
			a->order_ok = false;
		a->last[prod] = v + 1;
		a->got++;
	}
	return NULL;
}

static void test_many_producers_consumers(void)
{
	struct mp m = { 0 };
	struct mp_arg pa[MP_PRODUCERS], ca[MP_CONSUMERS];
	pthread_t pt[MP_PRODUCERS], ct[MP_CONSUMERS];
	unsigned total = 0, missing = 0;
	bool order_ok = true;

	m.q = queue__new(4);
	m.seen = calloc(MP_PRODUCERS * MP_ITEMS, 1);
	CHECK(m.q && m.seen);
	if (!m.q || !m.seen)
		goto out;
	memset(pa, 0, sizeof(pa));
	memset(ca, 0, sizeof(ca));
	for (int i = 0; i < MP_CONSUMERS; i++) {
		ca[i].m = &m;
		CHECK_EQ(pthread_create(&ct[i], NULL, mp_consumer, &ca[i]), 0);
	}
	for (int i = 0; i < MP_PRODUCERS; i++) {
		pa[i].m = &m;
		pa[i].id = i;
		CHECK_EQ(pthread_create(&pt[i], NULL, mp_producer, &pa[i]), 0);
	}
	for (int i = 0; i < MP_PRODUCERS; i++)
		pthread_join(pt[i], NULL);
	queue__close(m.q);
	for (int i = 0; i < MP_CONSUMERS; i++) {
		pthread_join(ct[i], NULL);
		total += ca[i].got;
		order_ok = order_ok && ca[i].order_ok;
	}
	for (unsigned i = 0; i < MP_PRODUCERS * MP_ITEMS; i++)
		missing += !m.seen[i];
	CHECK_EQ(total, MP_PRODUCERS * MP_ITEMS);
	CHECK_EQ(missing, 0);
	CHECK_EQ(atomic_load(&m.dup), 0);
	CHECK(order_ok);
	CHECK(queue__max_len(m.q) <= 4);
	CHECK_EQ(queue__len(m.q), 0);
out:
	queue__free(m.q);
	free(m.seen);
}

int main(void)
{
	bool blocking = can_see_syscalls();

	RUN(test_fifo_wraparound);
	RUN(test_max_len);
	RUN(test_close_drains);
/* the blocking tests watch a thread sleep in futex(2) through /proc */
#define RUN_BLOCKING(fn)                                                   \
	do {                                                               \
		if (blocking)                                              \
			RUN(fn);                                           \
		else                                                       \
			RUN_SKIPPED(fn, "no /proc/self/task/TID/syscall"); \
	} while (0)
	RUN_BLOCKING(test_capacity_one);
	RUN_BLOCKING(test_push_blocks_when_full);
	RUN_BLOCKING(test_pop_blocks_when_empty);
	RUN_BLOCKING(test_close_wakes_pusher);
	RUN_BLOCKING(test_close_wakes_poppers);
	RUN(test_bounded_circulation);
	RUN(test_many_producers_consumers);
	HARNESS_EXIT();
}
