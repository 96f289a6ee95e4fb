// SPDX-License-Identifier: MIT
/*
 * fast_drain.c - the socket and rings of the in-process heap path; see
 * fast_drain.h and src/fast/fast_ring.h.
 *
 * Only the command's user (and root) can connect: the socket is theirs,
 * 0600, in a directory of root's.  A connection from a process outside
 * the tree is closed at once (SO_PEERCRED); one of the tree starts
 * pending (a bounded number, one per process), and its first message must
 * be the hello with the ring's memfd, within FAST_HELLO_NS.  memtrack maps
 * the ring when it is a sealed memfd of the ring's size and answers 'y',
 * else 'n' and closes.  The library announces only after 'y', so a ring
 * memtrack refused is never written.  Later bytes on the connection are
 * wakeups.  When the peer's end closes (exec, exit, or the library gave
 * up), the ring is read to its end and unmapped.  What the ring holds is
 * the process's word, read by fast_reader.c: a ring that lies is cut off
 * (unmapped and its connection closed), and what it refused goes into the
 * artifact as one REFUSED record of that process.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <unistd.h>
#include <linux/types.h>
#include <bpf/bpf.h>
#include "bpf_abi.h"
#include "record/fast_drain.h"
#include "inspect/fast_reader.h"
#include "fast/fast_ring.h"
#include "pipeline/pipeline.h"
#include "record/reaper.h"
#include "record/stacks.h"
#include "record/stacks_share.h"

struct fast_conn {
	int sock;
	pid_t pid;	       /* the peer (SO_PEERCRED) */
	void *ring;	       /* MT_FAST_RING_BYTES, NULL while pending */
	struct fast_reader rd; /* the ring's reading, once mapped */
	uint64_t deadline;     /* pending: closed unless its hello came by then (ns) */
	bool closing;	       /* the peer's end closed: read to the end, then free */
	bool orphan;	       /* its end closed, its image still records (sock -1) */
	bool reported;	       /* its REFUSED record is written */
	bool counted;	       /* its COUNTS record is written (--sample-bytes) */
	struct fast_conn *next;
};

/*
 * How often the poller looks at the orphans' rings (no wakeup bytes come
 * from them): a producer waiting on a full ring waits about this long.
 * The poller's own timer (up to 100 ms) made 1,000,000 pairs take 25 s.
 */
#define ORPHAN_TICK_NS 1000000

