// SPDX-License-Identifier: MIT
/*
 * probes.c - per-process allocator uprobes; see probes.h.
 *
 * Two tables: files (dev, inode) with the allocator sites found in them,
 * read once per file; and per live process the files it has attached with
 * their links.  Both are small arrays searched linearly: a tree has few live
 * processes and few allocator files.
 *
 * Each (process, file) gets two requests to the attachment mechanism
 * (attach.h): every entry site with alloc_enter, every return site with
 * alloc_exit, the enum mt_fn as the site's cookie.  This file is the site
 * policy and the registry of the fds the mechanism hands back; it never
 * creates a link itself.
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <linux/types.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "bpf_abi.h"
#include "record/attach.h"
#include "record/probes.h"
#include "record/retire.h"
#include "format/schema.h"
#include "inspect/symbols.h"

#define MAX_FILES_PER_PROC 16

struct file_info {
	dev_t dev;
	ino_t ino;
	struct alloc_syms syms; /* n == 0: no allocator here */
};

struct proc_links {
	pid_t pid;
	unsigned nfiles;
	struct file_info *files[MAX_FILES_PER_PROC]; /* borrowed from probes->files */
	struct fd_list links;			     /* owned link fds */
	struct proc_links *ilinks; /* --fast: links of interposed sites, owned (NULL: none) */
	bool fast;		   /* announced the in-process path: no interposed sites */
};

struct probes {
	const struct attach_ops *attach; /* the mechanism (attach.h) */
	int enter_fd;			 /* the program entry sites run (borrowed), -1: none yet */
	int exit_fd;			 /* the program return sites run (borrowed) */
	struct retire *retire;		 /* where links go once let go of (borrowed) */
	struct file_info **files;	 /* owned, with their elements */
	unsigned nfiles;
	struct proc_links *procs; /* owned */
	unsigned nprocs;
	struct probes_stats stats;
	/* pids counted in stats.lost, once each: an exec forgets a process's
	 * entry (probes_forget), not that it went unprobed */
	pid_t *unprobed;
	unsigned nunprobed, unprobed_cap;
	bool fast_path; /* --fast: interposed sites are marked and linked apart */
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

struct probes *probes__new(struct retire *retire, const struct attach_ops *attach)
{
	struct probes *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->attach = attach;
	p->enter_fd = p->exit_fd = -1;
	p->retire = retire;
	return p;
}

/* Returns the file's allocator sites, reading them on first sight. */
static struct file_info *file_lookup(struct probes *p, const char *path, dev_t dev, ino_t ino)
{
	struct file_info *fi, **grown;

	for (unsigned i = 0; i < p->nfiles; i++)
		if (p->files[i]->dev == dev && p->files[i]->ino == ino)
			return p->files[i];
	fi = calloc(1, sizeof(*fi));
	if (!fi)
		return NULL;
	/* an array of pointers: sizeof(pointer) is meant */
	grown = realloc(p->files,
			(p->nfiles + 1) * sizeof(*grown)); // NOLINT(bugprone-sizeof-expression)
	if (!grown) {
		free(fi);
		return NULL;
	}
	p->files = grown;
	fi->dev = dev;
	fi->ino = ino;
	alloc_syms_read(path, &fi->syms); /* unreadable: no sites */
	p->files[p->nfiles++] = fi;
	return fi;
}

static struct proc_links *proc_lookup(struct probes *p, pid_t pid, bool create)
{
	struct proc_links *grown;

