// SPDX-License-Identifier: MIT
/*
 * pipeline.c - the live path from the ring buffer to the artifact; see
 * pipeline.h for the flush rules and THREAD NOTES.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "format/artifact.h"
#include "pipeline/batch.h"
#include "pipeline/pipeline.h"
#include "pipeline/queue.h"
#include "format/schema.h"

struct sort_key {
	uint64_t ts;
	uint32_t off; /* record offset in the batch */
};

struct pipeline;

/* A fd the poller waits on, and what it calls when the fd is readable. */
struct watched {
	int fd;
	pipeline_fd_fn fn;
	void *ctx;
};

/* A record source besides the rings, and the fd it is woken by. */
struct source {
	int fd;
	struct pipeline_source src;
};

/* One encoding thread: sorts, encodes and compresses whole batches. */
struct worker {
	struct pipeline *p;
	pthread_t thread;
	bool started;
	struct mt_encoder *enc; /* this thread's frames */
	struct sort_key *keys;	/* sort scratch */
	uint64_t busy_ns;	/* time in sort + encode + compress + write */
};

struct pipeline {
	struct pipeline_opts opts;
	struct mt_writer *writer;     /* used by the worker holding the turn only */
	struct pipeline_observer obs; /* obs.observe NULL: none */
	struct rec_out out;	      /* what the observer made, batched after its record */

	struct queue *full;		 /* poller -> workers */
	struct queue *empty;		 /* workers -> poller */
	struct batch **all;		 /* every batch, for freeing */
	struct batch *cur;		 /* poller's current batch */
	uint64_t seq;			 /* poller: sequence number of the next batch */
	uint8_t min_fields[MT_TYPE_MAX]; /* per type; above MT_MAX_FIELDS: unknown */

	struct worker *workers;	   /* opts.writers of them */
	bool workers_running;	   /* until pipeline__stop() joined them */
	_Atomic int writer_err;	   /* first writer error, 0 if none */
	pthread_mutex_t turn_lock; /* guards next_seq */
	pthread_cond_t turn_cond;  /* next_seq moved */
	uint64_t next_seq;	   /* the batch whose frames go to the file next */

	pthread_t poller_thread;
	bool poller_started;
	struct ring_buffer *rb;	    /* the events ring */
	struct ring_buffer *ctl_rb; /* the control ring (process records), or NULL */
	int epoll_fd;		    /* both rings and stop_fd */
	int stop_fd;		    /* eventfd: wakes the poller to stop */
	_Atomic int stop_cause;	    /* -1 while running */
	int poller_err;
	struct watched *watched; /* pipeline__watch_fd()'s, owned */
	unsigned nwatched;
	struct source *srcs; /* pipeline__add_source()'s, owned */
	unsigned nsrcs;
	uint64_t ring_ts;		    /* newest timestamp of an events record fed so far */
	unsigned char *ctl_buf;		    /* control records read, not fed yet (owned) */
	size_t ctl_used, ctl_head, ctl_cap; /* bytes held; next to feed; allocated */

	struct pipeline_stats st; /* poller fields; writer ones merged at stop */
};

uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* Sorts a batch's records by timestamp; they are nearly sorted already. */
static unsigned sort_batch(struct sort_key *keys, const struct batch *b)
{
	unsigned n = 0;

	for (size_t off = 0; off < b->used; off += rec_size(b->buf + off)) {
		const struct mt_rec_hdr *h = (const void *)(b->buf + off);
		struct sort_key k = { h->ts, (uint32_t)off };
		unsigned i = n++;

		while (i > 0 && keys[i - 1].ts > k.ts) {
			keys[i] = keys[i - 1];
			i--;
		}
		keys[i] = k;
	}
	return n;
}

/* Waits until the frames of batch @seq are the next to go to the file. */
static void wait_turn(struct pipeline *p, uint64_t seq)
{
	pthread_mutex_lock(&p->turn_lock);
	while (p->next_seq != seq)
		pthread_cond_wait(&p->turn_cond, &p->turn_lock);
	pthread_mutex_unlock(&p->turn_lock);
}

static void end_turn(struct pipeline *p, uint64_t seq)
{
	pthread_mutex_lock(&p->turn_lock);
	p->next_seq = seq + 1;
	pthread_cond_broadcast(&p->turn_cond);
	pthread_mutex_unlock(&p->turn_lock);
}

