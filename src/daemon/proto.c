// SPDX-License-Identifier: MIT
/*
 * proto.c - the daemon's messages on the wire; see proto.h.
 */
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "daemon/proto.h"

int mtd_send(int sock, const void *msg, size_t len, const int *fds, unsigned nfds)
{
	char cbuf[CMSG_SPACE(MTD_FDS_MAX * sizeof(int))] = { 0 };
	struct iovec iov = { .iov_base = (void *)msg, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if (nfds > MTD_FDS_MAX || len > MTD_MSG_MAX)
		return -EINVAL;
	if (nfds) {
		struct cmsghdr *c;

		mh.msg_control = cbuf;
		mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
	}
	do
		n = sendmsg(sock, &mh, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EIO;
}

int mtd_send_vtext(int sock, enum mtd_type type, const char *fmt, va_list ap)
{
	char buf[1024];
	struct mtd_hdr h = mtd_hdr(type);
	int n;

	memcpy(buf, &h, sizeof(h));
	n = vsnprintf(buf + sizeof(h), sizeof(buf) - sizeof(h), fmt, ap);
	if (n < 0)
		return -EINVAL;
	if ((size_t)n >= sizeof(buf) - sizeof(h))
		n = sizeof(buf) - sizeof(h) - 1;
	return mtd_send(sock, buf, sizeof(h) + n + 1, NULL, 0);
}

int mtd_send_text(int sock, enum mtd_type type, const char *fmt, ...)
{
	va_list ap;
	int ret;

	va_start(ap, fmt);
	ret = mtd_send_vtext(sock, type, fmt, ap);
	va_end(ap);
	return ret;
}

int mtd_send_type(int sock, enum mtd_type type)
{
	struct mtd_hdr h = mtd_hdr(type);

	return mtd_send(sock, &h, sizeof(h), NULL, 0);
}

/* Takes the fds of @mh's SCM_RIGHTS messages into @fds; anything else fails. */
static int take_fds(struct msghdr *mh, int *fds, unsigned *nfds)
{
	int err = 0;

	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		size_t n;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
			err = -EBADMSG;
			continue;
		}
		n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(fd));
			if (*nfds < MTD_FDS_MAX)
				fds[(*nfds)++] = fd;
			else {
				close(fd);
				err = -EBADMSG;
			}
		}
	}
	return err;
}

static bool header_ok(const void *buf, size_t len)
{
	struct mtd_hdr h;

	if (len < sizeof(h))
		return false;
	memcpy(&h, buf, sizeof(h));
	return h.magic == MTD_MAGIC && h.version == MTD_VERSION && h.type >= MTD_START &&
	       h.type < MTD_TYPE_MAX;
}

ssize_t mtd_recv(int sock, void *buf, int timeout_ms, int *fds, unsigned *nfds)
{
	/* room for more fds than allowed, so extras are seen (and closed), not cut */
	char cbuf[CMSG_SPACE(8 * sizeof(int))] __attribute__((aligned(8)));
	struct iovec iov = { .iov_base = buf, .iov_len = MTD_MSG_MAX + 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct pollfd pfd = { .fd = sock, .events = POLLIN };
	ssize_t n;
	int err, ready;

	*nfds = 0;
	do
		ready = poll(&pfd, 1, timeout_ms);
	while (ready < 0 && errno == EINTR);
	if (ready < 0)
		return -errno;
	if (!ready)
		return -ETIMEDOUT;
	mh.msg_control = cbuf;
	mh.msg_controllen = sizeof(cbuf);
	do
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EAGAIN ? -ETIMEDOUT : -errno;
	err = take_fds(&mh, fds, nfds);
	if (!err && (mh.msg_flags & MSG_CTRUNC))
		err = -EBADMSG;
	if (!err && (mh.msg_flags & MSG_TRUNC || n > MTD_MSG_MAX))
		err = -EMSGSIZE;
	if (!err && n > 0 && !header_ok(buf, (size_t)n))
		err = -EBADMSG;
	if (!err && n == 0 && *nfds)
		err = -EBADMSG;
	if (err) {
		for (unsigned i = 0; i < *nfds; i++)
			close(fds[i]);
		*nfds = 0;
		return err;
	}
	return n;
}

const char *mtd_type_name(unsigned type)
{
	static const char *const names[MTD_TYPE_MAX] = {
		[MTD_START] = "START",	 [MTD_READY] = "READY",	  [MTD_ROOT] = "ROOT",
		[MTD_GO] = "GO",	 [MTD_EXITED] = "EXITED", [MTD_STOP] = "STOP",
		[MTD_NOTICE] = "NOTICE", [MTD_DONE] = "DONE",	  [MTD_REFUSED] = "REFUSED",
	};

	return type < MTD_TYPE_MAX && names[type] ? names[type] : "?";
}