	for (unsigned i = 0; i < p->nprocs; i++)
		if (p->procs[i].pid == pid)
			return &p->procs[i];
	if (!create)
		return NULL;
	grown = realloc(p->procs, (p->nprocs + 1) * sizeof(*grown));
	if (!grown)
		return NULL;
	p->procs = grown;
	memset(&p->procs[p->nprocs], 0, sizeof(*grown));
	p->procs[p->nprocs].pid = pid;
	return &p->procs[p->nprocs++];
}

/*
 * Attaches @n sites of @path with @prog_fd for @into's process through the
 * mechanism; the fds go into @into's list.  Returns 0 or -errno.
 */
static int attach_sites(struct probes *p, struct proc_links *into, int prog_fd, const char *path,
			const uint64_t *offsets, const uint64_t *cookies, unsigned n, bool ret)
{
	const struct attach_sites req = {
		.pid = into->pid,
		.path = path,
		.prog_fd = prog_fd,
		.offsets = offsets,
		.cookies = cookies,
		.n = n,
		.ret = ret,
	};
	int err = p->attach->attach(&req, &into->links);

	if (err) {
		p->stats.failures++;
		return err;
	}
	p->stats.links += n;
	return 0;
}

/*
 * glibc's free never calls another probed free, so it needs no return
 * probe to tell its own nested calls apart (see attach_file).
 */
static bool is_libc(const char *path)
{
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	return !strncmp(base, "libc.so", 7) || !strncmp(base, "libc-", 5);
}

/*
 * A C++ runtime's operator new calls malloc and may throw: it gets no
 * return probe (the unwinder cannot step through the kernel's return
 * trampoline) and takes its result from the malloc it calls (alloc.bpf.c).
 * An allocator library's own operator new (jemalloc, tcmalloc, mimalloc)
 * allocates without a probed call, so it keeps its return probe.
 */
static bool is_operator_new(unsigned fn)
{
	return fn >= MT_FN_NEW && fn <= MT_FN_NEW_ARRAY_ALIGNED_NOTHROW;
}

/*
 * Whether the calls of site @s of @fi all pass through libmemtrack-fast.so:
 * a standard name (the library defines it, so the program's calls bind to
 * the library's) of a file that is not an allocator library of its own.
 * jemalloc's, mimalloc's and tcmalloc's functions also go by their own
 * names (mimalloc's free is mi_free), which a program can call directly
 * (dlsym): their sites stay with the uprobes.
 */
static bool is_interposed(const struct file_info *fi, const struct alloc_site *s)
{
	return !fi->syms.vendor && !s->vendor && s->fn != MT_FN_FREE_SIZED &&
	       s->fn != MT_FN_FREE_ALIGNED_SIZED;
}

/* One link group's sites: entries (alloc_enter) and returns (alloc_exit). */
struct site_set {
	uint64_t off[MT_MAX_SITES], cookie[MT_MAX_SITES];
	uint64_t roff[MT_MAX_SITES], rcookie[MT_MAX_SITES];
	unsigned n, nr;
};

/* Adds site @s with cookie @c to @set, as attach_file() describes. */
static void add_site(struct site_set *set, const struct alloc_site *s, uint64_t c, bool guard_free,
		     bool vendor_file)
{
	int kind = mt_fn_kind(s->fn);

	if (kind == MT_K_FREE && !guard_free) {
		set->off[set->n] = s->offset;
		set->cookie[set->n++] = c;
		return;
	}
	if (is_operator_new(s->fn) && !vendor_file) {
		set->off[set->n] = s->entry;
		set->cookie[set->n++] = c | MT_COOKIE_NORET;
		return;
	}
	if (kind == MT_K_FREE)
		c |= MT_COOKIE_GUARDED;
	set->off[set->n] = s->entry;
	set->cookie[set->n++] = c;
	set->roff[set->nr] = s->entry;
	set->rcookie[set->nr++] = c;
}

/*
 * Links @set's sites for @pl's process (into @pl's link list @into): the
 * returns first.  A running process (attach) calls on while its links go
 * in; a call that met the entry probe but not yet its return probe would
 * leave its entry in alloc.bpf.c's inflight map for good, and every later
 * call from the same stack level would count as nested in it and go
 * unrecorded (test_attach_duration: no allocation in 0.5 s, one run in
 * three under load).  A return without its entry records nothing.
 */
static int link_set(struct probes *p, struct proc_links *pl, struct proc_links *into,
		    const struct site_set *set, const char *path)
{
	int err = 0;

	into->pid = pl->pid;
	if (set->nr)
		err = attach_sites(p, into, p->exit_fd, path, set->roff, set->rcookie, set->nr,
				   true);
	if (!err && set->n)
		err = attach_sites(p, into, p->enter_fd, path, set->off, set->cookie, set->n,
				   false);
	return err;
}

/*
 * Attaches every site of @fi for @pl's process: entries (free included) to
 * alloc_enter, returns to alloc_exit.  A free-kind site outside libc gets a
 * return probe too (MT_COOKIE_GUARDED) when the process has (or, being
 * dynamically linked, will have) another allocator file: operator delete
 * calling free, or an LD_PRELOAD wrapper's free calling libc's, is then one
 * call, recorded once.  That return probe
 * sits at the function's entry, so such a site is probed there too, not
 * past free's NULL check.  Under --fast, sites libmemtrack-fast.so
 * interposes go into links of their own (pl->ilinks), or nowhere once the
 * process has announced.  Returns the sites attached or -errno.
 */
static int attach_file(struct probes *p, struct proc_links *pl, struct file_info *fi,
		       const char *path, bool others)
{
	struct site_set *sets = calloc(2, sizeof(*sets)); /* [0] others, [1] interposed */
	bool guard_free = others && !is_libc(path);
	int err = -ENOMEM;

	if (!fi)
		err = -EINVAL;
	if (!fi || !sets)
		goto out;
	for (unsigned i = 0; i < fi->syms.n; i++) {
		const struct alloc_site *s = &fi->syms.site[i];
		uint64_t c = s->fn | (uint64_t)mt_fn_kind(s->fn) << MT_COOKIE_KIND_SHIFT;
		bool interposed = p->fast_path && is_interposed(fi, s);

		if (interposed && pl->fast)
			continue;
		add_site(&sets[interposed], s, c | (interposed ? MT_COOKIE_INTERPOSED : 0),
			 guard_free, fi->syms.vendor);
	}
	err = link_set(p, pl, pl, &sets[0], path);
	if (!err && sets[1].n) {
		if (!pl->ilinks)
			pl->ilinks = calloc(1, sizeof(*pl->ilinks));
		err = pl->ilinks ? link_set(p, pl, pl->ilinks, &sets[1], path) : -ENOMEM;
	}
	if (!err)
		err = (int)(sets[0].n + sets[0].nr + sets[1].n + sets[1].nr);
out:
	free(sets);
	return err;
}

static bool proc_has_file(const struct proc_links *pl, const struct file_info *fi)
{
	for (unsigned i = 0; i < pl->nfiles; i++)
		if (pl->files[i] == fi)
			return true;
	return false;
}

/*
 * Parses one /proc/PID/maps line; returns true for an executable mapping of
 * a file, with its path in @path.
 */
static bool exec_file_mapping(const char *line, char *path, size_t len)
{
	char perms[8];
	int pos = 0;

	if (sscanf(line, "%*x-%*x %7s %*x %*x:%*x %*u %n", perms, &pos) < 1 || !pos)
		return false;
	if (perms[2] != 'x' || line[pos] != '/')
		return false;
	snprintf(path, len, "%s", line + pos);
	path[strcspn(path, "\n")] = 0;
	return true;
}

/*
 * Sorts a failed sync of @pid: a process that is gone (killed while
 * parked) lost nothing; any other failure (no fd left, no memory) left a
 * live process without probes, which is lost data, counted once a process
 * (it is synced again at every fork, exec and mapping: a 22-process tree
 * under `ulimit -n 64` was counted as 97).  Returns -ESRCH or @err.
 */
static int gone_or_lost(struct probes *p, pid_t pid, int err)
{
	pid_t *grown;

	if (err == -ENOENT || err == -ESRCH)
		return -ESRCH;
	p->stats.last_error = -err;
	for (unsigned i = 0; i < p->nunprobed; i++)
		if (p->unprobed[i] == pid)
			return err;
	if (p->nunprobed == p->unprobed_cap) {
		unsigned cap = p->unprobed_cap ? p->unprobed_cap * 2 : 64;

		grown = realloc(p->unprobed, cap * sizeof(*grown));
		if (!grown) {
			p->stats.lost++; /* no memory to remember it: counted at each failure */
			return err;
		}
		p->unprobed = grown;
		p->unprobed_cap = cap;
	}
	p->unprobed[p->nunprobed++] = pid;
	p->stats.lost++;
	return err;
}

/*
 * libmemtrack-fast.so (--fast) only forwards each call to the next
 * definition, which is probed: its own sites would trap every call twice
 * in a process that stays on the uprobes, and record nothing more.
 */
static bool is_fast_lib(const char *path)
{
	const char *base = strrchr(path, '/');

	return !strcmp(base ? base + 1 : path, "libmemtrack-fast.so");
}

/* The dynamic loader (ld-linux-x86-64.so.2, ld-musl-x86_64.so.1 ...). */
static bool is_dynamic_loader(const char *path)
{
	const char *base = strrchr(path, '/');

	return !strncmp(base ? base + 1 : path, "ld-", 3);
}

/* One allocator file a process maps and has not attached yet. */
struct pending_file {
	struct file_info *fi;
	char path[4096 + 32]; /* through /proc/PID/root */
};

#define MAX_PENDING 8

/* What pending_files() saw besides the files it returns. */
struct maps_seen {
	bool libc_only;	   /* in: return the C library only (probes_preattach) */
	bool dynamic;	   /* out: the process maps a dynamic loader */
	unsigned attached; /* out: mappings of files @pl has attached */
};

/*
 * Reads @pid's executable file mappings into @out: the allocator files @pl
 * has not attached yet.  Returns how many, or -errno (fopen of its maps).
 */
static int pending_files(struct probes *p, pid_t pid, struct proc_links *pl,
			 struct pending_file *out, unsigned max, struct maps_seen *seen_in)
{
	char maps_path[64], line[4096 + 128], path[4096];
	unsigned n = 0;
	FILE *maps;

