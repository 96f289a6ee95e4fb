// SPDX-License-Identifier: MIT
/*
 * stacks.c - unwind tables and mapping tables for the kernel unwinder;
 * see stacks.h.
 *
 * Two tables, both small arrays searched linearly (a tree maps a few
 * hundred objects at most; processes are looked up once per park): the
 * objects of the run, and per live process the executable mappings last
 * given to the kernel.  Rows of all objects share one BPF array, filled
 * bump-style through an mmap of it; an object keeps its slice until the end.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "bpf_abi.h"
#include "memtrack.skel.h"
#include "pipeline/pipeline.h"
#include "record/stacks.h"
#include "record/stacks_share.h"
#include "inspect/unwind_table.h"

struct object {
	dev_t dev;
	ino_t ino;
	uint32_t id; /* OBJECT id, > 0 */
	uint32_t row_start, nrows;
	uint32_t index_start, nbuckets; /* 0 buckets: the unwinder searches all rows */
	struct unwind_table *t;		/* build-id and PT_LOADs (its rows are freed once loaded) */
};

struct proc_maps {
	pid_t pid;
	unsigned n;
	struct mt_umap m[MT_MAX_UMAPS];
};

struct stacks {
	struct memtrack_bpf *skel; /* borrowed */
	struct rec_out *out;	   /* stacks_sync()'s records go here (borrowed, during the call) */
	struct mt_unwind_row *rows; /* mmap of unwind_rows */
	size_t rows_len;	    /* bytes mmaped */
	uint32_t rows_used, rows_cap;
	uint64_t *index; /* mmap of unwind_index (64-bit elements) */
	size_t index_len;
	uint32_t index_used, index_cap;
	struct object *objs;
	unsigned nobjs, objs_cap;
	struct proc_maps **procs;
	unsigned nprocs, procs_cap;
	struct stacks_stats st;
	struct stacks_share *share; /* the tables for in-process unwinders, NULL: none */
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct stacks *stacks__new(struct memtrack_bpf *skel)
{
	struct stacks *s = calloc(1, sizeof(*s));
	struct bpf_map *map = skel->maps.unwind_rows;

	if (!s)
		return NULL;
	s->skel = skel;
	s->rows_cap = bpf_map__max_entries(map);
	s->rows_len = (size_t)s->rows_cap * sizeof(struct mt_unwind_row);
	s->rows_len = (s->rows_len + 4095) & ~(size_t)4095;
	s->rows = mmap(NULL, s->rows_len, PROT_READ | PROT_WRITE, MAP_SHARED, bpf_map__fd(map), 0);
	map = skel->maps.unwind_index;
	s->index_cap = bpf_map__max_entries(map);
	s->index_len = ((size_t)s->index_cap * sizeof(uint64_t) + 4095) & ~(size_t)4095;
	s->index = s->rows == MAP_FAILED ? MAP_FAILED
					 : mmap(NULL, s->index_len, PROT_READ | PROT_WRITE,
						MAP_SHARED, bpf_map__fd(map), 0);
	if (s->rows == MAP_FAILED || s->index == MAP_FAILED) {
		int err = errno;

		if (s->rows != MAP_FAILED)
			munmap(s->rows, s->rows_len);
		free(s);
		errno = err;
		return NULL;
	}
	s->st.rows_cap = s->rows_cap;
	s->st.table_bytes = s->rows_len + s->index_len;
	/* issue 20: without it, processes on the in-process path take no stacks */
	s->share = stacks_share__new(s->rows_cap, s->index_cap);
	return s;
}

/* Writes an OBJECT record for @o, timestamped @ts. */
static int emit_object(struct stacks *s, const struct object *o, const char *path, uint64_t ts)
{
	struct mt_rec_object r;

	memset(&r, 0, sizeof(r));
	r.h.type = MT_OBJECT;
	r.h.nfields = OBJECT_NFIELDS;
	r.h.ts = ts;
	r.f[OBJECT_ID] = o->id;
	if (o->t) {
		r.build_id_len = o->t->build_id_len;
		memcpy(r.build_id, o->t->build_id, o->t->build_id_len);
	}
	snprintf(r.path, sizeof(r.path), "%s", path);
	return rec_out_put(s->out, &r, sizeof(r));
}

/*
 * The object of file (@dev, @ino) at @path (as the process names it), built
 * and announced on first sight.  NULL only when memory ran out.
 */
static struct object *object_get(struct stacks *s, pid_t pid, dev_t dev, ino_t ino,
				 const char *path, uint64_t ts)
{
	char full[4096 + 32];
	struct object *o;
	uint64_t t0 = now_ns();

	for (unsigned i = 0; i < s->nobjs; i++)
		if (s->objs[i].dev == dev && s->objs[i].ino == ino)
			return &s->objs[i];
	if (s->nobjs == s->objs_cap) {
		unsigned cap = s->objs_cap ? s->objs_cap * 2 : 64;
		struct object *v = realloc(s->objs, cap * sizeof(*v));

		if (!v)
			return NULL;
		s->objs = v;
		s->objs_cap = cap;
	}
	o = &s->objs[s->nobjs];
	memset(o, 0, sizeof(*o));
	o->dev = dev;
	o->ino = ino;
	o->id = s->nobjs + 1;
	/* through the process's root, so chroots and deleted files still work */
	snprintf(full, sizeof(full), "/proc/%d/root%s", pid, path);
	if (unwind_table_build(full, &o->t) || !o->t->nrows) {
		s->st.no_cfi++;
	} else if (o->t->nrows > s->rows_cap - s->rows_used ||
		   o->t->nrows > MT_UNWIND_OBJECT_ROWS_MAX) {
		s->st.no_room++;
	} else {
		o->row_start = s->rows_used;
		o->nrows = (uint32_t)o->t->nrows;
		memcpy(s->rows + o->row_start, o->t->rows, o->t->nrows * sizeof(*s->rows));
		stacks_share_rows(s->share, o->row_start, s->rows + o->row_start, o->nrows);
		s->rows_used += o->nrows;
		s->st.rows += o->nrows;
		/* no room for the index: the unwinder searches the whole slice */
		if (o->t->nindex <= s->index_cap - s->index_used) {
			o->index_start = s->index_used;
			o->nbuckets = (uint32_t)o->t->nindex;
			for (size_t i = 0; i < o->t->nindex; i++)
				s->index[o->index_start + i] = o->t->index[i];
			stacks_share_index(s->share, o->index_start, s->index + o->index_start,
					   o->nbuckets);
			s->index_used += o->nbuckets;
		}
	}
	if (o->t) {
		free(o->t->rows);
		free(o->t->index);
		o->t->rows = NULL;
		o->t->index = NULL;
	}
	s->st.build_ns += now_ns() - t0;
	s->nobjs++;
	s->st.objects++;
	return emit_object(s, o, path, ts) ? NULL : o;
}

static struct proc_maps *proc_get(struct stacks *s, pid_t pid, bool create)
{
	struct proc_maps *pm;

