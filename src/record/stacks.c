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
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "bpf_abi.h"
#include "memtrack.skel.h"
#include "pipeline/pipeline.h"
#include "record/stacks.h"
#include "record/stacks_prebuild.h"
#include "record/stacks_share.h"
#include "inspect/unwind_cache.h"
#include "inspect/unwind_table.h"
#include "inspect/python_elf.h"
#include "inspect/glibc_tls.h"

struct object {
	dev_t dev;
	ino_t ino;
	uint32_t id;		/* OBJECT id, > 0 */
	struct stacks_slice sl; /* 0 buckets: no rows (the unwinders need the index) */
	struct unwind_table *t; /* build-id and PT_LOADs (its rows are freed once loaded) */
	bool pending;		/* its slice is given, its rows not yet written */
	bool is_py;		/* a CPython interpreter (python_elf.h): py says which */
	struct py_interp py;
	bool announced; /* its OBJECT record is in this session's artifact */
	bool stale;	/* the file changed since (a daemon's later session): never matched */
	struct timespec ctime; /* the file's when first seen: a change moves it */
	off_t size;	       /* bytes, likewise */
};

struct proc_maps {
	pid_t pid;
	unsigned n;
	struct mt_umap m[MT_MAX_UMAPS];
	struct mt_py py; /* the interpreter whose frames its stacks take, runtime 0: none */
};

/*
 * One chunked table in the kernel (bpf_abi.h): the outer map's slots and
 * the chunks created so far, each a BPF_F_MMAPABLE array of @per entries.
 */
struct chunked {
	int outer_fd;	     /* borrowed from the skeleton; -1 until stacks__attach() */
	uint32_t elem;	     /* bytes an entry */
	uint32_t per;	     /* entries a chunk (the outer map's inner template) */
	uint32_t nslots;     /* the outer map's slots */
	uint32_t nchunks;    /* chunks created: slots [0, nchunks) */
	uint32_t npublished; /* chunks in the outer map: [0, npublished) */
	int *fds;	     /* [nslots], the chunks' fds */
	uint64_t kbytes;     /* kernel bytes of the chunks created */
	int inflight;	     /* atomic: publish() threads not yet returned from the kernel */
};

struct stacks {
	struct memtrack_bpf *skel; /* borrowed, from stacks__attach() on */
	/* rows_used, index_used, the chunks, st's rows, index_entries and
	 * table_bytes: the poller's stores and the prebuild's (stacks_prestore) */
	pthread_mutex_t store_lock;
	struct rec_out *out; /* stacks_sync()'s records go here (borrowed, during the call) */
	struct chunked rows, index;
	uint32_t rows_used, rows_cap;
	uint32_t index_used, index_cap;
	struct object *objs;
	unsigned nobjs, objs_cap;
	struct proc_maps **procs;
	unsigned nprocs, procs_cap;
	struct stacks_stats st;
	struct stacks_share *share;	  /* the tables for in-process unwinders, NULL: none */
	struct stacks_prebuild *prebuild; /* files built during the load (stacks_prebuild.h) */
	struct unwind_cache *cache;	  /* borrowed, may be NULL */
	bool no_python;			  /* --no-python-frames */
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void publish_join(struct chunked *c);

static size_t page_up(size_t n)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);

	return (n + pg - 1) / pg * pg;
}

/* A table of at most @cap entries of @elem bytes in chunks of @chunk (the loader's sizes). */
static int chunked_init(struct chunked *c, uint32_t elem, uint32_t cap, uint32_t chunk)
{
	c->outer_fd = -1;
	c->elem = elem;
	c->per = stacks_chunk_entries(cap, chunk) ?: 1;
	c->nslots = stacks_chunk_slots(cap, chunk);
	c->fds = calloc(c->nslots, sizeof(*c->fds));
	/* the outer map: one pointer a slot */
	c->kbytes = (uint64_t)c->nslots * sizeof(void *);
	return c->fds ? 0 : -ENOMEM;
}

