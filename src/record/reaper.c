// SPDX-License-Identifier: MIT
/*
 * reaper.c - the process that makes memtrack's slow last closes; see
 * reaper.h.
 *
 * Nothing on the reaper's side allocates: it is a fork of memtrack, which
 * may run with an allocator interposer preloaded
 * (tests/integration/test_exact.py counts every call), so it works in
 * static buffers, and its parallel closes are raw clone()s sharing its
 * memory and fd table, on static stacks.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include "bpf_abi.h"
#include "record/reaper.h"

/* Each close waits for its own grace periods: this many at once overlap. */
#define CLOSE_TASKS 64
#define CLOSE_STACK (16u << 10)
#define BATCH_TASKS 8 /* at the end (close_batched) */
#define MAX_FDS 65536
/* fds per message: the kernel's SCM_MAX_FD */
#define FDS_PER_MSG 253
#define SEND_BUFFER (4 << 20)

struct reaper {
	int sock;	      /* memtrack's end */
	pid_t pid;	      /* the reaper's pid, 0 if unknown */
	pthread_mutex_t lock; /* one hand-over (fds, closes, "c") at a time */
	bool gone;	      /* a send failed for good: the reaper is gone */
};

/* --- the reaper's side ------------------------------------------------ */

/*
 * One close per task, and the reaper does not wait for it: each last close
 * waits for its own grace periods, which overlap, and a link handed over
 * later (an exec'd program's interposed sites, whose uprobes trap until
 * they are gone) starts closing at once instead of after earlier ones.
 */
struct close_slot {
	pid_t pid; /* the task closing fd, 0: free */
	int fd;
};

static int held[MAX_FDS + FDS_PER_MSG]; /* received, not closed yet */
/* what to remove at the end ("d", reaper_remove_at_end): -1 while none */
static int end_parent = -1, end_dir = -1;
static char end_name[64], end_sock[16];
/* the `parked` and `session` maps ("p", reaper_resume_at_end): -1 while none */
static int end_parked = -1, end_session = -1;
static struct close_slot slots[CLOSE_TASKS];
static char stacks[CLOSE_TASKS][CLOSE_STACK] __attribute__((aligned(64)));

static int close_task(void *arg)
{
	close(*(const int *)arg);
	return 0;
}

/* Frees the slots of finished tasks; with @block, waits for one first. */
static void reap_tasks(bool block)
{
	pid_t pid;

	while ((pid = waitpid(-1, NULL, __WALL | (block ? 0 : WNOHANG))) > 0 ||
	       (pid < 0 && errno == EINTR)) {
		for (unsigned t = 0; t < CLOSE_TASKS; t++)
			if (pid > 0 && slots[t].pid == pid)
				slots[t].pid = 0;
		block = false;
	}
}

/* Starts the last close of @fd on a task of its own (here, if none can start). */
static void close_async(int fd)
{
	for (;;) {
		for (unsigned t = 0; t < CLOSE_TASKS; t++) {
			if (slots[t].pid)
				continue;
			slots[t].fd = fd;
			slots[t].pid = clone(close_task, stacks[t] + CLOSE_STACK,
					     CLONE_VM | CLONE_FILES | SIGCHLD, &slots[t].fd);
			if (slots[t].pid <= 0) {
				slots[t].pid = 0;
				close(fd);
			}
			return;
		}
		reap_tasks(true); /* every slot busy: wait for one */
	}
}

/* Task t of close_batched(): closes fds t, t + BATCH_TASKS, ... */
struct batch_share {
	const int *fds;
	unsigned n, first;
};

static struct batch_share batch_shares[BATCH_TASKS];

static int batch_task(void *arg)
{
	const struct batch_share *sh = arg;

	for (unsigned i = sh->first; i < sh->n; i += BATCH_TASKS)
		close(sh->fds[i]);
	return 0;
}

/*
 * Closes @fds[0..@n) from BATCH_TASKS tasks, and waits: what memtrack held
 * at its end.  Spread over a few tasks rather than one each: a memtrack
 * started right after this one (a benchmark's next round) loads and
 * attaches meanwhile, and dozens of concurrent detaches (tracepoints,
 * uprobes, maps) slowed its start by ~15 ms (ls -la: 45.6 -> 60 ms median).
 * Every close task has ended: their stacks are free.
 */
static void close_batched(const int *fds, unsigned n)
{
	pid_t pids[BATCH_TASKS];

	for (unsigned t = 0; t < BATCH_TASKS; t++) {
		batch_shares[t] = (struct batch_share){ .fds = fds, .n = n, .first = t };
		pids[t] = t < n ? clone(batch_task, stacks[t] + CLOSE_STACK,
					CLONE_VM | CLONE_FILES | SIGCHLD, &batch_shares[t])
				: 0;
		if (pids[t] < 0)
			batch_task(&batch_shares[t]);
	}
	for (unsigned t = 0; t < BATCH_TASKS; t++)
		if (pids[t] > 0)
			while (waitpid(pids[t], NULL, __WALL) < 0 && errno == EINTR)
				;
}

