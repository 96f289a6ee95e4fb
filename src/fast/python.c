// SPDX-License-Identifier: MIT
/*
 * python.c - the calling thread's Python frames, in-process; see python.h.
 * src/bpf/python.bpf.h walks the same chain from the kernel with the same
 * offsets, keys and marks, so both paths give the same frames.
 */
#include <pthread.h>
#include <string.h>
#include <linux/types.h>
#include "event.h"
#include "py_key.h"
#include "fast/python.h"
#include "fast/ring.h"

#define OWNED_BY_GENERATOR 1 /* FRAME_OWNED_BY_GENERATOR (3.11+) */
#define OWNED_BY_CSTACK 3    /* FRAME_OWNED_BY_CSTACK (3.12+): an eval loop's entry */
#define PYOBJ_TYPE 8	     /* PyObject's ob_type */
#define PYVAR_SIZE 16	     /* PyVarObject's ob_size */

static uint64_t rd64(uint64_t a)
{
	uint64_t v;

	memcpy(&v, (const void *)(uintptr_t)a, sizeof(v));
	return v;
}

static uint32_t rd32(uint64_t a)
{
	uint32_t v;

	memcpy(&v, (const void *)(uintptr_t)a, sizeof(v));
	return v;
}

static uint8_t rd8(uint64_t a)
{
	return *(const volatile uint8_t *)(uintptr_t)a;
}

/* The calling thread's PyThreadState (its own, by the runtime's TSS key), or 0. */
static uint64_t thread_state(const struct mt_py *py)
{
	uint64_t key = py->runtime + py->tss_key;

	if (!rd32(key - 4)) /* Py_tss_t's _is_initialized: the interpreter is not up */
		return 0;
	return (uint64_t)(uintptr_t)pthread_getspecific((pthread_key_t)rd32(key));
}

/* The thread's innermost frame, or 0. */
static uint64_t first_frame(const struct mt_py *py, uint64_t ts)
{
	uint64_t f = rd64(ts + py->ts_frame);

	if (f && (py->chain == MT_PY_CHAIN_311 || py->chain == MT_PY_CHAIN_312))
		f = rd64(f + py->cf_frame); /* the _PyCFrame's current_frame */
	return f;
}

/*
 * Frame @f's instruction offset (code units) in code object @code; false:
 * the frame is incomplete (3.11+: not yet past its prologue, as CPython's
 * own tracebacks leave it out).
 */
static bool frame_offset(const struct mt_py *py, uint64_t f, uint64_t code, uint32_t *off)
{
	uint64_t instr, start;
	int32_t lasti;

	if (py->chain == MT_PY_CHAIN_310) {
		lasti = (int32_t)rd32(f + py->fr_instr);
		*off = lasti < 0 ? 0 : (uint32_t)lasti & MT_PY_OFFSET_MASK;
		return true;
	}
	instr = rd64(f + py->fr_instr);
	start = code + py->co_code;
	*off = instr > start ? (uint32_t)((instr - start) / 2) & MT_PY_OFFSET_MASK : 0;
	return rd8(f + py->fr_owner) == OWNED_BY_GENERATOR ||
	       *off >= (uint32_t)rd32(code + py->co_traceable);
}

uint32_t fast_python_frames(const struct mt_py *py, uint32_t pid, struct fast_stack *st,
			    uint64_t *codes)
{
	uint64_t ts = py->runtime ? thread_state(py) : 0, f;
	uint32_t n0 = st->n, n = st->n, off;

	for (f = ts ? first_frame(py, ts) : 0; f; f = rd64(f + py->fr_back)) {
		uint64_t code = rd64(f + py->fr_code);
		bool entry = py->chain == MT_PY_CHAIN_310;

		if (py->chain >= MT_PY_CHAIN_312 && rd8(f + py->fr_owner) == OWNED_BY_CSTACK) {
			if (n > n0) /* the eval loop's entry: its frames end at the last one */
				st->frames[n - 1].object |= MT_PY_ENTRY;
			continue;
		}
		if (py->chain == MT_PY_CHAIN_311)
			entry = rd8(f + py->fr_entry) != 0;
		if (!code || rd64(code + PYOBJ_TYPE) != py->code_type) {
			st->truncated = 1; /* not a code object: no frame rather than a wrong one */
			break;
		}
		if (!frame_offset(py, f, code, &off)) {
			if (entry && n > n0)
				st->frames[n - 1].object |= MT_PY_ENTRY;
			continue;
		}
		if (n >= MT_STACK_MAX) {
			st->truncated = 1;
			break;
		}
		st->frames[n].object = MT_PY_FRAME | (entry ? MT_PY_ENTRY : 0) | off;
		st->frames[n].pad = 0;
		st->frames[n].addr = mt_py_key(pid, code, rd32(code + py->co_first),
					       rd64(code + py->co_name), rd64(code + py->co_file));
		codes[n++] = code;
	}
	st->n = n;
	return n - n0;
}

