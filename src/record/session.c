// SPDX-License-Identifier: MIT
/*
 * session.c - one recording from start to end; see session.h.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "bpf_abi.h"
#include "fast/fast_ring.h"
#include "util/as_user.h"
#include "inspect/authority.h"
#include "record/adopt.h"
#include "record/phys_adopt.h"
#include "record/attach.h"
#include "record/bpf_slot.h"
#include "record/control.h"
#include "record/heap_stub.h"
#include "record/heap_switch.h"
#include "record/loader.h"
#include "record/reaper.h"
#include "record/recorder.h"
#include "record/retire.h"
#include "record/session.h"
#include "record/sample_counts.h"
#include "record/spawn.h"
#include "record/stacks_prebuild.h"
#include "memtrack.skel.h"

struct session {
	struct session_opts o;
	struct reaper *reaper;		 /* NULL: memtrack makes its slow closes itself */
	struct retire *retire;		 /* every slow close goes through it (retire.h) */
	const struct attach_ops *attach; /* how uprobes are attached (attach.h) */
	struct probes *probes;		 /* NULL with --no-allocators */
	struct heap_stub stub;		 /* stand-ins for the heap programs until loaded */
	pthread_t preattach_thread;	 /* attaches the root's libc during the load */
	bool preattaching;		 /* preattach_thread runs (joined by finish_early) */
	int preattach_err;		 /* its probes_preattach() result, if < 0 */
	struct memtrack_bpf *skel;
	struct stacks *stacks;	   /* NULL without --stacks */
	struct recorder *recorder; /* NULL with --no-allocators */
	struct pipeline *pipe;
	struct control *ctl;		 /* NULL without --control (or when it failed) */
	struct fast_drain *fast;	 /* --fast: the in-process rings, else NULL */
	char fast_lib[4096];		 /* --fast: libmemtrack-fast.so's path */
	struct heap_switch *heap_switch; /* with --control or --fast, once loaded */
	struct mt_writer *writer;
	struct mt_header hdr;
	int out_fd; /* the artifact, -1 before session_start() */
	struct spawn child;
	struct spawn_env env; /* the command's environment */
	sigset_t old_mask;    /* memtrack's mask before the handlers: the command's */
	/* attach: the running tree, and the eventfds main and the poller adopt it by */
	struct adopt_tree tree;
	struct adopt_result adopt;
	int adopt_kick, adopt_done;
	struct phys_adopt phys; /* attach --physical: phys_on when open */
	bool phys_on;
	struct session_stats st;
};

/* Formats one line and hands it to the CLI's notice(). */
static void __attribute__((format(printf, 2, 3)))
notice(const struct session *s, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	s->o.notice(s->o.notice_ctx, msg);
}

/* --- before anything runs ------------------------------------------------ */

/*
 * CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN) are needed; say so before
 * anything runs.  Reads the effective set from /proc/self/status.
 */
static bool has_bpf_caps(void)
{
	const unsigned long long sys_admin = 1ull << 21, perfmon = 1ull << 38, bpf = 1ull << 39;
	unsigned long long eff = 0;
	char line[256];
	FILE *f;

	if (geteuid() == 0)
		return true;
	f = fopen("/proc/self/status", "re");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &eff) == 1)
			break;
	fclose(f);
	return (eff & sys_admin) || ((eff & perfmon) && (eff & bpf));
}

/*
 * The BPF side sees global pids, and memtrack resumes, reads /proc of and
 * waits for the tree's processes by pid: inside a PID namespace of its own
 * those are other numbers.  PROC_PID_INIT_INO (include/linux/proc_ns.h) is
 * the initial namespace's inode number.
 */
static bool in_initial_pid_ns(void)
{
	struct stat st;

	return stat("/proc/self/ns/pid", &st) || st.st_ino == 0xEFFFFFFCu;
}

enum session_host session_check_host(void)
{
	if (!has_bpf_caps())
		return SESSION_HOST_NO_CAPS;
	return in_initial_pid_ns() ? SESSION_HOST_OK : SESSION_HOST_PID_NS;
}

/*
 * Finds libmemtrack-fast.so: next to the memtrack binary (the build tree),
 * else in the install's lib/memtrack.  Returns 0 or -ENOENT.
 */
static int fast_lib_path(char *buf, size_t len)
{
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	char *slash;

	if (n > 0) {
		exe[n] = 0;
		slash = strrchr(exe, '/');
		if (slash &&
		    (size_t)snprintf(buf, len, "%.*s/libmemtrack-fast.so", (int)(slash - exe),
				     exe) < len &&
		    !access(buf, R_OK))
			return 0;
		if (slash && (slash = memrchr(exe, '/', slash - exe)) &&
		    (size_t)snprintf(buf, len, "%.*s/lib/memtrack/libmemtrack-fast.so",
				     (int)(slash - exe), exe) < len &&
		    !access(buf, R_OK))
			return 0;
	}
	return -ENOENT;
}

bool session_fast_available(void)
{
	char lib[4096];

	return !fast_lib_path(lib, sizeof(lib));
}

struct session *session__new(const struct session_opts *o)
{
	struct session *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->o = *o;
	s->out_fd = -1;
	s->child = (struct spawn){ .pid = -1, .release_fd = -1, .status_fd = -1 };
	s->stub = (struct heap_stub){ -1, -1, -1 };
	s->adopt_kick = s->adopt_done = -1;
	s->st.t_start = mono_ns();
	return s;
}

/* The fd limit memtrack raises its own to, as root, when its hard one is lower. */
#define FD_LIMIT_WANT 65536
/* The least fd limit error messages ask for: the BPF side and the pipeline
 * hold ~64, a small tree a few dozen more. */
#define FD_LIMIT_MIN 128

