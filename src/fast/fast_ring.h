/* SPDX-License-Identifier: MIT */
/*
 * fast_ring.h - the shared-memory ring of the in-process heap path
 * (--fast): libmemtrack-fast.so writes heap records into it, memtrack
 * drains it (src/record/fast_drain.c).  Both sides include this header.
 *
 * One ring per process (a memfd the library creates and hands to memtrack
 * over the Unix socket named by MEMTRACK_FAST_SOCKET, with SCM_RIGHTS).
 * A header page, then MT_FAST_SLOTS fixed 64-byte slots: many producers
 * (the process's threads), one consumer (memtrack's poller).
 *
 * A slot's `seq` says whose turn it is, relative to the position p that
 * maps to it (lap = p & ~(slots - 1)): lap means free for the producer of
 * p, lap + 1 written (the consumer may read it), lap + slots consumed (free
 * for p + slots).  Zeroed memory is a ring whose every slot is free for
 * its first lap.  A producer takes p with one fetch-and-add on `head`; a
 * full ring (seq still lap - slots + 1 ... ) makes it wait (it never drops).
 * Records keep the ring's order per thread; the pipeline sorts batches by
 * timestamp, as it does for the BPF rings.
 *
 * The ring is the process's memory: memtrack (root) treats every byte of
 * it as a claim of the process about itself (src/inspect/fast_reader.c).
 * It maps only a sealed memfd of exactly MT_FAST_RING_BYTES (the library
 * seals it: F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), so the mapping can
 * never shrink under it (SIGBUS).
 */
#ifndef MEMTRACK_FAST_RING_H
#define MEMTRACK_FAST_RING_H

#include <errno.h>
#include <stdint.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <linux/types.h>
#include "bpf_abi.h"
#include "event.h"

#define MT_FAST_MAGIC 0x676e6972747366ull /* "fstring" */
#define MT_FAST_SLOTS 8192u		  /* 512 KiB of slots per process */
#define MT_FAST_HDR_BYTES 4096u
#define MT_FAST_RING_BYTES (MT_FAST_HDR_BYTES + MT_FAST_SLOTS * 64u)
/* a producer pokes the consumer (one byte on the socket) every this many records */
#define MT_FAST_WAKE_EVERY (MT_FAST_SLOTS / 4)
#define MT_FAST_SOCKET_ENV "MEMTRACK_FAST_SOCKET"
/*
 * Beyond these the library execs with the program's envp as it is, without
 * its two entries (it builds the copy on the exec'ing thread's stack), and
 * counts it in the header's env_overflow.
 */
#define MT_FAST_ENV_MAX_ENTRIES 16384u
#define MT_FAST_ENV_MAX_PRELOAD 65536u
/* the seals memtrack requires on a ring's memfd (F_GET_SEALS) */
#define MT_FAST_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)
/*
 * head - tail is at most the slots plus one position per thread waiting on
 * a full ring; no process has more threads than the kernel has pids
 * (PID_MAX_LIMIT on 64-bit): anything beyond is a lie.
 */
#define MT_FAST_MAX_WAITERS (1u << 22)

/*
 * --sample-bytes: the library's exact heap totals, in stripes (a thread
 * adds to one, so threads rarely share a line); memtrack sums them into
 * the process's COUNTS record (fast_drain.c).  Claims of the process.
 */
#define MT_FAST_COUNT_STRIPES 16u
struct mt_fast_counts {
	__u64 allocs; /* as struct mt_heap_counts (bpf_abi.h) */
	__u64 alloc_bytes;
	__u64 frees;
	__u64 sampled;
	__u64 unmatched;
	__u64 pad[3];
};

struct mt_fast_hdr {
	__u64 magic;   /* MT_FAST_MAGIC */
	__u32 version; /* MT_FAST_VERSION (bpf_abi.h) */
	__u32 slots;   /* MT_FAST_SLOTS */
	/* memtrack: 1 once it reads no more (it unmaps or abandons the ring):
	 * a producer waiting on a full ring stops, socket or not */
	__u32 closed;
	/* the library: execs this process made with its own envp, memtrack's
	 * entries not put back (too large an environment: exec.c), so the image
	 * records on the uprobes; a claim of the process, read as "any" */
	__u32 env_overflow;
	__u8 pad0[40];
	__u64 head; /* next position a producer takes (atomic) */
	__u8 pad1[56];
	__u64 tail; /* next position the consumer reads (its own, informative) */
	__u8 pad2[56];
	/* memtrack, before its answer: --sample-bytes N (sample.h), 0: record every call */
	__u64 sample_bytes;
	__u8 pad3[56];
	struct mt_fast_counts counts[MT_FAST_COUNT_STRIPES]; /* the library's */
};

struct mt_fast_slot {
	__u64 seq;		  /* see above (atomic) */
	struct mt_rec_hdr h;	  /* as the BPF side fills it */
	__u64 f[REALLOC_NFIELDS]; /* heap records have at most 4 fields (the last: stack 0) */
};

_Static_assert(sizeof(struct mt_fast_slot) == 64, "fast slot layout");
_Static_assert(sizeof(struct mt_fast_hdr) <= MT_FAST_HDR_BYTES, "fast header");
_Static_assert(sizeof(struct mt_fast_counts) == 64, "a stripe a cache line");
_Static_assert(REALLOC_NFIELDS == 4 && ALIGNED_ALLOC_NFIELDS == 4, "heap records fit a slot");

