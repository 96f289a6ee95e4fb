// SPDX-License-Identifier: MIT
/* spawn.c - start the command as a parked child; see spawn.h. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "record/spawn.h"

static int check_exec(const char *path)
{
	struct stat st;

	if (stat(path, &st))
		return -errno;
	if (S_ISDIR(st.st_mode))
		return -EISDIR;
	return access(path, X_OK) ? -errno : 0;
}

int spawn_resolve(const char *file, char *path, size_t len)
{
	const char *env = getenv("PATH");
	char *dirs, *dir, *save = NULL;
	int err = -ENOENT;

	if (strchr(file, '/')) {
		snprintf(path, len, "%s", file);
		return check_exec(path);
	}
	dirs = strdup(env && *env ? env : "/usr/local/bin:/usr/bin:/bin");
	if (!dirs)
		return -ENOMEM;
	for (dir = strtok_r(dirs, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
		snprintf(path, len, "%s/%s", *dir ? dir : ".", file);
		err = check_exec(path);
		if (!err)
			break;
		if (err != -EACCES) /* a directory on PATH is skipped, as by a shell */
			err = -ENOENT;
	}
	free(dirs);
	return err;
}

/*
 * In the child: become the user who ran sudo, with their groups (read by
 * the parent: as_user_prepare), and let no exec raise privileges again: a
 * setuid or setgid binary or one with file capabilities runs as that user
 * (PR_SET_NO_NEW_PRIVS, as under a debugger), so what the tree records is
 * never a privileged process's memory.
 */
static int drop_privileges(void)
{
	int err = as_user_become();

	if (err)
		return err;
	return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ? -errno : 0;
}

static void child_run(struct spawn *sp, int wait_fd, char *const argv[], bool shell, bool drop,
		      const sigset_t *mask)
{
	char c;
	int err = 0;

	/* the command starts as it would without memtrack: memtrack's mask, and
	 * what was ignored before memtrack caught it (exec resets a handler) */
	for (int sig = 1; sig < NSIG; sig++)
		if (sigismember(&sp->ignored, sig) == 1)
			signal(sig, SIG_IGN);
	sigprocmask(SIG_SETMASK, mask, NULL);
	if (sp->nofile) {
		struct rlimit rl;

		if (!getrlimit(RLIMIT_NOFILE, &rl)) {
			rl.rlim_cur = sp->nofile;
			if (sp->nofile_max)
				rl.rlim_max = sp->nofile_max; /* lowering it needs no privilege */
			setrlimit(RLIMIT_NOFILE, &rl);
		}
	}
	/* before memtrack tracks this process (it waits for this word) */
	if (drop) {
		err = drop_privileges();
		if (write(sp->status_fd, &err, sizeof(err)) != sizeof(err))
			_exit(127);
	}
	/* parked until memtrack has registered this pid */
	if (read(wait_fd, &c, 1) != 1)
		_exit(127);
	close(wait_fd);
	if (!err) {
		char *const *envp = sp->envp ? sp->envp : environ;

		if (shell)
			execle("/bin/sh", "sh", "-c", argv[0], (char *)NULL, envp);
		else
			execvpe(argv[0], argv, envp);
		err = -errno;
	}
	if (write(sp->status_fd, &err, sizeof(err)) < 0)
		_exit(127);
	_exit(127);
}

/* Reads one int from @fd (EINTR retried); false at EOF or on a short read. */
static bool read_word(int fd, int *word)
{
	ssize_t n;

	do
		n = read(fd, word, sizeof(*word));
	while (n < 0 && errno == EINTR);
	return n == sizeof(*word);
}

