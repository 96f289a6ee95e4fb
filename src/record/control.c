// SPDX-License-Identifier: MIT
/*
 * control.c - the control socket server; see control.h for the protocol
 * and THREAD NOTES.
 *
 * Everything runs on the poller thread, woken through one epoll set that
 * holds the listening socket and the client: a command takes effect, its
 * record is batched behind every ring record before it, and the answer goes
 * out, with no thread hand-over in between (one round trip is a few tens of
 * microseconds).  Sockets are non-blocking so a slow or vanished client can
 * never stall the poller.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <unistd.h>
#include "util/as_user.h"
#include "record/control.h"
#include "record/heap_switch.h"
#include "event.h"
#include "pipeline/pipeline.h"

#define CTL_LINE_MAX 512 /* a command line, "\n" included */
/*
 * A client has this long after connecting to send its first complete line,
 * and then for each line from its first byte (docs/CONTROL.md): one that
 * never finishes one does not hold the one client slot for good.  A client
 * that has been answered may stay connected, idle, as long as it likes.
 */
#define CTL_DEADLINE_S 3

static const char deadline_msg[] = "error no complete line within 3 s; disconnecting\n";

struct control {
	struct control_opts o;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int dir_fd;	     /* the socket's directory (O_PATH), -1 before */
	const char *base;    /* the socket's name in it (in path) */
	struct stat sock_st; /* the socket file as bound: only that one is removed */
	bool bound;	     /* the socket file is ours to remove */
	int listen_fd;
	int client_fd;	  /* -1 when nobody is connected */
	pid_t client_pid; /* SO_PEERCRED: the pid the records carry */
	bool answered;	  /* the client completed a line (it may idle now) */
	int timer_fd;	  /* the client's line deadline (CTL_DEADLINE_S) */
	int epoll_fd;
	char buf[CTL_LINE_MAX]; /* the client's unanswered bytes */
	size_t used;
};

static void notice(struct control *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Hands one line about a client's misstep to o.notice (memtrack's stderr). */
static void notice(struct control *c, const char *fmt, ...)
{
	char msg[CTL_LINE_MAX + 128];
	va_list ap;

	if (!c->o.notice)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	c->o.notice(c->o.notice_ctx, msg);
}

/*
 * The pid of the live process listening on the socket @c->base of
 * @c->dir_fd (another memtrack session's control socket), 0 if none: a
 * connect, and the peer's credentials.
 */
static pid_t socket_owner(const struct control *c)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct ucred cred = { 0 };
	socklen_t len = sizeof(cred);
	int fd;

	if (c->dir_fd < 0 ||
	    (size_t)snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/%s", c->dir_fd,
			     c->base) >= sizeof(sa.sun_path))
		return 0;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len))
		cred.pid = 0;
	close(fd);
	return cred.pid;
}

/* Words why the socket cannot be made (@ret) in @err; returns @ret. */
static int cannot_create(const struct control *c, int ret, char *err, size_t errlen)
{
	pid_t owner = ret == -EADDRINUSE || ret == -EEXIST ? socket_owner(c) : 0;

	if (owner)
		snprintf(
			err, errlen,
			"cannot create control socket '%s': another memtrack session (pid %d) is listening on it; give each concurrent session its own --control path",
			c->path, (int)owner);
	else if (ret == -EADDRINUSE || ret == -EEXIST)
		snprintf(
			err, errlen,
			"cannot create control socket '%s': the path already exists; remove it (a memtrack that was killed leaves it behind) or choose another --control path",
			c->path);
	else
		snprintf(
			err, errlen,
			"cannot create control socket '%s': %s; choose a path in a directory you can write",
			c->path, strerror(-ret));
	return ret;
}

/*
 * Binds and listens as the invoking user (as_user.h): the socket is theirs,
 * born 0600, and its name appears only once it listens.
 */
static int make_socket(struct control *c, char *err, size_t errlen)
{
	int ret;

	c->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (c->listen_fd < 0) {
		snprintf(err, errlen, "cannot create the control socket: %s", strerror(errno));
		return -errno;
	}
	ret = as_user_listenat(c->dir_fd, c->listen_fd, c->base, 8);
	if (ret)
		return cannot_create(c, ret, err, errlen);
	c->bound = !fstatat(c->dir_fd, c->base, &c->sock_st, AT_SYMLINK_NOFOLLOW) &&
		   S_ISSOCK(c->sock_st.st_mode);
	return 0;
}

/* Removes the socket file, if its name still is the socket memtrack bound. */
static void remove_socket(struct control *c)
{
	struct stat st;

	if (c->bound && !fstatat(c->dir_fd, c->base, &st, AT_SYMLINK_NOFOLLOW) &&
	    st.st_ino == c->sock_st.st_ino && st.st_dev == c->sock_st.st_dev)
		as_user_unlinkat(c->dir_fd, c->base);
	c->bound = false;
}