/*
 * Every probed process holds a few link fds while it lives, every
 * in-process one a connection: raise the fd limit.  Root raises the hard
 * one too (CAP_SYS_RESOURCE): under `ulimit -n 64` (soft and hard) a tree
 * of 22 processes needs more than 64; without the capability, the soft
 * limit goes up to the hard one.  The command gets its own limits back
 * (spawn.c).
 */
static void raise_fd_limit(struct spawn *child)
{
	struct rlimit rl, old;

	if (getrlimit(RLIMIT_NOFILE, &old))
		return;
	child->nofile = old.rlim_cur;
	child->nofile_max = old.rlim_max;
	rl.rlim_cur = rl.rlim_max = old.rlim_max < FD_LIMIT_WANT ? FD_LIMIT_WANT : old.rlim_max;
	if (rl.rlim_max == old.rlim_max || setrlimit(RLIMIT_NOFILE, &rl)) {
		rl.rlim_cur = rl.rlim_max = old.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* A signal to forward (SIGINT, SIGTERM, SIGHUP); SIGCHLD only wakes pselect. */
static volatile sig_atomic_t pending_signal;

static void on_signal(int sig)
{
	if (sig != SIGCHLD)
		pending_signal = sig;
}

/* @ignored: those of them ignored before (nohup: SIGHUP), for the command */
static void install_signals(sigset_t *old, sigset_t *ignored)
{
	static const int caught[] = { SIGINT, SIGTERM, SIGHUP, SIGCHLD };
	struct sigaction sa = { .sa_handler = on_signal }, was;
	sigset_t block;

	sigemptyset(&sa.sa_mask);
	sigemptyset(ignored);
	for (size_t i = 0; i < sizeof(caught) / sizeof(caught[0]); i++)
		if (!sigaction(caught[i], &sa, &was) && was.sa_handler == SIG_IGN)
			sigaddset(ignored, caught[i]);
	/* blocked except inside sigsuspend-like waits, so none is lost */
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGHUP);
	sigaddset(&block, SIGCHLD);
	sigprocmask(SIG_BLOCK, &block, old);
}

static void join_argv(char *dst, size_t len, char **argv)
{
	size_t used = 0;

	dst[0] = 0;
	for (int i = 0; argv[i] && used + 1 < len; i++)
		used += snprintf(dst + used, len - used, "%s%s", i ? " " : "", argv[i]);
}

/* The attached process's command line, /proc/PID/cmdline (any bytes: NULs become spaces). */
static void read_cmdline(pid_t pid, char *dst, size_t len)
{
	char path[32];
	ssize_t n = -1;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, dst, len - 1);
		close(fd);
	}
	if (n < 0)
		n = 0;
	while (n > 0 && !dst[n - 1])
		n--;
	for (ssize_t i = 0; i < n; i++)
		if (!dst[i])
			dst[i] = ' ';
	dst[n] = 0;
}

static void fill_header(struct mt_header *h, const struct session_opts *o)
{
	struct timespec mono, real;
	struct utsname u;

	memset(h, 0, sizeof(*h));
	h->format_version = MT_FORMAT_VERSION;
	snprintf(h->memtrack_version, sizeof(h->memtrack_version), "%s", MT_VERSION);
	h->page_size = sysconf(_SC_PAGESIZE);
	h->clock_id = CLOCK_MONOTONIC;
	clock_gettime(CLOCK_REALTIME, &real);
	clock_gettime(CLOCK_MONOTONIC, &mono);
	h->start_ns = mono.tv_sec * 1000000000ull + mono.tv_nsec;
	h->wall_offset_ns = (real.tv_sec * 1000000000ll + real.tv_nsec) - (int64_t)h->start_ns;
	if (!uname(&u)) {
		snprintf(h->kernel_release, sizeof(h->kernel_release), "%s", u.release);
		snprintf(h->arch, sizeof(h->arch), "%s", u.machine);
	}
	if (o->attach_pid)
		read_cmdline(o->attach_pid, h->command, sizeof(h->command));
	else
		join_argv(h->command, sizeof(h->command), o->argv);
	h->flags = (o->allocators ? MT_HDR_ALLOCATORS : 0) | (o->physical ? MT_HDR_PHYSICAL : 0) |
		   (o->start_disabled ? MT_HDR_START_DISABLED : 0) |
		   (o->stacks ? MT_HDR_STACKS : 0) | (o->attach_pid ? MT_HDR_ATTACHED : 0);
}

/* --- the control socket and the in-process drain -------------------------- */

/* Poller thread: a control socket problem that does not stop the session. */
static void control_notice(void *ctx, const char *msg)
{
	const struct session *s = ctx;

	s->o.notice(s->o.notice_ctx, msg);
}

/*
 * The command's MEMTRACK_CONTROL: the path made absolute when it fits a
 * socket address, so a command that changes directory still finds it.
 */
static int export_control_path(struct session *s, const char *path)
{
	char abs[108], cwd[4096];

	if (path[0] != '/' && getcwd(cwd, sizeof(cwd)) &&
	    (size_t)snprintf(abs, sizeof(abs), "%s/%s", cwd, path) < sizeof(abs))
		path = abs;
	return spawn_env_set(&s->env, "MEMTRACK_CONTROL", path);
}

/*
 * Creates the control socket.  A socket that cannot be made is reported and
 * the session goes on without one, heap recording on (even under
 * --start-disabled: nothing could enable it).  Returns 0 or -ENOMEM.
 */