struct fast_drain {
	int tracked_fd; /* borrowed */
	fast_admit_fn admit;
	void *admit_ctx;
	int switch_fd; /* borrowed, -1: none */
	uint32_t switch_offset;
	uint64_t switch_map_bytes;
	struct stacks *stacks; /* borrowed, NULL: no in-process unwinding */
	uint64_t sample_bytes; /* --sample-bytes, 0: every call recorded */
	int listen_fd;
	int epoll_fd;
	int parent_fd; /* $TMPDIR or /tmp, -1: none */
	int dir_fd;    /* our directory in it, -1: none */
	char name[32]; /* its name there */
	char path[128];
	uid_t uid;		 /* who may connect: the command's user (and root) */
	uint64_t va_end;	 /* fast_va_end() */
	struct fast_conn *conns; /* owned */
	unsigned nopen;
	unsigned npending; /* connections waiting for their hello */
	unsigned norphans; /* rings whose process lost its socket (fast_conn.orphan) */
	int orphan_timer;  /* ticks every ORPHAN_TICK_NS while there are any, -1: none */
	uint64_t low;	   /* no ring holds a record stamped before this (fast_drain_feed) */
	struct fast_drain_stats st; /* of the connections freed so far */
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

/*
 * Makes our directory in @tmp (0700, root's: nobody else can write in it
 * or reach into it yet), with a random name.  Returns 0 or -errno.
 */
static int make_dir(struct fast_drain *d, const char *tmp)
{
	static const char chars[] =
		"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
	struct stat st;

	d->parent_fd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d->parent_fd < 0)
		return -errno;
	for (int tries = 0;; tries++) {
		unsigned char rnd[6];

		if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
			return -EIO;
		strcpy(d->name, "memtrack-fast.");
		for (unsigned i = 0; i < sizeof(rnd); i++)
			d->name[14 + i] = chars[rnd[i] % (sizeof(chars) - 1)];
		d->name[14 + sizeof(rnd)] = 0;
		if (!mkdirat(d->parent_fd, d->name, 0700))
			break;
		if (errno != EEXIST || tries == 100)
			return -errno;
	}
	d->dir_fd = openat(d->parent_fd, d->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (d->dir_fd < 0)
		return -errno;
	/* a writable $TMPDIR could have had it swapped: it must be the one made */
	if (fstat(d->dir_fd, &st) || st.st_uid != geteuid() || (st.st_mode & 077)) {
		close(d->dir_fd);
		d->dir_fd = -1; /* not ours: left alone */
		return -EEXIST;
	}
	snprintf(d->path, sizeof(d->path), "%s/%s/sock", tmp, d->name);
	return 0;
}

/*
 * Binds and listens on "sock" in our directory (through /proc/self/fd:
 * whatever the path names by now), makes it 0600 and @uid's, then opens
 * the directory for lookups (0711).  Only @uid and root can connect: no
 * one else can write in the directory, so nothing there is swapped for a
 * link between the bind and the chown.  Returns 0 or -errno.
 */
static int make_socket(struct fast_drain *d, uid_t uid, gid_t gid)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/sock", d->dir_fd);
	d->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (d->listen_fd < 0 || bind(d->listen_fd, (struct sockaddr *)&sa, sizeof(sa)))
		return -errno;
	if (fchownat(d->dir_fd, "sock", uid, gid, AT_SYMLINK_NOFOLLOW) ||
	    fchmodat(d->dir_fd, "sock", 0600, 0) || listen(d->listen_fd, FAST_BACKLOG) ||
	    fchmod(d->dir_fd, 0711))
		return -errno;
	d->uid = uid;
	return 0;
}

struct fast_drain *fast_drain__new(fast_admit_fn admit, void *ctx, uid_t uid, gid_t gid,
				   struct reaper *reaper)
{
	struct fast_drain *d = calloc(1, sizeof(*d));
	const char *tmp = getenv("TMPDIR");
	int err;

	if (!d)
		return NULL;
	d->tracked_fd = -1;
	d->admit = admit;
	d->admit_ctx = ctx;
	d->switch_fd = -1;
	d->listen_fd = d->epoll_fd = d->parent_fd = d->dir_fd = d->orphan_timer = -1;
	d->va_end = fast_va_end();
	if (!tmp || !*tmp || strlen(tmp) > 40)
		tmp = "/tmp";
	err = make_dir(d, tmp);
	if (!err)
		err = make_socket(d, uid, gid);
	if (!err) /* a SIGKILLed memtrack leaves no socket behind */
		(void)reaper_remove_at_end(reaper, d->parent_fd, d->dir_fd, d->name, "sock");
	d->epoll_fd = err ? -1 : epoll_create1(EPOLL_CLOEXEC);
	if (!err && d->epoll_fd < 0)
		err = -errno;
	if (!err)
		err = epoll_add_ptr(d->epoll_fd, d->listen_fd, NULL);
	if (err) {
		fast_drain__free(d);
		errno = -err;
		return NULL;
	}
	return d;
}

void fast_drain__set_switch(struct fast_drain *d, int map_fd, uint32_t offset, uint64_t map_bytes)
{
	d->switch_fd = map_fd;
	d->switch_offset = offset;
	d->switch_map_bytes = map_bytes;
}

void fast_drain__set_sampling(struct fast_drain *d, uint64_t sample_bytes)
{
	d->sample_bytes = sample_bytes;
}

void fast_drain__set_stacks(struct fast_drain *d, struct stacks *stacks)
{
	d->stacks = stacks;
}

