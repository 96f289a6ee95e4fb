// SPDX-License-Identifier: MIT
/*
 * client.c - track and attach through the daemon; see client.h.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "daemon/client.h"
#include "daemon/proto.h"
#include "fast/fast_ring.h"
#include "pipeline/pipeline.h"
#include "record/spawn.h"

/* How long the daemon may take to answer a step (a load on a cold pool included). */
#define ANSWER_MS 120000

struct client {
	int sock;
	const struct session_opts *so;
	char buf[MTD_MSG_MAX + 1] __attribute__((aligned(8)));
	sigset_t old_mask; /* the mask before the handlers: the command's */
	bool signalled;
};

static void __attribute__((format(printf, 2, 3))) say(const struct client *c, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	c->so->notice(c->so->notice_ctx, msg);
}

int client_connect(const char *path)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	int s, err;

	if (strlen(path) >= sizeof(addr.sun_path))
		return -ENAMETOOLONG;
	memcpy(addr.sun_path, path, strlen(path) + 1);
	s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	if (connect(s, (struct sockaddr *)&addr, sizeof(addr))) {
		err = -errno;
		close(s);
		return err;
	}
	return s;
}

static volatile sig_atomic_t pending_signal;

static void on_signal(int sig)
{
	if (sig != SIGCHLD)
		pending_signal = sig;
}

/* The handlers, with the signals blocked except inside ppoll (none is lost). */
static void install_signals(struct client *c)
{
	struct sigaction sa = { .sa_handler = on_signal };
	const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGCHLD };
	sigset_t block;

	sigemptyset(&sa.sa_mask);
	sigemptyset(&block);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		sigaction(sigs[i], &sa, NULL);
		sigaddset(&block, sigs[i]);
	}
	sigprocmask(SIG_BLOCK, &block, &c->old_mask);
}

/* A NOTICE's or REFUSED's text (the daemon's: bounded, NUL-terminated here). */
static const char *text_of(struct client *c, ssize_t n)
{
	c->buf[n < (ssize_t)sizeof(c->buf) ? n : (ssize_t)sizeof(c->buf) - 1] = 0;
	return c->buf + sizeof(struct mtd_hdr);
}

/*
 * Reads messages until one of @want (NOTICEs are shown on the way).
 * Returns its length, or -1 after a message (REFUSED, the end of the
 * connection, a malformed answer).
 */
static ssize_t await(struct client *c, enum mtd_type want)
{
	for (;;) {
		int fds[MTD_FDS_MAX];
		unsigned nfds;
		ssize_t n = mtd_recv(c->sock, c->buf, ANSWER_MS, fds, &nfds);

		for (unsigned i = 0; n > 0 && i < nfds; i++)
			close(fds[i]); /* the daemon sends none */
		if (n > 0 && mtd_type_of(c->buf) == MTD_NOTICE) {
			say(c, "%s", text_of(c, n));
			continue;
		}
		if (n > 0 && mtd_type_of(c->buf) == MTD_REFUSED) {
			say(c, "%s", text_of(c, n));
			return -1;
		}
		if (n > 0 && mtd_type_of(c->buf) == want)
			return n;
		if (n == 0)
			say(c,
			    "the memtrack daemon closed the connection before %s (it stopped or was killed); retry, or run memtrack as root with --no-daemon",
			    mtd_type_name(want));
		else
			say(c,
			    "the memtrack daemon's answer was not %s (%s); client and daemon must be the same memtrack version",
			    mtd_type_name(want),
			    n < 0 ? strerror((int)-n) : mtd_type_name(mtd_type_of(c->buf)));
		return -1;
	}
}

/* The argv joined for the artifact's header (bounded like the header's field). */
static size_t join_cmd(char *dst, size_t len, char *const *argv)
{
	size_t used = 0;

	dst[0] = 0;
	for (int i = 0; argv && argv[i] && used + 1 < len; i++) {
		int n = snprintf(dst + used, len - used, "%s%s", i ? " " : "", argv[i]);

		used = n < 0 || used + n >= len ? len - 1 : used + n;
	}
	return used + 1;
}

