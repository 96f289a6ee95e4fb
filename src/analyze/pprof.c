// SPDX-License-Identifier: MIT
/*
 * pprof.c - the call sites as a gzipped profile.proto; see pprof.h.
 * Field numbers are those of pprof's proto/profile.proto.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>
#include "analyze/intern.h"
#include "analyze/pb.h"
#include "analyze/pprof.h"
#include "util/hash_index.h"

/* message Profile */
enum {
	P_SAMPLE_TYPE = 1,
	P_SAMPLE = 2,
	P_MAPPING = 3,
	P_LOCATION = 4,
	P_FUNCTION = 5,
	P_STRING_TABLE = 6,
	P_TIME_NANOS = 9,
	P_DURATION_NANOS = 10,
	P_PERIOD_TYPE = 11,
	P_PERIOD = 12,
	P_COMMENT = 13,
	P_DEFAULT_SAMPLE_TYPE = 14
};
/* message ValueType, Sample, Mapping, Location, Line, Function */
enum { VT_TYPE = 1, VT_UNIT = 2 };
enum { S_LOCATION_ID = 1, S_VALUE = 2 };
enum {
	M_ID = 1,
	M_START = 2,
	M_LIMIT = 3,
	M_OFFSET = 4,
	M_FILENAME = 5,
	M_BUILD_ID = 6,
	M_HAS_FUNCTIONS = 7,
	M_HAS_FILENAMES = 8,
	M_HAS_LINES = 9,
	M_HAS_INLINE = 10
};
enum { L_ID = 1, L_MAPPING_ID = 2, L_ADDRESS = 3, L_LINE = 4 };
enum { LN_FUNCTION_ID = 1, LN_LINE = 2 };
enum { F_ID = 1, F_NAME = 2, F_SYSTEM_NAME = 3, F_FILENAME = 4 };

/* A map from a pair of u64 to an id (1, 2, 3... in insertion order). */
struct idmap {
	uint64_t (*keys)[2]; /* owned: keys[id - 1] */
	uint64_t n, cap;
	struct hash_index index; /* owned: keys by value */
};

static uint64_t mix(uint64_t a, uint64_t b)
{
	uint64_t h = a * 0x9e3779b97f4a7c15ull ^ b;

	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return h;
}

static bool idmap_has(const void *ctx, uint64_t pos, const void *key)
{
	const struct idmap *m = ctx;
	const uint64_t *k = key;

	return m->keys[pos][0] == k[0] && m->keys[pos][1] == k[1];
}

static uint64_t idmap_hash(const void *ctx, uint64_t pos)
{
	const struct idmap *m = ctx;

	return mix(m->keys[pos][0], m->keys[pos][1]);
}

/* The id of (@a, @b), added when new (*@added says so); 0 on -ENOMEM. */
static uint64_t idmap_get(struct idmap *m, uint64_t a, uint64_t b, bool *added)
{
	const uint64_t key[2] = { a, b };
	uint64_t id;

	*added = false;
	id = hash_index_find(&m->index, mix(a, b), idmap_has, m, key);
	if (id)
		return id;
	if (hash_index_reserve(&m->index, 1024, idmap_hash, m))
		return 0;
	if (m->n == m->cap) {
		uint64_t cap = m->cap ? m->cap * 2 : 256;
		void *k = realloc(m->keys, cap * sizeof(*m->keys));

		if (!k)
			return 0;
		m->keys = k;
		m->cap = cap;
	}
	m->keys[m->n][0] = a;
	m->keys[m->n][1] = b;
	*added = true;
	hash_index_add(&m->index, mix(a, b), m->n);
	return ++m->n;
}

static void idmap_release(struct idmap *m)
{
	free(m->keys);
	hash_index_release(&m->index);
	memset(m, 0, sizeof(*m));
}