/* Closes @fds[0..@n), each on its own task (see close_async). */
static void close_parallel(const int *fds, unsigned n)
{
	reap_tasks(false);
	for (unsigned i = 0; i < n; i++)
		close_async(fds[i]);
}

/* A "d" message: its two fds and names become what to remove at the end. */
static int take_dir(const char *buf, size_t len, const int *fds, unsigned n)
{
	size_t name_len = strnlen(buf + 1, len - 1), sock_len;

	if (n != 2 || 1 + name_len + 1 >= len || name_len >= sizeof(end_name)) {
		for (unsigned i = 0; i < n; i++)
			close(fds[i]);
		return 'd';
	}
	sock_len = strnlen(buf + 2 + name_len, len - 2 - name_len);
	if (sock_len >= sizeof(end_sock)) {
		close(fds[0]);
		close(fds[1]);
		return 'd';
	}
	if (end_dir >= 0) {
		close(end_parent);
		close(end_dir);
	}
	end_parent = fds[0];
	end_dir = fds[1];
	memcpy(end_name, buf + 1, name_len + 1);
	memcpy(end_sock, buf + 2 + name_len, sock_len);
	end_sock[sock_len] = 0;
	return 'd';
}

static void on_child(int sig)
{
	(void)sig; /* only interrupts ppoll (wait_readable) */
}

/*
 * Waits until @sock has a message (or its end), reaping the close tasks
 * that end meanwhile: a reaper waiting for memtrack's next hand-over (a
 * long attach, the daemon) left each finished task a zombie until then.
 * SIGCHLD is blocked but inside ppoll, so none is lost between the reap
 * and the wait.
 */
static void wait_readable(int sock)
{
	struct pollfd pfd = { .fd = sock, .events = POLLIN };
	sigset_t open;

	sigemptyset(&open);
	for (;;) {
		reap_tasks(false);
		if (ppoll(&pfd, 1, NULL, &open) >= 0 || errno != EINTR)
			return;
	}
}

/*
 * Receives one message into held[*nheld...].  Returns its byte ('h' for
 * fds, 'c' for "memtrack closed its copies", 'd' for what to remove at
 * the end), 0 at the end of the socket, or -1 (nothing to read without
 * blocking, or an error).
 */
static int receive(int sock, unsigned *nheld, bool block)
{
	char buf[2 + sizeof(end_name) + sizeof(end_sock)] = { 0 };
	char cbuf[CMSG_SPACE(FDS_PER_MSG * sizeof(int))];
	struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
	struct msghdr msg = { .msg_iov = &iov,
			      .msg_iovlen = 1,
			      .msg_control = cbuf,
			      .msg_controllen = sizeof(cbuf) };
	unsigned first = *nheld;
	ssize_t len;

	if (block)
		wait_readable(sock);
	do
		len = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | (block ? 0 : MSG_DONTWAIT));
	while (len < 0 && errno == EINTR);
	if (len <= 0)
		return len == 0 ? 0 : -1;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
		unsigned n;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		memcpy(held + *nheld, CMSG_DATA(c), n * sizeof(int));
		*nheld += n;
	}
	if (buf[0] == 'p' && *nheld - first == 2 && end_parked < 0) { /* kept to the end */
		end_parked = held[first];
		end_session = held[first + 1];
		*nheld = first;
		return 'p';
	}
	if (buf[0] == 'd') { /* its fds are not to be closed now */
		unsigned n = *nheld - first;

		*nheld = first;
		return take_dir(buf, (size_t)len, held + first, n);
	}
	return (unsigned char)buf[0];
}

/*
 * memtrack is gone: what the kernel's BPF side does at memtrack's exit
 * where it has the kfuncs (proc.bpf.c handle_exit), stop parking and
 * resume every process still parked.  The same order as
 * loader_stop_parking(): the flag first (a syscall, a full barrier).
 */
static void resume_parked(void)
{
	struct session_state off = { 1, 0 };
	__u32 zero = 0, next;

	if (end_parked < 0)
		return;
	(void)bpf_map_update_elem(end_session, &zero, &off, BPF_ANY);
	for (unsigned n = 0; n < MT_MAX_TRACKED && !bpf_map_get_next_key(end_parked, NULL, &next);
	     n++) {
		kill((pid_t)next, SIGCONT);
		(void)bpf_map_delete_elem(end_parked, &next);
	}
}

/*
 * The reaper's loop: takes in what is there (blocking for the first
 * message), then starts closing every fd memtrack has let go of.  Ends
 * when memtrack's end of the socket closes: once the run's closes are
 * done, it closes what memtrack held at its end (close_batched).
 */