/*
 * Sorts, encodes and compresses batch @b outside any lock, then appends its
 * frame(s) to the file when its turn comes, so frames keep the batches'
 * order whichever worker finishes first.  A batch whose records pass
 * MT_FRAME_RAW_TARGET becomes several frames; the earlier ones wait for the
 * turn, which the worker then keeps until its batch is done.
 */
static int write_batch(struct worker *wk, const struct batch *b)
{
	struct pipeline *p = wk->p;
	unsigned n = sort_batch(wk->keys, b);
	int err = 0;

	for (unsigned i = 0; i < n && !err; i++) {
		const unsigned char *rec = b->buf + wk->keys[i].off;
		const struct mt_rec_hdr *h = (const void *)rec;
		const __u64 *f = (const void *)(rec + sizeof(*h));
		const void *str = NULL;

		if (__builtin_expect(mt_encoder__full(wk->enc), 0)) {
			wait_turn(p, b->seq);
			err = mt_writer__put(p->writer, wk->enc);
			if (err)
				break;
		}
		if (h->type == MT_EXEC)
			str = ((const struct mt_rec_exec *)rec)->path;
		else if (h->type == MT_MARK)
			str = ((const struct mt_rec_mark *)rec)->name;
		else if (h->type == MT_RUNNING)
			str = ((const struct mt_rec_running *)rec)->path;
		else if (h->type == MT_OBJECT || h->type == MT_STACK || h->type == MT_PYCODE)
			str = rec; /* build-id and path, frames, or a code object's bytes */
		err = mt_encoder__add(wk->enc, h, f, str);
	}
	if (!err)
		err = mt_encoder__seal(wk->enc);
	wait_turn(p, b->seq);
	/* an encoder error becomes the writer's here, so finish() reports it */
	return mt_writer__put(p->writer, wk->enc) ?: err;
}

/*
 * The pipeline's threads run at the highest priority they may (nice -20 as
 * root; unprivileged, unchanged): on a machine with fewer CPUs than the
 * command has busy threads, the poller is otherwise one runnable thread
 * among them and the ring buffer overflows (100 threads on 2 CPUs lost
 * 43% of their records).  On Linux the nice value is per thread.
 */
static void raise_priority(void)
{
	if (setpriority(PRIO_PROCESS, 0, -20)) {
		/* not allowed: the default priority still works, with more drops */
	}
}

static void *worker_main(void *arg)
{
	struct worker *wk = arg;
	struct pipeline *p = wk->p;
	struct batch *b;

	raise_priority();
	while ((b = queue__pop(p->full))) {
		uint64_t t0 = mono_ns();
		int err = 0;

		if (!atomic_load(&p->writer_err))
			err = write_batch(wk, b);
		else
			wait_turn(p, b->seq);
		end_turn(p, b->seq);
		if (err) {
			int none = 0;

			atomic_compare_exchange_strong(&p->writer_err, &none, err);
		}
		wk->busy_ns += mono_ns() - t0;
		batch__reset(b);
		queue__push(p->empty, b);
	}
	return NULL;
}

static void free_batches(struct pipeline *p)
{
	for (unsigned i = 0; p->all && i < p->opts.batches; i++)
		batch__free(p->all[i]);
	free(p->all);
	p->all = NULL;
}

/*
 * Encoding threads when the caller leaves it to us: one per usable CPU but
 * one, which the poller keeps: all run at the same raised priority, and a
 * poller sharing its CPU with encoders falls behind a burst of allocating
 * threads (100 threads on 2 CPUs lost records at the default ring).
 */
static unsigned auto_writers(void)
{
	cpu_set_t set;
	int n;

	if (sched_getaffinity(0, sizeof(set), &set))
		return 1;
	n = CPU_COUNT(&set) - 1;
	if (n < 1)
		return 1;
	return (unsigned)n > PIPELINE_MAX_WRITERS ? PIPELINE_MAX_WRITERS : (unsigned)n;
}

