// SPDX-License-Identifier: MIT
/*
 * fast_drain.c - the socket and rings of the in-process heap path; see
 * fast_drain.h and src/fast/fast_ring.h.
 *
 * A connection starts pending: its first message is the hello with the
 * ring's memfd.  memtrack maps the ring and answers 'y' when the peer
 * (SO_PEERCRED) is a process of the tree, else 'n' and closes.  The
 * library announces only after 'y', so a ring memtrack refused is never
 * written.  Later bytes on the connection are wakeups.  When the peer's
 * end closes (exec, exit, or the library gave up), the ring is read to
 * its end and unmapped.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <linux/types.h>
#include <bpf/bpf.h>
#include "bpf_abi.h"
#include "fast_drain.h"
#include "fast_ring.h"
#include "pipeline.h"

struct fast_conn {
	int sock;
	pid_t pid;     /* the peer */
	void *ring;    /* MT_FAST_RING_BYTES, NULL while pending */
	uint64_t tail; /* next position to read */
	bool closing;  /* the peer's end closed: read to the end, then free */
	struct fast_conn *next;
};

struct fast_drain {
	int tracked_fd; /* borrowed */
	fast_admit_fn admit;
	void *admit_ctx;
	int switch_fd; /* borrowed, -1: none */
	uint32_t switch_offset;
	uint64_t switch_map_bytes;
	int listen_fd;
	int epoll_fd;
	char dir[64];
	char path[128];
	struct fast_conn *conns; /* owned */
	unsigned nopen;
	uint64_t low; /* no ring holds a record stamped before this (fast_drain_feed) */
	struct fast_drain_stats st;
};

static int epoll_add_ptr(int epfd, int fd, void *ptr)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.ptr = ptr };

	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) ? -errno : 0;
}

void fast_drain__set_tracked(struct fast_drain *d, int tracked_fd)
{
	d->tracked_fd = tracked_fd;
}

struct fast_drain *fast_drain__new(fast_admit_fn admit, void *ctx)
{
	struct fast_drain *d = calloc(1, sizeof(*d));
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	const char *tmp = getenv("TMPDIR");
	int err;

	if (!d)
		return NULL;
	d->tracked_fd = -1;
	d->admit = admit;
	d->admit_ctx = ctx;
	d->switch_fd = -1;
	d->listen_fd = d->epoll_fd = -1;
	if (!tmp || !*tmp || strlen(tmp) > 40)
		tmp = "/tmp";
	snprintf(d->dir, sizeof(d->dir), "%s/memtrack-fast.XXXXXX", tmp);
	if (!mkdtemp(d->dir)) {
		d->dir[0] = 0;
		goto fail;
	}
	/* the command may run as the sudo invoker: it must reach the socket */
	chmod(d->dir, 0711);
	snprintf(d->path, sizeof(d->path), "%s/sock", d->dir);
	memcpy(sa.sun_path, d->path, strlen(d->path) + 1);
	d->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	d->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (d->listen_fd < 0 || d->epoll_fd < 0 ||
	    bind(d->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) || chmod(d->path, 0666) ||
	    listen(d->listen_fd, 128))
		goto fail;
	err = epoll_add_ptr(d->epoll_fd, d->listen_fd, NULL);
	if (err) {
		errno = -err;
		goto fail;
	}
	return d;
fail:
	err = errno;
	fast_drain__free(d);
	errno = err;
	return NULL;
}

void fast_drain__set_switch(struct fast_drain *d, int map_fd, uint32_t offset, uint64_t map_bytes)
{
	d->switch_fd = map_fd;
	d->switch_offset = offset;
	d->switch_map_bytes = map_bytes;
}

/* Sends the answer, with the switch's map when it is a yes.  Returns 0 or -1. */
static int answer(const struct fast_drain *d, int sock, bool yes)
{
	struct mt_fast_answer a = { .verdict = yes ? 'y' : 'n',
				    .switch_offset = d->switch_offset,
				    .map_bytes = d->switch_map_bytes };

	return fast_send_fd(sock, &a, sizeof(a), yes ? d->switch_fd : -1, MSG_DONTWAIT);
}

const char *fast_drain__path(const struct fast_drain *d)
{
	return d->path;
}