struct pprof {
	struct pb out, msg, sub; /* the profile, a message, a nested one */
	struct intern names;	 /* string storage: the string table's entries */
	struct idmap strings;	 /* interned pointer -> string table index + 1 */
	struct idmap locations;	 /* (object, addr) -> location id */
	struct idmap functions;	 /* (name index, file index) -> function id */
	struct symbolizer *sym;
	const struct stack_table *st;
	bool live;  /* pprof_run.live */
	bool final; /* pprof_run.final */
	int err;
};

/* The string table index of @s (written to the table when new). */
static uint64_t str(struct pprof *pp, const char *s)
{
	const char *in = intern(&pp->names, s ? s : "");
	uint64_t id;
	bool added;

	if (!in) {
		pp->err = -ENOMEM;
		return 0;
	}
	id = idmap_get(&pp->strings, (uint64_t)(uintptr_t)in, 0, &added);
	if (!id) {
		pp->err = -ENOMEM;
		return 0;
	}
	if (added)
		pb_string_field(&pp->out, P_STRING_TABLE, in);
	return id - 1;
}

static uint64_t function_id(struct pprof *pp, const char *name, const char *file)
{
	uint64_t n = str(pp, name), f = str(pp, file), id;
	bool added;

	id = idmap_get(&pp->functions, n, f, &added);
	if (!id) {
		pp->err = -ENOMEM;
		return 0;
	}
	if (added) {
		pb_reset(&pp->sub);
		pb_varint_field(&pp->sub, F_ID, id);
		pb_varint_field(&pp->sub, F_NAME, n);
		pb_varint_field(&pp->sub, F_SYSTEM_NAME, n);
		pb_varint_field(&pp->sub, F_FILENAME, f);
		pb_message(&pp->out, P_FUNCTION, &pp->sub);
	}
	return id;
}

/* Writes the Location message of Python frame (@object, @key), id @id: one line (FORMAT.md §8.3). */
static void python_location(struct pprof *pp, uint64_t id, uint32_t object, uint64_t key)
{
	const struct mt_frame fr = { .object = object, .addr = key };
	struct site_frame f = callsite_python_frame(pp->st, &fr);
	struct pb line = { .p = NULL };
	char buf[128];

	pb_reset(&pp->msg);
	pb_varint_field(&pp->msg, L_ID, id);
	pb_reset(&line);
	pb_varint_field(&line, LN_FUNCTION_ID,
			function_id(pp, site_frame_name(&f, buf, sizeof(buf)), f.file));
	pb_varint_field(&line, LN_LINE, f.line);
	pb_message(&pp->msg, L_LINE, &line);
	pb_release(&line);
	pb_message(&pp->out, P_LOCATION, &pp->msg);
}

/* Writes the Location message of frame (@obj_id, @addr), id @id, with its lines. */
static void location(struct pprof *pp, uint64_t id, uint32_t obj_id, uint64_t addr)
{
	const struct mt_object *obj = obj_id ? stack_table_object(pp->st, obj_id) : NULL;
	struct pb line = { .p = NULL };
	struct sym_result r;
	char buf[128];

	if (symbolizer__lookup(pp->sym, obj, addr ? addr - 1 : 0, &r)) {
		pp->err = -ENOMEM;
		return;
	}
	pb_reset(&pp->msg);
	pb_varint_field(&pp->msg, L_ID, id);
	if (obj)
		pb_varint_field(&pp->msg, L_MAPPING_ID, obj->id);
	pb_varint_field(&pp->msg, L_ADDRESS, addr);
	for (uint32_t i = 0; i < r.nframes; i++) {
		/* object 0, address 0: the location of the sites recorded without a stack */
		struct site_frame f = { .function = obj_id || addr ? r.frames[i].function
								   : "(no stack)",
					.obj = obj,
					.addr = addr };
		uint64_t fid =
			function_id(pp, site_frame_name(&f, buf, sizeof(buf)), r.frames[i].file);

		pb_reset(&line);
		pb_varint_field(&line, LN_FUNCTION_ID, fid);
		pb_varint_field(&line, LN_LINE, r.frames[i].line);
		pb_message(&pp->msg, L_LINE, &line);
	}
	pb_release(&line);
	pb_message(&pp->out, P_LOCATION, &pp->msg);
}