static void chunked_free(struct chunked *c)
{
	publish_join(c);
	for (uint32_t i = 0; i < c->nchunks; i++)
		close(c->fds[i]);
	free(c->fds);
}

/*
 * One update of an outer map in flight (publish()): shared by the thread
 * making it and the poller, freed by whichever drops the last reference.
 */
struct pub {
	int outer_fd;
	int refs;      /* atomic */
	int done;      /* atomic: the update returned */
	int *inflight; /* atomic, the chunked's count of threads running */
	uint32_t n;
	__u32 keys[64];
	int fds[64];
};

static void pub_put(struct pub *p)
{
	if (__atomic_sub_fetch(&p->refs, 1, __ATOMIC_ACQ_REL) == 0)
		free(p);
}

static void *publish_main(void *arg)
{
	struct pub *p = arg;
	int *inflight = p->inflight;
	__u32 count = p->n;

	if (bpf_map_update_batch(p->outer_fd, p->keys, p->fds, &count, NULL))
		/* older kernels without batches on a map of maps: one by one */
		for (count = 0; count < p->n; count++)
			if (bpf_map_update_elem(p->outer_fd, &p->keys[count], &p->fds[count],
						BPF_ANY))
				break;
	__atomic_store_n(&p->done, 1, __ATOMIC_RELEASE);
	pub_put(p);
	__atomic_sub_fetch(inflight, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* Waits for the publisher threads still in the kernel's grace period. */
static void publish_join(struct chunked *c)
{
	while (__atomic_load_n(&c->inflight, __ATOMIC_ACQUIRE))
		usleep(100);
}

/* Whether slot @key of the outer map holds a chunk (userspace reads its map id). */
static bool slot_set(const struct chunked *c, __u32 key)
{
	__u32 id;

	return !bpf_map_lookup_elem(c->outer_fd, &key, &id);
}

/*
 * Puts chunks @fds in slots [@first, @first + @n).  The kernel waits for an
 * RCU grace period (~10 ms) after each update of a map of maps, once for a
 * batch (6.8), but the slots are set before it waits: a detached thread
 * makes the update and this thread returns as soon as the last slot reads
 * back set, so a parked process waits for no grace period.  Returns the
 * chunks put (the first ones).
 */
static uint32_t publish(struct chunked *c, uint32_t first, const int *fds, uint32_t n)
{
	struct pub *p = calloc(1, sizeof(*p));
	pthread_attr_t attr;
	pthread_t t;
	uint32_t done;
	int failed;

	if (!p)
		return 0;
	p->outer_fd = c->outer_fd;
	p->refs = 2;
	p->inflight = &c->inflight;
	p->n = n;
	for (uint32_t i = 0; i < n; i++) {
		p->keys[i] = first + i;
		p->fds[i] = fds[i];
	}
	__atomic_add_fetch(&c->inflight, 1, __ATOMIC_ACQ_REL);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 64 << 10);
	failed = pthread_create(&t, &attr, publish_main, p);
	pthread_attr_destroy(&attr);
	if (failed)
		publish_main(p); /* no thread: wait here (it drops the thread's reference) */
	while (!slot_set(c, first + n - 1) && !__atomic_load_n(&p->done, __ATOMIC_ACQUIRE))
		usleep(20);
	for (done = 0; done < n && slot_set(c, first + done); done++)
		;
	if (done < n) /* failed: the thread is done with the fds closed next */
		while (!__atomic_load_n(&p->done, __ATOMIC_ACQUIRE))
			usleep(20);
	/* the thread's reference went with publish_main(); this is ours (refs was 2) */
	pub_put(p); // NOLINT(clang-analyzer-unix.Malloc): a reference count the analyzer cannot follow
	return done;
}

/*
 * Creates the chunks up to slot @k (the kernel allocates a chunk's pages
 * at its creation), published in one update (publish()).
 */
static int chunk_reach(struct chunked *c, uint32_t k)
{
	struct bpf_map_create_opts opts = { .sz = sizeof(opts), .map_flags = BPF_F_MMAPABLE };
	uint32_t first = c->nchunks, n, put;
	int err = 0;

	if (k >= c->nslots)
		return -ENOSPC;
	if (k < c->nchunks)
		return 0;
	n = k + 1 - first;
	if (n > 64)
		n = 64; /* the next call creates the rest */
	for (uint32_t i = 0; i < n; i++) {
		int fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "unwind_chunk", sizeof(__u32), c->elem,
					c->per, &opts);

		if (fd < 0) {
			err = -errno;
			n = i;
			break;
		}
		c->fds[first + i] = fd;
	}
	/* before stacks__attach() there is no outer map yet: chunks_publish() puts them */
	put = n && c->outer_fd >= 0 ? publish(c, first, &c->fds[first], n) : n;
	for (uint32_t i = put; i < n; i++)
		close(c->fds[first + i]);
	if (put < n && !err)
		err = -EIO;
	c->nchunks += put;
	if (c->outer_fd >= 0)
		c->npublished = c->nchunks;
	/* an mmapable array: a page of header, then its entries' pages */
	c->kbytes += put * (page_up(1) + page_up((size_t)c->elem * c->per));
	if (!err && c->nchunks <= k)
		return chunk_reach(c, k);
	return err;
}

