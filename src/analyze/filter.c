// SPDX-License-Identifier: MIT
/* filter.c - which records belong to the --pid / --comm processes; see filter.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "analyze/filter.h"
#include "analyze/mix64.h"
#include "format/schema.h"

void proc_filter_init(struct proc_filter *f)
{
	memset(f, 0, sizeof(*f));
}

void proc_filter_init_like(struct proc_filter *f, const struct proc_filter *opts)
{
	proc_filter_init(f);
	memcpy(f->pids, opts->pids, sizeof(f->pids));
	f->npids = opts->npids;
	memcpy(f->comms, opts->comms, sizeof(f->comms));
	f->ncomms = opts->ncomms;
}

bool proc_filter_active(const struct proc_filter *f)
{
	return f->npids || f->ncomms;
}

int proc_filter_add_pid(struct proc_filter *f, const char *arg)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(arg, &end, 10);
	if (end == arg || *end || arg[0] == '-' || errno || !v || v > 0x7fffffff)
		return -EINVAL;
	if (f->npids == FILTER_MAX)
		return -E2BIG;
	f->pids[f->npids++] = (uint32_t)v;
	return 0;
}

int proc_filter_add_comm(struct proc_filter *f, const char *name)
{
	if (!name[0] || strchr(name, '/'))
		return -EINVAL;
	if (f->ncomms == FILTER_MAX)
		return -E2BIG;
	f->comms[f->ncomms++] = name;
	return 0;
}

static bool proc_has(const void *ctx, uint64_t pos, const void *pid)
{
	return ((const struct proc_filter *)ctx)->procs[pos].pid == *(const uint32_t *)pid;
}

static uint64_t proc_hash(const void *ctx, uint64_t pos)
{
	return mix64(((const struct proc_filter *)ctx)->procs[pos].pid);
}

/* The process @pid, added (with no command) when new; NULL on -ENOMEM. */
static struct filter_proc *proc_get(struct proc_filter *f, uint32_t pid)
{
	uint64_t at = hash_index_find(&f->index, mix64(pid), proc_has, f, &pid);
	struct filter_proc *p;

	if (at)
		return &f->procs[at - 1];
	if (hash_index_reserve(&f->index, 64, proc_hash, f))
		return NULL;
	if (f->nprocs == f->cap) {
		uint64_t cap = f->cap ? f->cap * 2 : 64;

		p = realloc(f->procs, cap * sizeof(*p));
		if (!p)
			return NULL;
		f->procs = p;
		f->cap = cap;
	}
	p = &f->procs[f->nprocs];
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	hash_index_add(&f->index, mix64(pid), f->nprocs++);
	return p;
}

/* The basename of @path, as analysis.c names a process. */
static void set_command(struct filter_proc *p, const char *path)
{
	const char *base = strrchr(path, '/');

	snprintf(p->command, sizeof(p->command), "%.63s", base ? base + 1 : path);
}

/* Follows @ev's effect on the commands; the process it concerns in *@pid. */
static int follow(struct proc_filter *f, const struct mt_event *ev, uint32_t *pid)
{
	struct filter_proc *p, *child;

	*pid = ev->h.pid;
	if (ev->h.type == MT_FORK && !(ev->f[2] & MT_FORK_THREAD))
		*pid = (uint32_t)ev->f[1];
	p = proc_get(f, ev->h.pid); /* every process seen is counted (nprocs) */
	if (!p)
		return -ENOMEM;
	if (!f->ncomms) /* --pid only: no command to follow */
		return *pid == ev->h.pid || proc_get(f, *pid) ? 0 : -ENOMEM;
	switch (ev->h.type) {
	case MT_EXEC:
	case MT_RUNNING: set_command(p, ev->str); return 0;
	case MT_FORK:
		if (ev->f[2] & MT_FORK_THREAD)
			return 0;
		child = proc_get(f, *pid); /* may move procs: look the parent up again */
		p = proc_get(f, ev->h.pid);
		if (!child || !p)
			return -ENOMEM;
		memcpy(child->command, p->command, sizeof(child->command));
		return 0;
	default: return 0;
	}
}

static bool about_a_process(unsigned type)
{
	switch (type) {
	case MT_PHYSICAL:
	case MT_MARK:
	case MT_ENABLE:
	case MT_DISABLE:
	case MT_OBJECT:
	case MT_MAPPING:
	case MT_STACK: return false;
	default: return type > 0 && type < MT_TYPE_MAX;
	}
}

static bool chosen(struct proc_filter *f, uint32_t pid)
{
	const struct filter_proc *p;
	uint64_t at;

	for (unsigned i = 0; i < f->npids; i++)
		if (f->pids[i] == pid)
			return true;
	if (!f->ncomms)
		return false;
	at = hash_index_find(&f->index, mix64(pid), proc_has, f, &pid);
	p = at ? &f->procs[at - 1] : NULL;
	for (unsigned i = 0; p && i < f->ncomms; i++)
		if (!strcmp(p->command, f->comms[i]))
			return true;
	return false;
}

int proc_filter_keep(struct proc_filter *f, const struct mt_event *ev)
{
	uint32_t pid;
	bool keep;

	if (!proc_filter_active(f) || !about_a_process(ev->h.type))
		return 1;
	if (follow(f, ev, &pid))
		return -ENOMEM;
	keep = chosen(f, pid);
	f->kept += keep;
	f->dropped += !keep;
	return keep;
}

const char *proc_filter_describe(const struct proc_filter *f, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = 0;
	for (unsigned i = 0; i < f->npids && used < len; i++)
		used += snprintf(buf + used, len - used, "%s--pid %u", used ? " " : "", f->pids[i]);
	for (unsigned i = 0; i < f->ncomms && used < len; i++)
		used += snprintf(buf + used, len - used, "%s--comm %s", used ? " " : "",
				 f->comms[i]);
	return buf;
}

void proc_filter_release(struct proc_filter *f)
{
	free(f->procs);
	hash_index_release(&f->index);
	memset(f, 0, sizeof(*f));
}
