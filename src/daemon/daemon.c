// SPDX-License-Identifier: MIT
/*
 * daemon.c - the socket, the connections and the stop of `memtrack
 * daemon`; see daemon.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include "bpf_abi.h"
#include "daemon/daemon.h"
#include "daemon/pool.h"
#include "daemon/proto.h"
#include "daemon/serve.h"
#include "inspect/unwind_cache.h"
#include "record/session.h"

struct daemon {
	struct serve_env env;
	pthread_mutex_t lock; /* conns, per_uid */
	pthread_cond_t idle;  /* conns reached 0 */
	unsigned conns;
	struct {
		uid_t uid;
		unsigned n;
	} per_uid[DAEMON_MAX_CONNS];
};

struct client {
	struct daemon *d;
	int sock;
	struct ucred peer;
};

/* Under the lock: the per-uid counter of @uid, made if new (NULL: full). */
static unsigned *uid_count(struct daemon *d, uid_t uid)
{
	unsigned *free_slot = NULL;

	for (unsigned i = 0; i < DAEMON_MAX_CONNS; i++) {
		if (d->per_uid[i].n && d->per_uid[i].uid == uid)
			return &d->per_uid[i].n;
		if (!d->per_uid[i].n && !free_slot) {
			free_slot = &d->per_uid[i].n;
			d->per_uid[i].uid = uid;
		}
	}
	return free_slot;
}

static void *client_main(void *arg)
{
	struct client *cl = arg;
	struct daemon *d = cl->d;

	serve_client(&d->env, cl->sock, &cl->peer);
	pthread_mutex_lock(&d->lock);
	(*uid_count(d, cl->peer.uid))--;
	if (!--d->conns)
		pthread_cond_broadcast(&d->idle);
	pthread_mutex_unlock(&d->lock);
	free(cl);
	return NULL;
}

/* Admits a connection under the limits; false when it must be refused. */
static bool admit(struct daemon *d, uid_t uid)
{
	unsigned *n;
	bool ok;

	pthread_mutex_lock(&d->lock);
	n = uid_count(d, uid);
	ok = d->conns < DAEMON_MAX_CONNS && n && *n < DAEMON_MAX_PER_UID;
	if (ok) {
		d->conns++;
		(*n)++;
	}
	pthread_mutex_unlock(&d->lock);
	return ok;
}

static void release(struct daemon *d, uid_t uid)
{
	pthread_mutex_lock(&d->lock);
	(*uid_count(d, uid))--;
	d->conns--;
	pthread_mutex_unlock(&d->lock);
}

/* One accepted connection: authenticated, admitted, served on its thread. */
static void take_client(struct daemon *d, int sock)
{
	struct ucred peer;
	socklen_t len = sizeof(peer);
	struct timeval tv = { .tv_sec = 5 }; /* a client that reads nothing holds no send long */
	struct client *cl;
	pthread_attr_t attr;
	pthread_t t;

	if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &peer, &len) || len != sizeof(peer)) {
		close(sock);
		return;
	}
	(void)setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (!admit(d, peer.uid)) {
		(void)mtd_send_text(
			sock, MTD_REFUSED,
			"the daemon serves at most %d sessions at once, %d of one user; wait for yours to end and retry",
			DAEMON_MAX_CONNS, DAEMON_MAX_PER_UID);
		close(sock);
		return;
	}
	cl = malloc(sizeof(*cl));
	if (cl) {
		*cl = (struct client){ .d = d, .sock = sock, .peer = peer };
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		if (!pthread_create(&t, &attr, client_main, cl))
			cl = NULL;
		pthread_attr_destroy(&attr);
		if (!cl)
			return;
		free(cl);
	}
	(void)mtd_send_text(sock, MTD_REFUSED,
			    "the daemon is out of memory or threads; retry later");
	close(sock);
	release(d, peer.uid);
}

/* systemd's socket (memtrack.socket), when it passed one: fd 3.  -1: none. */
static int systemd_socket(void)
{
	const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
	int type = 0;
	socklen_t len = sizeof(type);

	if (!pid || !fds || atoi(pid) != getpid() || strcmp(fds, "1") != 0)
		return -1;
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	if (getsockopt(3, SOL_SOCKET, SO_TYPE, &type, &len) || type != SOCK_SEQPACKET)
		return -1;
	(void)fcntl(3, F_SETFD, FD_CLOEXEC);
	return 3;
}

/* Whether a daemon answers on @addr (a stale socket does not). */
static bool someone_listens(const struct sockaddr_un *addr)
{
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	bool yes;

	if (s < 0)
		return false;
	yes = !connect(s, (const struct sockaddr *)addr, sizeof(*addr));
	close(s);
	return yes;
}

/* Makes @path's directory (0755) when missing: /run/memtrack on a fresh boot. */
static int make_parent(const char *path)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char *slash;

	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return 0;
	*slash = 0;
	if (!mkdir(dir, 0755) || errno == EEXIST)
		return 0;
	return -errno;
}