/* Puts the chunks created before the outer map @outer existed into it; 0 or -errno. */
static int chunks_publish(struct chunked *c, struct bpf_map *outer)
{
	if (bpf_map__max_entries(outer) != c->nslots)
		return -EINVAL; /* the loader sized it for another ceiling: an invariant */
	c->outer_fd = bpf_map__fd(outer);
	while (c->npublished < c->nchunks) {
		uint32_t n = c->nchunks - c->npublished < 64 ? c->nchunks - c->npublished : 64;

		if (publish(c, c->npublished, &c->fds[c->npublished], n) < n)
			return -EIO;
		c->npublished += n;
	}
	return 0;
}

/*
 * Copies @n entries from @src to entries [@at, @at + @n) of the flat
 * numbering, chunk by chunk, each through a short-lived mmap of the pages
 * written (no mapping stays: memtrack's RSS holds no table).
 */
static int chunked_write(struct chunked *c, uint32_t at, const void *src, uint32_t n)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	const char *p = src;

	while (n) {
		uint32_t k = at / c->per, e = at % c->per, take = c->per - e;
		size_t lo, hi;
		char *map;
		int err;

		if (take > n)
			take = n;
		err = chunk_reach(c, k);
		if (err)
			return err;
		lo = (size_t)e * c->elem / pg * pg;
		hi = page_up((size_t)(e + take) * c->elem);
		map = mmap(NULL, hi - lo, PROT_READ | PROT_WRITE, MAP_SHARED, c->fds[k], (off_t)lo);
		if (map == MAP_FAILED)
			return -errno;
		memcpy(map + (size_t)e * c->elem - lo, p, (size_t)take * c->elem);
		munmap(map, hi - lo);
		p += (size_t)take * c->elem;
		at += take;
		n -= take;
	}
	return 0;
}

struct stacks *stacks__new(uint32_t rows_cap, struct unwind_cache *cache)
{
	struct stacks *s = calloc(1, sizeof(*s));
	int err;

	if (!s)
		return NULL;
	pthread_mutex_init(&s->store_lock, NULL);
	s->cache = cache;
	err = chunked_init(&s->rows, sizeof(struct mt_unwind_row), rows_cap, MT_UNWIND_CHUNK_ROWS);
	err = err
		      ?: chunked_init(&s->index, sizeof(uint64_t), MT_UNWIND_INDEX_CAP(rows_cap),
				      MT_UNWIND_CHUNK_INDEX);
	if (err) {
		stacks__free(s);
		errno = -err;
		return NULL;
	}
	/* the ceiling (--unwind-rows), exactly: the slots may hold a little more */
	s->rows_cap = rows_cap;
	s->index_cap = MT_UNWIND_INDEX_CAP(rows_cap);
	s->st.rows_cap = s->rows_cap;
	s->st.table_bytes = s->rows.kbytes + s->index.kbytes;
	/* issue 20: without it, processes on the in-process path take no stacks */
	s->share = stacks_share__new(s->rows_cap, s->index_cap);
	return s;
}

