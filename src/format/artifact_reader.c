// SPDX-License-Identifier: MIT
/*
 * artifact_reader.c - the streaming .mtrk reader; docs/FORMAT.md is the spec.
 *
 * One frame at a time is read into a reused buffer, checked and decompressed
 * into a second reused buffer, and its records are decoded on demand.  The
 * file is only ever read forward (no seeks), so memory is bounded by the
 * largest frame whatever the file's size.  Only regular files are read: a
 * FIFO or device named as an artifact would block the reader or feed it
 * without end.  Following a file that is still being written
 * (mt_reader__follow) is the one exception to reading forward: an
 * unfinished frame is read again from its start once more of it is there.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <zstd.h>
#include "format/artifact.h"
#include "format/artifact_format.h"
#include "format/open_regular.h"
#include "format/schema.h"
#include "format/varint.h"

struct mt_reader {
	int fd;
	int state;    /* 0 reading, 1 clean end, < 0 sticky error */
	uint64_t off; /* file offset of the next byte to read */
	struct mt_header hdr;
	struct mt_trailer trailer;
	bool have_trailer;
	bool follow; /* mt_reader__follow(): an unfinished frame is awaited, not an error */
	ZSTD_DCtx *dctx;

	uint8_t *zbuf; /* payload as stored */
	size_t zcap;
	uint8_t *raw; /* payload decompressed */
	size_t rcap;

	/* the current event frame */
	const uint8_t *p; /* next undecoded record */
	const uint8_t *end;
	bool in_frame;
	uint64_t frame_off;   /* file offset of its frame header */
	uint32_t frame_count; /* its header's event_count */
	uint32_t frame_seen;  /* records decoded so far, of every type */
	uint64_t prev_ts;
	uint64_t prev_addr;

	uint64_t records;	    /* records returned */
	uint64_t frames;	    /* event frames read */
	uint64_t seen[MT_TYPE_MAX]; /* records returned per type */

	/* the schema, flattened for the hot path (as in the writer) */
	bool known[MT_TYPE_MAX];
	bool has_string[MT_TYPE_MAX];
	uint8_t nfields[MT_TYPE_MAX];
	uint8_t min_fields[MT_TYPE_MAX]; /* nfields, less the stack id (files of older writers) */
	int8_t stack_field[MT_TYPE_MAX]; /* index of the `stack` field, -1: none */
	uint8_t kind[MT_TYPE_MAX][MT_MAX_FIELDS];

	char err[256];
};