static int send_start(struct client *c, enum mtd_kind kind, const char *cmd, const int *fds,
		      unsigned nfds)
{
	const struct session_opts *so = c->so;
	char msg[sizeof(struct mtd_start) + MTD_CMD_MAX] __attribute__((aligned(8)));
	struct mtd_start st = {
		.h = mtd_hdr(MTD_START),
		.kind = kind,
		.flags = (so->allocators ? MTD_F_ALLOCATORS : 0) | (so->stacks ? MTD_F_STACKS : 0) |
			 (so->verbose ? MTD_F_VERBOSE : 0) | (so->fast ? MTD_F_FAST : 0) |
			 (so->stacks && !so->unwind_cache_dir ? MTD_F_NO_UNWIND_CACHE : 0),
		.ring_bytes = so->ring_bytes,
		.wakeup_bytes = so->wakeup_bytes,
		.batch_bytes = so->pipe.batch_bytes,
		.batches = so->pipe.batches,
		.flush_ms = so->pipe.flush_ms,
		.duration_ns = so->duration_ns,
		.unwind_rows = so->unwind_rows,
		.attach_pid = so->attach_pid,
		.cmd_len = (__u32)strlen(cmd) + 1,
	};

	memcpy(msg, &st, sizeof(st));
	memcpy(msg + sizeof(st), cmd, st.cmd_len);
	return mtd_send(c->sock, msg, sizeof(st) + st.cmd_len, fds, nfds);
}

/* DONE into @res. */
static void take_done(struct client *c, ssize_t n, struct client_result *res)
{
	struct mtd_done d;

	if ((size_t)n != sizeof(d)) {
		say(c,
		    "the memtrack daemon's DONE is malformed; client and daemon must be the same memtrack version");
		res->lost = true;
		return;
	}
	memcpy(&d, c->buf, sizeof(d));
	res->finish_err = d.err;
	res->st.events = d.events;
	res->st.unprobed_errno = d.unprobed_errno;
	memcpy(res->t.dropped, d.dropped, sizeof(d.dropped));
	res->t.unprobed = d.unprobed;
	res->st.t_loaded = 0;
	res->st.t_exited = d.run_ns;
	res->st.t_attach = 0;
	res->st.t_root_probed = d.root_probed_ns;
	res->st.t_all_probed = d.all_probed_ns;
	res->st.attached_procs = d.attached_procs;
	res->st.tree_exited = d.tree_exited;
}

/*
 * During the recording: messages of the daemon (NOTICEs, DONE, the end of
 * the connection), and the signals.  Returns 1 on DONE, 0 on the
 * daemon's loss, -1 when neither came (a signal or the child: go on).
 */
static int poll_daemon(struct client *c, int timeout_ms, struct client_result *res)
{
	struct pollfd p = { .fd = c->sock, .events = POLLIN };
	struct timespec ts = { timeout_ms / 1000, (timeout_ms % 1000) * 1000000L };
	ssize_t n;
	int fds[MTD_FDS_MAX];
	unsigned nfds;

	if (ppoll(&p, 1, timeout_ms < 0 ? NULL : &ts, &c->old_mask) <= 0)
		return -1;
	n = mtd_recv(c->sock, c->buf, 0, fds, &nfds);
	for (unsigned i = 0; n > 0 && i < nfds; i++)
		close(fds[i]);
	if (n == -ETIMEDOUT)
		return -1;
	if (n > 0 && mtd_type_of(c->buf) == MTD_NOTICE) {
		say(c, "%s", text_of(c, n));
		return -1;
	}
	if (n > 0 && mtd_type_of(c->buf) == MTD_DONE) {
		take_done(c, n, res);
		return 1;
	}
	if (n > 0 && mtd_type_of(c->buf) == MTD_REFUSED)
		say(c, "%s", text_of(c, n));
	res->lost = true;
	return 0;
}

static int send_exited(struct client *c, int status, bool stop)
{
	struct mtd_exited ex = { .h = mtd_hdr(MTD_EXITED), .status = status, .stop = stop };

	return mtd_send(c->sock, &ex, sizeof(ex), NULL, 0);
}

