// SPDX-License-Identifier: MIT
/* as_user.c - file-system operations done as the invoking user; see as_user.h. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include "util/as_user.h"

#define MAX_GROUPS 1024 /* more than a user has; getgrouplist's extra are dropped */

/* The sudo invoker, read once (as_user_prepare). */
static struct {
	bool sudo;
	uid_t uid;
	gid_t gid;
	int ngroups;
	gid_t *groups; /* with ngroups 0 the user keeps only gid */
	int err;
} invoker;
static pthread_once_t invoker_once = PTHREAD_ONCE_INIT;

bool sudo_invoker(uid_t *uid, gid_t *gid)
{
	const char *u = getenv("SUDO_UID"), *g = getenv("SUDO_GID");
	char *end;
	long lu, lg;

	if (geteuid() != 0 || !u || !g)
		return false;
	lu = strtol(u, &end, 10);
	if (*end || lu <= 0)
		return false;
	lg = strtol(g, &end, 10);
	if (*end || lg < 0)
		return false;
	*uid = lu;
	*gid = lg;
	return true;
}

static void read_invoker(void)
{
	struct passwd *pw;
	int n = MAX_GROUPS;

	invoker.sudo = sudo_invoker(&invoker.uid, &invoker.gid);
	if (!invoker.sudo)
		return;
	pw = getpwuid(invoker.uid);
	if (!pw)
		return; /* no passwd entry: no supplementary groups, as initgroups would fail */
	invoker.groups = calloc(MAX_GROUPS, sizeof(gid_t));
	if (!invoker.groups) {
		invoker.err = -ENOMEM;
		return;
	}
	if (getgrouplist(pw->pw_name, invoker.gid, invoker.groups, &n) < 0)
		n = MAX_GROUPS; /* the first MAX_GROUPS */
	invoker.ngroups = n;
}

int as_user_prepare(void)
{
	pthread_once(&invoker_once, read_invoker);
	return invoker.err;
}

uid_t as_user_uid(void)
{
	if (as_user_prepare() || !invoker.sudo)
		return geteuid();
	return invoker.uid;
}

int as_user_become(void)
{
	if (!invoker.sudo)
		return 0;
	/*
	 * The raw system calls: glibc's wrappers would signal every thread of
	 * the process under a lock (setxid), which a child forked from
	 * memtrack's threads has no business touching; here there is one
	 * thread, and the raw calls change exactly it.
	 */
	if (syscall(SYS_setgroups, invoker.ngroups, invoker.groups) ||
	    syscall(SYS_setresgid, invoker.gid, invoker.gid, invoker.gid) ||
	    syscall(SYS_setresuid, invoker.uid, invoker.uid, invoker.uid))
		return -errno;
	return 0;
}

/* One operation, run by the invoker's child (or directly). */
enum op_kind { OP_OPEN, OP_MKDIR, OP_RENAME, OP_UNLINK, OP_BIND, OP_PLACE };

struct op {
	enum op_kind kind;
	int dirfd;
	const char *a, *b; /* names under dirfd */
	int flags;
	mode_t mode;
	int sock;
};

/* Writes ".memtrack-" and 8 random hex digits to @name (async-signal-safe). */
static void temp_socket_name(char name[20])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char r[4] = { 0 };

	if (getrandom(r, sizeof(r), GRND_NONBLOCK) != sizeof(r)) {
		pid_t pid = getpid(); /* unique among live processes: good enough */

		memcpy(r, &pid, sizeof(r));
	}
	memcpy(name, ".memtrack-", 10);
	for (int i = 0; i < 4; i++) {
		name[10 + 2 * i] = hex[r[i] >> 4];
		name[11 + 2 * i] = hex[r[i] & 15];
	}
	name[18] = 0;
}

/*
 * OP_BIND: bind() has no "at" form, so this process's cwd becomes the
 * directory, and its umask the socket's mode.  0 or -errno.
 */
static int bind_op(const struct op *op)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	umask(0177);
	if (fchdir(op->dirfd))
		return -errno;
	memcpy(sa.sun_path, op->a, strlen(op->a) + 1);
	return bind(op->sock, (struct sockaddr *)&sa, sizeof(sa)) ? -errno : 0;
}

/* OP_PLACE: @op->a takes the name @op->b, which it never replaces.  0 or -errno. */
static int place_op(const struct op *op)
{
	int ret = 0;

	if (syscall(SYS_renameat2, op->dirfd, op->a, op->dirfd, op->b, RENAME_NOREPLACE)) {
		ret = -errno;
		/* a file system without RENAME_NOREPLACE: a hard link never replaces either */
		if (ret == -EINVAL)
			ret = linkat(op->dirfd, op->a, op->dirfd, op->b, 0) ? -errno : 0;
		unlinkat(op->dirfd, op->a, 0);
	}
	return ret;
}

/* The operation itself: async-signal-safe calls only.  An fd or 0, or -errno. */
static int do_op(const struct op *op)
{
	int ret;

	switch (op->kind) {
	case OP_OPEN:
		ret = openat(op->dirfd, op->a, op->flags | O_NOFOLLOW | O_CLOEXEC, op->mode);
		break;
	case OP_MKDIR: ret = mkdirat(op->dirfd, op->a, op->mode); break;
	case OP_RENAME: ret = renameat(op->dirfd, op->a, op->dirfd, op->b); break;
	case OP_UNLINK: ret = unlinkat(op->dirfd, op->a, 0); break;
	case OP_BIND: return bind_op(op);
	case OP_PLACE: return place_op(op);
	default: return -EINVAL;
	}
	return ret < 0 ? -errno : ret;
}