static int start_workers(struct pipeline *p)
{
	size_t nkeys = p->opts.batch_bytes / sizeof(struct mt_rec_hdr) + 1;
	sigset_t all, old;
	int err = 0;

	p->workers = calloc(p->opts.writers, sizeof(*p->workers));
	if (!p->workers)
		return -ENOMEM;
	for (unsigned i = 0; i < p->opts.writers; i++) {
		struct worker *wk = &p->workers[i];

		wk->p = p;
		wk->enc = mt_encoder__new(p->opts.zstd_level);
		wk->keys = calloc(nkeys, sizeof(*wk->keys));
		if (!wk->enc || !wk->keys)
			return -ENOMEM;
	}
	/* only main handles signals */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (unsigned i = 0; i < p->opts.writers && !err; i++) {
		err = -pthread_create(&p->workers[i].thread, NULL, worker_main, &p->workers[i]);
		p->workers[i].started = !err;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	p->workers_running = true;
	return err;
}

static void stop_workers(struct pipeline *p)
{
	queue__close(p->full);
	for (unsigned i = 0; p->workers && i < p->opts.writers; i++) {
		if (p->workers[i].started)
			pthread_join(p->workers[i].thread, NULL);
		p->workers[i].started = false;
	}
	p->workers_running = false;
}

static void free_workers(struct pipeline *p)
{
	for (unsigned i = 0; p->workers && i < p->opts.writers; i++) {
		mt_encoder__free(p->workers[i].enc);
		free(p->workers[i].keys);
	}
	free(p->workers);
	p->workers = NULL;
}

struct pipeline *pipeline__new(const struct pipeline_opts *o, struct mt_writer *w,
			       const struct pipeline_observer *obs)
{
	struct pipeline *p = calloc(1, sizeof(*p));
	int err = -ENOMEM;

	if (!p)
		return NULL;
	p->opts = *o;
	if (p->opts.batches < 2)
		p->opts.batches = 2;
	if (!p->opts.writers)
		p->opts.writers = auto_writers();
	for (unsigned t = 0; t < MT_TYPE_MAX; t++) {
		const struct mt_type_def *d = mt_type_def(t);

		/* heap and mmap records may omit the stack id (FORMAT.md §5.4) */
		p->min_fields[t] =
			d ? (uint8_t)(d->nfields - (mt_stack_field(t) >= 0)) : MT_MAX_FIELDS + 1;
	}
	p->writer = w;
	if (obs)
		p->obs = *obs;
	p->stop_cause = -1;
	p->stop_fd = -1;
	p->epoll_fd = -1;
	pthread_mutex_init(&p->turn_lock, NULL);
	pthread_cond_init(&p->turn_cond, NULL);
	p->full = queue__new(p->opts.batches);
	p->empty = queue__new(p->opts.batches);
	/* an array of batch pointers: sizeof(pointer) is meant */
	p->all = calloc(p->opts.batches, sizeof(*p->all)); // NOLINT(bugprone-sizeof-expression)
	if (!p->full || !p->empty || !p->all)
		goto fail;
	for (unsigned i = 0; i < p->opts.batches; i++) {
		p->all[i] = batch__new(p->opts.batch_bytes);
		if (!p->all[i])
			goto fail;
		if (i)
			queue__push(p->empty, p->all[i]);
	}
	p->cur = p->all[0];
	err = start_workers(p);
	if (err)
		goto fail;
	return p;
fail:
	pipeline__free(p);
	errno = -err;
	return NULL;
}

/* Hands the current batch to the writer and takes an empty one. */
static int hand_on(struct pipeline *p, enum flush_cause cause)
{
	int err = atomic_load(&p->writer_err);

	if (!p->cur->nrec)
		return err;
	if (queue__len(p->empty) == 0)
		p->st.poller_waits++;
	p->cur->seq = p->seq++;
	if (queue__push(p->full, p->cur))
		return -EPIPE;
	p->st.batches++;
	p->st.flushes[cause]++;
	p->cur = queue__pop(p->empty);
	return p->cur ? err : -EPIPE;
}

/*
 * A record the writer would refuse (unknown type, wrong field count) would
 * stop the whole artifact: such records are left out instead.
 */
static bool rec_valid(const struct pipeline *p, const void *rec, size_t size)
{
	const struct mt_rec_hdr *h = rec;

	if (size < sizeof(*h) || size > p->opts.batch_bytes || rec_size(rec) > size)
		return false;
	return h->type < MT_TYPE_MAX && h->nfields >= p->min_fields[h->type] &&
	       h->nfields <= MT_MAX_FIELDS;
}

int rec_out_put(struct rec_out *o, const void *rec, size_t size)
{
	unsigned char *grown;

	if (size < sizeof(struct mt_rec_hdr) || rec_size(rec) > size)
		return -EINVAL;
	size = rec_size(rec); /* a record struct may be larger than its record */
	if (o->used + size > o->cap) {
		size_t cap = o->cap ? 2 * o->cap : 4096;

		while (cap < o->used + size)
			cap *= 2;
		grown = realloc(o->buf, cap);
		if (!grown)
			return -ENOMEM;
		o->buf = grown;
		o->cap = cap;
	}
	memcpy(o->buf + o->used, rec, size);
	o->used += size;
	return 0;
}

/* Batches one valid record of @size bytes (copied). */
static int batch_record(struct pipeline *p, const void *rec, size_t size)
{
	uint64_t now = 0;
	int err;

	if (!p->cur->nrec)
		now = mono_ns();
	if (batch__append(p->cur, rec, size, now)) {
		p->st.events++;
		return 0;
	}
	err = hand_on(p, FLUSH_FULL);
	if (err)
		return err;
	batch__append(p->cur, rec, size, mono_ns());
	p->st.events++;
	return 0;
}

static bool observed(const struct pipeline *p, const struct mt_rec_hdr *h)
{
	return p->obs.observe &&
	       ((h->fn & p->obs.fn_flags) ||
		(h->type < 128 && (p->obs.types[h->type / 64] >> (h->type % 64) & 1)));
}

/* Batches what the observer put into p->out (each record checked), then empties it. */
static int batch_out(struct pipeline *p)
{
	int err = 0;

	for (size_t off = 0; off < p->out.used && !err;) {
		const void *rec = p->out.buf + off;
		size_t size = rec_size(rec); /* rec_out_put() stored whole records */

		off += size;
		if (rec_valid(p, rec, size))
			err = batch_record(p, rec, size);
	}
	p->out.used = 0;
	return err;
}

int pipeline_feed(struct pipeline *p, const void *rec, size_t size)
{
	const struct mt_rec_hdr *h = rec;
	int err;

	if (!rec_valid(p, rec, size))
		return 0;     /* not a record of ours: ignore rather than stop the run */
	size = rec_size(rec); /* the ring may pad: keep the record's own bytes */
	if (!observed(p, h))
		return batch_record(p, rec, size);
	p->obs.observe(p->obs.ctx, h, (const __u64 *)(h + 1), &p->out);
	err = batch_record(p, rec, size);
	return err ? err : batch_out(p);
}

int pipeline_tick(struct pipeline *p, uint64_t now_ns)
{
	if (!p->cur->nrec || now_ns < p->cur->born_ns ||
	    now_ns - p->cur->born_ns < p->opts.flush_ms * 1000000ull)
		return atomic_load(&p->writer_err);
	return hand_on(p, FLUSH_TIMEOUT);
}

int pipeline_flush(struct pipeline *p, enum flush_cause cause)
{
	return hand_on(p, cause);
}

int pipeline__watch_fd(struct pipeline *p, int fd, pipeline_fd_fn fn, void *ctx)
{
	struct watched *grown = realloc(p->watched, (p->nwatched + 1) * sizeof(*grown));

	if (!grown)
		return -ENOMEM;
	p->watched = grown;
	p->watched[p->nwatched++] = (struct watched){ fd, fn, ctx };
	return 0;
}

int pipeline__add_source(struct pipeline *p, int fd, const struct pipeline_source *src)
{
	struct source *grown = realloc(p->srcs, (p->nsrcs + 1) * sizeof(*grown));

	if (!grown)
		return -ENOMEM;
	p->srcs = grown;
	p->srcs[p->nsrcs++] = (struct source){ fd, *src };
	return 0;
}

/*
 * Records are fed in time order across the three places they come from:
 * the events ring (read in order), the control ring (read first into
 * ctl_buf) and the source (peeked by timestamp).  Before an events record,
 * every control record and source record stamped no later goes in.
 */

/*
 * The sources' records stamped up to @until (no source: nothing), one
 * source after the other: each is in time order with the rings, and with
 * the others up to the last @until (the newest ring record, at every ring
 * record).  Returns the number fed or the first -errno.
 */
static int feed_source(struct pipeline *p, uint64_t until)
{
	int total = 0;

	for (unsigned i = 0; i < p->nsrcs; i++) {
		int n = p->srcs[i].src.feed(p->srcs[i].src.ctx, p, until);

		if (n < 0)
			return n;
		total += n;
	}
	return total;
}

/* The control records read so far stamped up to @until, after older source records. */
static int feed_ctl(struct pipeline *p, uint64_t until)
{
	int err = 0;

	while (p->ctl_head < p->ctl_used && err >= 0) {
		const struct mt_rec_hdr *h = (const void *)(p->ctl_buf + p->ctl_head);
		size_t size = rec_size(h);

		if (h->ts > until)
			break;
		err = feed_source(p, h->ts);
		if (err >= 0)
			err = pipeline_feed(p, h, size);
		p->ctl_head += size;
	}
	if (p->ctl_head == p->ctl_used)
		p->ctl_head = p->ctl_used = 0;
	return err;
}

/* An events record, after the control and source records stamped no later. */
static int ring_cb(void *ctx, void *data, size_t size)
{
	struct pipeline *p = ctx;
	const struct mt_rec_hdr *h = data;
	int err;

	if (size >= sizeof(*h) && h->ts > p->ring_ts)
		p->ring_ts = h->ts;
	err = feed_ctl(p, p->ring_ts);
	if (err >= 0)
		err = feed_source(p, p->ring_ts);
	return err < 0 ? err : pipeline_feed(p, data, size);
}

/* A control record: kept until the events records stamped before it are in. */
static int ctl_cb(void *ctx, void *data, size_t size)
{
	struct pipeline *p = ctx;
	unsigned char *grown;

	if (size < sizeof(struct mt_rec_hdr) || rec_size(data) > size)
		return 0; /* not a record of ours: pipeline_feed() would drop it too */
	size = rec_size(data);
	if (p->ctl_used + size > p->ctl_cap) {
		size_t cap = p->ctl_cap ? 2 * p->ctl_cap : 64u << 10;

		while (cap < p->ctl_used + size)
			cap *= 2;
		grown = realloc(p->ctl_buf, cap);
		if (!grown) /* out of memory: in order of reading, as before */
			return pipeline_feed(p, data, size);
		p->ctl_buf = grown;
		p->ctl_cap = cap;
	}
	memcpy(p->ctl_buf + p->ctl_used, data, size);
	p->ctl_used += size;
	return 0;
}

/*
 * Reads the control ring, then the events ring (merging), then feeds what
 * is left: every control record read, and the source's records stamped
 * before this read began (every ring record stamped before then has been
 * read: a record is committed right after it is stamped) or before the
 * newest events record fed.  A process's exit (control ring) is submitted
 * after all of its own records, so once an exit has been read, every
 * record before it is committed: the events ring is read once more.
 */
static int consume_rings(struct pipeline *p)
{
	uint64_t began = mono_ns();
	int n = 0, err = 0;

	if (p->ctl_rb)
		n = ring_buffer__consume(p->ctl_rb);
	if (n < 0)
		return n;
	err = ring_buffer__consume(p->rb);
	if (err >= 0 && n > 0)
		err = ring_buffer__consume(p->rb);
	if (err >= 0)
		err = feed_ctl(p, UINT64_MAX);
	for (unsigned i = 0; err >= 0 && i < p->nsrcs; i++)
		if (p->srcs[i].src.service)
			err = p->srcs[i].src.service(p->srcs[i].src.ctx, p);
	if (err >= 0)
		err = feed_source(p, began > p->ring_ts ? began : p->ring_ts);
	return err < 0 ? err : 0;
}

int pipeline_inject(struct pipeline *p, const void *rec, size_t size)
{
	const struct mt_rec_hdr *h = rec;
	int err = p->rb ? consume_rings(p) : 0;

	if (err >= 0 && size >= sizeof(*h))
		err = feed_source(p, h->ts);
	return err < 0 ? err : pipeline_feed(p, rec, size);
}

/* Whether the epoll_wait() result @ev[0..n) has @fd readable. */
static bool fd_ready(const struct epoll_event *ev, int n, int fd)
{
	for (int i = 0; i < n; i++)
		if (ev[i].data.fd == fd)
			return true;
	return false;
}

/*
 * Waits for a wakeup (BPF wakes us only past the watermark, or for a control
 * record), the stop eventfd, the watched fd, or the timeout, which picks up
 * the tail below the watermark.
 */
static void *poller_main(void *arg)
{
	struct pipeline *p = arg;
	int poll_ms = p->opts.flush_ms / 2 ? p->opts.flush_ms / 2 : 1;
	struct epoll_event ev[8];
	int err = 0;

	if (poll_ms > 100)
		poll_ms = 100;
	raise_priority();
	while (atomic_load(&p->stop_cause) < 0) {
		int n = epoll_wait(p->epoll_fd, ev, 8, poll_ms);

		if (n < 0 && errno != EINTR) {
			err = -errno;
			break;
		}
		err = consume_rings(p);
		for (unsigned i = 0; err >= 0 && i < p->nwatched; i++)
			if (fd_ready(ev, n, p->watched[i].fd))
				p->watched[i].fn(p->watched[i].ctx);
		if (err >= 0)
			err = pipeline_tick(p, mono_ns());
		if (err < 0)
			break;
	}
	/* drain: whatever the rings and the source still hold, then the partial batch */
	if (err >= 0)
		err = consume_rings(p);
	if (err >= 0)
		err = feed_source(p, UINT64_MAX);
	if (err >= 0)
		err = pipeline_flush(p, atomic_load(&p->stop_cause) < 0
						? FLUSH_SHUTDOWN
						: (enum flush_cause)atomic_load(&p->stop_cause));
	/* a failed pipeline reads nothing more: the source must stop its producers */
	for (unsigned i = 0; err < 0 && i < p->nsrcs; i++)
		if (p->srcs[i].src.service)
			p->srcs[i].src.service(p->srcs[i].src.ctx, NULL);
	p->poller_err = err < 0 ? err : 0;
	return NULL;
}

static int epoll_add(int epfd, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };

	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) ? -errno : 0;
}

