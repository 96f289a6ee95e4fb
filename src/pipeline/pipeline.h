/* SPDX-License-Identifier: MIT */
/*
 * pipeline.h - ring buffer -> batches -> encoding threads -> artifact frames.
 *
 * The poller side copies each record into the current batch and hands the
 * batch on when it is full.  A partial batch is flushed in exactly three
 * other cases, each its own path: TIMEOUT (the batch is flush_ms old), DRAIN
 * (the command exited and the ring buffer was read to empty) and SHUTDOWN
 * (memtrack was signalled or failed).  An encoding thread (one per usable
 * CPU, so a free core shares the work) takes a whole batch, sorts it by
 * timestamp, encodes and compresses it as one frame, and appends the frame
 * when every earlier batch's frame is in the file, so the file keeps the
 * batches' order.  The poller never waits on zstd or the disk; it waits only
 * when every batch is in flight, which bounds memory.
 *
 * The pipeline moves records and knows no rule of the recorder: an observer
 * (struct pipeline_observer) sees the records it asks for and hands back
 * records to add (struct rec_out), which the pipeline batches itself, so
 * nothing re-enters it.
 *
 * THREAD NOTES: pipeline_feed/_tick/_flush/_inject belong to one thread, the
 * poller (the thread pipeline__start_poller() creates, or a test's own thread
 * when no poller is started); the observer, the sources and the watched fds'
 * callbacks run there too.  The
 * encoding threads own the mt_writer from pipeline__new() until
 * pipeline__stop() returns: each has its own mt_encoder, and only the one
 * whose batch is next (turn_lock, next_seq) calls mt_writer__put().
 * Statistics are read after pipeline__stop().
 */
#ifndef MEMTRACK_PIPELINE_H
#define MEMTRACK_PIPELINE_H

#include <stddef.h>
#include <stdint.h>
#include <linux/types.h>
#include "event.h"
#include "compiler.h"

struct mt_writer;
struct pipeline;

enum flush_cause {
	FLUSH_FULL = 0,
	FLUSH_TIMEOUT = 1,
	FLUSH_DRAIN = 2,
	FLUSH_SHUTDOWN = 3,
	FLUSH_CAUSES = 4,
};

struct pipeline_opts {
	size_t batch_bytes; /* bytes of raw records per batch (= per frame) */
	unsigned batches;   /* batches in existence: bounds memory in flight */
	unsigned flush_ms;  /* T: a partial batch older than this is flushed */
	unsigned
		writers; /* encoding threads; 0: one per usable CPU, at most PIPELINE_MAX_WRITERS */
	int zstd_level;	 /* 0: the writer's default */
};

/* Each encoding thread holds ~0.8 MiB (buffers, zstd context); memtrack's RSS stays under 16 MiB. */
#define PIPELINE_MAX_WRITERS 2u

#define PIPELINE_DEFAULT_BATCH_BYTES (256u << 10)
#define PIPELINE_DEFAULT_BATCHES 6u
#define PIPELINE_DEFAULT_FLUSH_MS 500u

/*
 * Records an observer makes (rec_out_put()); the pipeline batches them right
 * after the record observed, unobserved, and empties the list.
 */
struct rec_out {
	unsigned char *buf; /* records, back to back (owned by the pipeline) */
	size_t used, cap;
};

/*
 * Appends a copy of the record @rec (a buffer of @size bytes; its own
 * length is taken).  Returns 0, -EINVAL (no whole record) or -ENOMEM.
 */
MT_MUST_CHECK int rec_out_put(struct rec_out *o, const void *rec, size_t size);

/*
 * The one observer of the records: @observe(@ctx, h, f, out) runs on the
 * poller thread before a record is batched, for every record of a type in
 * @types (bit t of types[t / 64]) or whose h->fn has any bit of @fn_flags.
 * It must not call into the pipeline: records it makes go into @out.
 */
struct pipeline_observer {
	void (*observe)(void *ctx, const struct mt_rec_hdr *h, const __u64 *f, struct rec_out *out);
	void *ctx;
	uint64_t types[2];
	__u16 fn_flags;
};

struct pipeline_stats {
	uint64_t events;		/* records batched */
	uint64_t batches;		/* batches handed to the writer */
	uint64_t flushes[FLUSH_CAUSES]; /* batches handed on, by cause */
	uint64_t max_queue;		/* most full batches waiting at once */
	uint64_t poller_waits;		/* times the poller waited for a free batch */
	uint64_t encode_ns; /* encoding threads' time in sort + encode + compress + write, summed */
	uint64_t frames;    /* frames written */
	uint64_t file_bytes; /* artifact bytes written so far */
	uint64_t raw_bytes;  /* encoded bytes before compression */
};

