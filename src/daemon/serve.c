// SPDX-License-Identifier: MIT
/*
 * serve.c - one client of the daemon, from its START to its DONE; see
 * serve.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "bpf_abi.h"
#include "daemon/pool.h"
#include "daemon/proto.h"
#include "daemon/serve.h"
#include "format/artifact.h"
#include "inspect/authority.h"
#include "record/session.h"

/* How long a client may take to send its next handshake message. */
#define HANDSHAKE_MS 10000

struct conn {
	const struct serve_env *env;
	int sock;
	struct ucred peer;
	char buf[MTD_MSG_MAX + 1] __attribute__((aligned(8))); /* the last message */
	char cmd[MTD_CMD_MAX];				       /* START's command line */
	char *argv[2];
	struct mtd_start start; /* START's fixed part, checked */
	int out_fd;		/* the artifact, -1 once the session's */
	int pidfd;		/* the root's or the target's */
	pid_t pid;		/* what pidfd names */
	struct authority auth;	/* the peer's: whose processes it may record */
	struct session_opts so;
	struct bpf_slot *slot;
	struct session *s;
};

static void refuse(struct conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Sends REFUSED: one line naming the problem and the fix; the connection then ends. */
static void refuse(struct conn *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	(void)mtd_send_vtext(c->sock, MTD_REFUSED, fmt, ap);
	va_end(ap);
}

/* The session's lines, to the client (from the serving thread or the poller). */
static void conn_notice(void *ctx, const char *msg)
{
	struct conn *c = ctx;

	(void)mtd_send_text(c->sock, MTD_NOTICE, "%s", msg);
}

static bool pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

/* START's numbers in the ranges the CLI allows; NULL, or what is wrong. */
static const char *check_ranges(const struct mtd_start *st)
{
	if (st->kind != MTD_TRACK && st->kind != MTD_ATTACH)
		return "an unknown session kind";
	if (st->flags & ~MTD_F_ALL || st->pad)
		return "unknown flags";
	if (!pow2(st->ring_bytes) || st->ring_bytes < 4096 || st->ring_bytes > (1ull << 31))
		return "a ring size that is no power of two from 4K to 2G";
	if (st->wakeup_bytes > st->ring_bytes)
		return "a wakeup size beyond the ring";
	if (st->batch_bytes < 4096 || st->batch_bytes > (64u << 20))
		return "a batch size outside 4K..64M";
	if (st->batches < 2 || st->batches > 64)
		return "a batch count outside 2..64";
	if (st->flush_ms < 1 || st->flush_ms > 3600000)
		return "a flush interval outside 1..3600000 ms";
	if (st->unwind_rows && (st->unwind_rows < 1024 || st->unwind_rows > (64u << 20)))
		return "unwind rows outside 1K..64M";
	if (st->duration_ns > 10000000ull * 1000000000ull)
		return "a duration beyond 1e7 s";
	if ((st->flags & MTD_F_STACKS) && !(st->flags & MTD_F_ALLOCATORS))
		return "stacks without the allocator probes";
	if ((st->kind == MTD_TRACK) != (st->attach_pid == 0) || st->attach_pid < 0)
		return "a pid that does not fit the session kind";
	return NULL;
}

/* A user other than root takes a bounded share of the kernel's memory. */
static const char *check_user_limits(const struct mtd_start *st)
{
	if (st->ring_bytes > SERVE_USER_RING_MAX)
		return "a ring over 64M (the daemon's limit for users other than root)";
	if (st->unwind_rows > SERVE_USER_ROWS_MAX)
		return "unwind rows over 4M (the daemon's limit for users other than root)";
	return NULL;
}

/* The artifact's fd: something a write goes to (a file or pipe the client opened for writing). */
static const char *check_output(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	struct stat st;

	if (fl < 0 || fstat(fd, &st))
		return "an artifact fd that cannot be inspected";
	if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode))
		return "an artifact fd that is neither a regular file nor a pipe";
	if ((fl & O_ACCMODE) == O_RDONLY)
		return "an artifact fd not open for writing";
	return NULL;
}

/*
 * Receives and checks START with its fds (the artifact; attach: and the
 * target's pidfd).  Returns 0, or -1 after a refusal.
 */
