// SPDX-License-Identifier: MIT
/*
 * artifact_writer.c - the streaming .mtrk writer; docs/FORMAT.md is the spec.
 *
 * An mt_encoder varint-encodes records straight into one frame buffer that
 * is reused for the whole run; sealing compresses it with one reused
 * ZSTD_CCtx into a second reused buffer that already holds room for the
 * frame header.  The mt_writer owns the file: it appends sealed frames with a
 * single write loop each, in the order it is given them, and keeps the
 * counts the trailer needs.  Several encoders (one per thread) can feed one
 * writer, so encoding and compression run in parallel while the file stays
 * sequential.  Nothing is allocated per record or per frame once the
 * buffers have reached their final size.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>
#include <zstd_errors.h>
#include "format/artifact.h"
#include "format/artifact_format.h"
#include "format/schema.h"
#include "format/varint.h"

#define RAW_INITIAL (64u << 10)
#define RAW_FINAL (MT_FRAME_RAW_TARGET + MT_REC_MAX)

/*
 * Timing every record would cost more than encoding it, so one add in
 * 2^SAMPLE_SHIFT is timed and counted 2^SAMPLE_SHIFT times.
 */
#define SAMPLE_SHIFT 6
#define SAMPLE_MASK ((1u << SAMPLE_SHIFT) - 1)

/* Header body: the command line plus a few short keys and numbers. */
#define HEADER_BODY_CAP (MT_CMDLINE_MAX + 1024)
/* Trailer body: 2 keys per type plus a few, each well under 64 bytes. */
#define TRAILER_BODY_CAP ((size_t)64 * (2 * MT_TYPE_MAX + 8))

/*
 * One frame under construction: its records, then (sealed) its header and
 * compressed payload.  Each encoding thread owns one.
 */
struct mt_encoder {
	int err;   /* first error, sticky; 0 if none */
	int level; /* zstd level */
	ZSTD_CCtx *cctx;

	uint8_t *raw; /* records of the current frame */
	size_t raw_len;
	size_t raw_cap;
	uint8_t *out; /* frame header + compressed payload */
	size_t out_cap;
	size_t out_len; /* bytes of the sealed frame in out, 0 if not sealed */

	/* the current frame */
	uint32_t nev;
	uint64_t first_ts;
	uint64_t prev_ts;
	uint64_t prev_addr;
	uint64_t events[MT_TYPE_MAX]; /* records of the frame, per type */

	uint64_t adds;		/* records ever added: picks the timed samples */
	uint64_t encode_ns;	/* encode + compress time not yet handed to a writer */
	uint64_t clock_cost_ns; /* cost of one now_ns(), removed from samples */

	/* The schema, flattened so the hot path does no lookups or calls. */
	bool known[MT_TYPE_MAX];
	bool has_string[MT_TYPE_MAX];
	uint8_t nfields[MT_TYPE_MAX];
	uint8_t kind[MT_TYPE_MAX][MT_MAX_FIELDS];
};