	for (unsigned i = 0; i < s->nprocs; i++)
		if (s->procs[i]->pid == pid)
			return s->procs[i];
	if (!create)
		return NULL;
	if (s->nprocs == s->procs_cap) {
		unsigned cap = s->procs_cap ? s->procs_cap * 2 : 64;
		struct proc_maps **v = realloc(s->procs, cap * sizeof(struct proc_maps *));

		if (!v)
			return NULL;
		s->procs = v;
		s->procs_cap = cap;
	}
	pm = calloc(1, sizeof(*pm));
	if (!pm)
		return NULL;
	pm->pid = pid;
	s->procs[s->nprocs++] = pm;
	return pm;
}

/* Whether @pm already had mapping @m (same range, offset and object). */
static bool had_mapping(const struct proc_maps *pm, const struct mt_umap *m)
{
	for (unsigned i = 0; i < pm->n; i++)
		if (pm->m[i].start == m->start && pm->m[i].end == m->end &&
		    pm->m[i].bias == m->bias && pm->m[i].object == m->object)
			return true;
	return false;
}

static int emit_mapping(struct stacks *s, pid_t pid, const struct mt_umap *m, uint64_t offset,
			uint64_t ts)
{
	struct mt_rec r;

	memset(&r, 0, sizeof(r));
	r.h.type = MT_MAPPING;
	r.h.pid = pid;
	r.h.tid = pid;
	r.h.nfields = MAPPING_NFIELDS;
	r.h.ts = ts;
	r.f[MAPPING_START] = m->start;
	r.f[MAPPING_END] = m->end;
	r.f[MAPPING_OFFSET] = offset;
	r.f[MAPPING_OBJECT] = m->object;
	r.f[MAPPING_BIAS] = m->bias;
	return rec_out_put(s->out, &r, sizeof(r.h) + MAPPING_NFIELDS * sizeof(__u64));
}

/*
 * Parses one /proc/PID/maps line: an executable mapping of a file gives 1
 * with its fields, anything else 0.
 */
static int parse_line(const char *line, struct mt_umap *m, uint64_t *offset, dev_t *dev, ino_t *ino,
		      const char **path)
{
	unsigned long long start, end, off, inode;
	unsigned maj, min;
	char perms[8];
	int pos = 0;

	if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu %n", &start, &end, perms, &off, &maj, &min,
		   &inode, &pos) < 7 ||
	    !pos || perms[2] != 'x' || line[pos] != '/')
		return 0;
	memset(m, 0, sizeof(*m));
	m->start = start;
	m->end = end;
	*offset = off;
	*dev = makedev(maj, min);
	*ino = (ino_t)inode;
	*path = line + pos;
	return 1;
}