	snprintf(maps_path, sizeof(maps_path), "/proc/%d/maps", pid);
	maps = fopen(maps_path, "re");
	if (!maps)
		return -errno; /* ENOENT/ESRCH: gone; EMFILE...: see gone_or_lost() */
	while (n < max && fgets(line, sizeof(line), maps)) {
		struct file_info *fi;
		struct stat st;
		bool seen = false;

		if (!exec_file_mapping(line, path, sizeof(path)))
			continue;
		seen_in->dynamic |= is_dynamic_loader(path);
		if (is_fast_lib(path) || (seen_in->libc_only && !is_libc(path)))
			continue;
		/* through the process's root, so chroots and deleted files still work */
		snprintf(out[n].path, sizeof(out[n].path), "/proc/%d/root%s", pid, path);
		if (stat(out[n].path, &st))
			continue;
		fi = file_lookup(p, out[n].path, st.st_dev, st.st_ino);
		if (fi && proc_has_file(pl, fi))
			seen_in->attached++;
		if (!fi || !fi->syms.n || proc_has_file(pl, fi))
			continue;
		for (unsigned i = 0; i < n; i++)
			seen |= out[i].fi == fi;
		if (!seen)
			out[n++].fi = fi;
	}
	fclose(maps);
	return n;
}

/* Attaches what pending_files() finds; returns the sites attached or -errno. */
static int sync_files(struct probes *p, pid_t pid, bool libc_only)
{
	struct maps_seen seen = { .libc_only = libc_only };
	struct pending_file *files = NULL;
	uint64_t start = now_ns();
	struct proc_links *pl;
	int total = 0, n, nfiles;

	p->stats.syncs++;
	pl = proc_lookup(p, pid, true);
	files = calloc(MAX_PENDING, sizeof(*files));
	if (!pl || !files) {
		total = -ENOMEM;
		goto out;
	}
	nfiles = pending_files(p, pid, pl, files, MAX_PENDING, &seen);
	if (nfiles < 0) {
		total = nfiles;
		goto out;
	}
	for (int i = 0; i < nfiles; i++) {
		/*
		 * A dynamic process maps libc besides any other allocator, often
		 * only after the other is attached (an LD_PRELOAD library is
		 * mapped, and attached, before libc is)
		 */
		bool others = seen.dynamic || seen.attached + nfiles > 1;

		if (pl->nfiles == MAX_FILES_PER_PROC)
			break;
		n = attach_file(p, pl, files[i].fi, files[i].path, others);
		pl->files[pl->nfiles++] = files[i].fi;
		if (n < 0) {
			total = n;
			break;
		}
		total += n;
	}
out:
	free(files);
	p->stats.sync_ns += now_ns() - start;
	return total;
}

int probes_sync(struct probes *p, pid_t pid)
{
	int total = sync_files(p, pid, false);

	return total < 0 ? gone_or_lost(p, pid, total) : total;
}

int probes_preattach(struct probes *p, pid_t pid)
{
	int total = sync_files(p, pid, true);

	if (total < 0) /* the sync after its exec attaches everything */
		probes_forget(p, pid, true);
	return total;
}

/*
 * Lets go of @pl's links: retired (retire.h), so the poller waits for no
 * grace period; @now: closed before this returns.
 */
static void bury(struct probes *p, struct proc_links *pl, bool now)
{
	if (now)
		retire_fds_now(pl->links.fds, pl->links.n);
	else
		retire_fds(p->retire, pl->links.fds, pl->links.n);
	fd_list_release(&pl->links);
}

/* Lets go of @pl's interposed-site links (see bury). */
static void bury_ilinks(struct probes *p, struct proc_links *pl, bool now)
{
	if (!pl->ilinks)
		return;
	bury(p, pl->ilinks, now);
	free(pl->ilinks);
	pl->ilinks = NULL;
}
void probes__set_progs(struct probes *p, int enter_fd, int exit_fd)
{
	p->enter_fd = enter_fd;
	p->exit_fd = exit_fd;
}

void probes__set_fast(struct probes *p, bool on)
{
	p->fast_path = on;
}

void probes_fast(struct probes *p, pid_t pid)
{
	struct proc_links *pl = proc_lookup(p, pid, true);

	if (!pl)
		return;
	pl->fast = true;
	bury_ilinks(p, pl, false);
}

bool probes_exe_allocates(struct probes *p, pid_t pid)
{
	struct file_info *fi;
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d/exe", pid);
	if (stat(path, &st))
		return true; /* cannot tell: the uprobes are always right */
	fi = file_lookup(p, path, st.st_dev, st.st_ino);
	if (!fi)
		return true;
	/* its own C++ operators are fine: the library tells their calls apart */
	for (unsigned i = 0; i < fi->syms.n; i++)
		if (fi->syms.site[i].fn < MT_FN_NEW ||
		    fi->syms.site[i].fn > MT_FN_DELETE_ARRAY_ALIGNED_NOTHROW)
			return true;
	return false;
}

bool probes_is_fast(const struct probes *p, pid_t pid)
{
	for (unsigned i = 0; i < p->nprocs; i++)
		if (p->procs[i].pid == pid)
			return p->procs[i].fast;
	return false;
}

void probes_forget(struct probes *p, pid_t pid, bool detach_now)
{
	struct proc_links *pl = proc_lookup(p, pid, false);

	if (!pl)
		return;
	bury_ilinks(p, pl, detach_now);
	bury(p, pl, detach_now);
	*pl = p->procs[--p->nprocs];
}

void probes__stats(const struct probes *p, struct probes_stats *st)
{
	*st = p->stats;
}

void probes__free(struct probes *p)
{
	if (!p)
		return;
	for (unsigned i = 0; i < p->nprocs; i++) {
		bury_ilinks(p, &p->procs[i], false);
		bury(p, &p->procs[i], false);
	}
	for (unsigned i = 0; i < p->nfiles; i++)
		free(p->files[i]);
	free(p->procs);
	free(p->unprobed);
	free(p->files);
	free(p);
}