static int open_control(struct session *s)
{
	struct control_opts co = {
		.path = s->o.control,
		.notice = control_notice, /* the switch comes once loaded: control__set_switch */
		.notice_ctx = s,
	};
	char err[512];

	s->ctl = control__new(&co, err, sizeof(err));
	if (!s->ctl) {
		notice(s, "%s (the command runs without control, heap recording on)", err);
		s->o.start_disabled = false; /* read when the BPF side is configured */
		/* no other session's socket either */
		return spawn_env_set(&s->env, "MEMTRACK_CONTROL", NULL);
	}
	return export_control_path(s, s->o.control);
}

/* Hooks the control socket to the poller. */
static int start_control(struct session *s)
{
	control__set_pipeline(s->ctl, s->pipe);
	if (s->o.start_disabled)
		(void)control_record(s->ctl, MT_DISABLE, getpid());
	return pipeline__watch_fd(s->pipe, control__fd(s->ctl), control_handle, s->ctl);
}

/* Poller thread: a process whose executable allocates itself stays on the uprobes. */
static bool fast_admit(void *ctx, pid_t pid)
{
	const struct session *s = ctx;

	return !probes_exe_allocates(s->probes, pid);
}

/*
 * --fast: finds the library and opens the socket it hands its rings to,
 * connectable by @uid (@gid), the command's user.  Returns 0 or -errno
 * with a message in @err.
 */
static int make_drain(struct session *s, uid_t uid, gid_t gid, char *err, size_t errlen)
{
	int ret;

	if (fast_lib_path(s->fast_lib, sizeof(s->fast_lib))) {
		snprintf(
			err, errlen,
			"--fast needs libmemtrack-fast.so next to the memtrack binary or in lib/memtrack of its install; run make (or make install), or drop --fast");
		return -ENOENT;
	}
	s->fast = fast_drain__new(fast_admit, s, uid, gid, s->reaper);
	if (!s->fast) {
		ret = -errno;
		snprintf(
			err, errlen,
			"cannot create the --fast socket: %s; set TMPDIR to a writable directory or drop --fast",
			strerror(-ret));
		return ret;
	}
	return 0;
}

int session_open_fast(struct session *s, uid_t uid, gid_t gid, const char **lib, const char **sock,
		      char *err, size_t errlen)
{
	int ret;

	assert(s->o.slot && !s->fast);
	err[0] = 0;
	ret = make_drain(s, uid, gid, err, errlen);
	if (ret) {
		s->o.fast = false; /* the uprobes record the heap instead */
		return ret;
	}
	*lib = s->fast_lib;
	*sock = fast_drain__path(s->fast);
	return 0;
}

/*
 * --fast: opens the socket (make_drain), and puts the library first in the
 * command's LD_PRELOAD (the command sees it there, and
 * MEMTRACK_FAST_SOCKET: exec'd programs keep the path through them).  The
 * daemon's client sets both itself (session_open_fast).  Returns 0 or
 * -errno with a message in @err.
 */
static int open_fast(struct session *s, char *err, size_t errlen)
{
	uid_t uid;
	gid_t gid;
	int ret;

	if (s->o.slot)
		return 0;		 /* the drain, if any, is session_open_fast()'s */
	if (!sudo_invoker(&uid, &gid)) { /* the command's user: the socket is theirs */
		uid = geteuid();
		gid = getegid();
	}
	ret = make_drain(s, uid, gid, err, errlen);
	if (!ret)
		ret = spawn_env_prepend(&s->env, "LD_PRELOAD", s->fast_lib, ':');
	return ret ? ret : spawn_env_set(&s->env, MT_FAST_SOCKET_ENV, fast_drain__path(s->fast));
}

/* --fast, once the BPF side is loaded: the drain learns the tree and joins the pipeline. */
static int start_fast(struct session *s)
{
	fast_drain__set_tracked(s->fast, bpf_map__fd(s->skel->maps.tracked));
	/* the heap switch (control socket), on a sealed page the libraries map read-only */
	fast_drain__set_switch(s->fast, heap_switch__page_fd(s->heap_switch), 0,
			       HEAP_SWITCH_PAGE_BYTES);
	/* --stacks: the libraries unwind in-process, with the kernel's tables */
	fast_drain__set_stacks(s->fast, s->stacks);
	fast_drain__set_sampling(s->fast, s->o.sample_bytes);
	return pipeline__add_source(s->pipe, fast_drain__fd(s->fast),
				    &(struct pipeline_source){ .feed = fast_drain_feed,
							       .service = fast_drain_service,
							       .ctx = s->fast });
}

/* --- start ------------------------------------------------------------------ */

static void *preattach_main(void *arg)
{
	struct session *s = arg;
	int ret = probes_preattach(s->probes, s->child.pid);

	s->preattach_err = ret < 0 ? ret : 0;
	return NULL;
}

/*
 * The registry of the allocator probes, and the root's libc attached
 * through the heap stubs on a thread of its own, so that link's grace
 * period (~10 ms) passes during the BPF load (heap_stub.h).
 */