/* The first message on the socket, with the memfd (SCM_RIGHTS). */
struct mt_fast_hello {
	__u64 magic;   /* MT_FAST_MAGIC */
	__u32 version; /* MT_FAST_VERSION */
	__u32 bytes;   /* MT_FAST_RING_BYTES */
};

/*
 * memtrack's answer: 'y' with the BPF side's .data map (SCM_RIGHTS), whose
 * __u32 at switch_offset is the heap-recording switch (the control
 * socket's enable/disable): the library reads it for every call, as the
 * uprobes do; or 'n', no fd.
 *
 * With --stacks (stacks 1) two more fds follow the map's, for the
 * in-process unwinder (src/fast/unwind.h): the unwind tables (a memfd
 * memtrack writes and sealed against growing, shrinking and any new
 * writable mapping: F_SEAL_FUTURE_WRITE; rows_cap struct mt_unwind_row at
 * 0, index_cap __u64 at index_off) shared by the whole tree, and this
 * process's own executable mappings (struct mt_fast_umaps, sealed alike).
 */
struct mt_fast_answer {
	char verdict; /* 'y' or 'n' */
	char stacks;  /* 1: the unwinder's two fds follow the map's */
	char pad[2];
	__u32 switch_offset; /* bytes into the map */
	__u64 map_bytes;     /* to mmap */
	__u64 tables_bytes;  /* the tables memfd's size */
	__u64 index_off;     /* bytes from its start to the index */
	__u32 rows_cap;	     /* rows at 0 */
	__u32 index_cap;     /* index entries at index_off */
};

/*
 * One process's executable mappings as memtrack last gave them to the
 * kernel (stacks.c), written only while the process is parked; gen is
 * odd while memtrack writes (a seqlock): a thread that was unwinding when
 * the process stopped sees gen changed and takes no stack from the walk.
 */
struct mt_fast_umaps {
	__u64 gen;
	__u64 pad;
	struct mt_umaps maps;
};

/*
 * A STACK record in the ring: a head slot (h.type MT_STACK, nfields
 * STACK_NFIELDS; f[0] the id, f[1] truncated, f[2] the frames, f[3] 0)
 * and then MT_FAST_FRAME_SLOTS(n) slots of frames, taken with the head in
 * one fetch-and-add, each published on its own.
 */
#define MT_FAST_FRAMES_PER_SLOT 3u
#define MT_FAST_FRAME_SLOTS(n) (((n) + MT_FAST_FRAMES_PER_SLOT - 1) / MT_FAST_FRAMES_PER_SLOT)
#define MT_FAST_FRAMES_MARK 0xffffffffu /* where a head slot has type and fn */
/*
 * A PYCODE record (issue 37) the same way: a head slot (h.type MT_PYCODE,
 * nfields PYCODE_NFIELDS; f[0] the bytes that follow, f[1..3] 0), then
 * MT_FAST_DATA_SLOTS(bytes) data slots of 48 bytes each, laid out as frame
 * slots: the record's fields, then its blob.
 */
#define MT_FAST_DATA_BYTES 48u
#define MT_FAST_DATA_SLOTS(len) (((len) + MT_FAST_DATA_BYTES - 1) / MT_FAST_DATA_BYTES)

struct mt_fast_frames {
	__u64 seq;
	__u32 mark;  /* MT_FAST_FRAMES_MARK */
	__u32 index; /* 0 for the head's first frame slot, 1, ... */
	struct mt_rec_frame fr[MT_FAST_FRAMES_PER_SLOT];
};

_Static_assert(sizeof(struct mt_fast_frames) == 64, "fast frame slot layout");
_Static_assert(sizeof(((struct mt_fast_frames *)0)->fr) == MT_FAST_DATA_BYTES, "data slot bytes");
_Static_assert(MT_FAST_DATA_SLOTS(8 * PYCODE_NFIELDS + MT_PYCODE_BLOB_MAX) + 1 < MT_FAST_SLOTS / 4,
	       "a code object fits the ring");
_Static_assert(MT_FAST_FRAME_SLOTS(MT_STACK_MAX) + 1 < MT_FAST_SLOTS / 4, "a stack fits the ring");

static inline struct mt_fast_slot *mt_fast_slots(void *ring)
{
	return (struct mt_fast_slot *)((char *)ring + MT_FAST_HDR_BYTES);
}

/*
 * Sends @len bytes of @buf on @sock with @nfds (at most 3) @fds attached
 * (SCM_RIGHTS); fast_send_fd: one, or none when @fd < 0.  Both sides use it: the library its ring, memtrack
 * its answer with the heap switch's map.  A signal is retried.  Returns 0, or
 * -1 unless all was sent.
 */
static inline int fast_send_fds(int sock, const void *buf, size_t len, const int *fds, int nfds,
				int flags)
{
	union {
		char buf[CMSG_SPACE(3 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { (void *)buf, len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *cm;
	ssize_t n;

	memset(&u, 0, sizeof(u));
	if (nfds > 3)
		return -1;
	if (nfds > 0) {
		msg.msg_control = u.buf;
		msg.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(cm), fds, nfds * sizeof(int));
	}
	do
		n = sendmsg(sock, &msg, MSG_NOSIGNAL | flags);
	while (n < 0 && errno == EINTR);
	return n == (ssize_t)len ? 0 : -1;
}

static inline int fast_send_fd(int sock, const void *buf, size_t len, int fd, int flags)
{
	return fast_send_fds(sock, buf, len, &fd, fd >= 0 ? 1 : 0, flags);
}

#endif /* MEMTRACK_FAST_RING_H */
