// SPDX-License-Identifier: MIT
/* exec.c - libmemtrack-fast.so's exec and spawn entry points; see exec.h. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include "fast/env.h"
#include "fast/fast_ring.h"
#include "fast/interpose.h"
#include "fast/exec.h"
#include "fast/next_sym.h"
#include "fast/ring.h"

#define EXPORT __attribute__((visibility("default")))

typedef int execve_fn(const char *, char *const[], char *const[]);
typedef int execveat_fn(int, const char *, char *const[], char *const[], int);
typedef int fexecve_fn(int, char *const[], char *const[]);
typedef int spawn_fn(pid_t *, const char *, const posix_spawn_file_actions_t *,
		     const posix_spawnattr_t *, char *const[], char *const[]);
typedef FILE *popen_fn(const char *, const char *);

static struct {
	execve_fn *execve, *execvpe;
	execveat_fn *execveat;
	fexecve_fn *fexecve;
	spawn_fn *posix_spawn, *posix_spawnp;
	popen_fn *popen;
} libc;

void exec_resolve(void)
{
	const void *self = (const void *)exec_resolve;

	libc.execve = (execve_fn *)next_sym("execve", self);
	libc.execvpe = (execve_fn *)next_sym("execvpe", self);
	libc.execveat = (execveat_fn *)next_sym("execveat", self);
	libc.fexecve = (fexecve_fn *)next_sym("fexecve", self);
	libc.posix_spawn = (spawn_fn *)next_sym("posix_spawn", self);
	libc.posix_spawnp = (spawn_fn *)next_sym("posix_spawnp", self);
	libc.popen = (popen_fn *)next_sym("popen", self);
}

/* env_build(), and the count of an envp that did not fit (ring.h). */
static char *const *exec_env(char *const envp[], const struct env_need *need, char **ptrs, char *ld)
{
	if (need->overflow)
		ring_note_env_overflow();
	return env_build(envp, need, ptrs, ld);
}

/*
 * Declares `env`, @envp with memtrack's entries put back, in buffers on
 * this stack frame (env.h); the frame must last until the exec.
 */
#define WITH_ENV(envp)                                                    \
	struct env_need env_plan = env_need(envp);                        \
	char *env_ptrs[env_plan.slots ? env_plan.slots : 1];              \
	char env_ld[env_plan.preload_bytes ? env_plan.preload_bytes : 1]; \
	char *const *env = exec_env((envp), &env_plan, env_ptrs, env_ld)

static int no_libc(void)
{
	errno = ENOSYS;
	return -1;
}

static int do_execve(const char *path, char *const argv[], char *const envp[])
{
	WITH_ENV(envp);

	return libc.execve ? libc.execve(path, argv, env) : no_libc();
}

static int do_execvpe(const char *file, char *const argv[], char *const envp[])
{
	WITH_ENV(envp);

	return libc.execvpe ? libc.execvpe(file, argv, env) : no_libc();
}

EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	return do_execve(path, argv, envp);
}

EXPORT int execveat(int dirfd, const char *path, char *const argv[], char *const envp[], int flags)
{
	WITH_ENV(envp);

	return libc.execveat ? libc.execveat(dirfd, path, argv, env, flags) : no_libc();
}

EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	WITH_ENV(envp);

	return libc.fexecve ? libc.fexecve(fd, argv, env) : no_libc();
}

EXPORT int execv(const char *path, char *const argv[])
{
	return do_execve(path, argv, environ);
}

EXPORT int execvp(const char *file, char *const argv[])
{
	return do_execvpe(file, argv, environ);
}

EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	return do_execvpe(file, argv, envp);
}

/* execl's arguments after @arg up to the NULL (as glibc counts them). */
static size_t count_args(const char *arg, va_list ap)
{
	size_t n = 0;

	if (!arg)
		return 0;
	for (n = 1; va_arg(ap, const char *); n++)
		;
	return n;
}

/*
 * The execl forms gather their arguments into an argv on their stack (as
 * glibc's do): count_args() counts them, fill_args() copies them and
 * leaves *@ap past the NULL (execle's envp is next).
 */
static void fill_args(char **argv, size_t n, const char *arg, va_list *ap)
{
	argv[0] = (char *)arg;
	for (size_t i = 1; i <= n; i++)
		argv[i] = va_arg(*ap, char *);
	argv[n] = NULL;
}

EXPORT int execl(const char *path, const char *arg, ...)
{
	va_list ap;
	size_t n;

	va_start(ap, arg);
	n = count_args(arg, ap);
	va_end(ap);
	char *argv[n + 1];

	va_start(ap, arg);
	fill_args(argv, n, arg, &ap);
	va_end(ap);
	return do_execve(path, argv, environ);
}

EXPORT int execlp(const char *file, const char *arg, ...)
{
	va_list ap;
	size_t n;

	va_start(ap, arg);
	n = count_args(arg, ap);
	va_end(ap);
	char *argv[n + 1];

	va_start(ap, arg);
	fill_args(argv, n, arg, &ap);
	va_end(ap);
	return do_execvpe(file, argv, environ);
}

EXPORT int execle(const char *path, const char *arg, ...)
{
	char *const *envp;
	va_list ap;
	size_t n;

	va_start(ap, arg);
	n = count_args(arg, ap);
	va_end(ap);
	char *argv[n + 1];

	va_start(ap, arg);
	fill_args(argv, n, arg, &ap);
	envp = va_arg(ap, char *const *);
	va_end(ap);
	return do_execve(path, argv, envp);
}

EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
		       const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	WITH_ENV(envp);

	return libc.posix_spawn ? libc.posix_spawn(pid, path, fa, attr, argv, env) : ENOSYS;
}

EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
			const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	WITH_ENV(envp);

	return libc.posix_spawnp ? libc.posix_spawnp(pid, file, fa, attr, argv, env) : ENOSYS;
}

/*
 * system(), as glibc 2.36 writes it (stdlib/system.c), over posix_spawn
 * with the built envp: SIGINT and SIGQUIT ignored while any system() runs
 * (counted under a lock), SIGCHLD blocked, the child's mask and those two
 * signals' dispositions reset, `sh -c line`, 127 if the shell cannot be
 * spawned, and a cancelled caller's child killed and reaped.
 */
static pthread_mutex_t sys_lock = PTHREAD_MUTEX_INITIALIZER;
static int sys_refs;
static struct sigaction sys_intr, sys_quit;

struct sys_call {
	pid_t pid;
	sigset_t omask;
};

static void sys_ignore_signals(void)
{
	struct sigaction sa = { .sa_handler = SIG_IGN };

	sigemptyset(&sa.sa_mask);
	pthread_mutex_lock(&sys_lock);
	if (sys_refs++ == 0) {
		sigaction(SIGINT, &sa, &sys_intr);
		sigaction(SIGQUIT, &sa, &sys_quit);
	}
	pthread_mutex_unlock(&sys_lock);
}

static void sys_restore(const struct sys_call *c)
{
	pthread_mutex_lock(&sys_lock);
	if (--sys_refs == 0) {
		sigaction(SIGINT, &sys_intr, NULL);
		sigaction(SIGQUIT, &sys_quit, NULL);
	}
	pthread_mutex_unlock(&sys_lock);
	sigprocmask(SIG_SETMASK, &c->omask, NULL);
}

static void sys_cancelled(void *arg)
{
	struct sys_call *c = arg;

	kill(c->pid, SIGKILL);
	while (waitpid(c->pid, NULL, 0) < 0 && errno == EINTR)
		;
	sys_restore(c);
}

static int sys_spawn(struct sys_call *c, const char *line)
{
	char *argv[] = { "sh", "-c", (char *)line, NULL };
	posix_spawnattr_t attr;
	sigset_t chld, reset;
	int ret;

	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, &c->omask);
	sigemptyset(&reset);
	if (sys_intr.sa_handler != SIG_IGN)
		sigaddset(&reset, SIGINT);
	if (sys_quit.sa_handler != SIG_IGN)
		sigaddset(&reset, SIGQUIT);
	posix_spawnattr_init(&attr);
	posix_spawnattr_setsigmask(&attr, &c->omask);
	posix_spawnattr_setsigdefault(&attr, &reset);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
	ret = posix_spawn(&c->pid, "/bin/sh", NULL, &attr, argv, environ); /* ours */
	posix_spawnattr_destroy(&attr);
	return ret;
}

static int do_system(const char *line)
{
	struct sys_call c;
	int status, ret;
	pid_t got;

	sys_ignore_signals();
	ret = sys_spawn(&c, line);
	if (!ret) {
		pthread_cleanup_push(sys_cancelled, &c);
		do
			got = waitpid(c.pid, &status, 0);
		while (got < 0 && errno == EINTR);
		if (got != c.pid)
			status = -1;
		pthread_cleanup_pop(0);
	} else {
		status = W_EXITCODE(127, 0);
	}
	sys_restore(&c);
	if (ret)
		errno = ret;
	return status;
}

EXPORT int system(const char *line)
{
	if (!line)
		return do_system("exit 0") == 0;
	return do_system(line);
}

/*
 * popen(): libc's, with `environ` the built envp while it spawns (one
 * popen() at a time).  The built array is static and stays as it is after
 * the swap: another thread's setenv() or getenv() that read `environ` in
 * that window may still walk it (a stack copy gone by then crashed such a
 * setenv).  A setenv() that copied the built array meanwhile gets
 * memtrack's entries taken out of its copy.  (Only the one popen() at a
 * time writes these buffers: popen_lock.)
 */
static pthread_mutex_t popen_lock = PTHREAD_MUTEX_INITIALIZER;
/* mapped at the first popen() (interpose_own_map: 192 KiB in .bss would
 * count as the program's mapped memory), then kept */
static struct popen_buffers {
	char *envp[MT_FAST_ENV_MAX_ENTRIES + 3];
	char ld[MT_FAST_ENV_MAX_PRELOAD];
} * popen_buf;

EXPORT FILE *popen(const char *command, const char *mode)
{
	struct env_need plan;
	char *const *env;
	char **saved;
	FILE *f;
	int err;

	if (!libc.popen) {
		errno = ENOSYS;
		return NULL;
	}
	pthread_mutex_lock(&popen_lock);
	if (!popen_buf)
		popen_buf = interpose_own_map(sizeof(*popen_buf));
	if (!popen_buf) { /* no memory for the copy: the child goes to the uprobes */
		pthread_mutex_unlock(&popen_lock);
		return libc.popen(command, mode);
	}
	saved = environ;
	plan = env_need(saved); /* within the buffers' bounds, or 0 slots */
	env = exec_env(saved, &plan, popen_buf->envp, popen_buf->ld);
	environ = (char **)env;
	f = libc.popen(command, mode);
	err = errno;
	if (environ == env)
		environ = saved;
	else
		env_strip(environ, popen_buf->ld,
			  plan.preload_at >= 0 ? saved[plan.preload_at] : NULL);
	pthread_mutex_unlock(&popen_lock);
	errno = err;
	return f;
}