/*
 * Sends the answer, with the switch's map when it is a yes, and with
 * --stacks the unwinder's tables and @c's mappings (stacks_share.h).  A
 * process memtrack cannot give them to (no memfd) is answered no: it
 * stays on the uprobes, whose kernel unwinder takes its stacks.  Returns
 * 0, or -1 (not sent, or turned into a no: drop the connection).
 */
static int answer(const struct fast_drain *d, struct fast_conn *c, bool yes)
{
	struct mt_fast_answer a = { .verdict = yes ? 'y' : 'n',
				    .switch_offset = d->switch_offset,
				    .map_bytes = d->switch_map_bytes };
	struct stacks_share_info info;
	int fds[3] = { d->switch_fd, -1, -1 }, ret;

	if (!yes)
		return fast_send_fd(c->sock, &a, sizeof(a), -1, MSG_DONTWAIT);
	if (d->stacks && stacks_fast_open(d->stacks, c->pid, &fds[1], &fds[2], &info)) {
		/* no tables for it: it records on the uprobes, the kernel unwinding */
		a.verdict = 'n';
		(void)fast_send_fd(c->sock, &a, sizeof(a), -1, MSG_DONTWAIT);
		return -1;
	}
	if (d->stacks) {
		a.stacks = 1;
		a.tables_bytes = info.tables_bytes;
		a.index_off = info.index_off;
		a.rows_cap = info.rows_cap;
		a.index_cap = info.index_cap;
		c->rd.stacks = true;
	}
	ret = fast_send_fds(c->sock, &a, sizeof(a), fds, a.stacks ? 3 : 1, MSG_DONTWAIT);
	if (a.stacks) {
		close(fds[1]);
		close(fds[2]);
	}
	return ret;
}

const char *fast_drain__path(const struct fast_drain *d)
{
	return d->path;
}

int fast_drain__fd(const struct fast_drain *d)
{
	return d->epoll_fd;
}

/* Notes that @c's peer has let go: its ring is read to its end, then freed. */
static void conn_closing(struct fast_conn *c)
{
	c->closing = true;
	if (c->ring)
		fast_reader_close(&c->rd);
}

/*
 * Whether the image that handed @c's ring over may still write it: its
 * process is of the tree and in-process (the exec of a new image and the
 * exit clear that, fast.bpf.c and proc.bpf.c, after its memory is gone),
 * and no newer connection of its pid came (a new image, or the pid
 * reused).  Earlier in d->conns is newer.
 */
static bool image_lives(const struct fast_drain *d, const struct fast_conn *c)
{
	struct tracked_proc tp;
	__u32 key = c->pid;

	if (d->tracked_fd < 0 || bpf_map_lookup_elem(d->tracked_fd, &key, &tp) ||
	    !(tp.flags & MT_PROC_FAST))
		return false;
	for (const struct fast_conn *o = d->conns; o && o != c; o = o->next)
		if (o->pid == c->pid)
			return false;
	return true;
}

/*
 * Starts (@on) or stops the orphans' tick: a timerfd in the epoll set
 * (its events carry @d), made at the first orphan.  Without one (no fd
 * left), the orphans are read on the poller's own timer.
 */
static void orphan_tick(struct fast_drain *d, bool on)
{
	struct itimerspec its = { { 0, on ? ORPHAN_TICK_NS : 0 }, { 0, on ? ORPHAN_TICK_NS : 0 } };

	if (on && d->orphan_timer < 0) {
		d->orphan_timer = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
		if (d->orphan_timer >= 0 && epoll_add_ptr(d->epoll_fd, d->orphan_timer, d)) {
			close(d->orphan_timer);
			d->orphan_timer = -1;
		}
	}
	if (d->orphan_timer >= 0)
		(void)timerfd_settime(d->orphan_timer, 0, &its, NULL);
}

/* One orphan fewer; the last one stops the tick. */
static void orphan_gone(struct fast_drain *d)
{
	if (!--d->norphans)
		orphan_tick(d, false);
}