static int read_start(struct conn *c)
{
	int fds[MTD_FDS_MAX];
	unsigned nfds, want;
	const char *bad, *fix = "use a memtrack of the same version as the daemon (" MT_VERSION ")";
	ssize_t n = mtd_recv(c->sock, c->buf, HANDSHAKE_MS, fds, &nfds);

	if (n <= 0) {
		if (n < 0)
			refuse(c,
			       "the daemon refused a malformed message (%s); use a memtrack of the same version as the daemon (%s)",
			       strerror((int)-n), MT_VERSION);
		return -1;
	}
	memcpy(&c->start, c->buf, (size_t)n < sizeof(c->start) ? (size_t)n : sizeof(c->start));
	want = c->start.kind == MTD_ATTACH ? 2 : 1;
	if (mtd_type_of(c->buf) != MTD_START || (size_t)n < sizeof(c->start) ||
	    c->start.cmd_len < 1 || c->start.cmd_len > MTD_CMD_MAX ||
	    (size_t)n != sizeof(c->start) + c->start.cmd_len || c->buf[n - 1])
		bad = "a first message that is no well-formed START";
	else if (nfds != want)
		bad = "a START without exactly its fds (the artifact; attach: and the target's pidfd)";
	else if (!(bad = check_ranges(&c->start)) && c->peer.uid &&
		 (bad = check_user_limits(&c->start)))
		fix = "choose a smaller --ring-size or --unwind-rows, or record as root with --no-daemon";
	if (!bad && nfds == want)
		bad = check_output(fds[0]);
	if (bad) {
		for (unsigned i = 0; i < nfds; i++)
			close(fds[i]);
		refuse(c, "the daemon refused the request: %s; %s", bad, fix);
		return -1;
	}
	memcpy(c->cmd, c->buf + sizeof(c->start), c->start.cmd_len);
	c->out_fd = fds[0];
	c->pidfd = want == 2 ? fds[1] : -1;
	return 0;
}

/* The session's options from START (nothing the client names is opened). */
static void build_opts(struct conn *c)
{
	const struct mtd_start *st = &c->start;
	struct session_opts *so = &c->so;

	c->argv[0] = c->cmd;
	c->argv[1] = NULL;
	*so = (struct session_opts){
		.argv = c->argv,
		.duration_ns = st->duration_ns,
		.output = "the client's artifact",
		.allocators = st->flags & MTD_F_ALLOCATORS,
		.verbose = st->flags & MTD_F_VERBOSE,
		.stacks = st->flags & MTD_F_STACKS,
		/* track only: attach has no in-process path (nothing preloads it) */
		.fast = st->kind == MTD_TRACK && (st->flags & MTD_F_FAST) &&
			(st->flags & MTD_F_ALLOCATORS) && session_fast_available(),
		.kf = c->env->kf,
		.unwind_rows = st->unwind_rows,
		.unwind_cache = st->flags & MTD_F_NO_UNWIND_CACHE ? NULL : c->env->cache,
		.ring_bytes = st->ring_bytes,
		.wakeup_bytes = st->wakeup_bytes ? st->wakeup_bytes : st->ring_bytes / 16,
		.pipe = { .batch_bytes = st->batch_bytes,
			  .batches = (unsigned)st->batches,
			  .flush_ms = (unsigned)st->flush_ms },
		.notice = conn_notice,
		.notice_ctx = c,
	};
	authority_for_client(&c->auth, c->peer.uid, c->peer.gid, c->peer.pid);
	/* attach: the tree may hold only the peer's processes, and a process
	 * leaves it at an exec or prctl that makes it no longer theirs (the BPF
	 * side, proc.bpf.c owner_may_trace); track's tree runs under
	 * PR_SET_NO_NEW_PRIVS (read_root) */
	if (st->kind == MTD_ATTACH)
		so->authority = &c->auth;
}

static struct bpf_slot_key slot_key(const struct session_opts *so)
{
	return (struct bpf_slot_key){
		.ring_bytes = so->ring_bytes,
		.wakeup_bytes = so->wakeup_bytes,
		.unwind_rows =
			so->stacks ? (so->unwind_rows ? so->unwind_rows : MT_UNWIND_ROWS_DEFAULT)
				   : 0,
		.allocators = so->allocators,
		.stacks = so->stacks,
		.fast = so->fast,
		.adopt_running = so->attach_pid != 0,
		.owner_only = so->authority && so->authority->restricted,
		.owner_uid = so->authority ? so->authority->uid : 0,
		.owner_gid = so->authority ? so->authority->gid : 0,
	};
}

