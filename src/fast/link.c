// SPDX-License-Identifier: MIT
/*
 * session.c - libmemtrack-fast.so's side of a process: its ring, its
 * connection to memtrack, and the handover from the uprobes (see
 * fast_ring.h and fast.bpf.c).
 *
 * At load (and in a fork child, before fork returns) the library makes a
 * ring (a memfd, sealed at its size: memtrack maps no other), sends it to
 * memtrack over the socket named by
 * MEMTRACK_FAST_SOCKET, waits for memtrack to accept it (memtrack says yes
 * only for a process of its tree), and then announces with the marker
 * prctl: from that syscall on, this process's outermost heap calls are
 * recorded here and the uprobes ignore them.  Any failure before the
 * announcement leaves the process to the uprobes, which never stopped.
 *
 * Nothing here allocates or takes a lock: it runs before the program's
 * constructors, inside malloc, in fork children and in signal handlers.
 * THREAD NOTES: fast_record() is called by any thread; the ring is
 * multi-producer (fast_ring.h).  setup runs single-threaded (the
 * constructor, the atfork child handler).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include "bpf_abi.h"
#include "fast/fast_lib.h"
#include "fast/fast_ring.h"
#include "fast/next_sym.h"

volatile int fast_recording;

/* Where a call is on until the answer maps memtrack's switch. */
static const uint32_t always_on = 1;
const volatile uint32_t *fast_heap_switch = &always_on;


/*
 * vfork(): the child runs on this process's memory, library included, but
 * is a process of its own that never announced: its calls belong to the
 * uprobes (attached to it when it was parked at vfork).  Our vfork raises
 * this flag and jumps to libc's (a jump, not a call: the child must return
 * straight to the program); while it is up, a call whose getpid() is not
 * ours is left alone, and the first call of ours lowers it.  posix_spawn's
 * child (glibc's own clone) does not allocate.
 */
HIDDEN volatile uint32_t fast_vfork_flag;
HIDDEN void *fast_real_vfork;

__asm__(".text\n"
	".globl vfork\n"
	".type vfork, @function\n"
	"vfork:\n"
	"	movl $1, fast_vfork_flag(%rip)\n"
	"	jmp *fast_real_vfork(%rip)\n"
	".size vfork, .-vfork\n");

static struct {
	void *ring;		    /* MT_FAST_RING_BYTES, shared with memtrack */
	struct mt_fast_slot *slots; /* in ring */
	struct mt_fast_hdr *hdr;    /* in ring */
	int sock;		    /* to memtrack, -1 if none (or no longer ours) */
	dev_t sock_dev;		    /* what sock was when it was made (see sock_ours) */
	ino_t sock_ino;
	pid_t memtrack_pid; /* the socket's other end (SO_PEERCRED), 0: unknown */
	pid_t pid;	    /* the process that announced */
	void *switch_map;   /* memtrack's .data map, mapped by accepted() */
	size_t switch_bytes;
} S = { .sock = -1 };

static __thread pid_t tls_tid TLS_IE;

/*
 * Whether S.sock is still the socket made (fstat identity): the program
 * may close every fd (closefrom, close_range) and reuse the number for
 * its own files or sockets, or dup2 over it.  Once it is not, it is
 * forgotten (never closed: the number is the program's now) and the
 * process records on without it: memtrack reads the ring while the image
 * lives (fast_drain.c), so only the wakeups and the end's notice are
 * lost.  A program that closes and reuses the number between this check
 * and the use (another thread, in that window) is not caught.
 */
static bool sock_ours(void)
{
	struct stat st;

	if (S.sock < 0)
		return false;
	if (!fstat(S.sock, &st) && st.st_dev == S.sock_dev && st.st_ino == S.sock_ino)
		return true;
	S.sock = -1;
	return false;
}