/* One epoll set for the poller: each ring's own epoll fd, and stop_fd. */
static int setup_poll(struct pipeline *p)
{
	int err;

	p->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	p->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (p->stop_fd < 0 || p->epoll_fd < 0)
		return -errno;
	err = epoll_add(p->epoll_fd, ring_buffer__epoll_fd(p->rb));
	if (!err && p->ctl_rb)
		err = epoll_add(p->epoll_fd, ring_buffer__epoll_fd(p->ctl_rb));
	if (!err)
		err = epoll_add(p->epoll_fd, p->stop_fd);
	for (unsigned i = 0; !err && i < p->nwatched; i++)
		err = epoll_add(p->epoll_fd, p->watched[i].fd);
	for (unsigned i = 0; !err && i < p->nsrcs; i++)
		if (p->srcs[i].fd >= 0) /* -1: a source read only with the rings */
			err = epoll_add(p->epoll_fd, p->srcs[i].fd);
	return err;
}

int pipeline__start_poller(struct pipeline *p, int ring_fd, int ctl_fd)
{
	sigset_t all, old;
	int err;

	p->rb = ring_buffer__new(ring_fd, ring_cb, p, NULL);
	if (!p->rb)
		return -errno;
	if (ctl_fd >= 0) {
		p->ctl_rb = ring_buffer__new(ctl_fd, ctl_cb, p, NULL);
		if (!p->ctl_rb)
			return -errno;
	}
	err = setup_poll(p);
	if (err)
		return err;
	/* only main handles signals */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = -pthread_create(&p->poller_thread, NULL, poller_main, p);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!err)
		p->poller_started = true;
	return err;
}