/* Whether @pid is the peer's to record (ptrace's rule); -1 after a refusal saying why. */
static int check_authority(struct conn *c, pid_t pid)
{
	struct authority_creds ac = { 0 };
	enum authority_verdict v = authority_check(&c->auth, pid, &ac);
	char why[768];

	if (v == AUTH_OK)
		return 0;
	authority_explain(&c->auth, pid, v, &ac, why, sizeof(why));
	refuse(c, "%s", why);
	return -1;
}

/* A process's parent and no_new_privs flag, from /proc/PID/status.  Returns 0 or -ENOENT. */
static int read_parent(pid_t pid, pid_t *ppid, bool *nnp)
{
	char path[64], line[256];
	unsigned found = 0;
	FILE *f;
	int v;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -ENOENT;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "PPid: %d", &v) == 1) {
			*ppid = v;
			found |= 1;
		} else if (sscanf(line, "NoNewPrivs: %d", &v) == 1) {
			*nnp = v != 0;
			found |= 2;
		}
	}
	fclose(f);
	return found == 3 ? 0 : -ENOENT;
}

/* The pid a pidfd refers to, or -errno (-EBADF: no pidfd, -ESRCH: it has exited). */
static pid_t pidfd_pid(int pidfd)
{
	char path[64], line[128], link[64];
	pid_t pid = -ESRCH;
	ssize_t n;
	FILE *f;
	int v;

	/* a pidfd, not any fd a client passed (a file has no Pid: line either) */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", pidfd);
	n = readlink(path, link, sizeof(link) - 1);
	if (n < 0)
		return -EBADF;
	link[n] = 0;
	if (strcmp(link, "anon_inode:[pidfd]") != 0)
		return -EBADF;
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
	f = fopen(path, "re");
	if (!f)
		return -EBADF;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Pid: %d", &v) == 1) {
			pid = v > 0 ? v : -ESRCH; /* -1: exited; 0: in no namespace of ours */
			break;
		}
	fclose(f);
	return pid;
}

/*
 * ROOT: the pidfd of the peer's child, parked before its exec.  Returns 0
 * with c->pid set, or -1 after a refusal.
 */
static int read_root(struct conn *c)
{
	pid_t ppid = 0;
	bool nnp = false;
	unsigned nfds;
	int fds[MTD_FDS_MAX];
	ssize_t n = mtd_recv(c->sock, c->buf, HANDSHAKE_MS, fds, &nfds);

	if (n <= 0 || mtd_type_of(c->buf) != MTD_ROOT || n != sizeof(struct mtd_hdr) || nfds != 1) {
		for (unsigned i = 0; n > 0 && i < nfds; i++)
			close(fds[i]);
		if (n != 0)
			refuse(c,
			       "the daemon expected ROOT with the command's pidfd and got %s; use a memtrack of the same version as the daemon (%s)",
			       n < 0 ? strerror((int)-n) : mtd_type_name(mtd_type_of(c->buf)),
			       MT_VERSION);
		return -1;
	}
	c->pidfd = fds[0];
	c->pid = pidfd_pid(c->pidfd);
	if (c->pid <= 0) {
		refuse(c,
		       "the daemon got no live process's pidfd with ROOT; the command must be parked before its exec");
		return -1;
	}
	if (read_parent(c->pid, &ppid, &nnp) || ppid != c->peer.pid) {
		refuse(c,
		       "process %d is not the client's child; the daemon records a command the client itself forked (memtrack track), or a running one through memtrack attach",
		       (int)c->pid);
		return -1;
	}
	if (c->peer.uid && !nnp) {
		refuse(c,
		       "process %d may gain privileges by an exec (no PR_SET_NO_NEW_PRIVS); memtrack track sets it in the command it forks: use memtrack track",
		       (int)c->pid);
		return -1;
	}
	return check_authority(c, c->pid);
}

/* attach: the target's pidfd names START's pid, which the peer may record. */
static int check_target(struct conn *c)
{
	c->pid = pidfd_pid(c->pidfd);
	if (c->pid != c->start.attach_pid) {
		refuse(c,
		       "the pidfd sent with attach does not name process %d (it names %d); pass the target's own pidfd",
		       c->start.attach_pid, (int)c->pid);
		return -1;
	}
	return check_authority(c, c->pid);
}