/*
 * Copies at most @cap bytes of the characters of str object @s to @dst and
 * returns their count; *@kind is 0 (ASCII), 1 (Latin-1), 2 or 4 (UCS-2,
 * UCS-4: FORMAT.md §8.3).  A string that is not compact gives none.
 */
static uint32_t str_copy(const struct mt_py *py, uint64_t s, uint8_t *dst, uint32_t cap,
			 uint32_t *kind)
{
	uint32_t state, k, bytes;
	uint64_t len, data;

	*kind = 0;
	if (!s)
		return 0;
	state = rd32(s + py->str_state);
	k = state >> 2 & 7;
	len = rd64(s + py->str_length);
	if (!(state >> 5 & 1) || (k != 1 && k != 2 && k != 4) || len > (1u << 20))
		return 0;
	data = s + (state >> 6 & 1 ? py->str_ascii : py->str_compact);
	*kind = state >> 6 & 1 ? 0 : k;
	bytes = (uint32_t)len * k;
	if (bytes > cap)
		bytes = cap - cap % k; /* whole characters */
	memcpy(dst, (const void *)(uintptr_t)data, bytes);
	return bytes;
}

/* Fills @c, the PYCODE record of code object @code, key @key. */
static void pycode_fill(const struct mt_py *py, uint64_t code, uint64_t key,
			struct mt_rec_pycode *c)
{
	uint32_t kn, kq, kf, ln, lq, lf, nl = 0;
	uint64_t lines = rd64(code + py->co_lines), all = 0;
	uint8_t *b = c->blob;

	ln = str_copy(py, rd64(code + py->co_name), b, MT_PYCODE_NAME_MAX, &kn);
	lq = str_copy(py, rd64(code + py->co_qual), b + ln, MT_PYCODE_QUAL_MAX, &kq);
	lf = str_copy(py, rd64(code + py->co_file), b + ln + lq, MT_PYCODE_FILE_MAX, &kf);
	if (lines) {
		all = rd64(lines + PYVAR_SIZE);
		nl = all > MT_PYCODE_LINES_MAX ? MT_PYCODE_LINES_MAX : (uint32_t)all;
		memcpy(b + ln + lq + lf, (const void *)(uintptr_t)(lines + py->bytes_data), nl);
	}
	c->f[PYCODE_KEY] = key;
	c->f[PYCODE_FIRSTLINE] = rd32(code + py->co_first);
	c->f[PYCODE_STRINGS] = MT_PYCODE_STR(ln, lq, lf, kn, kq, kf);
	c->f[PYCODE_LINES] = nl | (uint64_t)py->lines << 32;
	c->f[PYCODE_LINES_ALL] = all;
}

void fast_python_codes(const struct mt_py *py, const struct fast_stack *st, const uint64_t *codes)
{
	struct mt_rec_pycode c;

	for (uint32_t i = 0; i < st->n; i++) {
		uint64_t key = st->frames[i].addr;

		if (!(st->frames[i].object & MT_PY_FRAME) || fast_stack_seen(key))
			continue;
		pycode_fill(py, codes[i], key, &c);
		/* marked once written, as a stack: a vfork child's dropped record must not hide it */
		if (fast_record_pycode(&c))
			fast_stack_mark(key);
	}
}