/* The location id of a frame; its Location is written when new. */
static uint64_t location_id(struct pprof *pp, uint32_t object, uint64_t addr)
{
	bool added;
	uint64_t id = idmap_get(&pp->locations, object, addr, &added);

	if (!id)
		pp->err = -ENOMEM;
	else if (added && object & MT_PY_FRAME)
		python_location(pp, id, object, addr);
	else if (added)
		location(pp, id, object, addr);
	return id;
}

/*
 * A site's values in sample_types()' order: export's, with inuse at the
 * tree's heap peak; a live profile's, with inuse now (Go's heap profile).
 */
static uint32_t values(const struct pprof *pp, const struct site *s, uint64_t *v)
{
	if (pp->live) {
		v[0] = s->allocs;
		v[1] = s->allocated_bytes;
		/* once finished the blocks are swept: in use at the end is what was never freed */
		v[2] = pp->final ? s->leaked_count + s->live_end_count : s->live_count;
		v[3] = pp->final ? s->leaked_bytes + s->live_end_bytes : s->live_bytes;
		return 4;
	}
	v[0] = s->allocs;
	v[1] = s->allocated_bytes;
	v[2] = s->peak_bytes;
	v[3] = s->leaked_bytes;
	v[4] = s->mem_peak;
	v[5] = s->peak_count;
	return 6;
}

static void sample(struct pprof *pp, const struct site *s)
{
	const struct mt_stack *st = stack_table_get(pp->st, s->stack);
	uint64_t locs[MT_STACK_MAX], v[6];
	uint32_t nv = values(pp, s, v);
	struct mt_frame order[MT_STACK_MAX];
	int nf = st ? callsite_order(pp->sym, pp->st, st, order) : 0;
	uint32_t n = 0;
	struct pb smp = { .p = NULL };

	if (nf < 0) {
		pp->err = nf;
		return;
	}
	if (st)
		for (; n < (uint32_t)nf; n++)
			locs[n] = location_id(pp, order[n].object, order[n].addr);
	else /* no stack recorded: one location naming that */
		locs[n++] = location_id(pp, 0, 0);
	pb_packed(&smp, S_LOCATION_ID, locs, n);
	pb_packed(&smp, S_VALUE, v, nv);
	pb_message(&pp->out, P_SAMPLE, &smp);
	pb_release(&smp);
}

static void mappings(struct pprof *pp)
{
	char hex[2 * MT_BUILD_ID_MAX + 1];

	for (uint32_t i = 0; i < pp->st->nobjects; i++) {
		const struct mt_object *o = &pp->st->objects[i];

		for (unsigned k = 0; k < o->build_id_len; k++)
			snprintf(hex + 2 * (size_t)k, 3, "%02x", o->build_id[k]);
		hex[2 * (size_t)o->build_id_len] = 0;
		pb_reset(&pp->msg);
		pb_varint_field(&pp->msg, M_ID, o->id);
		pb_varint_field(&pp->msg, M_START, 0);
		pb_varint_field(&pp->msg, M_LIMIT, UINT64_MAX >> 1);
		pb_varint_field(&pp->msg, M_OFFSET, 0);
		pb_varint_field(&pp->msg, M_FILENAME, str(pp, o->path));
		pb_varint_field(&pp->msg, M_BUILD_ID, str(pp, hex));
		pb_varint_field(&pp->msg, M_HAS_FUNCTIONS, 1);
		pb_varint_field(&pp->msg, M_HAS_FILENAMES, 1);
		pb_varint_field(&pp->msg, M_HAS_LINES, 1);
		pb_varint_field(&pp->msg, M_HAS_INLINE, 1);
		pb_message(&pp->out, P_MAPPING, &pp->msg);
	}
}