/* Whether the pidfd's process still runs: then its pid was not reused since the checks. */
static bool still_there(int pidfd)
{
	return !syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0);
}

/* The BPF side for the session, before the client forks its command. */
static int start_session_slot(struct conn *c)
{
	struct bpf_slot_key key = slot_key(&c->so);
	char err[512] = "";

	c->slot = pool_take(c->env->pool, &key, err, sizeof(err));
	if (!c->slot) {
		refuse(c, "%s; see the daemon's log (journalctl -u memtrack)", err);
		return -1;
	}
	return 0;
}

/* The session on the slot, made before its start (a track's READY needs it). */
static int new_session(struct conn *c)
{
	if (!c->slot && start_session_slot(c))
		return -1;
	c->so.slot = c->slot;
	c->s = session__new(&c->so);
	if (!c->s) {
		refuse(c, "the daemon is out of memory; retry later");
		return -1;
	}
	return 0;
}

/* Starts the session made by new_session().  Returns 0, or -1 after a refusal. */
static int start_session(struct conn *c)
{
	char err[512] = "";
	int ret;

	ret = session_start(c->s, c->out_fd, err, sizeof(err));
	c->out_fd = -1; /* the session's */
	if (!ret && !still_there(c->pidfd)) {
		ret = -ESRCH;
		snprintf(err, sizeof(err), "process %d exited while the daemon started",
			 (int)c->pid);
	}
	if (ret) {
		session_abort(c->s);
		refuse(c, "%s", err);
		return -1;
	}
	return 0;
}

/*
 * READY, with the in-process path's environment when the session has it:
 * its socket is opened now, for the peer's uid, before the client forks.
 * A failure there is a notice, and the heap goes through the uprobes.
 */
static int send_ready(struct conn *c)
{
	char msg[sizeof(struct mtd_ready) + 2 * (size_t)MTD_PATH_MAX] __attribute__((aligned(8)));
	struct mtd_ready r = { .h = mtd_hdr(MTD_READY) };
	const char *lib = NULL, *sock = NULL;
	size_t ll = 0, sl = 0;
	char err[512];

	if (c->so.fast &&
	    session_open_fast(c->s, c->peer.uid, c->peer.gid, &lib, &sock, err, sizeof(err)))
		conn_notice(c, err);
	else if (c->so.fast) {
		ll = strlen(lib) + 1;
		sl = strlen(sock) + 1;
		r.fast = ll <= MTD_PATH_MAX && sl <= MTD_PATH_MAX;
	}
	if (!r.fast)
		return mtd_send(c->sock, &r, sizeof(r), NULL, 0);
	r.lib_len = (__u16)ll;
	r.sock_len = (__u16)sl;
	memcpy(msg, &r, sizeof(r));
	memcpy(msg + sizeof(r), lib, ll);
	memcpy(msg + sizeof(r) + ll, sock, sl);
	return mtd_send(c->sock, msg, sizeof(r) + ll + sl, NULL, 0);
}

/* What to do on a message during the session: 1 go on, 0 stop. */
static int on_message(struct conn *c, bool *root_done)
{
	int fds[MTD_FDS_MAX];
	unsigned nfds;
	ssize_t n = mtd_recv(c->sock, c->buf, 0, fds, &nfds);
	struct mtd_exited ex;

	for (unsigned i = 0; n > 0 && i < nfds; i++)
		close(fds[i]);
	if (n == -ETIMEDOUT)
		return 1;
	if (n > 0 && !nfds && mtd_type_of(c->buf) == MTD_EXITED && n == sizeof(ex) && !*root_done &&
	    c->start.kind == MTD_TRACK) {
		memcpy(&ex, c->buf, sizeof(ex));
		session_root_exited(c->s, ex.status, ex.stop != 0);
		*root_done = true;
		return !ex.stop;
	}
	if (n > 0 && !nfds && mtd_type_of(c->buf) == MTD_STOP && n == sizeof(struct mtd_hdr)) {
		session_root_exited(c->s, 0, true);
		return 0;
	}
	if (n != 0) /* garbage ends the session, recorded so far */
		refuse(c,
		       "the daemon got %s during the session and ended it; use a memtrack of the same version as the daemon (%s)",
		       n < 0 ? strerror((int)-n) : mtd_type_name(mtd_type_of(c->buf)), MT_VERSION);
	session_root_exited(c->s, 0, true); /* the client is gone: nobody waits for the tree */
	return 0;
}