struct mt_writer {
	int fd;			      /* borrowed */
	int err;		      /* first error, sticky; 0 if none */
	bool finished;		      /* the trailer has been written */
	struct mt_encoder *enc;	      /* the frame of mt_writer__add() */
	uint64_t events[MT_TYPE_MAX]; /* records written, per type */
	struct mt_writer_stats st;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int fail(struct mt_writer *w, int err)
{
	if (!w->err)
		w->err = err;
	return w->err;
}

/* Writes all of @buf, riding out short writes and signals. */
static int write_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		/* a regular file or pipe never takes 0 bytes of a non-empty write */
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/*
 * Appends "key\0value\0" to @buf.  Returns -ENOSPC when it does not fit,
 * which the fixed capacities above make a programming error.
 */
static int put_kv(char *buf, size_t *len, size_t cap, const char *key, const char *val)
{
	size_t kl = strlen(key) + 1, vl = strlen(val) + 1;

	if (cap - *len < kl + vl)
		return -ENOSPC;
	memcpy(buf + *len, key, kl);
	memcpy(buf + *len + kl, val, vl);
	*len += kl + vl;
	return 0;
}

static int put_kv_u64(char *buf, size_t *len, size_t cap, const char *key, uint64_t v)
{
	char num[24];

	snprintf(num, sizeof(num), "%" PRIu64, v);
	return put_kv(buf, len, cap, key, num);
}

static int put_kv_s64(char *buf, size_t *len, size_t cap, const char *key, int64_t v)
{
	char num[24];

	snprintf(num, sizeof(num), "%" PRId64, v);
	return put_kv(buf, len, cap, key, num);
}

/* Copies a fixed-size string field, which may lack its NUL, into @dst. */
static void bounded_str(char *dst, size_t dstlen, const char *src, size_t srclen)
{
	size_t n = strnlen(src, srclen);

	if (n >= dstlen)
		n = dstlen - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
}

/* kernel_<facility> = the mechanism the run used, for each one said (FORMAT.md §2.2). */
static int put_kernel_mechs(char *body, size_t *len, size_t cap, const struct mt_header *h)
{
#define MT_X_NAME(N, name, best, fallback) name,
	static const char *const names[] = { MT_KERNEL_FACILITIES(MT_X_NAME) };
#undef MT_X_NAME
	int err = 0;

	for (unsigned i = 0; i < MT_KERNEL_NFACILITIES && !err; i++) {
		char key[32], val[MT_KERNEL_MECH_MAX];

		bounded_str(val, sizeof(val), h->kernel_mech[i], sizeof(h->kernel_mech[i]));
		if (!val[0])
			continue;
		snprintf(key, sizeof(key), "kernel_%s", names[i]);
		err = put_kv(body, len, cap, key, val);
	}
	return err;
}

static int write_header(struct mt_writer *w, const struct mt_header *h)
{
	char *buf;
	char cmd[MT_CMDLINE_MAX], kr[sizeof(h->kernel_release)], arch[sizeof(h->arch)];
	char ver[sizeof(h->memtrack_version)];
	size_t len = 0, cap = MT_FILE_PREFIX_LEN + HEADER_BODY_CAP + 4;
	char *body;
	int err = 0;

	buf = malloc(cap);
	if (!buf)
		return -ENOMEM;
	body = buf + MT_FILE_PREFIX_LEN;
	cap -= MT_FILE_PREFIX_LEN + 4;
	bounded_str(cmd, sizeof(cmd), h->command, sizeof(h->command));
	bounded_str(kr, sizeof(kr), h->kernel_release, sizeof(h->kernel_release));
	bounded_str(arch, sizeof(arch), h->arch, sizeof(h->arch));
	bounded_str(ver, sizeof(ver), h->memtrack_version, sizeof(h->memtrack_version));

	err = err ?: put_kv_u64(body, &len, cap, "format_version", MT_FORMAT_VERSION);
	err = err ?: put_kv(body, &len, cap, "memtrack_version", ver);
	err = err ?: put_kv_u64(body, &len, cap, "page_size", h->page_size);
	err = err ?: put_kv_u64(body, &len, cap, "clock_id", h->clock_id);
	err = err ?: put_kv_s64(body, &len, cap, "wall_offset_ns", h->wall_offset_ns);
	err = err ?: put_kv_u64(body, &len, cap, "start_ns", h->start_ns);
	err = err ?: put_kv(body, &len, cap, "kernel_release", kr);
	err = err ?: put_kv(body, &len, cap, "arch", arch);
	err = err ?: put_kv(body, &len, cap, "command", cmd);
	err = err ?: put_kv_u64(body, &len, cap, "flags", h->flags);
	err = err ?: put_kernel_mechs(body, &len, cap, h);
	if (h->flags & MT_HDR_ATTACHED)
		err = err ?: put_kv_u64(body, &len, cap, "attach_ns", h->attach_ns);
	if (err)
		goto out;

	memcpy(buf, MT_FILE_MAGIC, MT_FILE_MAGIC_LEN);
	mt_put_le16((uint8_t *)buf + 8, MT_FORMAT_VERSION);
	mt_put_le16((uint8_t *)buf + 10, 0);
	mt_put_le32((uint8_t *)buf + 12, (uint32_t)len);
	mt_put_le32((uint8_t *)body + len, mt_crc32(body, len));
	len += MT_FILE_PREFIX_LEN + 4;
	err = write_all(w->fd, buf, len);
	if (!err)
		w->st.file_bytes += len;
out:
	free(buf);
	return err;
}

/*
 * Grows the frame buffer geometrically up to its final size, and the output
 * buffer with it so sealing never allocates.
 */
static int grow(struct mt_encoder *e)
{
	size_t cap = e->raw_cap ? e->raw_cap * 2 : RAW_INITIAL;
	size_t out_cap;
	uint8_t *p;

	if (cap > RAW_FINAL)
		cap = RAW_FINAL;
	out_cap = MT_FRAME_HDR_LEN + ZSTD_compressBound(cap);
	p = realloc(e->raw, cap);
	if (!p)
		return -ENOMEM;
	e->raw = p;
	e->raw_cap = cap;
	/* the old output is dead between frames: no need to copy it */
	p = malloc(out_cap);
	if (!p)
		return -ENOMEM;
	free(e->out);
	e->out = p;
	e->out_cap = out_cap;
	return 0;
}

static int enc_fail(struct mt_encoder *e, int err)
{
	if (!e->err)
		e->err = err;
	return e->err;
}

int mt_encoder__seal(struct mt_encoder *e)
{
	struct mt_frame_hdr fh = { .kind = MT_FRAME_EVENTS };
	uint64_t t0;
	size_t z;

	if (e->err)
		return e->err;
	if (!e->nev || e->out_len)
		return 0;
	t0 = now_ns();
	z = ZSTD_compress2(e->cctx, e->out + MT_FRAME_HDR_LEN, e->out_cap - MT_FRAME_HDR_LEN,
			   e->raw, e->raw_len);
	if (ZSTD_isError(z))
		return enc_fail(e, ZSTD_getErrorCode(z) == ZSTD_error_memory_allocation ? -ENOMEM
											: -EIO);
	fh.comp_len = (uint32_t)z;
	fh.raw_len = (uint32_t)e->raw_len;
	fh.event_count = e->nev;
	fh.first_ts = e->first_ts;
	fh.last_ts = e->prev_ts;
	fh.payload_crc = mt_crc32(e->out + MT_FRAME_HDR_LEN, z);
	mt_frame_hdr_put(e->out, &fh);
	e->out_len = MT_FRAME_HDR_LEN + z;
	e->encode_ns += now_ns() - t0;
	return 0;
}

bool mt_encoder__full(const struct mt_encoder *e)
{
	return e->raw_len >= MT_FRAME_RAW_TARGET;
}

/*
 * The part of an OBJECT, STACK or PYCODE record between its fields and its
 * string (FORMAT.md §8.2, §8.3): an OBJECT's build-id, a STACK's frames, a
 * PYCODE's strings and line table.  @tail is the
 * whole record as userspace or BPF made it.  Returns the end of what was
 * written, or NULL for a record the format cannot describe.
 */
static uint8_t *encode_tail(uint8_t *q, unsigned type, const void *tail)
{
	if (type == MT_OBJECT) {
		const struct mt_rec_object *o = tail;
		unsigned n = o ? o->build_id_len : 0;

		if (n > MT_BUILD_ID_MAX)
			return NULL;
		q += mt_varint_encode(q, n);
		if (n)
			memcpy(q, o->build_id, n);
		return q + n;
	}
	if (type == MT_PYCODE) {
		const struct mt_rec_pycode *c = tail;
		size_t n = c ? mt_pycode_blob_len(c->f) : 0;

		if (n > MT_PYCODE_BLOB_MAX)
			return NULL;
		q += mt_varint_encode(q, n);
		if (n)
			memcpy(q, c->blob, n);
		return q + n;
	}
	if (type == MT_STACK) {
		const struct mt_rec_stack *s = tail;

		if (!s) { /* no frames given */
			*q = 0;
			return q + 1;
		}
		if (s->nframes > MT_STACK_MAX)
			return NULL;
		q += mt_varint_encode(q, s->nframes);
		for (unsigned i = 0; i < s->nframes; i++) {
			q += mt_varint_encode(q, s->frames[i].object);
			q += mt_varint_encode(q, s->frames[i].addr);
		}
	}
	return q;
}

static inline __attribute__((always_inline)) int
encode(struct mt_encoder *e, const struct mt_rec_hdr *h, const __u64 *f, const void *tail)
{
	unsigned type = h->type, n = h->nfields;
	uint8_t *p, *b, *q;
	size_t blen;
	int err;

	if (e->err)
		return e->err;
	if (e->out_len)
		return -EBUSY;
	if (type >= MT_TYPE_MAX || !e->known[type] || n < e->nfields[type] || n > MT_MAX_FIELDS ||
	    (n && !f))
		return enc_fail(e, -EINVAL);
	while (__builtin_expect(e->raw_cap - e->raw_len < MT_REC_MAX, 0)) {
		err = grow(e);
		if (err)
			return enc_fail(e, err);
	}
	if (!e->nev) {
		e->first_ts = h->ts;
		e->prev_ts = h->ts;
		e->prev_addr = 0;
	}

	p = e->raw + e->raw_len;
	p[0] = (uint8_t)type;
	/* the body goes after a 1-byte length: only EXEC records with long
	 * paths need 2, and they move up one byte */
	b = q = p + 2;
	q += mt_varint_encode(q, mt_zigzag_encode((int64_t)(h->ts - e->prev_ts)));
	q += mt_varint_encode(q, h->pid);
	q += mt_varint_encode(q, h->tid);
	q += mt_varint_encode(q, h->fn);
	q += mt_varint_encode(q, n);
	for (unsigned i = 0; i < n; i++) {
		uint64_t v = f[i];

		switch (i < e->nfields[type] ? e->kind[type][i] : MT_FK_UINT) {
		case MT_FK_SINT: v = mt_zigzag_encode((int64_t)v); break;
		case MT_FK_ADDR:
			v = mt_zigzag_encode((int64_t)(f[i] - e->prev_addr));
			e->prev_addr = f[i];
			break;
		default: break;
		}
		q += mt_varint_encode(q, v);
	}
	if (__builtin_expect(type >= MT_OBJECT, 0)) {
		q = encode_tail(q, type, tail);
		if (!q)
			return enc_fail(e, -EINVAL);
	}
	if (e->has_string[type]) {
		const char *str = type == MT_OBJECT && tail
					  ? ((const struct mt_rec_object *)tail)->path
					  : tail;
		/* at most MT_PATH_MAX - 1 bytes: the BPF buffer may lack its NUL */
		size_t sl = str ? strnlen(str, MT_PATH_MAX - 1) : 0;

		q += mt_varint_encode(q, sl);
		if (sl)
			memcpy(q, str, sl);
		q += sl;
	}
	blen = (size_t)(q - b);
	if (__builtin_expect(blen < 0x80, 1)) {
		p[1] = (uint8_t)blen;
		blen += 2;
	} else {
		memmove(p + 3, b, blen);
		p[1] = (uint8_t)(blen | 0x80);
		p[2] = (uint8_t)(blen >> 7);
		blen += 3;
	}

	e->raw_len += blen;
	e->nev++;
	e->prev_ts = h->ts;
	e->events[type]++;
	return 0;
}

int mt_encoder__add(struct mt_encoder *e, const struct mt_rec_hdr *hdr, const __u64 *f,
		    const void *str)
{
	uint64_t t0;
	int err;

	if (e->adds++ & SAMPLE_MASK)
		return encode(e, hdr, f, str);
	t0 = now_ns();
	err = encode(e, hdr, f, str);
	t0 = now_ns() - t0;
	e->encode_ns += (t0 > e->clock_cost_ns ? t0 - e->clock_cost_ns : 0) << SAMPLE_SHIFT;
	return err;
}

/* Starts the next frame in @e once its last one has been written. */
static void enc_reset(struct mt_encoder *e)
{
	e->nev = 0;
	e->raw_len = 0;
	e->out_len = 0;
	memset(e->events, 0, sizeof(e->events));
}

int mt_writer__put(struct mt_writer *w, struct mt_encoder *e)
{
	uint64_t t0;
	int err;

	if (w->err)
		return w->err;
	if (w->finished)
		return -EINVAL;
	err = mt_encoder__seal(e);
	if (err)
		return fail(w, err);
	w->st.encode_ns += e->encode_ns;
	e->encode_ns = 0;
	if (!e->nev)
		return 0;
	t0 = now_ns();
	err = write_all(w->fd, e->out, e->out_len);
	if (err)
		return fail(w, err);
	w->st.frames++;
	w->st.file_bytes += e->out_len;
	w->st.events += e->nev;
	w->st.raw_bytes += e->raw_len;
	for (unsigned t = 0; t < MT_TYPE_MAX; t++)
		w->events[t] += e->events[t];
	enc_reset(e);
	w->st.encode_ns += now_ns() - t0;
	return 0;
}

int mt_writer__add(struct mt_writer *w, const struct mt_rec_hdr *hdr, const __u64 *f,
		   const void *str)
{
	int err;

	if (w->err)
		return w->err;
	if (w->finished)
		return -EINVAL;
	if (mt_encoder__full(w->enc)) {
		err = mt_writer__put(w, w->enc);
		if (err)
			return err;
	}
	err = mt_encoder__add(w->enc, hdr, f, str);
	return err ? fail(w, err) : 0;
}

int mt_writer__flush(struct mt_writer *w)
{
	if (w->err)
		return w->err;
	if (w->finished)
		return -EINVAL;
	return mt_writer__put(w, w->enc);
}

int mt_writer__finish(struct mt_writer *w, const struct mt_trailer *t)
{
	struct mt_frame_hdr fh = { .kind = MT_FRAME_TRAILER };
	uint8_t *buf;
	char *body, key[64];
	size_t len = 0, cap = TRAILER_BODY_CAP;
	uint64_t t0;
	int err;

	if (w->err)
		return w->err;
	if (w->finished || !t)
		return -EINVAL;
	err = mt_writer__flush(w);
	if (err)
		return err;

	t0 = now_ns();
	buf = malloc(MT_FRAME_HDR_LEN + cap);
	if (!buf)
		return fail(w, -ENOMEM);
	body = (char *)buf + MT_FRAME_HDR_LEN;
	for (unsigned i = 1; i < MT_TYPE_MAX && !err; i++) {
		const struct mt_type_def *d = mt_type_def(i);

		if (!d)
			continue;
		snprintf(key, sizeof(key), "events.%s", d->name);
		err = put_kv_u64(body, &len, cap, key, w->events[i]);
	}
	err = err ?: put_kv_u64(body, &len, cap, "dropped.unknown", t->dropped[0]);
	for (unsigned i = 1; i < MT_TYPE_MAX && !err; i++) {
		const struct mt_type_def *d = mt_type_def(i);

		if (!d)
			continue;
		snprintf(key, sizeof(key), "dropped.%s", d->name);
		err = put_kv_u64(body, &len, cap, key, t->dropped[i]);
	}
	err = err ?: put_kv_u64(body, &len, cap, "unprobed", t->unprobed);
	err = err ?: put_kv_u64(body, &len, cap, "killed_in_call", t->killed_in_call);
	err = err ?: put_kv_u64(body, &len, cap, "env_overflow", t->env_overflow);
	err = err ?: put_kv_u64(body, &len, cap, "stack_table_bytes", t->stack_table_bytes);
	err = err ?: put_kv_u64(body, &len, cap, "stack_rows", t->stack_rows);
	err = err ?: put_kv_u64(body, &len, cap, "stack_index_entries", t->stack_index_entries);
	err = err ?: put_kv_u64(body, &len, cap, "stack_rows_cap", t->stack_rows_cap);
	err = err ?: put_kv_u64(body, &len, cap, "stack_objects", t->stack_objects);
	err = err ?: put_kv_u64(body, &len, cap, "stack_no_room", t->stack_no_room);
	err = err ?: put_kv_u64(body, &len, cap, "stack_no_cfi", t->stack_no_cfi);
	err = err ?: put_kv_s64(body, &len, cap, "exit_code", t->exit_code);
	err = err ?: put_kv_s64(body, &len, cap, "exit_signal", t->exit_signal);
	err = err ?: put_kv_u64(body, &len, cap, "duration_ns", t->duration_ns);
	err = err ?: put_kv_u64(body, &len, cap, "frames", w->st.frames);
	if (err)
		goto out;

	/* stored, not compressed: tiny, and readable with `strings` */
	fh.comp_len = fh.raw_len = (uint32_t)len;
	fh.payload_crc = mt_crc32(body, len);
	mt_frame_hdr_put(buf, &fh);
	err = write_all(w->fd, buf, MT_FRAME_HDR_LEN + len);
	if (err)
		goto out;
	w->st.file_bytes += MT_FRAME_HDR_LEN + len;
	w->st.encode_ns += now_ns() - t0;
	w->finished = true;
out:
	free(buf);
	return err ? fail(w, err) : 0;
}

void mt_writer__stats(const struct mt_writer *w, struct mt_writer_stats *st)
{
	*st = w->st;
	/* records of the frame being built count as added */
	st->events += w->enc->nev;
	st->raw_bytes += w->enc->raw_len;
}

/* What two back-to-back clock reads cost, so samples can discount it. */
static uint64_t clock_cost(void)
{
	uint64_t best = UINT64_MAX;

	for (int i = 0; i < 16; i++) {
		uint64_t t0 = now_ns(), d = now_ns() - t0;

		if (d < best)
			best = d;
	}
	return best;
}

struct mt_encoder *mt_encoder__new(int zstd_level)
{
	struct mt_encoder *e;

