// SPDX-License-Identifier: MIT
/* link.c - libmemtrack-fast.so's socket to memtrack; see link.h. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <linux/types.h>
#include "bpf_abi.h"
#include "fast/fast_ring.h"
#include "fast/link.h"
#include "fast/own_map.h"

static struct {
	int sock;	/* to memtrack, -1 if none (or no longer ours) */
	dev_t sock_dev; /* what sock was when it was made (see sock_ours) */
	ino_t sock_ino;
	pid_t memtrack_pid; /* the socket's other end (SO_PEERCRED), 0: unknown */
	void *switch_map;   /* memtrack's .data map, mapped by link_hello() */
	size_t switch_bytes;
} L = { .sock = -1 };

/*
 * Whether L.sock is still the socket made (see link.h).  A program that
 * closes and reuses the number between this check and the use (another
 * thread, in that window) is not caught.
 */
static bool sock_ours(void)
{
	struct stat st;

	if (L.sock < 0)
		return false;
	if (!fstat(L.sock, &st) && st.st_dev == L.sock_dev && st.st_ino == L.sock_ino)
		return true;
	L.sock = -1;
	return false;
}

void link_poke(void)
{
	ssize_t n;

	if (!sock_ours())
		return; /* memtrack drains on its own timer */
	do
		n = send(L.sock, "w", 1, MSG_DONTWAIT | MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	/* a full socket buffer (EAGAIN): memtrack has a wakeup pending anyway */
}

/* Whether memtrack's process is gone (asked when the socket is lost). */
static bool memtrack_exited(void)
{
	return L.memtrack_pid > 0 && kill(L.memtrack_pid, 0) && errno == ESRCH;
}

bool link_peer_gone(void)
{
	struct pollfd p = { .events = POLLRDHUP };
	int n;

	if (!sock_ours())
		return memtrack_exited();
	p.fd = L.sock;
	do
		n = poll(&p, 1, 0);
	while (n < 0 && (errno == EINTR || errno == EAGAIN || errno == ENOMEM));
	if (n == 1 && (p.revents & POLLNVAL)) { /* closed since sock_ours(): lost, not an end */
		L.sock = -1;
		return memtrack_exited();
	}
	return n == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/*
 * memtrack's answer: 'y' (a process of its tree) within a few seconds,
 * with the heap-recording switch, which is mapped here.
 */
/* The answer's fds (SCM_RIGHTS): up to 3, the rest set to -1. */
static void answer_fds(struct msghdr *msg, int fds[3])
{
	struct cmsghdr *cm = CMSG_FIRSTHDR(msg);
	size_t n;

	fds[0] = fds[1] = fds[2] = -1;
	if (!cm || cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS ||
	    cm->cmsg_len < CMSG_LEN(0))
		return;
	n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
	memcpy(fds, CMSG_DATA(cm), (n < 3 ? n : 3) * sizeof(int));
}

static bool accepted(int sock, const volatile uint32_t **heap_switch, struct link_stacks *st)
{
	struct pollfd p = { .fd = sock, .events = POLLIN };
	struct mt_fast_answer a;
	union {
		char buf[CMSG_SPACE(3 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { &a, sizeof(a) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *cm;
	void *map = MAP_FAILED;
	int fd = -1, fds[3];

	msg.msg_control = u.buf;
	msg.msg_controllen = sizeof(u.buf);
	if (poll(&p, 1, 5000) != 1 || recvmsg(sock, &msg, MSG_CMSG_CLOEXEC) != sizeof(a))
		return false;
	(void)cm;
	answer_fds(&msg, fds);
	fd = fds[0];
	if (a.verdict == 'y' && a.stacks == 1 && fds[1] >= 0 && fds[2] >= 0) {
		st->tables_fd = fds[1];
		st->maps_fd = fds[2];
		st->tables_bytes = a.tables_bytes;
		st->index_off = a.index_off;
		st->rows_cap = a.rows_cap;
		st->index_cap = a.index_cap;
	} else {
		if (fds[1] >= 0)
			close(fds[1]);
		if (fds[2] >= 0)
			close(fds[2]);
	}
	if (fd >= 0) {
		map = mmap(own_map_hint(a.map_bytes), a.map_bytes, PROT_READ, MAP_SHARED, fd, 0);
		close(fd);
	}
	if (a.verdict != 'y' || map == MAP_FAILED || a.switch_offset + 4 > a.map_bytes) {
		if (map != MAP_FAILED)
			munmap(map, a.map_bytes);
		link_stacks_close(st);
		return false;
	}
	*heap_switch = (const volatile uint32_t *)((char *)map + a.switch_offset);
	L.switch_map = map;
	L.switch_bytes = a.map_bytes;
	return true;
}

void link_stacks_close(struct link_stacks *st)
{
	if (st->tables_fd >= 0)
		close(st->tables_fd);
	if (st->maps_fd >= 0)
		close(st->maps_fd);
	st->tables_fd = st->maps_fd = -1;
}

int link_hello(int memfd, const volatile uint32_t **heap_switch, struct link_stacks *st)
{
	struct mt_fast_hello hello = { MT_FAST_MAGIC, MT_FAST_VERSION, MT_FAST_RING_BYTES };

	memset(st, 0, sizeof(*st));
	st->tables_fd = st->maps_fd = -1;
	if (L.sock < 0 || fast_send_fd(L.sock, &hello, sizeof(hello), memfd, 0))
		return -1;
	return accepted(L.sock, heap_switch, st) ? 0 : -1;
}

int link_move_high(int sock)
{
	struct rlimit rl;
	rlim_t top;
	int high;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return sock;
	top = rl.rlim_cur < 1024 ? rl.rlim_cur : 1024;
	if (top < 32)
		return sock;
	high = fcntl(sock, F_DUPFD_CLOEXEC, (int)(top - 8));
	if (high < 0)
		return sock;
	close(sock);
	return high;
}

/* Notes what @sock is (sock_ours) and who listens on it. */
static int note_sock(int sock)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	struct stat st;

	if (fstat(sock, &st))
		return -1;
	L.sock_dev = st.st_dev;
	L.sock_ino = st.st_ino;
	/* 0 when memtrack is in a pid namespace we cannot see */
	if (!getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len))
		L.memtrack_pid = cred.pid;
	return 0;
}

int link_connect(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int sock;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -1;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (sock < 0)
		return -1;
	if (connect(sock, (struct sockaddr *)&sa, sizeof(sa))) {
		close(sock);
		return -1;
	}
	sock = link_move_high(sock);
	if (note_sock(sock)) { /* made here and not noted: surely ours */
		close(sock);
		return -1;
	}
	L.sock = sock;
	return 0;
}

void link_drop(void)
{
	if (sock_ours()) /* a lost number is the program's now: left alone */
		close(L.sock);
	if (L.switch_map)
		munmap(L.switch_map, L.switch_bytes);
	L.switch_map = NULL;
	L.sock = -1;
	L.sock_dev = 0;
	L.sock_ino = 0;
	L.memtrack_pid = 0;
}