/*
 * Until the session ends: track, the root's exit (EXITED) and then the
 * tree's; attach, the tree's end or --duration; either, STOP, the client
 * gone, garbage, or the daemon stopping.
 */
static void wait_session(struct conn *c)
{
	uint64_t deadline = c->start.duration_ns ? mono_ns() + c->start.duration_ns : UINT64_MAX;
	bool root_done = false;

	for (;;) {
		struct pollfd p[2] = { { .fd = c->sock, .events = POLLIN },
				       { .fd = c->env->stop_fd, .events = POLLIN } };
		bool tree_watch = root_done || c->start.kind == MTD_ATTACH;

		if (tree_watch && !session_tree_alive(c->s))
			return;
		if (mono_ns() >= deadline)
			return;
		if (poll(p, 2, tree_watch ? 20 : -1) < 0 && errno != EINTR)
			return;
		if (p[1].revents) {
			session_root_exited(c->s, 0, true);
			return;
		}
		if (p[0].revents && !on_message(c, &root_done))
			return;
	}
}

/* The session's end: the artifact finished, DONE with what the summary needs. */
static void finish(struct conn *c)
{
	struct mt_trailer t = { 0 };
	struct session_stats st;
	struct mtd_done d = { .h = mtd_hdr(MTD_DONE) };
	int ret;

	d.err = session_finish(c->s, &t);
	session_stats(c->s, &st);
	d.unprobed_errno = st.unprobed_errno;
	d.events = st.events;
	memcpy(d.dropped, t.dropped, sizeof(d.dropped));
	d.unprobed = t.unprobed;
	d.run_ns = st.t_exited - st.t_loaded;
	d.root_probed_ns = st.t_root_probed - st.t_attach;
	d.all_probed_ns = st.t_all_probed - st.t_attach;
	d.attached_procs = st.attached_procs;
	d.tree_exited =
		st.tree_exited || (c->start.kind == MTD_ATTACH && !session_tree_alive(c->s));
	ret = mtd_send(c->sock, &d, sizeof(d), NULL, 0);
	if (ret && c->env->verbose)
		fprintf(stderr, "memtrack: cannot tell uid %u its session ended: %s\n", c->peer.uid,
			strerror(-ret));
}

static int serve_track(struct conn *c)
{
	if (new_session(c) || send_ready(c) || read_root(c))
		return -1;
	session_set_root(c->s, c->pid);
	if (start_session(c))
		return -1;
	return mtd_send_type(c->sock, MTD_GO) ? -1 : 0;
}

static int serve_attach(struct conn *c)
{
	struct mtd_go go = { .h = mtd_hdr(MTD_GO) };
	struct session_stats st;

	if (check_target(c))
		return -1;
	c->so.attach_pid = c->pid;
	if (new_session(c) || start_session(c))
		return -1;
	session_stats(c->s, &st);
	go.attached_procs = st.attached_procs;
	return mtd_send(c->sock, &go, sizeof(go), NULL, 0) ? -1 : 0;
}

void serve_client(const struct serve_env *env, int sock, const struct ucred *peer)
{
	struct conn *c = calloc(1, sizeof(*c));
	int ret = -1;

	if (!c) {
		close(sock);
		return;
	}
	*c = (struct conn){ .env = env, .sock = sock, .peer = *peer, .out_fd = -1, .pidfd = -1 };
	if (!read_start(c)) {
		build_opts(c);
		ret = c->start.kind == MTD_TRACK ? serve_track(c) : serve_attach(c);
	}
	if (!ret) {
		wait_session(c);
		pool_giving(env->pool, c->slot); /* before the client is told: it may come again */
		finish(c);
	}
	if (env->verbose)
		fprintf(stderr, "memtrack: session of uid %u pid %d (%s): %s\n", peer->uid,
			(int)peer->pid, c->cmd, ret ? "refused" : "done");
	session__free(c->s);
	pool_give(env->pool, c->slot);
	if (c->out_fd >= 0)
		close(c->out_fd);
	if (c->pidfd >= 0)
		close(c->pidfd);
	close(sock);
	free(c);
}
