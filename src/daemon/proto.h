/* SPDX-License-Identifier: MIT */
/*
 * proto.h - the messages between `memtrack daemon` and its clients
 * (`memtrack track` and `memtrack attach`), on a SOCK_SEQPACKET Unix
 * socket: one message a packet, fds with SCM_RIGHTS.
 *
 * A track session:
 *   client  START (struct mtd_start, kind MTD_TRACK), fd: the artifact, open for writing
 *   daemon  READY (struct mtd_ready)    the BPF side is ready: fork the root, parked
 *                                       (with MTD_F_FAST: the environment it needs)
 *   client  ROOT, fd: the root's pidfd  parked before its exec
 *   daemon  GO                          tracked: release the root
 *   client  EXITED (struct mtd_exited)  the root's wait status (or STOP: stop now)
 *   daemon  DONE (struct mtd_done)      the artifact is finished; the connection ends
 * An attach session: START (kind MTD_ATTACH, fds: the artifact and the
 * target's pidfd), GO (struct mtd_go) once the tree is probed, then STOP or
 * the daemon's end (duration, the tree gone), DONE.  At any point the daemon
 * may send NOTICE lines (text) and, instead of the next answer, REFUSED
 * (text, one line naming the problem and the fix), after which it closes
 * the connection.  A client that closes the connection ends its session.
 *
 * Every message from a client is untrusted input: the daemon reads at most
 * MTD_MSG_MAX bytes and MTD_FDS_MAX fds a message (a longer one, extra
 * fds, a wrong magic, version, type or length are refused), checks every
 * field's range, and never opens a path a message names.
 *
 * THREAD NOTES: none of its own; each function works on the socket it is
 * given (the daemon's serving thread, or the client's main).
 */
#ifndef MEMTRACK_DAEMON_PROTO_H
#define MEMTRACK_DAEMON_PROTO_H

#include <stdarg.h>
#include <stddef.h>
#include <sys/types.h>
#include <linux/types.h>
#include "event.h"
#include "compiler.h"

#define MTD_DEFAULT_SOCKET "/run/memtrack/daemon.sock"
#define MTD_MAGIC 0x3144544du /* "MTD1" */
#define MTD_VERSION 2	      /* 2: READY carries the in-process path's environment */
#define MTD_MSG_MAX 8192      /* bytes a message, at most */
#define MTD_CMD_MAX 4096      /* bytes of START's command line, with its NUL */
#define MTD_FDS_MAX 2	      /* fds a message, at most */

enum mtd_type {
	MTD_START = 1, /* client: a session */
	MTD_READY,     /* daemon: fork the root */
	MTD_ROOT,      /* client: the root is parked (its pidfd) */
	MTD_GO,	       /* daemon: recording (struct mtd_go) */
	MTD_EXITED,    /* client: the root's wait status */
	MTD_STOP,      /* client: stop now */
	MTD_NOTICE,    /* daemon: a line for the user */
	MTD_DONE,      /* daemon: finished (struct mtd_done) */
	MTD_REFUSED,   /* daemon: refused (a line), the connection ends */
	MTD_TYPE_MAX,
};

enum mtd_kind {
	MTD_TRACK = 1,
	MTD_ATTACH = 2,
};

/* START's flags */
#define MTD_F_ALLOCATORS (1u << 0)	/* heap probes */
#define MTD_F_STACKS (1u << 1)		/* call stacks */
#define MTD_F_VERBOSE (1u << 2)		/* -v: the statistics as notices */
#define MTD_F_NO_UNWIND_CACHE (1u << 3) /* --no-unwind-cache */
#define MTD_F_FAST (1u << 4)		/* track: the in-process heap path where it serves */
#define MTD_F_ALL ((1u << 5) - 1)

struct mtd_hdr {
	__u32 magic;   /* MTD_MAGIC */
	__u16 version; /* MTD_VERSION */
	__u16 type;    /* enum mtd_type */
};

struct mtd_start {
	struct mtd_hdr h;
	__u32 kind;	    /* enum mtd_kind */
	__u32 flags;	    /* MTD_F_* */
	__u64 ring_bytes;   /* a power of two, 4K..2G */
	__u64 wakeup_bytes; /* 0: ring_bytes / 16 */
	__u64 batch_bytes;  /* 4K..64M */
	__u64 batches;	    /* batches in flight, 2..1024 */
	__u64 flush_ms;	    /* 1..3600000 */
	__u64 duration_ns;  /* attach --duration, 0: none */
	__u32 unwind_rows;  /* 0: the default, else 1K..64M */
	__s32 attach_pid;   /* attach: the target (its pidfd comes along), else 0 */
	__u32 cmd_len;	    /* bytes of cmd[], its NUL included, 1..MTD_CMD_MAX */
	__u32 pad;	    /* 0 */
	char cmd[];	    /* the command line, for the artifact's header */
};