/* Starts (@on) or stops the client's deadline. */
static void set_deadline(struct control *c, bool on)
{
	struct itimerspec t = { .it_value.tv_sec = on ? CTL_DEADLINE_S : 0 };

	timerfd_settime(c->timer_fd, 0, &t, NULL);
}

static int watch(struct control *c, int fd, int op)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };

	return epoll_ctl(c->epoll_fd, op, fd, &ev) ? -errno : 0;
}

/* Opens the socket's directory (as the invoking user) and checks the name is free. */
static int open_dir(struct control *c, char *err, size_t errlen)
{
	struct stat st;

	c->dir_fd = as_user_open_dir(c->path, &c->base);
	if (c->dir_fd < 0)
		return cannot_create(c, c->dir_fd, err, errlen);
	if (!fstatat(c->dir_fd, c->base, &st, AT_SYMLINK_NOFOLLOW))
		return cannot_create(c, -EEXIST, err, errlen);
	return 0;
}

struct control *control__new(const struct control_opts *o, char *err, size_t errlen)
{
	struct control *c;

	if (strlen(o->path) >= sizeof(c->path)) {
		snprintf(
			err, errlen,
			"control socket path '%s' is too long (%zu bytes, at most %zu); choose a shorter path",
			o->path, strlen(o->path), sizeof(c->path) - 1);
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	c->o = *o;
	snprintf(c->path, sizeof(c->path), "%s", o->path);
	c->client_fd = -1;
	c->listen_fd = -1;
	c->dir_fd = -1;
	c->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	c->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (c->epoll_fd < 0 || c->timer_fd < 0) {
		snprintf(err, errlen, "cannot create the control socket's epoll set: %s",
			 strerror(errno));
		goto fail;
	}
	if (open_dir(c, err, errlen) || make_socket(c, err, errlen))
		goto fail;
	if (watch(c, c->listen_fd, EPOLL_CTL_ADD) || watch(c, c->timer_fd, EPOLL_CTL_ADD)) {
		snprintf(err, errlen, "cannot watch the control socket: %s", strerror(errno));
		goto fail;
	}
	return c;
fail:
	control__free(c); /* removes the socket if it was bound */
	return NULL;
}

void control__set_switch(struct control *c, struct heap_switch *sw)
{
	c->o.heap_switch = sw;
}

void control__set_pipeline(struct control *c, struct pipeline *pipe)
{
	c->o.pipe = pipe;
}

int control__fd(const struct control *c)
{
	return c->epoll_fd;
}

static void drop_client(struct control *c)
{
	watch(c, c->client_fd, EPOLL_CTL_DEL);
	close(c->client_fd);
	c->client_fd = -1;
	c->used = 0;
	set_deadline(c, false);
}

/* Sends one answer line; a client that cannot take it is dropped. */
static void reply(struct control *c, const char *line)
{
	size_t len = strlen(line);

	if (send(c->client_fd, line, len, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)len) {
		notice(c, "control: cannot answer the client (%s); disconnected it",
		       strerror(errno));
		drop_client(c);
	}
}

static int emit(struct control *c, __u16 type, __u32 pid, const char *name)
{
	struct mt_rec_mark r;
	size_t size = sizeof(r.h);

	r.h.type = type;
	r.h.fn = 0;
	r.h.pid = pid;
	r.h.tid = pid;
	r.h.nfields = 0;
	r.h.ts = mono_ns();
	if (name) {
		snprintf(r.name, sizeof(r.name), "%s", name);
		size = sizeof(r);
	}
	return pipeline_inject(c->o.pipe, &r, size);
}

int control_record(struct control *c, __u16 type, __u32 pid)
{
	return emit(c, type, pid, NULL);
}

/*
 * Switches heap recording.  For `enable` the record's timestamp is taken
 * before the flag is set, for `disable` after it is cleared, so every heap
 * record of the artifact lies inside an enabled window.
 */
static int set_enabled(struct control *c, bool on)
{
	int err = 0;

	if (!c->o.heap_switch)
		return emit(c, on ? MT_ENABLE : MT_DISABLE, c->client_pid, NULL);
	if (heap_switch__on(c->o.heap_switch) == on)
		return 0; /* no change, no record */
	if (on) {
		err = emit(c, MT_ENABLE, c->client_pid, NULL);
		heap_switch__set(c->o.heap_switch, true);
	} else {
		heap_switch__set(c->o.heap_switch, false);
		err = emit(c, MT_DISABLE, c->client_pid, NULL);
	}
	return err;
}

/* Runs one command line (no "\n") and answers it. */
static void run_command(struct control *c, char *line)
{
	char ans[CTL_LINE_MAX + 128];
	size_t len = strlen(line);
	int err = 0;

	if (len && line[len - 1] == '\r')
		line[--len] = '\0';
	if (!strcmp(line, "ping")) {
		/* nothing to do */
	} else if (!strcmp(line, "enable") || !strcmp(line, "disable")) {
		err = set_enabled(c, line[0] == 'e');
	} else if (!strcmp(line, "mark") || !strncmp(line, "mark ", 5)) {
		const char *name = line[4] ? line + 5 : "";

		if (!*name) {
			reply(c, "error mark needs a name: mark NAME\n");
			return;
		}
		if (strlen(name) > MT_PATH_MAX - 1) {
			snprintf(
				ans, sizeof(ans),
				"error mark name too long (%zu bytes, at most %d); use a shorter name\n",
				strlen(name), MT_PATH_MAX - 1);
			reply(c, ans);
			return;
		}
		err = emit(c, MT_MARK, c->client_pid, name);
	} else {
		snprintf(ans, sizeof(ans),
			 "error unknown command '%.64s'; use enable, disable, ping or mark NAME\n",
			 line);
		reply(c, ans);
		return;
	}
	if (err) {
		snprintf(ans, sizeof(ans), "error the artifact cannot be written: %s\n",
			 strerror(-err));
		reply(c, ans);
		return;
	}
	reply(c, "ok\n");
}

/* Reads what the client sent and answers every complete line. */
static void serve_client(struct control *c)
{
	bool was_idle = c->used == 0;
	ssize_t n;
	char *nl;

	n = recv(c->client_fd, c->buf + c->used, sizeof(c->buf) - 1 - c->used, MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		if (c->used) {
			c->buf[c->used] = '\0';
			notice(c,
			       "control: the client disconnected in the middle of a command ('%.64s'); it was not run",
			       c->buf);
		}
		drop_client(c);
		return;
	}
	c->used += n;
	c->buf[c->used] = '\0';
	while (c->client_fd >= 0 && (nl = memchr(c->buf, '\n', c->used))) {
		size_t line_len = nl - c->buf + 1;

		*nl = '\0';
		if (memchr(c->buf, '\0', line_len - 1))
			reply(c, "error command contains a NUL byte; send text lines\n");
		else
			run_command(c, c->buf);
		if (c->client_fd < 0)
			return;
		memmove(c->buf, c->buf + line_len, c->used - line_len);
		c->used -= line_len;
		c->answered = true;
		was_idle = true; /* what is left starts a new line */
	}
	if (c->client_fd >= 0 && c->used == sizeof(c->buf) - 1) {
		reply(c, "error command longer than 511 bytes; disconnecting\n");
		if (c->client_fd >= 0)
			drop_client(c);
		return;
	}
	/* a client that has been answered may idle; a line in progress has its deadline */
	if (c->client_fd >= 0 && c->answered && (c->used == 0 || was_idle))
		set_deadline(c, c->used > 0);
}

/* The deadline passed: a client without a complete line gives the slot up. */
static void deadline_passed(struct control *c)
{
	uint64_t ticks;

	if (read(c->timer_fd, &ticks, sizeof(ticks)) != sizeof(ticks) || c->client_fd < 0)
		return;
	if (c->answered && c->used == 0)
		return; /* the line came in the meantime */
	notice(c,
	       "control: the client sent no complete line within %d s; disconnected it (a command is one line ending in a newline)",
	       CTL_DEADLINE_S);
	if (send(c->client_fd, deadline_msg, sizeof(deadline_msg) - 1,
		 MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
		/* it is gone already */
	}
	drop_client(c);
}

static void accept_client(struct control *c)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int fd;

	fd = accept4(c->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fd < 0)
		return;
	if (c->client_fd >= 0) {
		static const char busy[] =
			"error busy: another client is connected; one client at a time, retry when it has disconnected\n";

		if (send(fd, busy, sizeof(busy) - 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
			/* it is gone already */
		}
		close(fd);
		notice(c, "control: refused a second client (one at a time)");
		return;
	}
	c->client_fd = fd;
	c->client_pid = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) ? 0 : cred.pid;
	c->used = 0;
	c->answered = false;
	if (watch(c, fd, EPOLL_CTL_ADD))
		drop_client(c);
	else
		set_deadline(c, true); /* its first line is due */
}

void control_handle(void *arg)
{
	struct control *c = arg;
	struct epoll_event ev[3];
	int n;

	while ((n = epoll_wait(c->epoll_fd, ev, 3, 0)) > 0) {
		for (int i = 0; i < n; i++) {
			if (ev[i].data.fd == c->listen_fd)
				accept_client(c);
			else if (ev[i].data.fd == c->timer_fd)
				deadline_passed(c);
			else if (ev[i].data.fd == c->client_fd)
				serve_client(c);
		}
	}
}

void control__free(struct control *c)
{
	if (!c)
		return;
	if (c->client_fd >= 0)
		close(c->client_fd);
	if (c->listen_fd >= 0)
		close(c->listen_fd);
	if (c->timer_fd >= 0)
		close(c->timer_fd);
	if (c->epoll_fd >= 0)
		close(c->epoll_fd);
	if (c->dir_fd >= 0) {
		remove_socket(c);
		close(c->dir_fd);
	}
	free(c);
}