static void sample_types(struct pprof *pp)
{
	static const char *const export_types[6][2] = {
		{ "alloc_objects", "count" }, { "alloc_space", "bytes" },
		{ "inuse_space", "bytes" },   { "leaked", "bytes" },
		{ "memory", "bytes" },	      /* heap + mapped at its peak */
		{ "inuse_objects", "count" }, /* at the heap peak, as inuse_space */
	};
	static const char *const live_types[4][2] = {
		{ "alloc_objects", "count" },
		{ "alloc_space", "bytes" },
		{ "inuse_objects", "count" },
		{ "inuse_space", "bytes" },
	};
	const char *const(*types)[2] = pp->live ? live_types : export_types;
	int n = pp->live ? 4 : 6;

	for (int i = 0; i < n; i++) {
		pb_reset(&pp->msg);
		pb_varint_field(&pp->msg, VT_TYPE, str(pp, types[i][0]));
		pb_varint_field(&pp->msg, VT_UNIT, str(pp, types[i][1]));
		pb_message(&pp->out, P_SAMPLE_TYPE, &pp->msg);
	}
	pb_varint_field(&pp->out, P_DEFAULT_SAMPLE_TYPE, str(pp, "inuse_space"));
}

/*
 * --sample-bytes: the period (space/bytes, as Go's heap profiles say
 * theirs) and a comment that the values are estimates, already scaled.
 */
static void sampling(struct pprof *pp, const struct analysis *a)
{
	char note[256];
	bool sampled = analysis_sampling_note(a, note, sizeof(note));

	if (!sampled && !pp->live)
		return;
	/* a live profile always has one (Go's do): 1 byte for an exact recording */
	pb_reset(&pp->msg);
	pb_varint_field(&pp->msg, VT_TYPE, str(pp, "space"));
	pb_varint_field(&pp->msg, VT_UNIT, str(pp, "bytes"));
	pb_message(&pp->out, P_PERIOD_TYPE, &pp->msg);
	pb_varint_field(&pp->out, P_PERIOD, sampled ? a->sample_period : 1);
	if (sampled)
		pb_varint_field(&pp->out, P_COMMENT, str(pp, note));
}

static int gz_write(const struct pb *b, int fd)
{
	gzFile gz = gzdopen(fd, "wb");
	int ok;

	if (!gz) {
		close(fd);
		return errno ? -errno : -ENOMEM;
	}
	ok = b->n == 0 || gzwrite(gz, b->p, (unsigned)b->n) == (int)b->n;
	if (gzclose(gz) != Z_OK || !ok)
		return -EIO;
	return 0;
}

int pprof_write(const struct analysis *a, const struct stack_table *st, struct symbolizer *sym,
		const struct pprof_run *run, int fd)
{
	struct pprof pp = { .sym = sym, .st = st, .live = run->live, .final = run->final };
	int err = -ENOMEM;
	bool built;

	if (intern_init(&pp.names)) {
		close(fd);
		return -ENOMEM;
	}
	str(&pp, ""); /* index 0 is the empty string */
	sample_types(&pp);
	mappings(&pp);
	for (uint64_t i = 0; i < a->sites.nsites && !pp.err; i++)
		if (a->sites.sites[i].allocs ||
		    (!pp.live && a->sites.sites[i].mem_peak)) /* a mapping site too */
			sample(&pp, &a->sites.sites[i]);
	sampling(&pp, a);
	pb_varint_field(&pp.out, P_TIME_NANOS, run->start_wall_ns);
	pb_varint_field(&pp.out, P_DURATION_NANOS, run->duration_ns);
	built = !pp.err && !pp.out.err && !pp.msg.err && !pp.sub.err;
	if (built && pp.out.n <= UINT32_MAX) {
		err = gz_write(&pp.out, fd); /* closes @fd */
	} else {
		close(fd);
		if (built)
			err = -EFBIG;
	}
	pb_release(&pp.out);
	pb_release(&pp.msg);
	pb_release(&pp.sub);
	intern_release(&pp.names);
	idmap_release(&pp.strings);
	idmap_release(&pp.locations);
	idmap_release(&pp.functions);
	return err;
}