/* Forwards a pending signal to the running root (as track does without the daemon). */
static void forward_signal(struct client *c, pid_t root, bool root_done)
{
	int sig = pending_signal;

	pending_signal = 0;
	if (!sig)
		return;
	c->signalled = true;
	if (!root_done)
		kill(root, sig);
}

/*
 * The released command's run: waits for the root (its parent), tells the
 * daemon, and waits for DONE; a lost daemon is reported and the root still
 * waited for.
 */
static void run_track(struct client *c, pid_t root, struct client_result *res)
{
	bool root_done = false, told = false, gone = false;

	for (;;) {
		int r;

		forward_signal(c, root, root_done);
		if (!root_done && waitpid(root, &res->st.status, WNOHANG) == root)
			root_done = true;
		if (root_done && !told && !gone) {
			told = !send_exited(c, res->st.status, c->signalled);
			gone = !told;
		}
		if (root_done && gone)
			break;
		if (gone) { /* the daemon is lost: the command runs on, waited for */
			sigset_t wait_set = c->old_mask;
			struct timespec tick = { 0, 20 * 1000000L };

			pselect(0, NULL, NULL, NULL, &tick, &wait_set);
			continue;
		}
		r = poll_daemon(c, 20, res);
		if (r == 1)
			break;
		if (r == 0)
			gone = true;
	}
	res->lost = gone || res->lost;
	if (!root_done) /* DONE before the root's end: the daemon stopped; wait for it */
		while (waitpid(root, &res->st.status, 0) < 0 && errno == EINTR)
			forward_signal(c, root, false);
	res->st.signalled = c->signalled;
}

/*
 * READY's in-process path, if it has one, into @env (the user's own
 * environment with the library first in LD_PRELOAD and the socket in
 * MEMTRACK_FAST_SOCKET).  Returns 0, or -1 (reported) on a malformed READY.
 */
static int take_ready(struct client *c, ssize_t n, struct spawn_env *env)
{
	struct mtd_ready r;
	const char *lib, *sock;

	if ((size_t)n < sizeof(r))
		goto bad;
	memcpy(&r, c->buf, sizeof(r));
	if (!r.fast && (size_t)n == sizeof(r))
		return 0; /* the heap through the uprobes */
	if (r.fast != 1 || r.lib_len < 1 || r.lib_len > MTD_PATH_MAX || r.sock_len < 1 ||
	    r.sock_len > MTD_PATH_MAX || (size_t)n != sizeof(r) + r.lib_len + r.sock_len)
		goto bad;
	lib = c->buf + sizeof(r);
	sock = lib + r.lib_len;
	if (lib[r.lib_len - 1] || sock[r.sock_len - 1])
		goto bad;
	if (spawn_env_init(env) || spawn_env_prepend(env, "LD_PRELOAD", lib, ':') ||
	    spawn_env_set(env, MT_FAST_SOCKET_ENV, sock)) {
		say(c, "out of memory");
		return -1;
	}
	return 0;
bad:
	say(c,
	    "the memtrack daemon's READY is malformed; client and daemon must be the same memtrack version");
	return -1;
}

/* The root forked parked, its pidfd sent, GO awaited.  Returns 0 or -1 (reported). */
static int start_root(struct client *c, struct spawn *child, const struct spawn_env *env)
{
	int pidfd, ret;

	/* as the user: an exec in the tree never gains privileges, as the daemon requires */
	if (geteuid() && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) {
		say(c, "cannot set no_new_privs: %s", strerror(errno));
		return -1;
	}
	child->envp = env->vars; /* NULL: the user's own environment */
	ret = spawn_parked(child, c->so->argv, c->so->shell, false, &c->old_mask);
	if (ret) {
		say(c, "cannot start the command: %s", strerror(-ret));
		return -1;
	}
	pidfd = (int)syscall(SYS_pidfd_open, child->pid, 0);
	if (pidfd < 0) {
		say(c, "cannot open a pidfd of the command: %s; this needs Linux 5.3",
		    strerror(errno));
		return -1;
	}
	ret = mtd_send(
		c->sock,
		&(struct mtd_hdr){ .magic = MTD_MAGIC, .version = MTD_VERSION, .type = MTD_ROOT },
		sizeof(struct mtd_hdr), &pidfd, 1);
	close(pidfd);
	if (ret) {
		say(c, "cannot reach the memtrack daemon: %s", strerror(-ret));
		return -1;
	}
	return await(c, MTD_GO) < 0 ? -1 : 0;
}

