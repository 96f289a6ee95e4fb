// SPDX-License-Identifier: MIT
/*
 * adopt.c - a running tree found, tracked and probed; see adopt.h.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "pipeline/batch.h"
#include "inspect/authority.h"
#include "pipeline/pipeline.h"
#include "record/adopt.h"
#include "record/loader.h"
#include "record/phys_adopt.h"
#include "record/probes.h"
#include "record/stacks.h"

/* PF_KTHREAD (include/linux/sched.h), the 9th field of /proc/PID/stat. */
#define PF_KTHREAD 0x00200000u

struct proc_stat {
	char state;
	pid_t ppid;
	unsigned flags;
};

/*
 * Reads @pid's state, parent and flags from /proc/PID/stat.  The command
 * name (field 2) may hold any byte, ')' and spaces too: the fields are
 * read after its last ')'.  Returns 0 or -errno (-ENOENT: no such process).
 */
static int read_stat(pid_t pid, struct proc_stat *st)
{
	char path[32], buf[1024], *p;
	ssize_t n;
	int fd;

	*st = (struct proc_stat){ 0 };
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return n < 0 ? -errno : -ENOENT;
	buf[n] = 0;
	p = strrchr(buf, ')');
	/* state ppid pgrp session tty_nr tpgid flags */
	if (!p ||
	    sscanf(p + 1, " %c %d %*d %*d %*d %*d %u", &st->state, &st->ppid, &st->flags) != 3)
		return -EINVAL;
	return 0;
}

/*
 * Whether @pid runs a memtrack executable.  Two sessions parking the same
 * process would race (either one's SIGCONT may resume it before the other
 * has attached), so a memtrack inside the tree is left out with its tree,
 * as the recorder leaves out the children of a memtrack exec'd in it.
 */
static bool runs_memtrack(pid_t pid)
{
	char path[32], exe[4096];
	ssize_t n;
	const char *base;

	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	n = readlink(path, exe, sizeof(exe) - 1);
	if (n <= 0)
		return false;
	exe[n] = 0;
	base = strrchr(exe, '/');
	return !strcmp(base ? base + 1 : exe, "memtrack");
}

enum adopt_refusal adopt_check_root(pid_t pid, pid_t self, pid_t reaper, int *err)
{
	struct proc_stat st;
	char path[32];
	int fd;

	*err = 0;
	if (pid <= 0 || read_stat(pid, &st))
		return ADOPT_NO_PROCESS;
	if (pid == self || (reaper > 0 && pid == reaper))
		return ADOPT_SELF;
	if (st.flags & PF_KTHREAD)
		return ADOPT_KERNEL;
	if (st.state == 'Z' || st.state == 'X')
		return ADOPT_ZOMBIE;
	if (runs_memtrack(pid))
		return ADOPT_MEMTRACK;
	/* what the recorder reads of each process: its mappings (ptrace read access) */
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		*err = errno;
		return errno == ENOENT ? ADOPT_NO_PROCESS : ADOPT_NO_ACCESS;
	}
	close(fd);
	return ADOPT_OK;
}

/* Whether @pid is one of the @n of @v. */
static bool pids_has(const pid_t *v, size_t n, pid_t pid)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == pid)
			return true;
	return false;
}

static bool tree_has(const struct adopt_tree *t, pid_t pid)
{
	return pids_has(t->pids, t->n, pid);
}

