/* SPDX-License-Identifier: MIT */
/*
 * fast_drain.h - memtrack's side of the in-process heap path (--fast):
 * the socket libmemtrack-fast.so connects to, and the per-process rings it
 * hands over (src/fast/fast_ring.h), drained into the pipeline.
 *
 * THREAD NOTES: main creates and frees it; between pipeline__add_source()
 * and pipeline__stop() only the poller thread calls fast_drain_feed() and
 * fast_drain_service().
 * Statistics are read after pipeline__stop().
 */
#ifndef MEMTRACK_FAST_DRAIN_H
#define MEMTRACK_FAST_DRAIN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "compiler.h"

struct pipeline;
struct fast_drain;
struct reaper;

/* Connections waiting for their hello at once, at most (others are closed at once). */
#define FAST_MAX_PENDING 64u
/* A process's connections at once: its ring, and the one of its exec'd image. */
#define FAST_CONNS_PER_PID 2u
/* The hello's deadline after the connect: the library sends it right away, ns. */
#define FAST_HELLO_NS 2000000000ull
#define FAST_BACKLOG 128

struct fast_drain_stats {
	uint64_t rings;	      /* processes that handed a ring over */
	uint64_t refused;     /* connections refused (not of the tree, bad hello, late, too many) */
	uint64_t records;     /* records drained */
	uint64_t lost;	      /* slots a process left unwritten (killed in a call) */
	uint64_t max_open;    /* rings open at once, at most */
	uint64_t bad_records; /* ring records refused (not a heap call of its own, a lie) */
	uint64_t bad_procs;   /* rings that refused any */
	uint64_t cut;	      /* rings cut off for breaking the ring's protocol */
	uint64_t
		env_overflow; /* rings whose process exec'd without memtrack's entries (fast_ring.h) */
};

/* Whether process @pid may record in-process (called on the poller thread). */
typedef bool (*fast_admit_fn)(void *ctx, pid_t pid);

/*
 * Creates the socket "sock" in a fresh directory of root's under $TMPDIR
 * or /tmp, connectable by @uid (@gid), the command's user, and root only:
 * only processes in the BPF map of the tree (fast_drain__set_tracked) that
 * @admit(@ctx) accepts are answered yes.  @reaper (NULL is fine) removes
 * the socket and its directory should memtrack be killed.  Returns NULL
 * with errno set.
 */
struct fast_drain *fast_drain__new(fast_admit_fn admit, void *ctx, uid_t uid, gid_t gid,
				   struct reaper *reaper);

/* The BPF map of the tree (borrowed), before the first fast_drain_service(). */
void fast_drain__set_tracked(struct fast_drain *d, int tracked_fd);

/*
 * The heap-recording switch every library must read: a __u32 at @offset of
 * the file @map_fd (borrowed: heap_switch.h's sealed page, which a library
 * can map read-only and nothing else) of @map_bytes bytes.
 */
void fast_drain__set_switch(struct fast_drain *d, int map_fd, uint32_t offset, uint64_t map_bytes);

/*
 * --sample-bytes N: every library records one allocation in about N bytes
 * (its own draw, src/sample.h) and counts all in its ring's header; each
 * ring's totals become a COUNTS record when memtrack stops reading it.
 * 0 (the default): every call.  Before the first fast_drain_service().
 */
void fast_drain__set_sampling(struct fast_drain *d, uint64_t sample_bytes);

struct stacks;

/*
 * --stacks: the registry (borrowed; poller thread) whose tables each
 * accepted library gets, so it unwinds its heap calls in-process.
 */
void fast_drain__set_stacks(struct fast_drain *d, struct stacks *stacks);

/* The socket's path, for MEMTRACK_FAST_SOCKET. */
const char *fast_drain__path(const struct fast_drain *d);

/* An fd that is readable when the source has work (an epoll fd). */
int fast_drain__fd(const struct fast_drain *d);

/*
 * The pipeline source (struct pipeline_source), merged in time order with
 * the BPF rings: fast_drain_feed() feeds every ring's records stamped up to
 * @until (UINT64_MAX: all) and frees the rings of gone peers once read to
 * their end; it returns at once when no ring can hold anything that old.
 * fast_drain_service() answers new connections and notes gone peers.  With
 * @p NULL (the pipeline failed), or when feeding fails, every connection
 * and the socket are closed.  Return the records fed (0), or the
 * pipeline's -errno.
 */
int fast_drain_feed(void *ctx, struct pipeline *p, uint64_t until);
int fast_drain_service(void *ctx, struct pipeline *p);

void fast_drain__stats(const struct fast_drain *d, struct fast_drain_stats *st);

/* Closes every ring and connection, removes the socket (NULL is fine). */
void fast_drain__free(struct fast_drain *d);

#endif /* MEMTRACK_FAST_DRAIN_H */