/* A session's client on @sock (closed here if none can be made), its signals caught. */
static struct client *client_new(int sock, const struct session_opts *so, struct client_result *res)
{
	struct client *c = calloc(1, sizeof(*c));

	memset(res, 0, sizeof(*res));
	if (!c) {
		close(sock);
		return NULL;
	}
	c->sock = sock;
	c->so = so;
	install_signals(c);
	return c;
}

int client_track(int sock, const struct session_opts *so, int out_fd, void (*placed)(void *ctx),
		 void *ctx, struct client_result *res)
{
	struct client *c = client_new(sock, so, res);
	struct spawn child = { .pid = -1, .release_fd = -1, .status_fd = -1 };
	struct spawn_env env = { 0 };
	char cmd[MTD_CMD_MAX];
	int ret = -1;
	ssize_t n;

	if (!c)
		return -1;
	join_cmd(cmd, sizeof(cmd), so->argv);
	ret = send_start(c, MTD_TRACK, cmd, &out_fd, 1);
	if (ret) {
		say(c, "cannot reach the memtrack daemon: %s", strerror(-ret));
		ret = -1;
		goto out;
	}
	ret = -1;
	n = await(c, MTD_READY);
	if (n < 0 || take_ready(c, n, &env) || start_root(c, &child, &env)) {
		spawn_abort(&child); /* before its exec: nothing ran */
		goto out;
	}
	ret = 0;
	res->exec_err = spawn_release(&child);
	if (res->exec_err) { /* the child exits 127: nothing ran */
		waitpid(child.pid, NULL, 0);
		(void)send_exited(c, 127 << 8, true);
		goto out;
	}
	placed(ctx);
	run_track(c, child.pid, res);
out:
	spawn_env_free(&env);
	sigprocmask(SIG_SETMASK, &c->old_mask, NULL);
	close(sock);
	free(c);
	return ret;
}

int client_attach(int sock, const struct session_opts *so, int out_fd,
		  void (*started)(void *ctx, unsigned procs), void *ctx, struct client_result *res)
{
	struct client *c = client_new(sock, so, res);
	struct mtd_go go;
	char cmd[MTD_CMD_MAX];
	int fds[2] = { out_fd, -1 }, ret = -1, r = -1;
	ssize_t n;

	if (!c)
		return -1;
	snprintf(cmd, sizeof(cmd), "attach %d", (int)so->attach_pid);
	fds[1] = (int)syscall(SYS_pidfd_open, so->attach_pid, 0);
	if (fds[1] < 0) {
		say(c, "no process %d; give the PID of a running process (see ps or pidof)",
		    (int)so->attach_pid);
		goto out;
	}
	r = send_start(c, MTD_ATTACH, cmd, fds, 2);
	if (r) {
		say(c, "cannot reach the memtrack daemon: %s", strerror(-r));
		goto out;
	}
	n = await(c, MTD_GO);
	if (n < 0)
		goto out;
	memcpy(&go, c->buf, sizeof(go) <= (size_t)n ? sizeof(go) : (size_t)n);
	started(ctx, go.attached_procs);
	ret = 0;
	while ((r = poll_daemon(c, 100, res)) < 0)
		if (pending_signal) {
			pending_signal = 0;
			c->signalled = true;
			if (mtd_send_type(c->sock, MTD_STOP))
				break;
		}
	res->lost = r != 1;
	res->st.signalled = c->signalled;
out:
	if (fds[1] >= 0)
		close(fds[1]);
	sigprocmask(SIG_SETMASK, &c->old_mask, NULL);
	close(sock);
	free(c);
	return ret;
}