/*
 * @c's peer closed its end.  A process that closed every fd (closefrom,
 * close_range) or dup2()ed over the library's socket goes on recording in
 * the ring without it (src/fast/link.h): while its image lives, the ring is read
 * as before, the socket closed (no more wakeups, no EOF to watch), and
 * fast_drain_service() looks for the image's end.  Anything else: read to
 * its end, then freed.
 */
static void peer_left(struct fast_drain *d, struct fast_conn *c)
{
	if (c->closing || c->orphan)
		return;
	if (!c->ring || !image_lives(d, c)) {
		conn_closing(c);
		return;
	}
	c->orphan = true;
	if (!d->norphans++)
		orphan_tick(d, true);
	close(c->sock); /* also leaves the epoll set */
	c->sock = -1;
}

/* Closes the orphaned rings whose image is gone: read to their end, then freed. */
static void reap_orphans(struct fast_drain *d)
{
	for (struct fast_conn *c = d->conns; c && d->norphans; c = c->next)
		if (c->orphan && !c->closing && !image_lives(d, c)) {
			orphan_gone(d);
			conn_closing(c);
			d->low = 0; /* fast_drain_feed() reads it to its end and frees it */
		}
}

/* Whether the peer of @c has closed its end (data may still wait before it). */
static bool peer_closed(struct fast_drain *d, struct fast_conn *c)
{
	struct pollfd pfd = { .fd = c->sock, .events = POLLRDHUP };

	if (!c->closing && !c->orphan && poll(&pfd, 1, 0) == 1 &&
	    (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR)))
		peer_left(d, c);
	return c->closing || c->orphan;
}

/*
 * Whether a connection from @cred may wait for its hello: a process of the
 * tree (anyone else is closed at once, so no fd is held for it), of the
 * command's user or root, with no other connection pending and fewer than
 * FAST_CONNS_PER_PID open, while fewer than FAST_MAX_PENDING wait.
 */
static bool peer_allowed(struct fast_drain *d, const struct ucred *cred)
{
	struct tracked_proc tp;
	unsigned mine = 0;
	__u32 key = cred->pid;

	if ((cred->uid != d->uid && cred->uid != 0) || d->npending >= FAST_MAX_PENDING)
		return false;
	if (d->tracked_fd >= 0 && bpf_map_lookup_elem(d->tracked_fd, &key, &tp))
		return false; /* not of the tree (another session's leftover environment) */
	for (struct fast_conn *c = d->conns; c; c = c->next) {
		if (c->pid != cred->pid)
			continue;
		if (!c->ring && !c->closing)
			return false; /* one hello at a time */
		/* an image that exec'd is gone, its EOF maybe not read yet */
		mine += !peer_closed(d, c);
	}
	return mine < FAST_CONNS_PER_PID;
}

static bool open_ring(struct fast_drain *d, struct fast_conn *c);

/* Ends the wait of a pending connection (its hello came, or it is refused). */
static void not_pending(struct fast_drain *d, struct fast_conn *c)
{
	if (!c->ring && !c->closing)
		d->npending--;
}

/*
 * Takes the connections waiting, at most a backlog's worth per call: the
 * tree's processes could connect as fast as they are accepted, and the
 * rings must still be read.
 */
static void accept_some(struct fast_drain *d)
{
	int sock;

	for (unsigned i = 0;
	     i < FAST_BACKLOG &&
	     (sock = accept4(d->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0;
	     i++) {
		struct ucred cred;
		socklen_t len = sizeof(cred);
		struct fast_conn *c = NULL;

		if (!getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) &&
		    peer_allowed(d, &cred))
			c = calloc(1, sizeof(*c));
		if (!c || epoll_add_ptr(d->epoll_fd, sock, c)) {
			free(c);
			close(sock); /* the library then leaves the process to the uprobes */
			d->st.refused++;
			continue;
		}
		c->sock = sock;
		c->pid = cred.pid;
		c->deadline = mono_ns() + FAST_HELLO_NS;
		c->next = d->conns;
		d->conns = c;
		d->npending++;
		/* the library sends its hello right after connecting: mostly here already */
		if (!open_ring(d, c)) {
			not_pending(d, c);
			conn_closing(c);
		}
	}
}

/* Closes every fd of a received SCM_RIGHTS message but @keep. */
static void close_fds(const struct msghdr *msg, int keep)
{
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(msg); cm;
	     cm = CMSG_NXTHDR((struct msghdr *)msg, cm)) {
		size_t n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		for (size_t i = 0; i < n; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(fd));
			if (fd != keep)
				close(fd);
		}
	}
}

