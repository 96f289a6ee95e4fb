// SPDX-License-Identifier: MIT
/*
 * memtrack_ctl.c - libmemtrack-ctl, the client side of the control socket;
 * see include/memtrack-ctl.h.  It links into the measured program, so it
 * never allocates: messages are formatted into the caller's struct, lines
 * into stack buffers.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include "memtrack-ctl.h"

#define LINE_MAX_CTL 512 /* the server's limit, "\n" included */

/* Stores a one-line error and returns @err. */
static int fail(struct memtrack_ctl *c, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->error, sizeof(c->error), fmt, ap);
	va_end(ap);
	return err;
}

int memtrack_ctl_open(struct memtrack_ctl *c, const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int err;

	c->fd = -1;
	c->error[0] = '\0';
	if (!path)
		path = getenv("MEMTRACK_CONTROL");
	if (!path || !*path)
		return fail(
			c, -ENOENT,
			"no control socket: MEMTRACK_CONTROL is not set; run the program under memtrack track --control PATH");
	if (strlen(path) >= sizeof(sa.sun_path))
		return fail(c, -ENAMETOOLONG,
			    "control socket path '%s' is too long (at most %zu bytes)", path,
			    sizeof(sa.sun_path) - 1);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		return fail(c, -errno, "cannot create a socket: %s", strerror(errno));
	if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa))) {
		err = -errno;
		close(c->fd);
		c->fd = -1;
		if (err == -ENOENT)
			return fail(
				c, err,
				"no control socket at '%s'; start memtrack track --control %s first",
				path, path);
		if (err == -ECONNREFUSED)
			return fail(
				c, err,
				"nobody listens on '%s'; the memtrack that made it has exited (remove the file)",
				path);
		if (err == -EACCES)
			return fail(
				c, err,
				"not allowed to connect to '%s'; the socket (mode 0600) belongs to the user memtrack runs the command as: connect as that user",
				path);
		return fail(
			c, err,
			"cannot connect to '%s': %s; check that it is the socket of a running memtrack track --control",
			path, strerror(-err));
	}
	/*
	 * A first line right away: memtrack disconnects a client that sends no
	 * complete line within seconds of connecting (docs/CONTROL.md), and a
	 * program may open early and send its first command much later.
	 */
	err = memtrack_ctl_ping(c);
	if (err) {
		close(c->fd);
		c->fd = -1;
	}
	return err;
}

static int send_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		buf += n;
		len -= n;
	}
	return 0;
}

/*
 * Reads one answer line into @line (NUL-terminated, no "\n").  memtrack
 * sends nothing unasked, so nothing can follow the line.
 */
static int read_line(int fd, char *line, size_t cap)
{
	size_t used = 0;
	char *nl;

	while (used < cap - 1) {
		ssize_t n = recv(fd, line + used, cap - 1 - used, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EPIPE;
		used += n;
		nl = memchr(line, '\n', used);
		if (nl) {
			*nl = '\0';
			return 0;
		}
	}
	return -EPROTO;
}

int memtrack_ctl_command(struct memtrack_ctl *c, const char *line)
{
	char buf[LINE_MAX_CTL];
	size_t len = strlen(line);
	int err;

	c->error[0] = '\0';
	if (c->fd < 0)
		return fail(c, -EBADF, "not connected; call memtrack_ctl_open() first");
	if (len + 1 >= sizeof(buf) || memchr(line, '\n', len))
		return fail(c, -EINVAL, "command too long or contains a newline");
	memcpy(buf, line, len + 1); /* with its NUL, which the newline replaces */
	buf[len] = '\n';
	err = send_all(c->fd, buf, len + 1);
	if (!err)
		err = read_line(c->fd, buf, sizeof(buf));
	if (err == -EPIPE || err == -ECONNRESET)
		return fail(c, -EPIPE, "memtrack closed the control connection (it has exited)");
	if (err)
		return fail(c, err, "control connection: %s", strerror(-err));
	if (!strcmp(buf, "ok"))
		return 0;
	if (!strncmp(buf, "error busy", 10))
		return fail(c, -EBUSY, "%s", buf + 6);
	return fail(c, -EPROTO, "%s", strncmp(buf, "error ", 6) ? buf : buf + 6);
}

int memtrack_ctl_enable(struct memtrack_ctl *c)
{
	return memtrack_ctl_command(c, "enable");
}

int memtrack_ctl_disable(struct memtrack_ctl *c)
{
	return memtrack_ctl_command(c, "disable");
}

int memtrack_ctl_ping(struct memtrack_ctl *c)
{
	return memtrack_ctl_command(c, "ping");
}

int memtrack_ctl_mark(struct memtrack_ctl *c, const char *name)
{
	char line[LINE_MAX_CTL];

	if ((size_t)snprintf(line, sizeof(line), "mark %s", name) >= sizeof(line))
		return fail(c, -EINVAL, "mark name too long (at most 255 bytes)");
	return memtrack_ctl_command(c, line);
}

const char *memtrack_ctl_error(const struct memtrack_ctl *c)
{
	return c->error;
}

void memtrack_ctl_close(struct memtrack_ctl *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}