/*
 * READY.  With fast set, paths[] holds two NUL-terminated strings of
 * lib_len and sock_len bytes (their NULs included): libmemtrack-fast.so,
 * which the client puts first in the command's LD_PRELOAD, and the socket
 * it hands its rings to (MEMTRACK_FAST_SOCKET).  Without it, the daemon
 * records the heap through the uprobes (no library, or --no-fast).
 */
struct mtd_ready {
	struct mtd_hdr h;
	__u32 fast;	/* 1: paths[] follows; 0: nothing does */
	__u16 lib_len;	/* 1..MTD_PATH_MAX */
	__u16 sock_len; /* 1..MTD_PATH_MAX */
	char paths[];
};

/* bytes of a READY path, its NUL included: two fit in a message */
#define MTD_PATH_MAX 4000

struct mtd_exited {
	struct mtd_hdr h;
	__s32 status; /* the root's wait status */
	__u32 stop;   /* 1: the client was signalled, stop without waiting for the tree; else 0 */
};

struct mtd_go {
	struct mtd_hdr h;
	__u32 attached_procs; /* attach: processes found running */
	__u32 pad;
};

/* What the client's summary line and exit status need of the session. */
struct mtd_done {
	struct mtd_hdr h;
	__s32 err;		      /* 0, or why the artifact could not be finished (-errno) */
	__s32 unprobed_errno;	      /* why the last process went unprobed */
	__u64 events;		      /* records that reached the artifact */
	__u64 dropped[MT_DROP_SLOTS]; /* per record type */
	__u64 unprobed;		      /* processes that ran without heap probes */
	__u64 run_ns;		      /* from recording to its end */
	__u64 root_probed_ns;	      /* attach: from tracking to the root's probes */
	__u64 all_probed_ns;	      /* attach: to every process's */
	__u32 attached_procs;	      /* attach: processes found running */
	__u32 tree_exited;	      /* attach: it ended because the tree exited */
};

/* The header of a message of @type, for the caller to fill the rest. */
static inline struct mtd_hdr mtd_hdr(enum mtd_type type)
{
	return (struct mtd_hdr){ .magic = MTD_MAGIC, .version = MTD_VERSION, .type = type };
}

/*
 * Sends @len bytes of @msg and @nfds fds (borrowed) as one message (the
 * socket's SO_SNDTIMEO bounds the wait).  Returns 0 or -errno.
 */
MT_MUST_CHECK int mtd_send(int sock, const void *msg, size_t len, const int *fds, unsigned nfds);

/* Sends a NOTICE or REFUSED of one formatted line.  Returns 0 or -errno. */
int mtd_send_text(int sock, enum mtd_type type, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int mtd_send_vtext(int sock, enum mtd_type type, const char *fmt, va_list ap);

/* Sends a message that is its header alone.  Returns 0 or -errno. */
MT_MUST_CHECK int mtd_send_type(int sock, enum mtd_type type);

/*
 * Waits at most @timeout_ms (-1: forever) for one message, reads it into
 * @buf (MTD_MSG_MAX + 1 bytes) and its fds into @fds[MTD_FDS_MAX] (*@nfds,
 * the caller's to close; extra fds are closed here and fail the message).
 * Checks the header (magic, version, a known type).  Returns the message's
 * length, 0 at the end of the connection, or -errno: -ETIMEDOUT, -EMSGSIZE
 * (longer than MTD_MSG_MAX), -EBADMSG (a wrong header, too many fds, a
 * control message that is no SCM_RIGHTS), or the socket's error.
 */
MT_MUST_CHECK ssize_t mtd_recv(int sock, void *buf, int timeout_ms, int *fds, unsigned *nfds);

/* The type of a message mtd_recv() accepted. */
static inline enum mtd_type mtd_type_of(const void *buf)
{
	return (enum mtd_type)((const struct mtd_hdr *)buf)->type;
}

/* A message's name, for refusals ("START" ...); "?" for an unknown type. */
const char *mtd_type_name(unsigned type);

#endif /* MEMTRACK_DAEMON_PROTO_H */