int fast_drain__fd(const struct fast_drain *d)
{
	return d->epoll_fd;
}

static void accept_all(struct fast_drain *d)
{
	int sock;

	while ((sock = accept4(d->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0) {
		struct fast_conn *c = calloc(1, sizeof(*c));

		if (!c || epoll_add_ptr(d->epoll_fd, sock, c)) {
			free(c);
			close(sock); /* the library then leaves the process to the uprobes */
			continue;
		}
		c->sock = sock;
		c->next = d->conns;
		d->conns = c;
	}
}

/* The peer's hello and memfd; returns the fd, -EAGAIN (not here yet) or -errno. */
static int recv_hello(struct fast_conn *c)
{
	struct mt_fast_hello hello;
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { &hello, sizeof(hello) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *cm;
	int fd = -1;
	ssize_t n;

	msg.msg_control = u.buf;
	msg.msg_controllen = sizeof(u.buf);
	n = recvmsg(c->sock, &msg, MSG_CMSG_CLOEXEC);
	if (n < 0)
		return -errno;
	cm = CMSG_FIRSTHDR(&msg);
	if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
		memcpy(&fd, CMSG_DATA(cm), sizeof(fd));
	if (n != sizeof(hello) || hello.magic != MT_FAST_MAGIC ||
	    hello.version != MT_FAST_VERSION || hello.bytes != MT_FAST_RING_BYTES || fd < 0) {
		if (fd >= 0)
			close(fd);
		return -EPROTO;
	}
	return fd;
}

/* Maps a pending connection's ring and answers it.  Returns false to drop it. */
static bool open_ring(struct fast_drain *d, struct fast_conn *c)
{
	struct tracked_proc tp;
	struct ucred cred;
	socklen_t len = sizeof(cred);
	__u32 key;
	int fd = recv_hello(c);

	if (fd == -EAGAIN)
		return true;
	if (fd < 0 || getsockopt(c->sock, SOL_SOCKET, SO_PEERCRED, &cred, &len))
		goto refuse;
	key = cred.pid;
	if (bpf_map_lookup_elem(d->tracked_fd, &key, &tp))
		goto refuse; /* not of the tree (another session's leftover environment) */
	if (d->admit && !d->admit(d->admit_ctx, cred.pid))
		goto refuse;
	c->ring = mmap(NULL, MT_FAST_RING_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	fd = -1;
	if (c->ring == MAP_FAILED) {
		c->ring = NULL;
		goto refuse;
	}
	c->pid = cred.pid;
	if (answer(d, c->sock, true))
		return false;
	d->st.rings++;
	if (++d->nopen > d->st.max_open)
		d->st.max_open = d->nopen;
	return true;
refuse:
	if (fd >= 0)
		close(fd);
	if (answer(d, c->sock, false)) {
		/* the peer is gone already */
	}
	d->st.refused++;
	return false;
}

static void conn_free(struct fast_drain *d, struct fast_conn *c)
{
	if (c->ring) {
		munmap(c->ring, MT_FAST_RING_BYTES);
		d->nopen--;
	}
	close(c->sock); /* also leaves the epoll set */
	free(c);
}

/*
 * Reads the wakeup bytes (one read: a producer waiting on a full ring
 * keeps sending them until the ring is read, so reading until there are
 * none would never end); notes a closed peer.
 */
static void read_wakeups(struct fast_conn *c)
{
	char buf[256];
	ssize_t n = recv(c->sock, buf, sizeof(buf), MSG_DONTWAIT);

	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
		c->closing = true;
}

/*
 * The pipeline failed (disk full ...): nothing will be drained any more.
 * Closing every connection tells each library to stop recording (it sees
 * the end of the socket while it waits on a full ring), so no program
 * stalls on a ring nobody reads.
 */
static void abandon(struct fast_drain *d)
{
	while (d->conns) {
		struct fast_conn *c = d->conns;

		d->conns = c->next;
		conn_free(d, c);
	}
	if (d->listen_fd >= 0)
		close(d->listen_fd);
	d->listen_fd = -1;
}

/*
 * Feeds the written records of @c's ring up to the first one stamped after
 * @until, and returns in *@next the timestamp of that one (UINT64_MAX when
 * the ring is read to its end).  Once the peer is gone, slots reserved but
 * never written (a thread killed inside a call) are skipped and counted
 * lost.  Returns the records fed or the pipeline's -errno.
 */
static int drain_ring(struct fast_drain *d, struct fast_conn *c, struct pipeline *p, uint64_t until,
		      uint64_t *next)
{
	struct mt_fast_slot *slots = mt_fast_slots(c->ring);
	struct mt_fast_hdr *hdr = c->ring;
	struct mt_rec rec;
	int n = 0, err;

	*next = UINT64_MAX;
	for (;;) {
		struct mt_fast_slot *s = &slots[c->tail & (MT_FAST_SLOTS - 1)];
		uint64_t lap = c->tail & ~(uint64_t)(MT_FAST_SLOTS - 1);

		if (__atomic_load_n(&s->seq, __ATOMIC_ACQUIRE) != lap + 1) {
			if (!c->closing || c->tail >= __atomic_load_n(&hdr->head, __ATOMIC_ACQUIRE))
				break;
			d->st.lost++;
		} else if (s->h.ts > until) {
			*next = s->h.ts;
			break;
		} else {
			memcpy(&rec, &s->h, sizeof(s->h) + sizeof(s->f));
			rec.h.pid = c->pid; /* the peer's, whatever it wrote */
			if (rec.h.nfields > REALLOC_NFIELDS)
				rec.h.nfields = REALLOC_NFIELDS;
			err = pipeline_feed(p, &rec, sizeof(rec.h) + rec.h.nfields * sizeof(__u64));
			if (err)
				return err;
			n++;
		}
		__atomic_store_n(&s->seq, lap + MT_FAST_SLOTS, __ATOMIC_RELEASE);
		c->tail++;
	}
	hdr->tail = c->tail;
	d->st.records += n;
	return n;
}

int fast_drain_feed(void *ctx, struct pipeline *p, uint64_t until)
{
	struct fast_drain *d = ctx;
	uint64_t scan, low = UINT64_MAX, next;
	struct fast_conn **pc;
	int total = 0;

	if (until < d->low)
		return 0; /* nothing that old: the common case, once per ring record */
	scan = mono_ns();
	for (pc = &d->conns; *pc;) {
		struct fast_conn *c = *pc;
		int fed = c->ring ? drain_ring(d, c, p, until, &next) : 0;

		if (fed < 0) {
			abandon(d);
			return fed;
		}
		total += fed;
		if (c->closing && (!c->ring || next == UINT64_MAX)) {
			*pc = c->next; /* a gone peer's ring, read to its end */
			conn_free(d, c);
			continue;
		}
		/* a ring read to its end gets records stamped from about now on */
		if (c->ring)
			low = next == UINT64_MAX ? (scan < low ? scan : low)
						 : (next < low ? next : low);
		pc = &c->next;
	}
	d->low = low;
	return total;
}

int fast_drain_service(void *ctx, struct pipeline *p)
{
	struct fast_drain *d = ctx;
	struct epoll_event ev[16];
	int n;

	if (!p) { /* the pipeline failed */
		abandon(d);
		return 0;
	}
	/*
	 * One look per call: producers waiting on full rings keep poking, so
	 * looking until nothing is ready would starve the draining.
	 */
	n = epoll_wait(d->epoll_fd, ev, 16, 0);
	for (int i = 0; i < n; i++) {
		struct fast_conn *c = ev[i].data.ptr;

		if (!c)
			accept_all(d);
		else if (!c->ring && !open_ring(d, c))
			c->closing = true;
		else if (c->ring)
			read_wakeups(c);
	}
	if (n > 0)
		d->low = 0; /* a new ring, or news: look at every ring next time */
	return 0;
}

void fast_drain__stats(const struct fast_drain *d, struct fast_drain_stats *st)
{
	*st = d->st;
}

void fast_drain__free(struct fast_drain *d)
{
	if (!d)
		return;
	abandon(d); /* every connection and the listening socket */
	if (d->epoll_fd >= 0)
		close(d->epoll_fd);
	if (d->path[0])
		unlink(d->path);
	if (d->dir[0])
		rmdir(d->dir);
	free(d);
}