/* Reads @pid's executable file mappings into @out (sorted: maps is). */
static int read_maps(struct stacks *s, pid_t pid, uint64_t ts, struct proc_maps *out,
		     uint64_t *offsets)
{
	char maps_path[64], line[4096 + 128];
	FILE *f;
	int err = 0;

	snprintf(maps_path, sizeof(maps_path), "/proc/%d/maps", pid);
	f = fopen(maps_path, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	out->n = 0;
	while (fgets(line, sizeof(line), f)) {
		struct mt_umap m;
		struct object *o;
		const char *path;
		uint64_t off;
		dev_t dev;
		ino_t ino;

		line[strcspn(line, "\n")] = 0;
		if (!parse_line(line, &m, &off, &dev, &ino, &path))
			continue;
		if (out->n == MT_MAX_UMAPS) {
			s->st.too_many++;
			break;
		}
		o = object_get(s, pid, dev, ino, path, ts);
		if (!o) {
			err = -ENOMEM;
			break;
		}
		m.object = o->id;
		m.row_start = o->row_start;
		m.nrows = o->nrows;
		if (o->nbuckets) {
			m.index_start = o->index_start;
			m.nbuckets = o->nbuckets;
			m.text_lo = o->t->text_lo;
			m.shift = o->t->shift;
		}
		if (!o->t || unwind_table_bias(o->t, m.start, off, &m.bias))
			m.bias = m.start - off; /* not an ELF file: addresses are file offsets */
		offsets[out->n] = off;
		out->m[out->n++] = m;
	}
	fclose(f);
	return err;
}

int stacks_sync(struct stacks *s, pid_t pid, uint64_t ts, struct rec_out *out)
{
	uint64_t t0 = now_ns(), *offsets = NULL;
	struct proc_maps *pm, *cur = NULL;
	struct mt_umaps *um = NULL;
	__u32 key = pid;
	int err;

	s->st.syncs++;
	s->out = out;
	pm = proc_get(s, pid, true);
	cur = calloc(1, sizeof(*cur));
	um = calloc(1, sizeof(*um));
	offsets = calloc(MT_MAX_UMAPS, sizeof(*offsets));
	if (!pm || !cur || !um || !offsets) {
		err = -ENOMEM;
		goto out;
	}
	err = read_maps(s, pid, ts, cur, offsets);
	if (err)
		goto out;
	for (unsigned i = 0; i < cur->n && !err; i++)
		if (!had_mapping(pm, &cur->m[i]))
			err = emit_mapping(s, pid, &cur->m[i], offsets[i], ts);
	if (err)
		goto out;
	um->n = cur->n;
	memcpy(um->m, cur->m, cur->n * sizeof(um->m[0]));
	if (bpf_map_update_elem(bpf_map__fd(s->skel->maps.proc_maps), &key, um, BPF_ANY)) {
		err = -errno;
		goto out;
	}
	pm->n = cur->n;
	memcpy(pm->m, cur->m, cur->n * sizeof(pm->m[0]));
	stacks_share_maps(s->share, pid, um);
out:
	free(offsets);
	free(um);
	free(cur);
	s->out = NULL;
	s->st.sync_ns += now_ns() - t0;
	return err;
}

void stacks_forget(struct stacks *s, pid_t pid)
{
	__u32 key = pid;

	for (unsigned i = 0; i < s->nprocs; i++) {
		if (s->procs[i]->pid != pid)
			continue;
		free(s->procs[i]);
		s->procs[i] = s->procs[--s->nprocs];
		break;
	}
	bpf_map_delete_elem(bpf_map__fd(s->skel->maps.proc_maps), &key);
	stacks_share_forget(s->share, pid);
}

void stacks__stats(const struct stacks *s, struct stacks_stats *st)
{
	*st = s->st;
}

void stacks__free(struct stacks *s)
{
	if (!s)
		return;
	for (unsigned i = 0; i < s->nobjs; i++)
		unwind_table_free(s->objs[i].t);
	for (unsigned i = 0; i < s->nprocs; i++)
		free(s->procs[i]);
	free(s->objs);
	free(s->procs);
	munmap(s->rows, s->rows_len);
	munmap(s->index, s->index_len);
	stacks_share__free(s->share);
	free(s);
}

/* --- the in-process unwinder's view (stacks_share.h) ------------------------- */

int stacks_fast_open(struct stacks *s, pid_t pid, int *tables_fd, int *maps_fd,
		     struct stacks_share_info *info)
{
	const struct proc_maps *pm = proc_get(s, pid, false);
	struct mt_umaps *um;
	int err;

	if (!s->share)
		return -ENOTSUP;
	um = calloc(1, sizeof(*um));
	if (!um)
		return -ENOMEM;
	if (pm) {
		um->n = pm->n;
		memcpy(um->m, pm->m, pm->n * sizeof(um->m[0]));
	}
	err = stacks_share_open(s->share, pid, um, tables_fd, maps_fd, info);
	free(um);
	return err;
}

uint32_t stacks_objects(const struct stacks *s)
{
	return s->nobjs;
}