static int start_probes(struct session *s)
{
	sigset_t all, old;

	s->probes = probes__new(s->retire, s->attach);
	if (!s->probes)
		return -ENOMEM;
	probes__set_fast(s->probes, s->o.fast);
	if (s->o.attach_pid || s->o.slot) /* loaded already, or nothing waits for them */
		return 0;
	if (heap_stub_load(&s->stub, s->attach->prog_attach_type))
		return 0; /* libc is attached after the exec instead */
	probes__set_progs(s->probes, s->stub.enter_fd, s->stub.exit_fd);
	sigfillset(&all); /* signals are main's */
	pthread_sigmask(SIG_SETMASK, &all, &old);
	s->preattaching = !pthread_create(&s->preattach_thread, NULL, preattach_main, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return 0;
}

static uint32_t unwind_rows(const struct session *s)
{
	return s->o.unwind_rows ? s->o.unwind_rows : MT_UNWIND_ROWS_DEFAULT;
}

/*
 * --stacks: the rows of the files the command will map are built, and
 * stored into the registry's chunks, while the BPF side loads.
 */
static void start_prebuild(struct session *s)
{
	char exe[4096], lib[4096];
	bool have_exe = !spawn_resolve(s->o.argv[0], exe, sizeof(exe));
	bool have_lib = s->o.fast && !fast_lib_path(lib, sizeof(lib));

	s->stacks = stacks__new(unwind_rows(s), s->o.unwind_cache);
	if (!s->stacks)
		return; /* start_recorder() tries again, and says why */
	stacks__set_python(s->stacks, !s->o.no_python_frames);
	stacks__take_prebuild(s->stacks,
			      stacks_prebuild_start(have_exe ? exe : NULL, have_lib ? lib : NULL,
						    s->o.unwind_cache, s->stacks));
}

/*
 * Before the BPF side loads (~20 ms of CPU): forks the reaper (before any
 * thread), opens the control and --fast sockets (their paths go into the
 * command's environment), forks the command parked before its exec, and
 * starts the probes.  Returns 0 or -errno with a message in @err.
 */
static int start_early(struct session *s, char *err, size_t errlen)
{
	int ret;

	if (s->o.slot) { /* the daemon's: its reaper and retirer outlive the session */
		s->retire = s->o.slot->retire;
		s->attach = s->o.slot->attach;
	} else {
		s->reaper = reaper__new();
		s->retire = retire__new(s->reaper);
		s->attach = attach_select(s->o.kf);
	}
	ret = s->retire ? spawn_env_init(&s->env) : -ENOMEM;
	if (!ret && s->o.control) /* before the fork: the command finds it in its environment */
		ret = open_control(s);
	if (!ret && s->o.fast)
		ret = open_fast(s, err, errlen);
	if (ret) {
		if (!err[0])
			snprintf(err, errlen, "out of memory");
		return ret;
	}
	s->child.envp = s->env.vars;
	if (s->o.attach_pid)
		goto probes;
	if (s->o.root_pid) { /* forked parked by the client, which releases it */
		s->child.pid = s->o.root_pid;
		goto probes;
	}
	ret = spawn_parked(&s->child, s->o.argv, s->o.shell,
			   sudo_invoker(&(uid_t){ 0 }, &(gid_t){ 0 }), &s->old_mask);
	if (ret) {
		snprintf(err, errlen, "cannot start the command: %s", strerror(-ret));
		return ret;
	}
	if (s->o.stacks && !s->o.shell)
		start_prebuild(s);
probes:
	ret = s->o.allocators ? start_probes(s) : 0;
	if (ret)
		snprintf(err, errlen, "out of memory");
	return ret;
}

/*
 * Once the BPF side is loaded: the stubs run alloc_enter and alloc_exit
 * from now on, and later links use them directly.  Should the stubs not be
 * armed, the root's early links are dropped (its sync after exec attaches
 * libc again).
 */
static void finish_early(struct session *s)
{
	if (s->preattaching)
		pthread_join(s->preattach_thread, NULL);
	s->preattaching = false;
	if (!s->probes)
		return;
	if (s->skel) {
		int enter = bpf_program__fd(s->skel->progs.alloc_enter);
		int exit = bpf_program__fd(s->skel->progs.alloc_exit);

		if (s->stub.map_fd >= 0 && heap_stub_arm(&s->stub, enter, exit))
			probes_forget(s->probes, s->child.pid, true);
		probes__set_progs(s->probes, enter, exit);
	}
	if (s->preattach_err && s->o.verbose)
		notice(s, "libc not attached before exec (%s); it is after",
		       strerror(-s->preattach_err));
	s->preattach_err = 0;
}

/* Words a loader_open() failure as one line naming the fix; returns @buf. */
static const char *loader_reason(enum loader_step step, int err, char *buf, size_t len)
{
	struct rlimit rl;

	/* the maps, programs and links take one fd each, so a low fd limit
	 * shows up here first, at whichever step ran out (not the kernel's
	 * fault, whatever the step) */
	if ((err == -EMFILE || err == -ENFILE) && !getrlimit(RLIMIT_NOFILE, &rl)) {
		snprintf(
			buf, len,
			"out of file descriptors while loading memtrack's BPF programs (limit %llu); raise the fd limit (ulimit -n, at least %d)",
			(unsigned long long)rl.rlim_cur, FD_LIMIT_MIN);
		return buf;
	}
	switch (step) {
	case LOADER_BTF:
		snprintf(
			buf, len,
			"this kernel has no BTF (/sys/kernel/btf/vmlinux); memtrack needs a kernel built with CONFIG_DEBUG_INFO_BTF=y");
		break;
	case LOADER_OPEN:
		snprintf(buf, len, "cannot open the BPF object: %s", strerror(-err));
		break;
	case LOADER_LOAD:
		if (err == -ENOMEM)
			snprintf(
				buf, len,
				"not enough memory for memtrack's BPF maps; choose a smaller --ring-size");
		else if (err == -EPERM)
			snprintf(
				buf, len,
				"not allowed to load BPF programs (%s); run as root or grant CAP_BPF and CAP_PERFMON",
				strerror(-err));
		else
			snprintf(
				buf, len,
				"the kernel rejected memtrack's BPF programs (%s); rerun with -v to see the verifier's log",
				strerror(-err));
		break;
	case LOADER_ATTACH:
		snprintf(
			buf, len,
			"cannot attach memtrack's tracepoints (%s); this kernel needs BTF raw tracepoints (tp_btf, Linux 5.5+)",
			strerror(-err));
		break;
	}
	return buf;
}

/*
 * Where the BPF side cannot resume parked processes at memtrack's death
 * (KF_RESUME's fallback), the reaper does it once memtrack is gone.
 * Without a reaper nothing would, and a child of a killed memtrack would
 * stay stopped: the run is refused.  Returns 0 or -errno.
 */
static int hand_parked_to_reaper(struct session *s)
{
	int parked, session, err;

	err = loader_parked_fds(s->skel, &parked, &session);
	return err ? err : reaper_resume_at_end(s->reaper, parked, session);
}

/*
 * attach: puts the running tree in the tracked set (adopt.h), from which
 * moment every fork, exec and exit of it is followed.  Returns 0 or -errno
 * with @err.
 */
static int track_running(struct session *s, char *err, size_t errlen)
{
	int ret;

	s->st.t_attach = mono_ns();
	ret = adopt_track(s->skel, s->o.attach_pid, getpid(), reaper_pid(s->reaper), s->o.authority,
			  &s->tree);
	if (ret == -ESRCH || ret == -ENOENT)
		snprintf(err, errlen, "process %d exited while memtrack attached", s->o.attach_pid);
	else if (ret == -EPERM)
		snprintf(
			err, errlen,
			"process %d of the tree changed its credentials while memtrack attached (it exec'd a privileged program), so the invoking user may not trace it; nothing was recorded: attach again",
			(int)s->tree.changed);
	else if (ret < 0)
		snprintf(err, errlen, "cannot track process %d's tree: %s", s->o.attach_pid,
			 strerror(-ret));
	s->st.attached_procs = s->tree.n;
	s->st.refused_procs = s->tree.n_refused;
	return ret < 0 ? ret : 0;
}

static int track_tree(struct session *s, char *err, size_t errlen);

/* The daemon's slot in place of a load: the same object, the options it was loaded with. */
static int use_slot(struct session *s, char *err, size_t errlen)
{
	s->skel = s->o.slot->skel;
	s->o.physical = false;
	return track_tree(s, err, errlen);
}

/* Loads the BPF side and registers the root.  Returns 0 or -errno with @err. */
static int load_bpf(struct session *s, char *err, size_t errlen)
{
	struct loader_opts lo = {
		.ring_bytes = s->o.ring_bytes,
		.wakeup_bytes = s->o.wakeup_bytes,
		.allocators = s->o.allocators,
		.uprobe_attach_type = s->attach->prog_attach_type,
		.physical = s->o.physical,
		.verbose = s->o.verbose,
		.heap_disabled = s->o.start_disabled,
		.stacks = s->o.stacks,
		.unwind_rows = s->o.unwind_rows ? s->o.unwind_rows : MT_UNWIND_ROWS_DEFAULT,
		.fast = s->o.fast,
		.adopt_running = s->o.attach_pid != 0,
		.owner_only = s->o.authority && s->o.authority->restricted,
		.owner_uid = s->o.authority ? s->o.authority->uid : 0,
		.owner_gid = s->o.authority ? s->o.authority->gid : 0,
		.sample_bytes = s->o.sample_bytes,
		.kf = s->o.kf,
	};
	enum loader_step step;
	int ret;

	if (s->o.slot) /* loaded by the daemon, the resume at its death arranged */
		return use_slot(s, err, errlen);
	ret = loader_open(&lo, &s->skel, &step);
	if (!ret && s->o.kf->mech[KF_RESUME] != KF_BEST && lo.allocators) {
		ret = hand_parked_to_reaper(s);
		if (ret) {
			snprintf(
				err, errlen,
				"cannot start the reaper that resumes parked processes on this kernel (%s); free some processes or memory and retry",
				strerror(-ret));
			return ret;
		}
	}
	if (lo.physical_err)
		notice(s, "--physical is not available on this kernel (%s); recording without it",
		       loader_reason(lo.physical_step, lo.physical_err, err, errlen));
	err[0] = 0;
	if (ret) {
		loader_reason(step, ret, err, errlen);
		return ret;
	}
	s->o.physical = lo.physical;
	return track_tree(s, err, errlen);
}

/* Once loaded: the root (or the running tree) tracked, the heap switch made. */
static int track_tree(struct session *s, char *err, size_t errlen)
{
	int ret;

	finish_early(s);
	if (s->o.attach_pid) {
		ret = track_running(s, err, errlen);
		if (ret)
			return ret;
	} else if (loader_track_root(s->skel, s->child.pid)) {
		ret = -errno;
		snprintf(err, errlen, "cannot start the command: %s", strerror(-ret));
		return ret;
	}
	if (s->ctl || s->fast) {
		s->heap_switch = heap_switch__new(loader_heap_switch(s->skel));
		if (!s->heap_switch) {
			ret = -errno;
			snprintf(err, errlen, "cannot make the heap switch's page: %s",
				 strerror(-ret));
			return ret;
		}
	}
	if (s->ctl)
		control__set_switch(s->ctl, s->heap_switch);
	return 0;
}

/* Poller thread: main asked for the running tree's probes (adopt.h). */
static void adopt_handle(void *ctx)
{
	struct session *s = ctx;
	uint64_t v;

	if (read(s->adopt_kick, &v, sizeof(v)) != sizeof(v))
		return;
	adopt_sync(s->skel, &s->tree, s->o.authority, s->probes, s->stacks,
		   s->phys_on ? &s->phys : NULL, s->pipe, &s->adopt);
	(void)!write(s->adopt_done, &(uint64_t){ 1 }, sizeof(uint64_t));
}

/* attach, before the poller starts: the eventfds it adopts the tree by. */
static int watch_adopt(struct session *s)
{
	s->adopt_kick = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	s->adopt_done = eventfd(0, EFD_CLOEXEC);
	if (s->adopt_kick < 0 || s->adopt_done < 0)
		return -errno;
	return pipeline__watch_fd(s->pipe, s->adopt_kick, adopt_handle, s);
}

/* The unwinder's registry and the recorder, the pipeline's observer. */
static int start_recorder(struct session *s, struct pipeline_observer *obs, char *err,
			  size_t errlen)
{
	int ret;

	if (s->o.stacks && s->o.slot) { /* the slot's, with the rows of earlier sessions */
		s->stacks = s->o.slot->stacks;
		if (s->stacks)
			stacks_next_session(s->stacks, s->o.unwind_cache);
	} else if (s->o.stacks) {
		if (!s->stacks && (s->stacks = stacks__new(unwind_rows(s), s->o.unwind_cache)))
			stacks__set_python(s->stacks, !s->o.no_python_frames);
		ret = s->stacks ? stacks__attach(s->stacks, s->skel) : -errno;
		if (ret) {
			snprintf(err, errlen, "cannot set up the kernel's unwind tables: %s",
				 strerror(-ret));
			return ret;
		}
	}
	if (!s->probes) /* --no-allocators: nothing is ever parked */
		return 0;
	s->recorder = recorder__new(s->skel, s->probes, s->stacks);
	if (!s->recorder) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	recorder_observer(s->recorder, obs);
	return 0;
}

/*
 * The writer, the recorder and the pipeline with its sources and watched
 * fds, then the poller.  Returns 0 or -errno with @err.
 */
static int start_pipeline(struct session *s, char *err, size_t errlen)
{
	struct pipeline_observer obs = { 0 };
	int ret;

	fill_header(&s->hdr, &s->o);
	s->hdr.attach_ns = s->st.t_attach;
	kernel_features_header(s->o.kf, &s->hdr);
	s->writer = mt_writer__new(s->out_fd, &s->hdr, 0);
	if (!s->writer) {
		ret = -errno;
		snprintf(err, errlen, "cannot write the artifact header to '%s': %s", s->o.output,
			 strerror(-ret));
		return ret;
	}
	ret = start_recorder(s, &obs, err, errlen);
	if (ret)
		return ret;
	s->pipe = pipeline__new(&s->o.pipe, s->writer, obs.observe ? &obs : NULL);
	ret = s->pipe ? 0 : -errno;
	/* before every heap record: the SAMPLING record */
	if (!ret && s->o.sample_bytes)
		ret = sample_counts_start(s->pipe, bpf_map__fd(s->skel->maps.heap_counts),
					  s->o.sample_bytes);
	if (!ret && s->o.attach_pid)
		ret = watch_adopt(s);
	if (!ret && s->ctl)
		ret = start_control(s);
	if (!ret && s->fast) {
		ret = start_fast(s);
		if (ret) {
			snprintf(err, errlen, "cannot start the --fast drain: %s", strerror(-ret));
			return ret;
		}
	}
	if (!ret)
		ret = pipeline__start_poller(s->pipe, bpf_map__fd(s->skel->maps.events),
					     bpf_map__fd(s->skel->maps.ctl_events));
	/* pthread_create's code, or libbpf's: errno may be stale */
	if (ret == -EMFILE)
		snprintf(
			err, errlen,
			"cannot start the event pipeline: %s; raise the fd limit (ulimit -n, at least %d)",
			strerror(-ret), FD_LIMIT_MIN);
	else if (ret)
		snprintf(err, errlen, "cannot start the event pipeline: %s", strerror(-ret));
	return ret;
}

/*
 * attach, the poller running: has it give every process of the tree its
 * tables, probes and first RSS record, and waits.  A failure other than a
 * process gone fails the start (everything is detached at teardown).
 * Returns 0 or -errno with @err.
 */
static int probe_running(struct session *s, char *err, size_t errlen)
{
	uint64_t v;

	if (s->o.physical) {
		s->phys_on = !phys_adopt_open(&s->phys, s->skel, err, errlen);
		if (!s->phys_on)
			notice(s,
			       "--physical counts only the pages the tree faults in from now on: %s",
			       err);
		err[0] = 0;
	}

	if (write(s->adopt_kick, &(uint64_t){ 1 }, sizeof(v)) != sizeof(v) ||
	    read(s->adopt_done, &v, sizeof(v)) != sizeof(v)) {
		snprintf(err, errlen, "cannot reach the event pipeline: %s", strerror(errno));
		return -errno;
	}
	s->st.t_root_probed = s->adopt.t_first_ns;
	s->st.t_all_probed = s->adopt.t_done_ns;
	if (s->adopt.err) {
		snprintf(err, errlen, "cannot attach to process %d: %s", s->adopt.err_pid,
			 strerror(-s->adopt.err));
		return s->adopt.err;
	}
	if (!s->adopt.procs) {
		snprintf(err, errlen, "process %d exited while memtrack attached", s->o.attach_pid);
		return -ESRCH;
	}
	if (s->adopt.phys_err)
		notice(s,
		       "--physical left out some pages resident at attach: reading process %d's "
		       "pages: %s",
		       s->adopt.phys_err_pid,
		       s->adopt.phys_err == -EPERM ? "no page frame numbers without CAP_SYS_ADMIN"
						   : strerror(-s->adopt.phys_err));
	return 0;
}

void session_set_root(struct session *s, pid_t root_pid)
{
	assert(s->o.slot && s->out_fd < 0);
	s->o.root_pid = root_pid;
}

int session_start(struct session *s, int out_fd, char *err, size_t errlen)
{
	int ret;

	err[0] = 0;
	s->out_fd = out_fd;
	/*
	 * Held until the file is finished and closed (the kernel drops it when
	 * memtrack dies): `top` tells a recording whose writer is gone by it.
	 * Best effort: a file system without flock only loses that.
	 */
	(void)flock(out_fd, LOCK_EX | LOCK_NB);
	raise_fd_limit(&s->child);
	if (!s->o.slot) /* the daemon's signals are the daemon's */
		install_signals(&s->old_mask, &s->child.ignored);
	ret = start_early(s, err, errlen);
	if (!ret)
		ret = load_bpf(s, err, errlen);
	if (!ret)
		ret = start_pipeline(s, err, errlen);
	if (!ret && s->o.attach_pid)
		ret = probe_running(s, err, errlen);
	s->st.t_loaded = mono_ns();
	return ret;
}

void session_abort(struct session *s)
{
	if (!s)
		return;
	finish_early(s);
	if (!s->o.attach_pid && !s->o.root_pid)
		spawn_abort(&s->child); /* before its exec: nothing ran */
}

int session_release(struct session *s)
{
	int err;

	if (s->o.attach_pid || s->o.root_pid)
		return 0;
	err = spawn_release(&s->child);

	if (err) /* the child exits with 127 */
		waitpid(s->child.pid, NULL, 0);
	return err;
}

/* --- run and end -------------------------------------------------------------- */

/* attach: until a signal (not forwarded: the tree is not memtrack's), the duration, or the tree's end. */
static void wait_attached(struct session *s)
{
	struct timespec tick = { 0, 20 * 1000000L };
	uint64_t deadline = s->o.duration_ns ? s->st.t_loaded + s->o.duration_ns : UINT64_MAX;

	for (;;) {
		if (pending_signal) {
			pending_signal = 0;
			s->st.signalled = true;
			return;
		}
		if (!loader_tree_alive(s->skel)) {
			s->st.tree_exited = true;
			return;
		}
		if (mono_ns() >= deadline)
			return;
		sigset_t wait_set = s->old_mask;
		pselect(0, NULL, NULL, NULL, &tick, &wait_set);
	}
}

void session_wait(struct session *s)
{
	struct timespec tick = { 0, 20 * 1000000L };
	bool root_done = false;

	if (s->o.attach_pid) {
		wait_attached(s);
		return;
	}
	for (;;) {
		int sig = pending_signal;

		pending_signal = 0;
		if (sig) {
			s->st.signalled = true;
			if (!root_done)
				kill(s->child.pid, sig);
		}
		if (!root_done && waitpid(s->child.pid, &s->st.status, WNOHANG) == s->child.pid)
			root_done = true;
		if (root_done && (s->st.signalled || !loader_tree_alive(s->skel)))
			return;
		sigset_t wait_set = s->old_mask;
		pselect(0, NULL, NULL, NULL, &tick, &wait_set);
	}
}

bool session_tree_alive(const struct session *s)
{
	return s->skel && loader_tree_alive(s->skel);
}

void session_root_exited(struct session *s, int status, bool signalled)
{
	s->st.status = status;
	s->st.signalled = signalled;
}

/* What the trailer says besides the drops, from the stopped pipeline's modules. */
static void fill_trailer(struct session *s, struct mt_trailer *t)
{
	if (s->fast) {
		/*
		 * Slots a killed thread reserved and never wrote: calls it was
		 * inside, that never returned to the program (a block it never
		 * got, a free not yet done), so no loss of the recording: named,
		 * not dropped, and the exit status stays the command's.
		 */
		fast_drain__stats(s->fast, &s->st.fast_st);
		t->killed_in_call = s->st.fast_st.lost;
		/* exec'd images on the uprobes, recorded exactly there: named, not dropped */
		t->env_overflow = s->st.fast_st.env_overflow;
	}
	if (s->stacks) {
		stacks__stats(s->stacks, &s->st.stacks);
		t->stack_table_bytes = s->st.stacks.table_bytes;
		t->stack_rows = s->st.stacks.rows;
		t->stack_index_entries = s->st.stacks.index_entries;
		t->stack_rows_cap = s->st.stacks.rows_cap;
		t->stack_objects = s->st.stacks.objects;
		t->stack_no_room = s->st.stacks.no_room;
		t->stack_no_cfi = s->st.stacks.no_cfi;
	}
	if (s->probes) {
		probes__stats(s->probes, &s->st.probes);
		t->unprobed = s->st.probes.lost;
		s->st.unprobed_errno = s->st.probes.last_error;
	}
	t->exit_code = WIFEXITED(s->st.status) ? WEXITSTATUS(s->st.status) : -1;
	t->exit_signal = WIFSIGNALED(s->st.status) ? WTERMSIG(s->st.status) : 0;
	t->duration_ns = mono_ns() - s->hdr.start_ns;
}

static uint64_t total_drops(const struct mt_trailer *t)
{
	uint64_t n = 0;

	for (int i = 0; i < MT_DROP_SLOTS; i++)
		n += t->dropped[i];
	return n;
}

/* -v: the statistics of the run, one notice a line. */
static void print_stats(const struct session *s, const struct mt_trailer *t)
{
	const struct session_stats *st = &s->st;
	const struct pipeline_stats *ps = &st->pipe;
	const struct probes_stats *pr = &st->probes;

	notice(s,
	       "pipeline: %llu events, %llu batches (full %llu, timeout %llu, drain %llu, shutdown %llu), "
	       "max queue %llu, poller waits %llu, dropped %llu, encode %.1f ms, %llu frames, %llu raw bytes, %llu file bytes",
	       (unsigned long long)ps->events, (unsigned long long)ps->batches,
	       (unsigned long long)ps->flushes[FLUSH_FULL],
	       (unsigned long long)ps->flushes[FLUSH_TIMEOUT],
	       (unsigned long long)ps->flushes[FLUSH_DRAIN],
	       (unsigned long long)ps->flushes[FLUSH_SHUTDOWN], (unsigned long long)ps->max_queue,
	       (unsigned long long)ps->poller_waits, (unsigned long long)total_drops(t),
	       ps->encode_ns / 1e6, (unsigned long long)ps->frames,
	       (unsigned long long)ps->raw_bytes, (unsigned long long)ps->file_bytes);
	if (s->fast) {
		const struct fast_drain_stats *fs = &st->fast_st;

		notice(s,
		       "fast: %llu processes recorded in-process (%llu refused), %llu records, %llu cut short by a kill, %llu rings open at most, %llu forged records refused (%llu rings cut off)",
		       (unsigned long long)fs->rings, (unsigned long long)fs->refused,
		       (unsigned long long)fs->records, (unsigned long long)fs->lost,
		       (unsigned long long)fs->max_open, (unsigned long long)fs->bad_records,
		       (unsigned long long)fs->cut);
	}
	notice(s, "time: load+attach %.1f ms, run %.1f ms, drain+finish %.1f ms",
	       (st->t_loaded - st->t_start) / 1e6, (st->t_exited - st->t_loaded) / 1e6,
	       (st->t_finished - st->t_exited) / 1e6);
	notice(s,
	       "probes: %llu syncs, %llu uprobes attached, %llu failures, %llu processes unprobed, %.1f ms attaching",
	       (unsigned long long)pr->syncs, (unsigned long long)pr->links,
	       (unsigned long long)pr->failures, (unsigned long long)pr->lost, pr->sync_ns / 1e6);
	if (s->stacks) {
		const struct stacks_stats *ss = &st->stacks;

		notice(s,
		       "stacks: %llu objects, %llu unwind rows of %llu (%llu KiB table), %llu without CFI, %llu without room, %.1f ms building tables, %llu syncs %.1f ms, %llu index entries, %llu tables from the cache",
		       (unsigned long long)ss->objects, (unsigned long long)ss->rows,
		       (unsigned long long)ss->rows_cap, (unsigned long long)ss->table_bytes >> 10,
		       (unsigned long long)ss->no_cfi, (unsigned long long)ss->no_room,
		       ss->build_ns / 1e6, (unsigned long long)ss->syncs, ss->sync_ns / 1e6,
		       (unsigned long long)ss->index_entries, (unsigned long long)ss->cached);
	}
}

int session_finish(struct session *s, struct mt_trailer *t)
{
	struct recorder_failures rf = { 0 };
	int err, drops_err;

	s->st.t_exited = mono_ns();
	/* what the poller has not resumed by now runs on untracked */
	loader_stop_parking(s->skel);
	err = pipeline__stop(s->pipe, s->st.signalled ? FLUSH_SHUTDOWN : FLUSH_DRAIN);
	pipeline__stats(s->pipe, &s->st.pipe);
	s->st.events = s->st.pipe.events;
	drops_err = loader_read_drops(s->skel, t->dropped);
	if (drops_err)
		notice(s,
		       "cannot read the kernel's drop counters: %s; the artifact may undercount lost events",
		       strerror(-drops_err));
	if (s->recorder)
		recorder__failures(s->recorder, &rf);
	s->st.left_procs = s->adopt.left + rf.left;
	if (rf.procs)
		notice(s,
		       "could not attach the allocator probes of %u process(es) (pid %d: %s); their heap events are missing",
		       rf.procs, rf.first_pid, strerror(-rf.first_err));
	fill_trailer(s, t);
	if (!err)
		err = mt_writer__finish(s->writer, t);
	s->st.t_finished = mono_ns();
	if (s->o.verbose)
		print_stats(s, t);
	return err;
}

void session_stats(const struct session *s, struct session_stats *st)
{
	*st = s->st;
	st->fast = s->fast != NULL;
	st->stacks_on = s->stacks != NULL;
}

/*
 * Unloads the BPF side.  First parking stops and what memtrack parked is
 * resumed, then the tracked set is emptied, so nothing is recorded or
 * parked any more (nothing else is sent a signal: a process someone else
 * stopped stays stopped); then every fd goes to the reaper, which bears
 * the kernel's grace periods once memtrack has exited (retire_end()): the
 * closes here are reference drops.
 */
static void teardown(struct session *s)
{
	uint64_t t0 = mono_ns(), t1;
	unsigned handed;

	loader_stop_parking(s->skel);
	if (s->skel)
		loader_untrack_all(s->skel);
	probes__free(s->probes);
	if (s->o.slot) /* the daemon's: reset for the next session, not unloaded */
		return;
	stacks__free(s->stacks);
	handed = retire_end(s->retire);
	t1 = mono_ns();
	heap_stub_close(&s->stub);
	loader_close(s->skel);
	if (s->o.verbose)
		notice(s, "teardown: probes %.1f ms, bpf %.1f ms (%u fds left to the reaper)",
		       (t1 - t0) / 1e6, (mono_ns() - t1) / 1e6, handed);
}

void session__free(struct session *s)
{
	if (!s)
		return;
	pipeline__free(s->pipe);
	if (s->phys_on)
		phys_adopt_close(&s->phys); /* after the poller, which marks with it */
	recorder__free(s->recorder);	    /* after the poller, which runs it */
	control__free(s->ctl);		    /* after the poller, which serves it */
	fast_drain__free(s->fast);	    /* after the poller, which drains it */
	heap_switch__free(s->heap_switch);  /* after the control socket and drain */
	mt_writer__free(s->writer);
	teardown(s);
	if (s->out_fd >= 0)
		close(s->out_fd);
	spawn_env_free(&s->env);
	adopt_tree_free(&s->tree);
	if (s->adopt_kick >= 0)
		close(s->adopt_kick);
	if (s->adopt_done >= 0)
		close(s->adopt_done);
	if (!s->o.slot)
		retire__free(s->retire);
	reaper__free(s->reaper); /* after memtrack's last close */
	free(s);
}
