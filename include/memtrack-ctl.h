/* SPDX-License-Identifier: MIT */
/*
 * memtrack-ctl.h - drive `memtrack track --control PATH` from the program
 * it measures (libmemtrack-ctl.a; `pkg-config --cflags --libs memtrack-ctl`).
 *
 *	struct memtrack_ctl c;
 *
 *	if (memtrack_ctl_open(&c, NULL) == 0) {	// NULL: $MEMTRACK_CONTROL
 *		memtrack_ctl_enable(&c);
 *		run_benchmark();
 *		memtrack_ctl_disable(&c);		// returns once in effect
 *		memtrack_ctl_close(&c);
 *	}
 *
 * Every call returns 0 or a negative errno: -ENOENT (no such socket, or no
 * path and $MEMTRACK_CONTROL unset), -ECONNREFUSED (memtrack is gone),
 * -EBUSY (memtrack serves another client), -EPROTO (memtrack answered with
 * an error), -EPIPE (memtrack closed the connection)...; memtrack_ctl_error()
 * then says why in one line.  The library never allocates (the program's
 * heap is what is being measured) and is not thread-safe: one struct
 * memtrack_ctl per thread, or a lock around it.  The protocol is in
 * docs/CONTROL.md.
 */
#ifndef MEMTRACK_CTL_H
#define MEMTRACK_CTL_H

#ifdef __cplusplus
extern "C" {
#endif

/* Treat as opaque; it lives wherever the caller puts it (no malloc). */
struct memtrack_ctl {
	int fd;		 /* the connected socket, -1 when closed */
	char error[256]; /* the last error, "" if none */
};

/*
 * Connects to the control socket at @path (NULL: $MEMTRACK_CONTROL) and
 * pings it (memtrack drops a client that stays silent after connecting,
 * so a connection opened early stays usable).  Returns 0 or -errno
 * (-EBUSY when another client is connected); @c can be passed to
 * memtrack_ctl_close() either way.
 */
int memtrack_ctl_open(struct memtrack_ctl *c, const char *path);

/* Heap recording on / off; each returns once it is in effect. */
int memtrack_ctl_enable(struct memtrack_ctl *c);
int memtrack_ctl_disable(struct memtrack_ctl *c);

/* A round trip that changes nothing. */
int memtrack_ctl_ping(struct memtrack_ctl *c);

/* Records a marker named @name (1 to 255 bytes, no newline). */
int memtrack_ctl_mark(struct memtrack_ctl *c, const char *name);

/* Sends one command line (no "\n") and waits for the answer. */
int memtrack_ctl_command(struct memtrack_ctl *c, const char *line);

/* The last error in one line, "" after a success. */
const char *memtrack_ctl_error(const struct memtrack_ctl *c);

/* Disconnects (a closed or never opened @c is fine). */
void memtrack_ctl_close(struct memtrack_ctl *c);

#ifdef __cplusplus
}
#endif

#endif /* MEMTRACK_CTL_H */