/* Tells memtrack's poller to drain now (a byte on the socket; never blocks). */
static void poke(void)
{
	ssize_t n;

	if (!sock_ours())
		return; /* memtrack drains on its own timer */
	do
		n = send(S.sock, "w", 1, MSG_DONTWAIT | MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	/* a full socket buffer (EAGAIN): memtrack has a wakeup pending anyway */
}

/* Whether memtrack's process is gone (asked when the socket is lost). */
static bool memtrack_exited(void)
{
	return S.memtrack_pid > 0 && kill(S.memtrack_pid, 0) && errno == ESRCH;
}

/*
 * Whether memtrack stopped reading the ring: it said so in the header
 * (it unmaps or abandons it), its end of the socket closed, or, with the
 * socket lost, its process is gone.  A signal (EINTR) or a full buffer is
 * no end: only these are.
 */
static bool memtrack_gone(void)
{
	struct pollfd p = { .events = POLLRDHUP };
	int n;

	if (__atomic_load_n(&S.hdr->closed, __ATOMIC_ACQUIRE))
		return true;
	if (!sock_ours())
		return memtrack_exited();
	p.fd = S.sock;
	do
		n = poll(&p, 1, 0);
	while (n < 0 && (errno == EINTR || errno == EAGAIN || errno == ENOMEM));
	if (n == 1 && (p.revents & POLLNVAL)) { /* closed since sock_ours(): lost, not an end */
		S.sock = -1;
		return memtrack_exited();
	}
	return n == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/*
 * Waits until the slot is free for position lap (the consumer read its
 * previous lap).  Returns false when memtrack is gone: recording stops.
 */
static bool wait_slot(struct mt_fast_slot *s, uint64_t lap)
{
	struct timespec nap = { 0, 20000 };

	for (unsigned i = 1;; i++) {
		if (__atomic_load_n(&s->seq, __ATOMIC_ACQUIRE) == lap)
			return true;
		if (i < 256) {
			__builtin_ia32_pause();
			continue;
		}
		if (i % 64 == 0) {
			poke();
			if (memtrack_gone()) {
				fast_recording = 0;
				return false;
			}
		}
		nanosleep(&nap, NULL);
	}
}

void fast_record(uint16_t type, uint16_t fn, uint32_t nfields, uint64_t a, uint64_t b, uint64_t c)
{
	struct mt_fast_slot *s;
	struct timespec ts;
	uint64_t pos, lap;

	if (__builtin_expect(!*fast_heap_switch, 0))
		return; /* recording switched off (control socket), as in alloc.bpf.c */
	if (__builtin_expect(fast_vfork_flag, 0)) {
		if (syscall(SYS_getpid) != S.pid)
			return;	     /* a vfork child: the uprobes record it */
		fast_vfork_flag = 0; /* its child has exec'd or exited since */
	}
	if (__builtin_expect(!tls_tid, 0))
		tls_tid = syscall(SYS_gettid);
	pos = __atomic_fetch_add(&S.hdr->head, 1, __ATOMIC_RELAXED);
	s = &S.slots[pos & (MT_FAST_SLOTS - 1)];
	lap = pos & ~(uint64_t)(MT_FAST_SLOTS - 1);
	if (__atomic_load_n(&s->seq, __ATOMIC_ACQUIRE) != lap && !wait_slot(s, lap))
		return;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	s->h.type = type;
	s->h.fn = fn;
	s->h.pid = S.pid;
	s->h.tid = tls_tid;
	s->h.nfields = nfields;
	s->h.ts = ts.tv_sec * 1000000000ull + ts.tv_nsec;
	/* as alloc.bpf.c's emit_heap: addr, size, third field, then stack 0 (the
	 * library takes no stacks; --fast --stacks is refused) */
	s->f[0] = a;
	s->f[1] = b;
	s->f[2] = nfields == REALLOC_NFIELDS ? c : 0;
	s->f[3] = 0;
	__atomic_store_n(&s->seq, lap + 1, __ATOMIC_RELEASE);
	if (__builtin_expect(!(pos & (MT_FAST_WAKE_EVERY - 1)), 0))
		poke();
}

/* Sends the hello and the ring's memfd on @sock. Returns 0 or -1. */
static int send_ring(int sock, int memfd)
{
	struct mt_fast_hello hello = { MT_FAST_MAGIC, MT_FAST_VERSION, MT_FAST_RING_BYTES };

	return fast_send_fd(sock, &hello, sizeof(hello), memfd, 0);
}

/*
 * memtrack's answer: 'y' (a process of its tree) within a few seconds,
 * with the heap-recording switch, which is mapped here.
 */
static bool accepted(int sock)
{
	struct pollfd p = { .fd = sock, .events = POLLIN };
	struct mt_fast_answer a;
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { &a, sizeof(a) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *cm;
	void *map = MAP_FAILED;
	int fd = -1;

	msg.msg_control = u.buf;
	msg.msg_controllen = sizeof(u.buf);
	if (poll(&p, 1, 5000) != 1 || recvmsg(sock, &msg, MSG_CMSG_CLOEXEC) != sizeof(a))
		return false;
	cm = CMSG_FIRSTHDR(&msg);
	if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
		memcpy(&fd, CMSG_DATA(cm), sizeof(fd));
	if (fd >= 0) {
		map = mmap(NULL, a.map_bytes, PROT_READ, MAP_SHARED, fd, 0);
		close(fd);
	}
	if (a.verdict != 'y' || map == MAP_FAILED || a.switch_offset + 4 > a.map_bytes) {
		if (map != MAP_FAILED)
			munmap(map, a.map_bytes);
		return false;
	}
	fast_heap_switch = (const volatile uint32_t *)((char *)map + a.switch_offset);
	S.switch_map = map;
	S.switch_bytes = a.map_bytes;
	return true;
}

/*
 * Moves @sock to a high number (below the soft fd limit, at most 1024:
 * the fd table stays small), out of the way of a program that takes the
 * lowest free numbers or dup2()s onto its own small ones.  Returns the fd
 * to use (@sock when there is no room up there).
 */
static int move_high(int sock)
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

/* Notes what S.sock is (sock_ours) and who listens on it. */
static int note_sock(void)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	struct stat st;

	if (fstat(S.sock, &st))
		return -1;
	S.sock_dev = st.st_dev;
	S.sock_ino = st.st_ino;
	/* 0 when memtrack is in a pid namespace we cannot see */
	if (!getsockopt(S.sock, SOL_SOCKET, SO_PEERCRED, &cred, &len))
		S.memtrack_pid = cred.pid;
	return 0;
}

static int connect_memtrack(const char *path)
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
	return move_high(sock);
}

/* Forgets the ring and connection (a fork child inherits its parent's). */
static void drop_session(void)
{
	fast_recording = 0;
	if (S.ring)
		munmap(S.ring, MT_FAST_RING_BYTES);
	if (sock_ours()) /* a lost number is the program's now: left alone */
		close(S.sock);
	fast_heap_switch = &always_on;
	if (S.switch_map)
		munmap(S.switch_map, S.switch_bytes);
	S.switch_map = NULL;
	S.ring = NULL;
	S.slots = NULL;
	S.hdr = NULL;
	S.sock = -1;
	S.sock_dev = 0;
	S.sock_ino = 0;
	S.memtrack_pid = 0;
}

/*
 * Makes a ring, hands it to memtrack and announces.  Any failure leaves the
 * process to the uprobes.
 */
static void start_session(void)
{
	const char *path = getenv(MT_FAST_SOCKET_ENV);
	int memfd = -1;

	if (!path || !*path || !interpose_owns_malloc())
		return;
	memfd = memfd_create("memtrack-fast", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	/* sealed at its size: memtrack maps no ring that could shrink under it */
	if (memfd < 0 || ftruncate(memfd, MT_FAST_RING_BYTES) ||
	    fcntl(memfd, F_ADD_SEALS, MT_FAST_SEALS))
		goto fail;
	S.ring = mmap(NULL, MT_FAST_RING_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	if (S.ring == MAP_FAILED) {
		S.ring = NULL;
		goto fail;
	}
	S.hdr = S.ring;
	S.slots = mt_fast_slots(S.ring);
	S.hdr->magic = MT_FAST_MAGIC;
	S.hdr->version = MT_FAST_VERSION;
	S.hdr->slots = MT_FAST_SLOTS;
	S.pid = syscall(SYS_getpid);
	S.sock = connect_memtrack(path);
	if (S.sock < 0 || note_sock() || send_ring(S.sock, memfd) || !accepted(S.sock))
		goto fail;
	close(memfd);
	interpose_patch_exe();
	/* the handover: fails with EINVAL, after fast.bpf.c has seen it */
	prctl(MT_FAST_PRCTL, MT_FAST_VERSION, 0, 0, 0);
	fast_recording = 1;
	return;
fail:
	if (memfd >= 0)
		close(memfd);
	if (S.sock >= 0 && !S.sock_ino) { /* made here and not noted: surely ours */
		close(S.sock);
		S.sock = -1;
	}
	drop_session();
}

/*
 * start_session() with every signal blocked: the program's handlers (and
 * its timers) are already there in a fork child, and an interrupted
 * connect, send or wait for the answer would leave the process to the
 * uprobes for nothing.  Blocked signals wait until the handover is done.
 */
static void start_session_masked(void)
{
	sigset_t all, old;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	start_session();
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* In a fork child, before fork returns: a ring of its own. */
static void atfork_child(void)
{
	drop_session();
	tls_tid = 0;
	fast_vfork_flag = 0;
	start_session_masked();
}

static void fast_init(void);

__attribute__((constructor(101))) static void fast_init(void)
{
	interpose_resolve();
	fast_real_vfork = next_sym("vfork", (const void *)fast_init);
	start_session_masked();
	pthread_atfork(NULL, NULL, atfork_child);
}