static void set_err(char *buf, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void set_err(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (!buf || !len)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}

/* Reads up to @len bytes; returns how many (short only at EOF) or -errno. */
static ssize_t read_full(struct mt_reader *r, void *buf, size_t len)
{
	uint8_t *p = buf;
	size_t got = 0;

	while (got < len) {
		ssize_t n = read(r->fd, p + got, len - got);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	r->off += got;
	return (ssize_t)got;
}

static int io_error(struct mt_reader *r, int err)
{
	set_err(r->err, sizeof(r->err), "read error at offset %" PRIu64 ": %s", r->off,
		strerror(-err));
	return err;
}

static int truncated(struct mt_reader *r, const char *where)
{
	set_err(r->err, sizeof(r->err),
		"file truncated at offset %" PRIu64 " (%s): %" PRIu64 " events read", r->off, where,
		r->records);
	return -ENODATA;
}

static int corrupt(struct mt_reader *r, uint64_t frame_off, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int corrupt(struct mt_reader *r, uint64_t frame_off, const char *fmt, ...)
{
	char why[160];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	set_err(r->err, sizeof(r->err), "corrupt frame at offset %" PRIu64 ": %s", frame_off, why);
	return -EBADMSG;
}

/* Grows *@buf to at least @need bytes; its content is not kept. */
static int reserve(uint8_t **buf, size_t *cap, size_t need)
{
	uint8_t *p;

	if (need <= *cap && *buf)
		return 0;
	if (!need)
		need = 1;
	p = malloc(need);
	if (!p)
		return -ENOMEM;
	free(*buf);
	*buf = p;
	*cap = need;
	return 0;
}

/* Decimal without sign, whitespace or overflow; at most @max. */
static int parse_u64(const char *s, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;

	if (!*s)
		return -EINVAL;
	for (; *s; s++) {
		unsigned d = (unsigned)(*s - '0');

		if (d > 9 || v > (UINT64_MAX - d) / 10)
			return -EINVAL;
		v = v * 10 + d;
	}
	if (v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

/* Decimal with an optional '-', within [@min, @max]. */
static int parse_s64(const char *s, int64_t min, int64_t max, int64_t *out)
{
	bool neg = *s == '-';
	uint64_t mag;

	if (parse_u64(s + neg, neg ? (uint64_t)INT64_MAX + 1 : INT64_MAX, &mag))
		return -EINVAL;
	if (neg && mag == (uint64_t)INT64_MAX + 1)
		*out = INT64_MIN;
	else
		*out = neg ? -(int64_t)mag : (int64_t)mag;
	if (*out < min || *out > max)
		return -EINVAL;
	return 0;
}

typedef int (*kv_fn)(void *ctx, const char *key, const char *val);

/*
 * Walks a "key\0value\0..." body (NUL-terminated in place, so @fn gets C
 * strings).  Returns -EBADMSG when it does not end right after a value, or
 * what @fn returned when non-zero.
 */
static int parse_kv(const uint8_t *body, size_t len, kv_fn fn, void *ctx)
{
	const char *p = (const char *)body, *end = p + len;

	while (p < end) {
		const char *key = p, *val, *nul;
		int err;

		nul = memchr(key, 0, (size_t)(end - key));
		if (!nul || nul == key)
			return -EBADMSG;
		val = nul + 1;
		nul = memchr(val, 0, (size_t)(end - val));
		if (!nul)
			return -EBADMSG;
		err = fn(ctx, key, val);
		if (err)
			return err;
		p = nul + 1;
	}
	return 0;
}

struct header_ctx {
	struct mt_header *h;
	bool have_version;
	const char *bad_key; /* the key whose value did not parse */
};

/* A kernel_<facility> key: kept (bounded) for a facility this reader knows. */
static void kernel_mech_kv(struct mt_header *h, const char *facility, const char *val)
{
#define MT_X_NAME(N, name, best, fallback) name,
	static const char *const names[] = { MT_KERNEL_FACILITIES(MT_X_NAME) };
#undef MT_X_NAME

	for (unsigned i = 0; i < MT_KERNEL_NFACILITIES; i++)
		if (!strcmp(facility, names[i]))
			snprintf(h->kernel_mech[i], sizeof(h->kernel_mech[i]), "%s", val);
}

static int header_kv(void *ctx, const char *key, const char *val)
{
	struct header_ctx *c = ctx;
	struct mt_header *h = c->h;
	uint64_t u = 0;
	int64_t s = 0;
	int err = 0;

	if (!strcmp(key, "format_version")) {
		err = parse_u64(val, UINT16_MAX, &u);
		if (!err && u != h->format_version)
			err = -EINVAL;
		c->have_version = true;
	} else if (!strcmp(key, "memtrack_version")) {
		snprintf(h->memtrack_version, sizeof(h->memtrack_version), "%s", val);
	} else if (!strcmp(key, "page_size")) {
		err = parse_u64(val, UINT32_MAX, &u);
		h->page_size = (uint32_t)u;
	} else if (!strcmp(key, "clock_id")) {
		err = parse_u64(val, UINT32_MAX, &u);
		h->clock_id = (uint32_t)u;
	} else if (!strcmp(key, "wall_offset_ns")) {
		err = parse_s64(val, INT64_MIN, INT64_MAX, &s);
		h->wall_offset_ns = s;
	} else if (!strcmp(key, "start_ns")) {
		err = parse_u64(val, UINT64_MAX, &u);
		h->start_ns = u;
	} else if (!strcmp(key, "kernel_release")) {
		snprintf(h->kernel_release, sizeof(h->kernel_release), "%s", val);
	} else if (!strcmp(key, "arch")) {
		snprintf(h->arch, sizeof(h->arch), "%s", val);
	} else if (!strcmp(key, "command")) {
		snprintf(h->command, sizeof(h->command), "%s", val);
	} else if (!strncmp(key, "kernel_", 7)) {
		kernel_mech_kv(h, key + 7, val);
	} else if (!strcmp(key, "flags")) {
		err = parse_u64(val, UINT32_MAX, &u);
		h->flags = (uint32_t)u;
	} else if (!strcmp(key, "attach_ns")) {
		err = parse_u64(val, UINT64_MAX, &u);
		h->attach_ns = u;
	}
	/* other keys come from newer writers: ignored */
	if (err) {
		c->bad_key = key;
		return -EBADMSG;
	}
	return 0;
}

struct trailer_ctx {
	struct mt_trailer *t;
	const char *bad_key;
};

/* The trailer's stack_* keys (@name without the prefix); unknown ones are ignored. */
static int parse_stack_key(struct mt_trailer *t, const char *name, const char *val)
{
	static const struct {
		const char *name;
		size_t off;
	} keys[] = {
		{ "table_bytes", offsetof(struct mt_trailer, stack_table_bytes) },
		{ "rows", offsetof(struct mt_trailer, stack_rows) },
		{ "index_entries", offsetof(struct mt_trailer, stack_index_entries) },
		{ "rows_cap", offsetof(struct mt_trailer, stack_rows_cap) },
		{ "objects", offsetof(struct mt_trailer, stack_objects) },
		{ "no_room", offsetof(struct mt_trailer, stack_no_room) },
		{ "no_cfi", offsetof(struct mt_trailer, stack_no_cfi) },
	};

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (!strcmp(name, keys[i].name))
			return parse_u64(val, UINT64_MAX, (uint64_t *)((char *)t + keys[i].off));
	return 0;
}

static int trailer_kv(void *ctx, const char *key, const char *val)
{
	struct trailer_ctx *c = ctx;
	struct mt_trailer *t = c->t;
	uint64_t u = 0;
	int64_t s = 0;
	unsigned type;
	int err = 0;

	if (!strncmp(key, "events.", 7)) {
		type = mt_type_from_name(key + 7);
		err = parse_u64(val, UINT64_MAX, &u);
		if (type)
			t->events[type] = u;
	} else if (!strncmp(key, "dropped.", 8)) {
		/* mt_type_from_name() says 0 for any unknown name: test "unknown" */
		type = strcmp(key + 8, "unknown") ? mt_type_from_name(key + 8) : 0;
		err = parse_u64(val, UINT64_MAX, &u);
		if (type || !strcmp(key + 8, "unknown"))
			t->dropped[type] = u;
	} else if (!strcmp(key, "exit_code")) {
		err = parse_s64(val, INT32_MIN, INT32_MAX, &s);
		t->exit_code = (int32_t)s;
	} else if (!strcmp(key, "exit_signal")) {
		err = parse_s64(val, INT32_MIN, INT32_MAX, &s);
		t->exit_signal = (int32_t)s;
	} else if (!strcmp(key, "duration_ns")) {
		err = parse_u64(val, UINT64_MAX, &u);
		t->duration_ns = u;
	} else if (!strcmp(key, "frames")) {
		err = parse_u64(val, UINT64_MAX, &u);
		t->frames = u;
	} else if (!strcmp(key, "unprobed")) {
		err = parse_u64(val, UINT64_MAX, &u);
		t->unprobed = u;
	} else if (!strcmp(key, "killed_in_call")) {
		err = parse_u64(val, UINT64_MAX, &u);
		t->killed_in_call = u;
	} else if (!strcmp(key, "env_overflow")) {
		err = parse_u64(val, UINT64_MAX, &u);
		t->env_overflow = u;
	} else if (!strncmp(key, "stack_", 6)) {
		err = parse_stack_key(t, key + 6, val);
	}
	if (err) {
		c->bad_key = key;
		return -EBADMSG;
	}
	return 0;
}

/* The trailer frame's payload is in r->zbuf; the file must end after it. */
static int read_trailer(struct mt_reader *r, uint64_t frame_off, size_t len)
{
	struct trailer_ctx c = { .t = &r->trailer };
	uint8_t extra;
	ssize_t n;
	int err;

	memset(&r->trailer, 0, sizeof(r->trailer));
	err = parse_kv(r->zbuf, len, trailer_kv, &c);
	if (err) {
		if (c.bad_key)
			return corrupt(r, frame_off, "trailer value of %s is malformed", c.bad_key);
		return corrupt(r, frame_off, "trailer is not a key/value list");
	}
	r->have_trailer = true;
	if (r->trailer.frames != r->frames)
		return corrupt(r, frame_off,
			       "trailer counts %" PRIu64 " frames, the file has %" PRIu64,
			       r->trailer.frames, r->frames);
	for (unsigned t = 1; t < MT_TYPE_MAX; t++) {
		if (r->known[t] && r->trailer.events[t] != r->seen[t])
			return corrupt(r, frame_off,
				       "trailer counts %" PRIu64
				       " %s events, the file has %" PRIu64,
				       r->trailer.events[t], mt_type_def(t)->name, r->seen[t]);
	}
	n = read_full(r, &extra, 1);
	if (n < 0)
		return io_error(r, (int)n);
	if (n)
		return corrupt(r, frame_off, "data after the trailer");
	return 0;
}

/*
 * The file ends inside (or right before) the frame at @start.  Following a
 * file being written, that frame is not written yet: go back to its start
 * and say -EAGAIN, so the next call reads it again.  Otherwise the file is
 * truncated.
 */
static int frame_unfinished(struct mt_reader *r, uint64_t start, const char *where)
{
	if (!r->follow)
		return truncated(r, where);
	if (lseek(r->fd, (off_t)start, SEEK_SET) < 0)
		return io_error(r, -errno);
	r->off = start;
	return -EAGAIN;
}

/*
 * Reads the next frame.  Returns 1 when an event frame is ready to decode,
 * 2 for a frame to skip, 0 after the trailer, -EAGAIN when following and
 * the next frame is not complete yet, or a negative error.
 */
static int read_frame(struct mt_reader *r)
{
	uint8_t hb[MT_FRAME_HDR_LEN];
	struct mt_frame_hdr fh;
	uint64_t start = r->off;
	ssize_t n;
	size_t z;
	int err;

	n = read_full(r, hb, sizeof(hb));
	if (n < 0)
		return io_error(r, (int)n);
	if (n == 0)
		return frame_unfinished(r, start, "no trailer");
	if (n < MT_FRAME_HDR_LEN)
		return frame_unfinished(r, start, "inside a frame header");
	if (memcmp(hb, MT_FRAME_MAGIC, 4) != 0)
		return corrupt(r, start, "bad frame magic");
	if (!mt_crc32_ok(mt_get_le32(hb + MT_FRAME_OFF_HDR_CRC), hb, MT_FRAME_OFF_HDR_CRC))
		return corrupt(r, start, "frame header checksum mismatch");
	mt_frame_hdr_get(hb, &fh);
	/* refused before allocating anything for it */
	if (fh.comp_len > MT_FRAME_LEN_MAX || fh.raw_len > MT_FRAME_LEN_MAX)
		return corrupt(r, start, "frame length %" PRIu32 " exceeds the 64 MiB limit",
			       fh.comp_len > fh.raw_len ? fh.comp_len : fh.raw_len);
	err = reserve(&r->zbuf, &r->zcap, fh.comp_len);
	if (err)
		return err;
	n = read_full(r, r->zbuf, fh.comp_len);
	if (n < 0)
		return io_error(r, (int)n);
	if ((size_t)n < fh.comp_len)
		return frame_unfinished(r, start, "inside a frame payload");
	if (!mt_crc32_ok(fh.payload_crc, r->zbuf, fh.comp_len))
		return corrupt(r, start, "payload checksum mismatch");

	switch (fh.kind) {
	case MT_FRAME_EVENTS: break;
	case MT_FRAME_TRAILER:
		if (fh.comp_len != fh.raw_len)
			return corrupt(r, start, "trailer lengths differ");
		err = read_trailer(r, start, fh.comp_len);
		return err ? err : 0;
	default:
		/* a kind from a newer writer: its payload was checked, skip it */
		return 2;
	}

	err = reserve(&r->raw, &r->rcap, fh.raw_len);
	if (err)
		return err;
	/* exactly one zstd frame, of exactly raw_len bytes */
	z = ZSTD_findFrameCompressedSize(r->zbuf, fh.comp_len);
	if (ZSTD_isError(z) || z != fh.comp_len)
		return corrupt(r, start, "payload is not one zstd frame");
	z = ZSTD_decompressDCtx(r->dctx, r->raw, fh.raw_len, r->zbuf, fh.comp_len);
	if (ZSTD_isError(z))
		return corrupt(r, start, "bad zstd data: %s", ZSTD_getErrorName(z));
	if (z != fh.raw_len)
		return corrupt(r, start, "payload decompresses to %zu bytes, not %" PRIu32, z,
			       fh.raw_len);

	r->p = r->raw;
	r->end = r->raw + fh.raw_len;
	r->in_frame = true;
	r->frame_off = start;
	r->frame_count = fh.event_count;
	r->frame_seen = 0;
	r->prev_ts = fh.first_ts;
	r->prev_addr = 0;
	r->frames++;
	return 1;
}

static int bad_record(struct mt_reader *r, const char *why)
{
	return corrupt(r, r->frame_off, "record %" PRIu32 " %s", r->frame_seen, why);
}

/*
 * Decodes the part of an OBJECT, STACK or PYCODE record between its fields
 * and its string (FORMAT.md §8.2, §8.3) into @ev.  Returns 0 or -EBADMSG.
 */
static int decode_tail(const uint8_t **p, const uint8_t *bend, unsigned type, struct mt_event *ev)
{
	uint64_t n, obj, addr;

	if (type == MT_OBJECT) {
		if (mt_varint_get(p, bend, &n) || n > MT_BUILD_ID_MAX || n > (uint64_t)(bend - *p))
			return -EBADMSG;
		memcpy(ev->build_id, *p, n);
		ev->build_id_len = (__u8)n;
		*p += n;
		return 0;
	}
	if (type == MT_PYCODE) {
		if (mt_varint_get(p, bend, &n) || n > MT_PYCODE_BLOB_MAX ||
		    n > (uint64_t)(bend - *p) || n != mt_pycode_blob_len(ev->f))
			return -EBADMSG;
		memcpy(ev->blob, *p, n);
		ev->blob_len = (__u16)n;
		*p += n;
		return 0;
	}
	if (type != MT_STACK)
		return 0;
	if (mt_varint_get(p, bend, &n) || n > MT_STACK_MAX)
		return -EBADMSG;
	for (unsigned i = 0; i < n; i++) {
		if (mt_varint_get(p, bend, &obj) || mt_varint_get(p, bend, &addr) ||
		    obj > UINT32_MAX)
			return -EBADMSG;
		ev->frames[i].object = (__u32)obj;
		ev->frames[i].addr = addr;
	}
	ev->nframes = (__u32)n;
	ev->truncated = ev->f[STACK_TRUNCATED] != 0;
	return 0;
}

/*
 * Decodes the record at r->p.  Returns 1 when @ev holds it, 0 when it was of
 * an unknown type and skipped, or -EBADMSG.
 */
static int decode_record(struct mt_reader *r, struct mt_event *ev)
{
	const uint8_t *p = r->p, *bend;
	uint64_t type, blen, v, pid, tid, fn, nf;
	unsigned schema_n, kept;

	if (mt_varint_get(&p, r->end, &type) || mt_varint_get(&p, r->end, &blen) ||
	    blen > (uint64_t)(r->end - p))
		return bad_record(r, "runs past the payload");
	bend = p + blen;
	r->p = bend;
	if (r->frame_seen == r->frame_count)
		return corrupt(r, r->frame_off, "more records than the frame header's %" PRIu32,
			       r->frame_count);
	if (type == 0)
		return bad_record(r, "has type 0");
	/* every type, known or not, starts with the ts delta: the ts chain
	 * runs through records this reader skips */
	if (mt_varint_get(&p, bend, &v))
		return bad_record(r, "has a malformed timestamp");
	r->prev_ts += (uint64_t)mt_zigzag_decode(v);
	if (type >= MT_TYPE_MAX || !r->known[type]) {
		r->frame_seen++;
		return 0;
	}

	if (mt_varint_get(&p, bend, &pid) || mt_varint_get(&p, bend, &tid) ||
	    mt_varint_get(&p, bend, &fn) || mt_varint_get(&p, bend, &nf))
		return bad_record(r, "has a malformed header");
	if (pid > UINT32_MAX || tid > UINT32_MAX || fn > UINT16_MAX)
		return bad_record(r, "has an out-of-range pid, tid or fn");
	schema_n = r->nfields[type];
	if (nf < r->min_fields[type])
		return bad_record(r, "has fewer fields than its type");
	kept = nf < MT_MAX_FIELDS ? (unsigned)nf : MT_MAX_FIELDS;
	for (uint64_t i = 0; i < nf; i++) {
		if (mt_varint_get(&p, bend, &v))
			return bad_record(r, "has a malformed field");
		/* fields past the schema's are plain UINT (format rule) */
		if (i < schema_n) {
			switch (r->kind[type][i]) {
			case MT_FK_SINT: v = (uint64_t)mt_zigzag_decode(v); break;
			case MT_FK_ADDR:
				v = r->prev_addr + (uint64_t)mt_zigzag_decode(v);
				r->prev_addr = v;
				break;
			default: break;
			}
		}
		if (i < MT_MAX_FIELDS)
			ev->f[i] = v;
	}
	for (unsigned i = kept; i < MT_MAX_FIELDS; i++)
		ev->f[i] = 0;
	ev->str[0] = '\0';
	ev->stack = r->stack_field[type] >= 0 ? ev->f[r->stack_field[type]] : 0;
	if (type >= MT_OBJECT && decode_tail(&p, bend, type, ev))
		return bad_record(r, type == MT_STACK	 ? "has malformed frames"
				     : type == MT_PYCODE ? "has a malformed code object"
							 : "has a malformed build-id");
	if (r->has_string[type]) {
		uint64_t sl;
		size_t n;

		if (mt_varint_get(&p, bend, &sl) || sl > (uint64_t)(bend - p))
			return bad_record(r, "has a malformed string");
		n = sl < MT_PATH_MAX - 1 ? (size_t)sl : MT_PATH_MAX - 1;
		memcpy(ev->str, p, n);
		ev->str[n] = '\0';
	}
	/* bytes left in the body are a newer writer's extension: ignored */

	ev->h.type = (__u16)type;
	ev->h.fn = (__u16)fn;
	ev->h.pid = (__u32)pid;
	ev->h.tid = (__u32)tid;
	ev->h.nfields = kept;
	ev->h.ts = r->prev_ts;
	r->frame_seen++;
	r->seen[type]++;
	r->records++;
	return 1;
}

int mt_reader__next(struct mt_reader *r, struct mt_event *ev)
{
	int rc;

	if (r->state)
		return r->state > 0 ? 0 : r->state;
	for (;;) {
		if (r->in_frame) {
			if (r->p < r->end) {
				rc = decode_record(r, ev);
				if (rc == 0)
					continue;
				if (rc < 0)
					r->state = rc;
				return rc;
			}
			r->in_frame = false;
			if (r->frame_seen != r->frame_count) {
				r->state = corrupt(r, r->frame_off,
						   "%" PRIu32
						   " records, the frame header says %" PRIu32,
						   r->frame_seen, r->frame_count);
				return r->state;
			}
		}
		rc = read_frame(r);
		if (rc == 0) {
			r->state = 1;
			return 0;
		}
		if (rc == -EAGAIN)
			return rc; /* not sticky: the frame may be complete next time */
		if (rc < 0) {
			r->state = rc;
			return rc;
		}
	}
}

int mt_reader__follow(struct mt_reader *r)
{
	struct stat st;

	if (fstat(r->fd, &st))
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -ESPIPE;
	r->follow = true;
	return 0;
}

bool mt_reader__writer_holds(const struct mt_reader *r)
{
	/* a shared lock is refused only while someone holds the exclusive one */
	if (!flock(r->fd, LOCK_SH | LOCK_NB)) {
		flock(r->fd, LOCK_UN);
		return false;
	}
	return errno == EWOULDBLOCK;
}

const struct mt_header *mt_reader__header(const struct mt_reader *r)
{
	return &r->hdr;
}

const struct mt_trailer *mt_reader__trailer(const struct mt_reader *r)
{
	return r->have_trailer ? &r->trailer : NULL;
}

const char *mt_reader__error(const struct mt_reader *r)
{
	return r->err;
}

/* Reads and checks the file header; on failure @err says why. */
static int read_header(struct mt_reader *r, char *err, size_t errlen)
{
	uint8_t pre[MT_FILE_PREFIX_LEN];
	struct header_ctx c = { .h = &r->hdr };
	uint32_t body_len;
	uint16_t version;
	uint8_t *body;
	ssize_t n;
	int rc;

	n = read_full(r, pre, sizeof(pre));
	if (n < 0) {
		set_err(err, errlen, "%s", strerror((int)-n));
		return (int)n;
	}
	if (memcmp(pre, MT_FILE_MAGIC,
		   (size_t)n < MT_FILE_MAGIC_LEN ? (size_t)n : MT_FILE_MAGIC_LEN) != 0) {
		set_err(err, errlen, "not a memtrack artifact (bad magic)");
		return -EBADMSG;
	}
	/* the version decides how to read the rest: check it first */
	if (n >= 10) {
		version = mt_get_le16(pre + 8);
		if (version > MT_FORMAT_VERSION) {
			set_err(err, errlen,
				"file format version %u is newer than this memtrack's (%u); upgrade memtrack",
				version, MT_FORMAT_VERSION);
			return -EPROTONOSUPPORT;
		}
		if (version == 0) {
			set_err(err, errlen, "corrupt file header: format version 0");
			return -EBADMSG;
		}
		r->hdr.format_version = version;
	}
	if (n < MT_FILE_PREFIX_LEN)
		goto truncated;
	body_len = mt_get_le32(pre + 12);
	if (body_len > MT_HEADER_BODY_MAX) {
		set_err(err, errlen, "corrupt file header: length %" PRIu32 " exceeds 1 MiB",
			body_len);
		return -EBADMSG;
	}
	rc = reserve(&r->zbuf, &r->zcap, (size_t)body_len + 4);
	if (rc) {
		set_err(err, errlen, "%s", strerror(-rc));
		return rc;
	}
	body = r->zbuf;
	n = read_full(r, body, (size_t)body_len + 4);
	if (n < 0) {
		set_err(err, errlen, "%s", strerror((int)-n));
		return (int)n;
	}
	if ((size_t)n < (size_t)body_len + 4)
		goto truncated;
	if (!mt_crc32_ok(mt_get_le32(body + body_len), body, body_len)) {
		set_err(err, errlen, "corrupt file header: checksum mismatch");
		return -EBADMSG;
	}
	rc = parse_kv(body, body_len, header_kv, &c);
	if (rc || !c.have_version) {
		if (c.bad_key)
			set_err(err, errlen, "corrupt file header: bad value for %s", c.bad_key);
		else if (rc)
			set_err(err, errlen, "corrupt file header: not a key/value list");
		else
			set_err(err, errlen, "corrupt file header: no format_version");
		return -EBADMSG;
	}
	return 0;
truncated:
	set_err(err, errlen, "file truncated at offset %" PRIu64 " (inside the file header)",
		r->off);
	return -ENODATA;
}

/* Opens the artifact @path: a regular file only (open_regular.h).  The fd or -errno, @err saying why. */
static int open_artifact(const char *path, char *err, size_t errlen)
{
	const char *why = "";
	struct stat st;
	int fd = mt_open_regular(path, &st, &why);

	if (fd >= 0)
		return fd;
	if (*why)
		set_err(err, errlen,
			"it %s; memtrack reads artifacts from files (save it to one first)", why);
	else
		set_err(err, errlen, "%s", strerror(-fd));
	return fd;
}

struct mt_reader *mt_reader__open(const char *path, char *err, size_t errlen)
{
	struct mt_reader *r;
	int rc;

	set_err(err, errlen, "%s", "");
	r = calloc(1, sizeof(*r));
	if (!r) {
		set_err(err, errlen, "%s", strerror(ENOMEM));
		errno = ENOMEM;
		return NULL;
	}
	r->fd = open_artifact(path, err, errlen);
	if (r->fd < 0) {
		rc = r->fd;
		goto fail;
	}
	for (unsigned t = 1; t < MT_TYPE_MAX; t++) {
		const struct mt_type_def *d = mt_type_def(t);

		if (!d)
			continue;
		r->known[t] = true;
		r->has_string[t] = d->has_string;
		r->nfields[t] = (uint8_t)d->nfields;
		for (unsigned i = 0; i < d->nfields; i++)
			r->kind[t][i] = (uint8_t)d->fields[i].kind;
	}
	rc = read_header(r, err, errlen);
	if (rc)
		goto fail;
	for (unsigned t = 0; t < MT_TYPE_MAX; t++) {
		r->stack_field[t] = (int8_t)mt_stack_field(t);
		/* heap and mmap records may end before the stack id (FORMAT.md §5.4) */
		r->min_fields[t] = (uint8_t)(r->nfields[t] - (r->stack_field[t] >= 0));
	}
	r->dctx = ZSTD_createDCtx();
	if (!r->dctx) {
		rc = -ENOMEM;
		set_err(err, errlen, "%s", strerror(ENOMEM));
		goto fail;
	}
	return r;
fail:
	mt_reader__free(r);
	errno = -rc;
	return NULL;
}

void mt_reader__free(struct mt_reader *r)
{
	if (!r)
		return;
	if (r->fd >= 0)
		close(r->fd);
	ZSTD_freeDCtx(r->dctx);
	free(r->zbuf);
	free(r->raw);
	free(r);
}