/* Appends @pid to the array *@v of *@n (capacity *@cap).  Returns 0 or -ENOMEM. */
static int pids_push(pid_t **v, size_t *n, size_t *cap, pid_t pid)
{
	if (*n == *cap) {
		size_t ncap = *cap ? *cap * 2 : 16;
		pid_t *p = realloc(*v, ncap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		*v = p;
		*cap = ncap;
	}
	(*v)[(*n)++] = pid;
	return 0;
}

static int tree_add(struct adopt_tree *t, pid_t pid)
{
	return pids_push(&t->pids, &t->n, &t->cap, pid);
}

static bool tree_has_refused(const struct adopt_tree *t, pid_t pid)
{
	return pids_has(t->refused, t->n_refused, pid);
}

static int tree_refuse(struct adopt_tree *t, pid_t pid)
{
	return pids_push(&t->refused, &t->n_refused, &t->cap_refused, pid);
}

/* One process of /proc: its pid and parent. */
struct proc_link {
	pid_t pid, ppid;
};


/* Every live user process's parent, from /proc/PID/stat, into *@out (malloc'd). */
static int read_links(struct proc_link **out, size_t *n_out)
{
	size_t n = 0, cap = 256;
	struct proc_link *v = malloc(cap * sizeof(*v)), *nv;
	DIR *d = opendir("/proc");
	struct dirent *e;
	int ret = 0;

	if (!v || !d) {
		ret = -errno;
		goto out;
	}
	while ((e = readdir(d))) {
		struct proc_stat st;
		char *end;
		long pid = strtol(e->d_name, &end, 10);

		if (*end || pid <= 0 || read_stat(pid, &st) || (st.flags & PF_KTHREAD) ||
		    st.state == 'Z' || st.state == 'X')
			continue;
		if (n == cap) {
			nv = realloc(v, (cap *= 2) * sizeof(*v));
			if (!nv) {
				ret = -ENOMEM;
				goto out;
			}
			v = nv;
		}
		v[n++] = (struct proc_link){ (pid_t)pid, st.ppid };
	}
out:
	if (d)
		closedir(d);
	if (ret) {
		free(v);
		v = NULL;
	}
	*out = v;
	*n_out = n;
	return ret;
}

/*
 * One walk: adds to @t every process of @links whose parent is in @t (to a
 * fixed point: grandchildren too), except @self and @reaper, whose trees
 * are memtrack's own (memtrack attached to its own shell).  Returns the
 * number added or -errno.
 */
static int walk_once(const struct proc_link *links, size_t n, pid_t self, pid_t reaper,
		     const struct authority *auth, struct adopt_tree *t, size_t *added_from)
{
	int added = 0;
	bool more = true;

	*added_from = t->n;
	while (more) {
		more = false;
		for (size_t i = 0; i < n; i++) {
			pid_t pid = links[i].pid;

			if (pid == self || pid == reaper || tree_has(t, pid) ||
			    !tree_has(t, links[i].ppid) || runs_memtrack(pid))
				continue;
			/* not the user's to trace: left out, and so are its descendants */
			if (authority_check(auth, pid, NULL) != AUTH_OK) {
				if (!tree_has_refused(t, pid) && tree_refuse(t, pid))
					return -ENOMEM;
				continue;
			}
			if (tree_add(t, pid))
				return -ENOMEM;
			added++;
			more = true;
		}
	}
	return added;
}

/*
 * The processes @t gained from @from on, tracked, then checked again: one
 * that is no longer the user's to trace (it exec'd a setuid program between
 * the walk and its tracking; a later exec the BPF side sees) fails the
 * whole attach before anything of it is read (-EPERM, t->changed).
 */
static int track_new(struct memtrack_bpf *skel, const struct authority *auth, struct adopt_tree *t,
		     size_t from)
{
	int ret;

	for (size_t i = from; i < t->n; i++) {
		/* a child the BPF side tracked at its fork is the recorder's (EEXIST) */
		ret = loader_track_running(skel, t->pids[i]);
		if (ret && ret != -EEXIST)
			return ret;
		if (authority_check(auth, t->pids[i], NULL) > AUTH_GONE) {
			t->changed = t->pids[i];
			return -EPERM;
		}
	}
	return 0;
}

int adopt_track(struct memtrack_bpf *skel, pid_t root, pid_t self, pid_t reaper,
		const struct authority *auth, struct adopt_tree *t)
{
	int total = 0, ret;

	if (!t->n) {
		ret = tree_add(t, root);
		if (!ret)
			ret = track_new(skel, auth, t, 0);
		if (ret)
			return ret;
		total = 1;
	}
	for (int round = 0; round < 64; round++) {
		struct proc_link *links;
		size_t n, from;
		int added;

		ret = read_links(&links, &n);
		if (ret)
			return ret;
		added = walk_once(links, n, self, reaper, auth, t, &from);
		free(links);
		if (added < 0)
			return added;
		if (!added)
			return total;
		ret = track_new(skel, auth, t, from);
		if (ret)
			return ret;
		total += added;
	}
	return total;
}

/* Reads "KEY:   N kB" of /proc/PID/status into bytes. */
static void status_kb(const char *line, const char *key, __u64 *out)
{
	size_t len = strlen(key);
	unsigned long long kb;

	if (!strncmp(line, key, len) && sscanf(line + len, " %llu kB", &kb) == 1)
		*out = kb << 10;
}

/*
 * The process's RSS now, as the BPF side reports it (anon, file, shmem,
 * swap), so its timeline starts at its real level.  Returns 0 or -errno.
 */
static int rss_record(pid_t pid, struct mt_rec *r)
{
	char path[32], line[256];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	memset(r, 0, sizeof(*r));
	while (fgets(line, sizeof(line), f)) {
		status_kb(line, "RssAnon:", &r->f[RSS_ANON]);
		status_kb(line, "RssFile:", &r->f[RSS_FILE]);
		status_kb(line, "RssShmem:", &r->f[RSS_SHMEM]);
		status_kb(line, "VmSwap:", &r->f[RSS_SWAP]);
	}
	fclose(f);
	r->h.type = MT_RSS;
	r->h.pid = r->h.tid = pid;
	r->h.nfields = RSS_NFIELDS;
	r->h.ts = mono_ns();
	return 0;
}

/*
 * Reads the first line of /proc/PID/comm into @buf: what the process calls
 * itself (prctl PR_SET_NAME sets any bytes but NUL).  Returns its length,
 * 0 when it cannot be read.
 */
static size_t read_comm(pid_t pid, char *buf, size_t len)
{
	char path[32];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n <= 0)
		return 0;
	/* the kernel ends it with a newline; a newline of the name itself stays */
	if (buf[n - 1] == '\n')
		n--;
	buf[n] = 0;
	return strnlen(buf, (size_t)n);
}