/*
 * The peer's hello and memfd: exactly one fd.  Returns the fd, -EAGAIN
 * (not here yet) or -errno.
 */
static int recv_hello(struct fast_conn *c)
{
	struct mt_fast_hello hello;
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
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
	if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
	    cm->cmsg_len == CMSG_LEN(sizeof(int)) && !CMSG_NXTHDR(&msg, cm) &&
	    !(msg.msg_flags & MSG_CTRUNC))
		memcpy(&fd, CMSG_DATA(cm), sizeof(fd));
	close_fds(&msg, fd); /* any other the peer sent along */
	if (n != sizeof(hello) || hello.magic != MT_FAST_MAGIC ||
	    hello.version != MT_FAST_VERSION || hello.bytes != MT_FAST_RING_BYTES || fd < 0) {
		if (fd >= 0)
			close(fd);
		return -EPROTO;
	}
	return fd;
}

/*
 * Whether @fd is a ring memtrack may map: a memfd sealed against
 * shrinking, growing and unsealing (a mapping cannot fault past its end
 * later: no SIGBUS), of exactly the ring's size.  Seals first: the size
 * cannot change once they are on.
 */
static bool ring_fd_ok(int fd)
{
	int seals = fcntl(fd, F_GET_SEALS); /* EINVAL for anything but a memfd */
	struct stat st;

	return seals >= 0 && (seals & MT_FAST_SEALS) == MT_FAST_SEALS && !fstat(fd, &st) &&
	       S_ISREG(st.st_mode) && st.st_size == MT_FAST_RING_BYTES;
}