int stacks__attach(struct stacks *s, struct memtrack_bpf *skel)
{
	int err;

	pthread_mutex_lock(&s->store_lock);
	s->skel = skel;
	err = chunks_publish(&s->rows, skel->maps.unwind_rows);
	err = err ?: chunks_publish(&s->index, skel->maps.unwind_index);
	pthread_mutex_unlock(&s->store_lock);
	return err;
}

/* Entries an object's rows and index are copied in: a large table is never whole in memtrack. */
#define STORE_PIECE 16384

/*
 * The one place an object's rows and index reach the kernel and the shared
 * copy: slice @sl from its table @t (in memory, or in the unwind cache's entry: unwind_table.h),
 * STORE_PIECE entries at a time (the index widened to the kernel's 64 bits).
 * Returns 0 or -errno (the slice is then not used).  Under the store lock.
 */
static int object_store(struct stacks *s, const struct stacks_slice *sl,
			const struct unwind_table *t)
{
	struct mt_unwind_row *rbuf = malloc(STORE_PIECE * sizeof(*rbuf));
	uint32_t *ibuf = malloc(STORE_PIECE * sizeof(*ibuf));
	uint64_t *wide = malloc(STORE_PIECE * sizeof(*wide));
	int err = rbuf && ibuf && wide ? 0 : -ENOMEM;

	for (uint32_t at = 0, n; !err && at < sl->nrows; at += n) {
		const struct mt_unwind_row *r;

		n = sl->nrows - at < STORE_PIECE ? sl->nrows - at : STORE_PIECE;
		r = unwind_table_rows_at(t, at, n, rbuf);
		err = r ? chunked_write(&s->rows, sl->row_start + at, r, n) : -EIO;
		if (!err) /* the same slice for the libraries' unwinders (stacks_share.h) */
			stacks_share_rows(s->share, sl->row_start + at, r, n);
	}
	for (uint32_t at = 0, n; !err && at < sl->nbuckets; at += n) {
		const uint32_t *idx;

		n = sl->nbuckets - at < STORE_PIECE ? sl->nbuckets - at : STORE_PIECE;
		idx = unwind_table_index_at(t, at, n, ibuf);
		if (!idx) {
			err = -EIO;
			break;
		}
		for (uint32_t i = 0; i < n; i++)
			wide[i] = idx[i];
		err = chunked_write(&s->index, sl->index_start + at, wide, n);
		if (!err)
			stacks_share_index(s->share, sl->index_start + at, wide, n);
	}
	free(rbuf);
	free(ibuf);
	free(wide);
	return err;
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
 * Reads whether object @o (named @full) is a CPython interpreter and, when
 * it is, writes the PYTHON record saying whether its frames are taken.
 */
static int python_emit(struct stacks *s, const struct object *o, uint64_t ts);

static int python_object(struct stacks *s, struct object *o, const char *full, uint64_t ts)
{
	if (!py_interp_candidate(full) || py_interp_read(full, &o->py) != 1)
		return 0;
	o->is_py = true;
	if (s->no_python && o->py.verdict == MT_PY_ON)
		o->py.verdict = MT_PY_OFF;
	return python_emit(s, o, ts);
}

/* The PYTHON record of interpreter @o (again, in a daemon's later session). */
static int python_emit(struct stacks *s, const struct object *o, uint64_t ts)
{
	struct mt_rec r;

	memset(&r, 0, sizeof(r));
	r.h.type = MT_PYTHON;
	r.h.nfields = PYTHON_NFIELDS;
	r.h.ts = ts;
	r.f[PYTHON_OBJECT] = o->id;
	r.f[PYTHON_VERSION] = o->py.version;
	r.f[PYTHON_FRAMES] = o->py.verdict;
	return rec_out_put(s->out, &r, sizeof(r.h) + PYTHON_NFIELDS * sizeof(__u64));
}

void stacks__set_python(struct stacks *s, bool on)
{
	s->no_python = !on;
}

void stacks__take_prebuild(struct stacks *s, struct stacks_prebuild *pb)
{
	stacks_prebuild_free(s->prebuild);
	s->prebuild = pb;
}

/*
 * Gives table @t a slice of the numbering; false, nothing given, when it
 * does not fit (the unwinders search an object's rows through its index
 * only, so no index is no room either).  Under the store lock.
 */
static bool slice_give(struct stacks *s, const struct unwind_table *t, struct stacks_slice *sl)
{
	if (t->nrows > s->rows_cap - s->rows_used || t->nrows > MT_UNWIND_OBJECT_ROWS_MAX ||
	    !t->nindex || t->nindex > s->index_cap - s->index_used)
		return false;
	*sl = (struct stacks_slice){ .row_start = s->rows_used,
				     .nrows = (uint32_t)t->nrows,
				     .index_start = s->index_used,
				     .nbuckets = (uint32_t)t->nindex };
	s->rows_used += sl->nrows;
	s->index_used += sl->nbuckets;
	s->st.rows += sl->nrows;
	s->st.index_entries += sl->nbuckets;
	return true;
}

/* A slice whose rows could not be written: out of the counts, its numbers not reused. */
static void slice_lost(struct stacks *s, struct stacks_slice *sl)
{
	s->st.rows -= sl->nrows;
	s->st.index_entries -= sl->nbuckets;
	*sl = (struct stacks_slice){ 0 };
}

int stacks_prestore(struct stacks *s, const struct unwind_table *t, struct stacks_slice *slice)
{
	int err = -ENOSPC;

	if (!t->nrows)
		return err;
	pthread_mutex_lock(&s->store_lock);
	if (slice_give(s, t, slice)) {
		err = object_store(s, slice, t);
		if (err)
			slice_lost(s, slice);
	}
	s->st.table_bytes = s->rows.kbytes + s->index.kbytes;
	pthread_mutex_unlock(&s->store_lock);
	return err;
}

/*
 * Whether @full still is the file @o was built from (its change time and
 * size; @take: records them).  A daemon's registry lives across sessions,
 * and a file may be replaced by one of the same inode number meanwhile.
 */
static bool same_file(struct object *o, const char *full, bool take)
{
	struct stat st;

	if (stat(full, &st))
		return false;
	if (take) {
		o->ctime = st.st_ctim;
		o->size = st.st_size;
		return true;
	}
	return st.st_ctim.tv_sec == o->ctime.tv_sec && st.st_ctim.tv_nsec == o->ctime.tv_nsec &&
	       st.st_size == o->size;
}

/*
 * An object met before: as is within a session; in a daemon's later
 * session announced anew (its rows are still in the kernel), after a
 * check that the file is the same (else the old one is left, stale, and
 * NULL returned for the caller to make a new one).
 */
static struct object *object_again(struct stacks *s, struct object *o, const char *full,
				   const char *path, uint64_t ts)
{
	if (o->announced)
		return o;
	if (!same_file(o, full, false)) {
		o->stale = true;
		return NULL;
	}
	o->announced = true;
	s->st.objects++;
	s->st.cached++;
	return emit_object(s, o, path, ts) || (o->is_py && python_emit(s, o, ts)) ? NULL : o;
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

	snprintf(full, sizeof(full), "/proc/%d/root%s", pid, path);
	for (unsigned i = 0; i < s->nobjs; i++) {
		if (s->objs[i].dev != dev || s->objs[i].ino != ino || s->objs[i].stale)
			continue;
		o = object_again(s, &s->objs[i], full, path, ts);
		if (o || !s->objs[i].stale)
			return o;
		break; /* replaced since: made anew below */
	}
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
	o->announced = true;
	same_file(o, full, true);
	/* through the process's root, so chroots and deleted files still work */
	o->t = stacks_prebuild_take(s->prebuild, full, &o->sl); /* stored: sl.nbuckets */
	if (o->t) /* the build's own time, not the wait for its end */
		t0 = now_ns() - o->t->build_ns;
	if (!o->t && unwind_cache_build(s->cache, full, &o->t))
		o->t = NULL;
	if (o->t && o->t->from_cache)
		s->st.cached++;
	if (o->sl.nbuckets) {
		/* its rows went in while the BPF side loaded (stacks_prestore) */
	} else if (!o->t || !o->t->nrows) {
		s->st.no_cfi++;
	} else {
		pthread_mutex_lock(&s->store_lock);
		o->pending = slice_give(s, o->t, &o->sl); /* stores_flush() writes it */
		pthread_mutex_unlock(&s->store_lock);
		s->st.no_room += !o->pending;
	}
	if (o->t && !o->pending)
		unwind_table_drop_rows(o->t);
	s->st.build_ns += now_ns() - t0;
	s->nobjs++;
	s->st.objects++;
	return emit_object(s, o, path, ts) || python_object(s, o, full, ts) ? NULL : o;
}

/*
 * Writes the rows of the objects new to this sync, after creating the
 * chunks they reach in one go (chunk_reach() says why).  An object whose
 * rows cannot be written (the kernel refused a chunk) is counted in no_room
 * and loses its slice; a mapping given it meanwhile finds no row there
 * (truncated stacks, never a wrong frame: an unwritten row is MT_CFA_NONE).
 */
static void stores_flush(struct stacks *s)
{
	pthread_mutex_lock(&s->store_lock);
	if (s->rows_used)
		(void)chunk_reach(&s->rows, (s->rows_used - 1) / s->rows.per);
	if (s->index_used)
		(void)chunk_reach(&s->index, (s->index_used - 1) / s->index.per);
	for (unsigned i = 0; i < s->nobjs; i++) {
		struct object *o = &s->objs[i];

		if (!o->pending)
			continue;
		o->pending = false;
		if (object_store(s, &o->sl, o->t)) {
			slice_lost(s, &o->sl);
			s->st.no_room++;
		}
		unwind_table_drop_rows(o->t);
	}
	s->st.table_bytes = s->rows.kbytes + s->index.kbytes;
	pthread_mutex_unlock(&s->store_lock);
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
	bool same_libc = false;
	dev_t libc_dev;
	ino_t libc_ino;
	int16_t tls;
	FILE *f;
	int err = 0;

	snprintf(maps_path, sizeof(maps_path), "/proc/%d/maps", pid);
	f = fopen(maps_path, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	out->n = 0;
	memset(&out->py, 0, sizeof(out->py));
	tls = glibc_specific_offset(&libc_dev, &libc_ino);
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
		m.row_start = o->sl.row_start;
		m.nrows = o->sl.nrows;
		if (o->sl.nbuckets) {
			m.index_start = o->sl.index_start;
			m.nbuckets = o->sl.nbuckets;
			m.text_lo = o->t->text_lo;
			m.shift = o->t->shift;
		}
		if (!o->t || unwind_table_bias(o->t, m.start, off, &m.bias))
			m.bias = m.start - off; /* not an ELF file: addresses are file offsets */
		same_libc |= tls && dev == libc_dev && ino == libc_ino;
		if (o->is_py && o->py.verdict == MT_PY_ON && !out->py.runtime) {
			out->py = o->py.py; /* one bias for all of an object's segments */
			out->py.runtime += m.bias;
			out->py.code_type += m.bias;
		}
		offsets[out->n] = off;
		out->m[out->n++] = m;
	}
	fclose(f);
	/* the kernel reads the thread's state in glibc's layout: only where it is memtrack's */
	out->py.tls_specific = out->py.runtime && same_libc ? tls : 0;
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
	/* before the kernel has the mappings, even those read before an error */
	stores_flush(s);
	if (err)
		goto out;
	for (unsigned i = 0; i < cur->n && !err; i++)
		if (!had_mapping(pm, &cur->m[i]))
			err = emit_mapping(s, pid, &cur->m[i], offsets[i], ts);
	if (err)
		goto out;
	um->n = cur->n;
	memcpy(um->m, cur->m, cur->n * sizeof(um->m[0]));
	um->py = cur->py;
	if (bpf_map_update_elem(bpf_map__fd(s->skel->maps.proc_maps), &key, um, BPF_ANY)) {
		err = -errno;
		goto out;
	}
	pm->n = cur->n;
	memcpy(pm->m, cur->m, cur->n * sizeof(pm->m[0]));
	pm->py = cur->py;
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

int stacks__reserve(struct stacks *s, uint32_t rows)
{
	uint32_t r = rows < s->rows_cap ? rows : s->rows_cap;
	uint32_t ix = rows < s->index_cap ? rows : s->index_cap;
	int err = 0;

	pthread_mutex_lock(&s->store_lock);
	while (!err && r && s->rows.nchunks <= (r - 1) / MT_UNWIND_CHUNK_ROWS)
		err = chunk_reach(&s->rows, (r - 1) / MT_UNWIND_CHUNK_ROWS);
	while (!err && ix && s->index.nchunks <= (ix - 1) / MT_UNWIND_CHUNK_INDEX)
		err = chunk_reach(&s->index, (ix - 1) / MT_UNWIND_CHUNK_INDEX);
	s->st.table_bytes = s->rows.kbytes + s->index.kbytes;
	pthread_mutex_unlock(&s->store_lock);
	return err;
}

void stacks_next_session(struct stacks *s, struct unwind_cache *cache)
{
	bool full;

	pthread_mutex_lock(&s->store_lock);
	/* past 3/4 of the ceiling: the next sessions start with room again */
	full = s->rows_used > s->rows_cap / 4 * 3 || s->index_used > s->index_cap / 4 * 3;
	for (unsigned i = 0; i < s->nobjs; i++) {
		s->objs[i].announced = false;
		if (full) {
			unwind_table_free(s->objs[i].t);
			s->objs[i].t = NULL;
		}
	}
	if (full) {
		s->nobjs = 0;
		s->rows_used = s->index_used = 0;
	}
	for (unsigned i = 0; i < s->nprocs; i++)
		free(s->procs[i]);
	s->nprocs = 0;
	s->cache = cache;
	/* the rows and index the tables take in the kernel, kept from earlier sessions */
	s->st = (struct stacks_stats){ .rows = s->rows_used,
				       .index_entries = s->index_used,
				       .rows_cap = s->rows_cap,
				       .table_bytes = s->rows.kbytes + s->index.kbytes };
	pthread_mutex_unlock(&s->store_lock);
}

void stacks__stats(struct stacks *s, struct stacks_stats *st)
{
	pthread_mutex_lock(&s->store_lock); /* a prebuild thread may still store */
	*st = s->st;
	pthread_mutex_unlock(&s->store_lock);
}

void stacks__free(struct stacks *s)
{
	if (!s)
		return;
	stacks_prebuild_free(s->prebuild); /* first: its threads store here */
	for (unsigned i = 0; i < s->nobjs; i++)
		unwind_table_free(s->objs[i].t);
	for (unsigned i = 0; i < s->nprocs; i++)
		free(s->procs[i]);
	free(s->objs);
	free(s->procs);
	chunked_free(&s->rows);
	chunked_free(&s->index);
	stacks_share__free(s->share);
	pthread_mutex_destroy(&s->store_lock);
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
		um->py = pm->py;
	}
	err = stacks_share_open(s->share, pid, um, tables_fd, maps_fd, info);
	free(um);
	return err;
}

uint32_t stacks_objects(const struct stacks *s)
{
	return s->nobjs;
}