/*
 * The RUNNING record of @pid: its executable as the kernel names it
 * (/proc/PID/exe), else its comm; a path longer than the record holds is
 * cut.  Returns 0, or -ENOENT when neither can be read (the process gone).
 */
static int running_record(pid_t pid, pid_t ppid, struct mt_rec_running *r)
{
	char path[32], exe[4096];
	ssize_t n;

	memset(r, 0, sizeof(*r));
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	n = readlink(path, exe, sizeof(exe) - 1);
	/* readlink does not NUL-terminate, and a path holds no NUL */
	if (n > 0) {
		memcpy(r->path, exe,
		       (size_t)n < sizeof(r->path) - 1 ? (size_t)n : sizeof(r->path) - 1);
	} else if (read_comm(pid, r->path, sizeof(r->path))) {
		r->f[RUNNING_COMM] = 1;
	} else {
		return -ENOENT;
	}
	r->h.type = MT_RUNNING;
	r->h.pid = r->h.tid = pid;
	r->h.nfields = RUNNING_NFIELDS;
	r->h.ts = mono_ns();
	r->f[RUNNING_PPID] = ppid > 0 ? (__u64)ppid : 0;
	return 0;
}

/* Injects every record of @out, then empties it.  Returns 0 or -errno. */
static int inject_all(struct pipeline *pipe, struct rec_out *out)
{
	int err = 0;

	for (size_t off = 0; !err && off < out->used; off += rec_size(out->buf + off))
		err = pipeline_inject(pipe, out->buf + off, rec_size(out->buf + off));
	out->used = 0;
	return err;
}