static __attribute__((noreturn)) void reaper_main(int sock)
{
	unsigned nheld = 0;

	for (;;) {
		unsigned ready = 0;
		int m = receive(sock, &nheld, true);
		bool end = m <= 0; /* blocking: the end of the socket, or an error */

		while (m > 0) {
			if (m == 'c')
				ready = nheld;
			if (nheld > MAX_FDS)
				break; /* a later message waits in the socket */
			m = receive(sock, &nheld, false);
			end = m == 0;
		}
		if (end)
			break;
		if (nheld > MAX_FDS && !ready) /* no room: close them all (memtrack may then pay) */
			ready = nheld;
		close_parallel(held, ready);
		memmove(held, held + ready, (nheld - ready) * sizeof(int));
		nheld -= ready;
	}
	resume_parked(); /* first: a parked process waits for it */
	while (waitpid(-1, NULL, __WALL) > 0 || errno == EINTR) /* the run's closes */
		;
	close_batched(held, nheld);
	if (end_dir >= 0) /* memtrack removed them, unless it was killed */
		(void)reaper_remove_dir(end_parent, end_dir, end_name, end_sock);
	_exit(0);
}

/* Lists this process's fds above stderr but @keep into @out; returns how many. */
static unsigned list_fds(int keep, int *out, unsigned max)
{
	static char buf[16384] __attribute__((aligned(8)));
	unsigned n = 0;
	int dir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	long len;

	if (dir < 0)
		return 0;
	while ((len = syscall(SYS_getdents64, dir, buf, sizeof(buf))) > 0) {
		for (long off = 0; off < len;) {
			const struct dirent64 *d = (const void *)(buf + off);
			int fd = atoi(d->d_name);

			off += d->d_reclen;
			if (fd > STDERR_FILENO && fd != dir && fd != keep && n < max)
				out[n++] = fd;
		}
	}
	close(dir);
	return n;
}

/*
 * The reaper starts as a copy of memtrack: it drops its copies of
 * memtrack's fds (reference drops: memtrack holds them), takes /dev/null
 * as stdio and leaves memtrack's session, so neither a pipe reading
 * memtrack's output nor a terminal's ^C waits for or reaches it.
 */
static __attribute__((noreturn)) void reaper_start(int sock)
{
	static int inherited[MAX_FDS];
	unsigned n = list_fds(sock, inherited, MAX_FDS);
	sigset_t mask;
	int null;

	for (unsigned i = 0; i < n; i++)
		close(inherited[i]);
	/* memtrack's handlers and blocked signals are memtrack's */
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	sigaction(SIGCHLD, &(struct sigaction){ .sa_handler = on_child }, NULL);
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD); /* but in wait_readable's ppoll */
	sigprocmask(SIG_SETMASK, &mask, NULL);
	setsid();
	null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, STDIN_FILENO);
		dup2(null, STDOUT_FILENO);
		dup2(null, STDERR_FILENO);
		close(null);
	}
	/* what ps shows while it closes; named last, so the name means ready */
	prctl(PR_SET_NAME, "memtrack-reaper");
	reaper_main(sock);
}

/* --- memtrack's side -------------------------------------------------- */

struct reaper *reaper__new(void)
{
	struct reaper *r = calloc(1, sizeof(*r));
	int sv[2];
	pid_t pid;

	if (!r)
		return NULL;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv))
		goto out_free;
	/* twice: the reaper is not memtrack's child, whose only child is the command */
	pid = fork();
	if (pid < 0)
		goto out_close;
	if (pid == 0) {
		pid_t reaper;

		close(sv[0]);
		reaper = fork();
		if (reaper == 0)
			reaper_start(sv[1]);
		/* its pid, for attach to leave it out of a tree (the first message) */
		if (reaper > 0)
			(void)!send(sv[1], &reaper, sizeof(reaper), MSG_DONTWAIT);
		_exit(0);
	}
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	close(sv[1]);
	r->sock = sv[0];
	if (recv(r->sock, &r->pid, sizeof(r->pid), MSG_DONTWAIT) != sizeof(r->pid))
		r->pid = 0;
	/* room for a fork storm's exits while the reaper waits out a grace period */
	if (setsockopt(r->sock, SOL_SOCKET, SO_SNDBUFFORCE, &(int){ SEND_BUFFER }, sizeof(int)))
		(void)setsockopt(r->sock, SOL_SOCKET, SO_SNDBUF, &(int){ SEND_BUFFER },
				 sizeof(int));
	pthread_mutex_init(&r->lock, NULL);
	return r;

out_close:
	close(sv[0]);
	close(sv[1]);
out_free:
	free(r);
	return NULL;
}