/* Child: sends @res, and the fd @res is when @pass_fd, over @sock. */
static void send_result(int sock, int res, bool pass_fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	int word = pass_fd && res >= 0 ? 0 : res;
	struct iovec iov = { .iov_base = &word, .iov_len = sizeof(word) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (pass_fd && res >= 0) {
		struct cmsghdr *cm;

		msg.msg_control = cbuf;
		msg.msg_controllen = sizeof(cbuf);
		cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &res, sizeof(int));
	}
	if (sendmsg(sock, &msg, MSG_NOSIGNAL) < 0) {
		/* the parent sees EOF: -ECHILD */
	}
}

/* Parent: the child's answer (an fd when @want_fd), or -ECHILD when it sent none. */
static int recv_result(int sock, bool want_fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	int word = -ECHILD, fd = -1;
	struct iovec iov = { .iov_base = &word, .iov_len = sizeof(word) };
	struct msghdr msg = { .msg_iov = &iov,
			      .msg_iovlen = 1,
			      .msg_control = cbuf,
			      .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm;
	ssize_t n;

	do
		n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n != sizeof(word))
		return -ECHILD;
	cm = CMSG_FIRSTHDR(&msg);
	if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
		memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	if (word < 0 || !want_fd) {
		if (fd >= 0)
			close(fd);
		return word;
	}
	return fd >= 0 ? fd : -ECHILD;
}

/* Runs @op in a child that became the invoker (itself when not under sudo). */
static int run_in_child(const struct op *op)
{
	bool want_fd = op->kind == OP_OPEN;
	int sv[2], ret;
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return -errno;
	pid = fork();
	if (pid < 0) {
		ret = -errno;
		close(sv[0]);
		close(sv[1]);
		return ret;
	}
	if (pid == 0) {
		close(sv[0]);
		ret = as_user_become();
		send_result(sv[1], ret ? ret : do_op(op), want_fd);
		_exit(0);
	}
	close(sv[1]);
	ret = recv_result(sv[0], want_fd);
	close(sv[0]);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
	}
	return ret;
}

/*
 * Runs @op as the invoker.  Plain root runs it directly, but for a bind,
 * whose umask and cwd would be memtrack's (process-wide, other threads
 * create files): that one always runs in a child.
 */
static int run_op(const struct op *op)
{
	int err = as_user_prepare();

	if (err)
		return err;
	if (!invoker.sudo && op->kind != OP_BIND)
		return do_op(op);
	return run_in_child(op);
}

int as_user_open_dir(const char *path, const char **base)
{
	const char *slash = strrchr(path, '/');
	char dir[4096];

	*base = slash ? slash + 1 : path;
	if (!**base)
		return -EINVAL;
	/*
	 * The directory part is followed as given (the caller named it; "/."
	 * keeps O_NOFOLLOW off its last link): only the file itself is not.
	 */
	if (snprintf(dir, sizeof(dir), "%.*s/.", slash ? (int)(slash - path) : 1,
		     slash ? path : ".") >= (int)sizeof(dir))
		return -ENAMETOOLONG;
	return run_op(&(struct op){
		.kind = OP_OPEN, .dirfd = AT_FDCWD, .a = dir, .flags = O_PATH | O_DIRECTORY });
}

int as_user_openat(int dirfd, const char *name, int flags, mode_t mode)
{
	return run_op(&(struct op){
		.kind = OP_OPEN, .dirfd = dirfd, .a = name, .flags = flags, .mode = mode });
}

int as_user_mkstempat(int dirfd, char *templ, int flags)
{
	static const char chars[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
	size_t len = strlen(templ);
	unsigned char rnd[6];
	int fd = -EEXIST;

	if (len < 6 || strcmp(templ + len - 6, "XXXXXX") != 0)
		return -EINVAL;
	for (int tries = 0; tries < 100 && fd == -EEXIST; tries++) {
		if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
			return -errno;
		for (int i = 0; i < 6; i++)
			templ[len - 6 + i] = chars[rnd[i] % (sizeof(chars) - 1)];
		fd = as_user_openat(dirfd, templ, O_RDWR | O_CREAT | O_EXCL | flags, 0600);
	}
	return fd;
}

int as_user_mkdirat(int dirfd, const char *name, mode_t mode)
{
	return run_op(&(struct op){ .kind = OP_MKDIR, .dirfd = dirfd, .a = name, .mode = mode });
}

int as_user_renameat(int dirfd, const char *from, const char *to)
{
	return run_op(&(struct op){ .kind = OP_RENAME, .dirfd = dirfd, .a = from, .b = to });
}

int as_user_unlinkat(int dirfd, const char *name)
{
	return run_op(&(struct op){ .kind = OP_UNLINK, .dirfd = dirfd, .a = name });
}

/*
 * Bound under a temporary name (by the invoker), listening, then renamed
 * into place: a client that sees @name is never refused.  The listen()
 * is this process's own, so that SO_PEERCRED names memtrack (the pid a
 * second session's "another memtrack session (pid N)" reports), not the
 * child that bound it.
 */
int as_user_listenat(int dirfd, int sock, const char *name, int backlog)
{
	char tmp[20];
	int ret, tries = 0;

	do {
		temp_socket_name(tmp);
		ret = run_op(
			&(struct op){ .kind = OP_BIND, .dirfd = dirfd, .a = tmp, .sock = sock });
	} while (ret == -EADDRINUSE && ++tries < 8);
	if (ret)
		return ret;
	if (listen(sock, backlog)) {
		ret = -errno;
		as_user_unlinkat(dirfd, tmp);
		return ret;
	}
	return run_op(&(struct op){ .kind = OP_PLACE, .dirfd = dirfd, .a = tmp, .b = name });
}