/*
 * Name, tables, probes and the first RSS record of one process, gathered in
 * @out and injected only once the process is found still the user's to
 * trace (@auth) after all was read: an exec of a setuid program before a
 * read shows in that check (reading /proc/PID/maps waits for an exec in
 * progress), one after it left the read of the old image.  Returns 0,
 * -EPERM when it is no longer (its probes and tables forgotten, nothing of
 * it injected) or -errno.
 */
static int sync_one(struct memtrack_bpf *skel, pid_t pid, const struct authority *auth,
		    struct probes *probes, struct stacks *stacks, struct pipeline *pipe,
		    struct rec_out *out)
{
	struct mt_rec_running run;
	struct proc_stat st;
	struct mt_rec r;
	int ret;

	/* its name first, as an exec's comes before what the new image does */
	ret = read_stat(pid, &st) ?: running_record(pid, st.ppid, &run);
	if (!ret)
		ret = rec_out_put(out, &run, sizeof(run));
	/* the tables next: no stack through an object comes before its OBJECT record */
	if (!ret && stacks)
		ret = stacks_sync(stacks, pid, mono_ns(), out);
	if (!ret && probes)
		ret = probes_sync(probes, pid);
	loader_heap_armed(skel, pid); /* every probe in: its heap from here on */
	if (ret >= 0)
		ret = rss_record(pid, &r);
	if (!ret)
		ret = rec_out_put(out, &r, sizeof(r.h) + RSS_NFIELDS * sizeof(__u64));
	if (!ret && authority_check(auth, pid, NULL) > AUTH_GONE) {
		if (probes)
			probes_forget(probes, pid, false);
		if (stacks)
			stacks_forget(stacks, pid);
		out->used = 0;
		return -EPERM;
	}
	if (!ret)
		ret = inject_all(pipe, out);
	out->used = 0;
	return ret < 0 ? ret : 0;
}

/*
 * --physical: the pages the tree has resident, marked, and one PHYSICAL
 * record of the tree's total.  A process gone is skipped.
 */
static void mark_resident(const struct adopt_tree *t, struct phys_adopt *phys,
			  struct pipeline *pipe, struct adopt_result *res)
{
	struct mt_rec r;

	for (size_t i = 0; i < t->n && !res->phys_err; i++) {
		int ret = phys_adopt_mark(phys, t->pids[i]);

		if (ret && ret != -ENOENT && ret != -ESRCH) {
			res->phys_err = ret;
			res->phys_err_pid = t->pids[i];
		}
	}
	phys_adopt_record(phys, &r);
	res->phys_bytes = r.f[PHYSICAL_BYTES];
	res->t_phys_ns = mono_ns();
	if (pipeline_inject(pipe, &r, sizeof(r.h) + PHYSICAL_NFIELDS * sizeof(__u64)) &&
	    !res->phys_err)
		res->phys_err = -EIO;
}

void adopt_sync(struct memtrack_bpf *skel, const struct adopt_tree *t, const struct authority *auth,
		struct probes *probes, struct stacks *stacks, struct phys_adopt *phys,
		struct pipeline *pipe, struct adopt_result *res)
{
	struct rec_out out = { 0 };

	memset(res, 0, sizeof(*res));
	for (size_t i = 0; i < t->n; i++) {
		int ret = sync_one(skel, t->pids[i], auth, probes, stacks, pipe, &out);

		if (ret == -ESRCH || ret == -ENOENT) {
			res->gone++;
			continue;
		}
		if (ret == -EPERM) { /* it left (the BPF side untracked it at its exec) */
			res->left++;
			continue;
		}
		if (ret) {
			res->err = ret;
			res->err_pid = t->pids[i];
			break;
		}
		res->procs++;
		if (!i)
			res->t_first_ns = mono_ns();
	}
	res->t_done_ns = mono_ns();
	free(out.buf);
	if (phys && !res->err)
		mark_resident(t, phys, pipe, res);
}

void adopt_tree_free(struct adopt_tree *t)
{
	free(t->pids);
	free(t->refused);
	*t = (struct adopt_tree){ 0 };
}