int spawn_parked(struct spawn *sp, char *const argv[], bool shell, bool drop, const sigset_t *mask)
{
	int wait_pipe[2] = { -1, -1 }, status_pipe[2] = { -1, -1 };
	int err;

	sp->pid = -1;
	sp->release_fd = sp->status_fd = -1;
	if (drop) {
		/* the child may call only async-signal-safe functions: the groups are read here */
		err = as_user_prepare();
		if (err)
			return err;
	}
	if (pipe2(wait_pipe, O_CLOEXEC) || pipe2(status_pipe, O_CLOEXEC)) {
		err = -errno;
		goto out_close;
	}
	sp->pid = fork();
	if (sp->pid < 0) {
		err = -errno;
		goto out_close;
	}
	if (sp->pid == 0) {
		close(wait_pipe[1]);
		close(status_pipe[0]);
		sp->status_fd = status_pipe[1];
		child_run(sp, wait_pipe[0], argv, shell, drop, mask);
	}
	close(wait_pipe[0]);
	close(status_pipe[1]);
	sp->release_fd = wait_pipe[1];
	sp->status_fd = status_pipe[0];
	if (drop && !read_word(sp->status_fd, &err)) {
		spawn_abort(sp); /* the child died: it cannot have exec'd */
		return -ECHILD;
	}
	return 0; /* a failed drop is reported by spawn_release(), as the exec's */

out_close:
	for (int i = 0; i < 2; i++) {
		if (wait_pipe[i] >= 0)
			close(wait_pipe[i]);
		if (status_pipe[i] >= 0)
			close(status_pipe[i]);
	}
	return err;
}

int spawn_release(struct spawn *sp)
{
	int child_err = 0;
	ssize_t n;

	if (write(sp->release_fd, "x", 1) != 1)
		return -errno;
	close(sp->release_fd);
	sp->release_fd = -1;
	/* EOF (close-on-exec) means the exec succeeded */
	do
		n = read(sp->status_fd, &child_err, sizeof(child_err));
	while (n < 0 && errno == EINTR);
	close(sp->status_fd);
	sp->status_fd = -1;
	return n == sizeof(child_err) ? child_err : 0;
}

void spawn_abort(struct spawn *sp)
{
	if (sp->release_fd >= 0)
		close(sp->release_fd); /* the child reads EOF and exits 127 */
	if (sp->status_fd >= 0)
		close(sp->status_fd);
	sp->release_fd = sp->status_fd = -1;
	if (sp->pid > 0) {
		kill(sp->pid, SIGKILL);
		waitpid(sp->pid, NULL, 0);
	}
	sp->pid = -1;
}

/* The index of @name in @e, or e->n. */
static size_t env_find(const struct spawn_env *e, const char *name)
{
	size_t len = strlen(name);

	for (size_t i = 0; i < e->n; i++)
		if (!strncmp(e->vars[i], name, len) && e->vars[i][len] == '=')
			return i;
	return e->n;
}

int spawn_env_init(struct spawn_env *e)
{
	size_t n = 0;

	while (environ[n])
		n++;
	e->n = 0;
	e->vars = calloc(n + 1, sizeof(*e->vars));
	if (!e->vars)
		return -ENOMEM;
	for (; e->n < n; e->n++) {
		e->vars[e->n] = strdup(environ[e->n]);
		if (!e->vars[e->n]) {
			spawn_env_free(e);
			return -ENOMEM;
		}
	}
	return 0;
}

int spawn_env_set(struct spawn_env *e, const char *name, const char *value)
{
	size_t i = env_find(e, name);
	char *var = NULL, **grown;

	if (value && asprintf(&var, "%s=%s", name, value) < 0)
		return -ENOMEM;
	if (i == e->n && var) {
		grown = realloc(e->vars, (e->n + 2) * sizeof(*grown));
		if (!grown) {
			free(var);
			return -ENOMEM;
		}
		e->vars = grown;
		e->vars[e->n++] = var;
		e->vars[e->n] = NULL;
		return 0;
	}
	if (i == e->n) /* removing a name that is not there */
		return 0;
	free(e->vars[i]);
	if (var) {
		e->vars[i] = var;
		return 0;
	}
	memmove(e->vars + i, e->vars + i + 1, (e->n - i) * sizeof(*e->vars));
	e->n--;
	return 0;
}

const char *spawn_env_get(const struct spawn_env *e, const char *name)
{
	size_t i = env_find(e, name);

	return i < e->n ? e->vars[i] + strlen(name) + 1 : NULL;
}

int spawn_env_prepend(struct spawn_env *e, const char *name, const char *value, char sep)
{
	const char *old = spawn_env_get(e, name);
	char *v;
	int ret;

	if (!old || !*old)
		return spawn_env_set(e, name, value);
	if (asprintf(&v, "%s%c%s", value, sep, old) < 0)
		return -ENOMEM;
	ret = spawn_env_set(e, name, v);
	free(v);
	return ret;
}

void spawn_env_free(struct spawn_env *e)
{
	for (size_t i = 0; e->vars && i < e->n; i++)
		free(e->vars[i]);
	free(e->vars);
	e->vars = NULL;
	e->n = 0;
}