int pipeline__stop(struct pipeline *p, enum flush_cause cause)
{
	struct mt_writer_stats ws;
	int err = 0;

	if (p->poller_started) {
		uint64_t one = 1;

		atomic_store(&p->stop_cause, cause);
		if (write(p->stop_fd, &one, sizeof(one)) < 0) {
			/* the poller still sees the flag at its next timeout */
		}
		pthread_join(p->poller_thread, NULL);
		p->poller_started = false;
		err = p->poller_err;
	} else if (p->cur) {
		err = pipeline_flush(p, cause);
	}
	stop_workers(p);
	p->st.max_queue = queue__max_len(p->full);
	p->st.encode_ns = 0;
	for (unsigned i = 0; p->workers && i < p->opts.writers; i++)
		p->st.encode_ns += p->workers[i].busy_ns;
	mt_writer__stats(p->writer, &ws);
	p->st.frames = ws.frames;
	p->st.file_bytes = ws.file_bytes;
	p->st.raw_bytes = ws.raw_bytes;
	if (!err)
		err = atomic_load(&p->writer_err);
	return err;
}

void pipeline__stats(const struct pipeline *p, struct pipeline_stats *st)
{
	*st = p->st;
}

void pipeline__free(struct pipeline *p)
{
	if (!p)
		return;
	if (p->poller_started || p->workers_running)
		pipeline__stop(p, FLUSH_SHUTDOWN);
	ring_buffer__free(p->rb);
	ring_buffer__free(p->ctl_rb);
	free(p->ctl_buf);
	free(p->out.buf);
	free(p->watched);
	free(p->srcs);
	if (p->stop_fd >= 0)
		close(p->stop_fd);
	if (p->epoll_fd >= 0)
		close(p->epoll_fd);
	free_batches(p);
	queue__free(p->full);
	queue__free(p->empty);
	free_workers(p);
	pthread_mutex_destroy(&p->turn_lock);
	pthread_cond_destroy(&p->turn_cond);
	free(p);
}