/* Sends @n (<= FDS_PER_MSG) fds, or none, with @len bytes of @buf; returns 0 or -errno. */
static int send_msg(struct reaper *r, const int *fds, unsigned n, const void *buf, size_t len,
		    bool block)
{
	char cbuf[CMSG_SPACE(FDS_PER_MSG * sizeof(int))] = { 0 };
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t sent;

	if (n) {
		struct cmsghdr *c;

		msg.msg_control = cbuf;
		msg.msg_controllen = CMSG_SPACE(n * sizeof(int));
		c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(n * sizeof(int));
		memcpy(CMSG_DATA(c), fds, n * sizeof(int));
	}
	do
		sent = sendmsg(r->sock, &msg, MSG_NOSIGNAL | (block ? 0 : MSG_DONTWAIT));
	while (sent < 0 && errno == EINTR);
	if (sent < 0 && (errno == EPIPE || errno == ECONNRESET))
		r->gone = true;
	return sent < 0 ? -errno : 0;
}

static int send_fds(struct reaper *r, const int *fds, unsigned n, char byte, bool block)
{
	return send_msg(r, fds, n, &byte, 1, block);
}

int reaper_remove_at_end(struct reaper *r, int parent_fd, int dir_fd, const char *name,
			 const char *sock)
{
	char buf[2 + sizeof(end_name) + sizeof(end_sock)];
	size_t nlen = strlen(name), slen = strlen(sock);
	int err;

	if (!r)
		return 0;
	if (nlen >= sizeof(end_name) || slen >= sizeof(end_sock))
		return -ENAMETOOLONG;
	buf[0] = 'd';
	memcpy(buf + 1, name, nlen + 1);
	memcpy(buf + 2 + nlen, sock, slen + 1);
	pthread_mutex_lock(&r->lock);
	err = r->gone ? -EPIPE
		      : send_msg(r, (int[]){ parent_fd, dir_fd }, 2, buf, 3 + nlen + slen, true);
	pthread_mutex_unlock(&r->lock);
	return err;
}

int reaper_resume_at_end(struct reaper *r, int parked_fd, int session_fd)
{
	char byte = 'p';
	int err;

	if (!r)
		return -ENOTCONN;
	pthread_mutex_lock(&r->lock);
	err = r->gone ? -EPIPE : send_msg(r, (int[]){ parked_fd, session_fd }, 2, &byte, 1, true);
	pthread_mutex_unlock(&r->lock);
	return err;
}

int reaper_remove_dir(int parent_fd, int dir_fd, const char *name, const char *sock)
{
	struct stat st, dir;

	if (!fstatat(dir_fd, sock, &st, AT_SYMLINK_NOFOLLOW) && S_ISSOCK(st.st_mode))
		(void)unlinkat(dir_fd, sock, 0);
	if (fstat(dir_fd, &dir) || fstatat(parent_fd, name, &st, AT_SYMLINK_NOFOLLOW))
		return -errno;
	/* the reaper's fd keeps the inode: a same-named successor has another */
	if (st.st_dev != dir.st_dev || st.st_ino != dir.st_ino)
		return -ENOENT;
	return unlinkat(parent_fd, name, AT_REMOVEDIR) ? -errno : 0;
}

unsigned reaper_hand(struct reaper *r, const int *fds, unsigned n)
{
	unsigned done = 0;

	if (!r)
		return 0;
	pthread_mutex_lock(&r->lock);
	while (!r->gone && done < n) {
		unsigned k = n - done < FDS_PER_MSG ? n - done : FDS_PER_MSG;

		if (send_fds(r, fds + done, k, 'h', false))
			break;
		for (unsigned i = 0; i < k; i++)
			close(fds[done + i]);
		done += k;
	}
	/* should the socket be full, the next hand-over's "c" covers these too */
	if (done && !r->gone)
		(void)send_fds(r, NULL, 0, 'c', false);
	pthread_mutex_unlock(&r->lock);
	return done;
}

pid_t reaper_pid(const struct reaper *r)
{
	return r ? r->pid : 0;
}

unsigned reaper_hand_all(struct reaper *r)
{
	static int fds[MAX_FDS];
	unsigned n, done = 0;

	if (!r)
		return 0;
	n = list_fds(r->sock, fds, MAX_FDS);
	pthread_mutex_lock(&r->lock);
	while (!r->gone && done < n) {
		unsigned k = n - done < FDS_PER_MSG ? n - done : FDS_PER_MSG;

		if (send_fds(r, fds + done, k, 'h', true))
			break;
		done += k;
	}
	pthread_mutex_unlock(&r->lock);
	return done;
}

void reaper__free(struct reaper *r)
{
	if (!r)
		return;
	close(r->sock);
	pthread_mutex_destroy(&r->lock);
	free(r);
}