/* Maps a pending connection's ring and answers it.  Returns false to drop it. */
static bool open_ring(struct fast_drain *d, struct fast_conn *c)
{
	int fd = recv_hello(c);
	void *ring;

	if (fd == -EAGAIN)
		return true;
	if (fd < 0 || !ring_fd_ok(fd) || (d->admit && !d->admit(d->admit_ctx, c->pid)))
		goto refuse;
	ring = mmap(NULL, MT_FAST_RING_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	fd = -1;
	if (ring == MAP_FAILED)
		goto refuse;
	not_pending(d, c);
	c->ring = ring;
	/* before the answer, which starts the library's recording */
	((struct mt_fast_hdr *)ring)->sample_bytes = d->sample_bytes;
	/* before the answer: the library stamps nothing earlier */
	fast_reader__init(&c->rd, ring, c->pid, mono_ns(), d->va_end);
	if (answer(d, c, true))
		return false;
	d->st.rings++;
	if (++d->nopen > d->st.max_open)
		d->st.max_open = d->nopen;
	return true;
refuse:
	if (fd >= 0)
		close(fd);
	if (answer(d, c, false)) {
		/* the peer is gone already */
	}
	d->st.refused++;
	return false;
}

/* Adds the counts of @c's ring to @st. */
static void add_counts(struct fast_drain_stats *st, const struct fast_conn *c)
{
	if (!c->ring)
		return;
	st->records += c->rd.records;
	st->bad_records += c->rd.refused;
	st->bad_procs += c->rd.refused > 0;
	st->cut += c->rd.lied;
	if (c->rd.lied) /* its slots and header say nothing true any more */
		return;
	st->lost += c->rd.lost;
	st->env_overflow += __atomic_load_n(&((const struct mt_fast_hdr *)c->ring)->env_overflow,
					    __ATOMIC_RELAXED) != 0;
}

static void conn_free(struct fast_drain *d, struct fast_conn *c)
{
	not_pending(d, c);
	add_counts(&d->st, c);
	if (c->orphan && !c->closing)
		orphan_gone(d);
	if (c->ring) {
		/* a library waiting on a full ring stops, whether it has its socket or not */
		__atomic_store_n(&((struct mt_fast_hdr *)c->ring)->closed, 1, __ATOMIC_RELEASE);
		munmap(c->ring, MT_FAST_RING_BYTES);
		d->nopen--;
	}
	if (c->sock >= 0)
		close(c->sock); /* also leaves the epoll set; a cut library stops */
	free(c);
}

/*
 * Reads the wakeup bytes (one read: a producer waiting on a full ring
 * keeps sending them until the ring is read, so reading until there are
 * none would never end); notes a closed peer.
 */
static void read_wakeups(struct fast_drain *d, struct fast_conn *c)
{
	char buf[256];
	ssize_t n;

	if (c->sock < 0)
		return; /* an orphan's socket is closed (its event was queued before) */
	n = recv(c->sock, buf, sizeof(buf), MSG_DONTWAIT);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
		peer_left(d, c);
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
 * Writes @c's REFUSED record (once, when its ring refused anything),
 * stamped @ts.  Returns 0 or the pipeline's -errno.
 */
static int report_refusals(struct fast_conn *c, struct pipeline *p, uint64_t ts)
{
	struct mt_rec rec = { .h = { .type = MT_REFUSED,
				     .pid = c->pid,
				     .tid = c->pid,
				     .nfields = REFUSED_NFIELDS,
				     .ts = ts } };

	if (!c->ring || !c->rd.refused || c->reported)
		return 0;
	c->reported = true;
	rec.f[REFUSED_RECORDS] = c->rd.refused;
	rec.f[REFUSED_CUT] = c->rd.lied;
	return pipeline_feed(p, &rec, sizeof(rec.h) + REFUSED_NFIELDS * sizeof(__u64));
}

/*
 * --sample-bytes: writes @c's COUNTS record (once: when its ring is read to
 * its end, or at the end), the sums of its header's stripes, stamped @ts.
 * The process wrote them: a liar misstates its own totals only.  Returns 0
 * or the pipeline's -errno.
 */
static int report_counts(const struct fast_drain *d, struct fast_conn *c, struct pipeline *p,
			 uint64_t ts)
{
	const struct mt_fast_hdr *hdr = c->ring;
	struct mt_rec rec = { .h = { .type = MT_COUNTS,
				     .pid = c->pid,
				     .tid = c->pid,
				     .nfields = COUNTS_NFIELDS,
				     .ts = ts } };

	if (!c->ring || !d->sample_bytes || c->counted)
		return 0;
	c->counted = true;
	for (unsigned i = 0; i < MT_FAST_COUNT_STRIPES; i++) {
		const struct mt_fast_counts *k = &hdr->counts[i];

		rec.f[COUNTS_ALLOCS] += __atomic_load_n(&k->allocs, __ATOMIC_RELAXED);
		rec.f[COUNTS_ALLOC_BYTES] += __atomic_load_n(&k->alloc_bytes, __ATOMIC_RELAXED);
		rec.f[COUNTS_FREES] += __atomic_load_n(&k->frees, __ATOMIC_RELAXED);
		rec.f[COUNTS_SAMPLED] += __atomic_load_n(&k->sampled, __ATOMIC_RELAXED);
		rec.f[COUNTS_UNMATCHED] += __atomic_load_n(&k->unmatched, __ATOMIC_RELAXED);
	}
	return pipeline_feed(p, &rec, sizeof(rec.h) + COUNTS_NFIELDS * sizeof(__u64));
}

/* The records memtrack writes of @c's ring when it stops reading it. */
static int report_end(const struct fast_drain *d, struct fast_conn *c, struct pipeline *p,
		      uint64_t ts)
{
	int err = report_refusals(c, p, ts);

	return err ? err : report_counts(d, c, p, ts);
}

/*
 * Feeds @c's ring up to @until; frees @c (*@pc moves on, *@freed is set)
 * once it is read to its end, or lied.  *@next as fast_reader_feed's.
 * Returns the records fed or the pipeline's -errno.
 */
static int drain_conn(struct fast_drain *d, struct fast_conn **pc, struct pipeline *p,
		      uint64_t until, uint64_t *next, bool *freed)
{
	struct fast_conn *c = *pc;
	uint64_t now;
	int fed = 0, err;

	*next = UINT64_MAX;
	*freed = false;
	if (c->ring && d->stacks)
		c->rd.objects = stacks_objects(d->stacks);
	if (c->ring)
		fed = fast_reader_feed(&c->rd, p, until, next);
	if (fed < 0)
		return fed;
	if (c->ring ? !fast_reader_done(&c->rd) : !c->closing)
		return fed;
	/* a gone peer's ring, read to its end, or a liar's: cut off */
	now = mono_ns();
	err = report_end(d, c, p, until < now ? until : now);
	*pc = c->next;
	conn_free(d, c);
	*freed = true;
	return err ? err : fed;
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
		bool freed;
		int fed = drain_conn(d, pc, p, until, &next, &freed);
		struct fast_conn *c = *pc;

		if (fed < 0) {
			abandon(d);
			return fed;
		}
		total += fed;
		if (freed)
			continue; /* *pc is the next one already */
		/* a ring read to its end gets records stamped from about now on */
		if (c->ring)
			low = next == UINT64_MAX ? (scan < low ? scan : low)
						 : (next < low ? next : low);
		pc = &c->next;
	}
	d->low = low;
	/* the end: the rings of live peers say what they refused now */
	for (struct fast_conn *c = d->conns; until == UINT64_MAX && c; c = c->next) {
		int err = report_end(d, c, p, scan);

		if (err) {
			abandon(d);
			return err;
		}
	}
	return total;
}

/* Closes the pending connections whose hello is overdue (FAST_HELLO_NS). */
static void expire_pending(struct fast_drain *d)
{
	uint64_t now = mono_ns();

	for (struct fast_conn *c = d->conns; c && d->npending; c = c->next)
		if (!c->ring && !c->closing && now > c->deadline) {
			not_pending(d, c);
			conn_closing(c);
			d->st.refused++;
			d->low = 0; /* fast_drain_feed() frees it, even with no ring open */
		}
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

		if (!c) {
			accept_some(d);
		} else if (ev[i].data.ptr == d) { /* the orphans' tick: they are read next */
			uint64_t ticks;

			if (read(d->orphan_timer, &ticks, sizeof(ticks)) < 0) {
				/* EAGAIN: read already */
			}
		} else if (c->ring) {
			read_wakeups(d, c);
		} else if (!c->closing && !open_ring(d, c)) {
			not_pending(d, c);
			conn_closing(c);
		}
	}
	if (d->npending)
		expire_pending(d);
	if (d->norphans)
		reap_orphans(d);
	if (n > 0)
		d->low = 0; /* a new ring, or news: look at every ring next time */
	return 0;
}

void fast_drain__stats(const struct fast_drain *d, struct fast_drain_stats *st)
{
	*st = d->st;
	for (const struct fast_conn *c = d->conns; c; c = c->next)
		add_counts(st, c);
}

void fast_drain__free(struct fast_drain *d)
{
	if (!d)
		return;
	abandon(d); /* every connection and the listening socket */
	if (d->orphan_timer >= 0)
		close(d->orphan_timer);
	if (d->epoll_fd >= 0)
		close(d->epoll_fd);
	if (d->dir_fd >= 0) {
		(void)reaper_remove_dir(d->parent_fd, d->dir_fd, d->name, "sock");
		close(d->dir_fd);
	}
	if (d->parent_fd >= 0)
		close(d->parent_fd);
	free(d);
}