	if (!zstd_level)
		zstd_level = MT_ZSTD_LEVEL_DEFAULT;
	if (zstd_level < ZSTD_minCLevel() || zstd_level > ZSTD_maxCLevel()) {
		errno = EINVAL;
		return NULL;
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->level = zstd_level;
	for (unsigned t = 1; t < MT_TYPE_MAX; t++) {
		const struct mt_type_def *d = mt_type_def(t);

		if (!d)
			continue;
		e->known[t] = true;
		e->has_string[t] = d->has_string;
		/* heap and mmap records may omit the stack id (FORMAT.md §5.4) */
		e->nfields[t] = (uint8_t)(d->nfields - (mt_stack_field(t) >= 0));
		for (unsigned i = 0; i < d->nfields; i++)
			e->kind[t][i] = (uint8_t)d->fields[i].kind;
	}
	e->cctx = ZSTD_createCCtx();
	if (!e->cctx || grow(e)) {
		mt_encoder__free(e);
		errno = ENOMEM;
		return NULL;
	}
	/*
	 * Parameters are sticky in the reused context.  At the default level a
	 * smaller hash table and longer minimum match compress our records
	 * ~12% faster to the same size (measured on 256 KiB frames of
	 * malloc/free records, bench/bench_pipeline.c).
	 */
	ZSTD_CCtx_setParameter(e->cctx, ZSTD_c_compressionLevel, e->level);
	if (e->level == MT_ZSTD_LEVEL_DEFAULT) {
		ZSTD_CCtx_setParameter(e->cctx, ZSTD_c_hashLog, 12);
		ZSTD_CCtx_setParameter(e->cctx, ZSTD_c_minMatch, 7);
	}
	e->clock_cost_ns = clock_cost();
	return e;
}

void mt_encoder__free(struct mt_encoder *e)
{
	if (!e)
		return;
	ZSTD_freeCCtx(e->cctx);
	free(e->raw);
	free(e->out);
	free(e);
}

struct mt_writer *mt_writer__new(int fd, const struct mt_header *hdr, int zstd_level)
{
	struct mt_writer *w;
	int err;

	if (fd < 0 || !hdr) {
		errno = fd < 0 ? EBADF : EINVAL;
		return NULL;
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		errno = ENOMEM;
		return NULL;
	}
	w->fd = fd;
	w->enc = mt_encoder__new(zstd_level);
	if (!w->enc) {
		err = -errno;
		goto err;
	}
	/* the header goes out now, so even a run that dies at once leaves a
	 * file that reads as "truncated, 0 events" rather than garbage */
	err = write_header(w, hdr);
	if (err)
		goto err;
	return w;
err:
	mt_writer__free(w);
	errno = -err;
	return NULL;
}

void mt_writer__free(struct mt_writer *w)
{
	if (!w)
		return;
	mt_encoder__free(w->enc);
	free(w);
}