/*
 * Allocates every batch and starts the encoding threads, which take @w (still
 * owned by the caller, who must not touch it until pipeline__stop()).
 * @obs (copied; NULL: none) observes the records.  Returns NULL with errno
 * set.
 */
struct pipeline *pipeline__new(const struct pipeline_opts *o, struct mt_writer *w,
			       const struct pipeline_observer *obs);

/* Poller side: batches one record (copied).  Returns 0 or the writer's -errno. */
int pipeline_feed(struct pipeline *p, const void *rec, size_t size);

/* Poller side: flushes the partial batch if it is older than flush_ms. */
int pipeline_tick(struct pipeline *p, uint64_t now_ns);

/* Poller side: hands the partial batch on (no-op when empty). */
int pipeline_flush(struct pipeline *p, enum flush_cause cause);

/*
 * Starts the poller thread on the BPF ring buffer maps @ring_fd and @ctl_fd
 * (the control ring of parking records; -1 for none), with all signals
 * blocked.  Returns 0 or -errno.
 */
MT_MUST_CHECK int pipeline__start_poller(struct pipeline *p, int ring_fd, int ctl_fd);

/*
 * Stops the pipeline: the poller (if any) reads the ring buffer to empty,
 * flushes its partial batch with @cause (DRAIN or SHUTDOWN) and exits; then
 * the encoding threads write what is queued and exit.  Without a poller the partial
 * batch is flushed with @cause here.  Returns the first error of either.
 */
int pipeline__stop(struct pipeline *p, enum flush_cause cause);

/*
 * Called on the poller thread when a fd given to pipeline__watch_fd() is
 * readable, after the rings were read, from the poller's loop (nothing of
 * the pipeline is under way): it may call pipeline_inject().
 */
typedef void (*pipeline_fd_fn)(void *ctx);

/*
 * Makes the poller also wait on @fd (borrowed; an epoll fd is fine) and call
 * @fn(@ctx) when it is readable.  Any number of fds; call it before
 * pipeline__start_poller().  Returns 0 or -ENOMEM.
 */
int pipeline__watch_fd(struct pipeline *p, int fd, pipeline_fd_fn fn, void *ctx);

/*
 * A record source besides the BPF rings (the in-process heap rings of
 * --fast, src/record/fast_drain.c), merged with them in time order, so
 * that frames never take a record older than one an earlier frame took
 * (a frame boundary can fall anywhere).  On the poller thread:
 * @feed(@ctx, p, until) feeds, with pipeline_feed(), what the source holds
 * stamped up to @until (UINT64_MAX: everything) and returns the number fed
 * or -errno (which stops the poller).  It is called before every ring
 * record, with the newest ring timestamp so far, so it must return at once
 * when it holds nothing that old; after each read of the rings, with the
 * time that read began (every ring record stamped before it has been fed);
 * and with UINT64_MAX at the end.  @service(@ctx, p) does the source's
 * other work (new connections ...) once per read of the rings; when the
 * poller stops on an error it is called once more with p NULL: nothing
 * will be read any more.
 */
struct pipeline_source {
	int (*feed)(void *ctx, struct pipeline *p, uint64_t until);
	int (*service)(void *ctx, struct pipeline *p);
	void *ctx;
};

/*
 * Makes the poller also wait on @fd (borrowed; an epoll fd is fine; -1:
 * nothing to wait on) and read @src (copied) with the rings.  Any number of sources, merged with
 * each other too; call it before pipeline__start_poller().  Returns 0 or
 * -ENOMEM.
 */
int pipeline__add_source(struct pipeline *p, int fd, const struct pipeline_source *src);

/*
 * Poller side (or before the poller starts): batches a record made by
 * userspace (a control record), timestamped with mono_ns().  The rings are
 * read first, so every BPF record committed before the caller took its
 * timestamp is batched before it, never in a later frame.  Returns 0 or the
 * writer's -errno.
 */
int pipeline_inject(struct pipeline *p, const void *rec, size_t size);

void pipeline__stats(const struct pipeline *p, struct pipeline_stats *st);

/* Frees a stopped pipeline (NULL is fine). */
void pipeline__free(struct pipeline *p);

uint64_t mono_ns(void);

#endif /* MEMTRACK_PIPELINE_H */