/* Binds and listens on @path (0666).  Returns the fd or -errno with @err. */
static int listen_on(const char *path, char *err, size_t errlen)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	struct stat st;
	mode_t mask;
	int s, ret;

	if (strlen(path) >= sizeof(addr.sun_path)) {
		snprintf(err, errlen, "socket path '%s' is too long; give one under %zu bytes",
			 path, sizeof(addr.sun_path));
		return -ENAMETOOLONG;
	}
	memcpy(addr.sun_path, path, strlen(path) + 1);
	ret = make_parent(path);
	if (ret) {
		snprintf(err, errlen,
			 "cannot make the directory of '%s': %s; create it or give --socket PATH",
			 path, strerror(-ret));
		return ret;
	}
	if (!lstat(path, &st)) {
		if (!S_ISSOCK(st.st_mode)) {
			snprintf(
				err, errlen,
				"'%s' exists and is no socket; remove it or give another --socket PATH",
				path);
			return -EEXIST;
		}
		if (someone_listens(&addr)) {
			snprintf(
				err, errlen,
				"a memtrack daemon already listens on '%s'; stop it first (systemctl stop memtrack) or give another --socket PATH",
				path);
			return -EADDRINUSE;
		}
		unlink(path); /* stale: its daemon was killed */
	}
	s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	mask = umask(0111); /* 0666: anyone may connect, SO_PEERCRED says who */
	ret = bind(s, (struct sockaddr *)&addr, sizeof(addr)) ? -errno : 0;
	umask(mask);
	if (!ret && listen(s, 128))
		ret = -errno;
	if (ret) {
		snprintf(err, errlen, "cannot listen on '%s': %s; give a writable --socket PATH",
			 path, strerror(-ret));
		close(s);
		return ret;
	}
	return s;
}

/* Every signal that stops the daemon read through @sfd; SIGPIPE ignored. */
static int block_signals(void)
{
	sigset_t set;

	signal(SIGPIPE, SIG_IGN); /* a client's pipe closed under the writer: EPIPE */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, NULL);
	return signalfd(-1, &set, SFD_CLOEXEC);
}

/* Accepts until a stop signal (SIGHUP is read and ignored). */
static void accept_loop(struct daemon *d, int lfd, int sfd)
{
	for (;;) {
		struct pollfd p[2] = { { .fd = lfd, .events = POLLIN },
				       { .fd = sfd, .events = POLLIN } };
		struct signalfd_siginfo si;

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		if (p[1].revents && read(sfd, &si, sizeof(si)) == sizeof(si) &&
		    si.ssi_signo != SIGHUP)
			return;
		if (p[0].revents) {
			int s = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

			if (s >= 0)
				take_client(d, s);
		}
	}
}

/* The stop: every session told, waited for; then the slots unloaded. */
static void stop_all(struct daemon *d)
{
	(void)!write(d->env.stop_fd, &(uint64_t){ 1 }, sizeof(uint64_t));
	pthread_mutex_lock(&d->lock);
	while (d->conns)
		pthread_cond_wait(&d->idle, &d->lock);
	pthread_mutex_unlock(&d->lock);
}

static void daemon_defaults(struct bpf_slot_key *k)
{
	*k = (struct bpf_slot_key){
		.ring_bytes = MT_RING_DEFAULT,
		.wakeup_bytes = MT_RING_DEFAULT / 16,
		.unwind_rows = MT_UNWIND_ROWS_DEFAULT,
		.allocators = true,
		.stacks = true,			  /* track's default */
		.fast = session_fast_available(), /* and the in-process path, where installed */
	};
}

int daemon_run(const struct daemon_opts *o, const struct kernel_features *kf, char *err,
	       size_t errlen)
{
	const char *path = o->socket ? o->socket : MTD_DEFAULT_SOCKET;
	struct daemon d = { .env = { .kf = kf, .stop_fd = -1, .verbose = o->verbose } };
	struct bpf_slot_key def;
	char why[512];
	int sfd, lfd, ret = 0;
	bool ours = false;

	sfd = block_signals(); /* before any thread: they all inherit the mask */
	lfd = systemd_socket();
	if (lfd < 0) {
		lfd = listen_on(path, err, errlen);
		ours = lfd >= 0;
	}
	if (lfd < 0)
		return lfd;
	d.env.stop_fd = eventfd(0, EFD_CLOEXEC);
	pthread_mutex_init(&d.lock, NULL);
	pthread_cond_init(&d.idle, NULL);
	if (unwind_cache_open(UNWIND_CACHE_DEFAULT_DIR, &d.env.cache, why, sizeof(why)) &&
	    o->verbose)
		fprintf(stderr, "memtrack: %s\n", why);
	daemon_defaults(&def);
	d.env.pool = pool__new(kf, &def, 1);
	if (sfd < 0 || d.env.stop_fd < 0 || !d.env.pool) {
		ret = -errno;
		snprintf(err, errlen, "cannot start the daemon: %s", strerror(-ret));
	} else {
		fprintf(stderr, "memtrack: daemon listening on %s\n",
			ours ? path : "systemd's socket");
		accept_loop(&d, lfd, sfd);
	}
	/* first: no connection waits in a backlog nobody serves, a new daemon may start */
	if (ours)
		unlink(path);
	close(lfd);
	if (d.env.pool)
		stop_all(&d);
	pool__free(d.env.pool);
	unwind_cache_close(d.env.cache);
	if (d.env.stop_fd >= 0)
		close(d.env.stop_fd);
	if (sfd >= 0)
		close(sfd);
	pthread_mutex_destroy(&d.lock);
	pthread_cond_destroy(&d.idle);
	return ret;
}
