// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * python.bpf.c - one Python frame of the kernel's walk, and one code
 * object's PYCODE record (python.bpf.h).  src/fast/python.c is the same
 * walk in-process: the same reads in the same order, so both give the same
 * frames; a read that fails here ends the walk (truncated) instead.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "bpf/python.bpf.h"
#include "py_key.h"

#define OWNED_BY_GENERATOR 1 /* FRAME_OWNED_BY_GENERATOR (3.11+) */
#define OWNED_BY_CSTACK 3    /* FRAME_OWNED_BY_CSTACK (3.12+): an eval loop's entry */
#define PYOBJ_TYPE 8	     /* PyObject's ob_type */
#define PYVAR_SIZE 16	     /* PyVarObject's ob_size */

static __always_inline int rd(void *dst, __u32 size, __u64 addr)
{
	return bpf_probe_read_user(dst, size, (const void *)addr);
}

/*
 * Frame @f's instruction offset in @code (python.c's frame_offset): 1 with
 * *@off, 0 when the frame is incomplete, -1 when a read failed.
 */
static __always_inline int frame_offset(const struct mt_py *py, __u64 f, __u64 code, __u8 owner,
					__u32 *off)
{
	__u64 instr = 0, start = code + py->co_code;
	__s32 lasti = 0;
	__u32 traceable = 0;

	if (py->chain == MT_PY_CHAIN_310) {
		if (rd(&lasti, sizeof(lasti), f + py->fr_instr))
			return -1;
		*off = lasti < 0 ? 0 : (__u32)lasti & MT_PY_OFFSET_MASK;
		return 1;
	}
	if (rd(&instr, sizeof(instr), f + py->fr_instr) ||
	    rd(&traceable, sizeof(traceable), code + py->co_traceable))
		return -1;
	*off = instr > start ? (__u32)((instr - start) / 2) & MT_PY_OFFSET_MASK : 0;
	return owner == OWNED_BY_GENERATOR || *off >= traceable;
}

/* Holds frame (@object, @addr) of code object @code back, appending the one held before. */
static __always_inline bool hold_frame(struct mt_py_walk *w, struct mt_unwind_state *st,
				       struct mt_rec_stack *s, __u32 object, __u64 addr, __u64 code)
{
	__u32 i;

	if (w->pending)
		add_frame(st, s, w->pend_object, w->pend_addr);
	i = st->n;
	if (i >= MT_STACK_MAX)
		return false;
	w->codes[i] = code;
	w->pend_object = object;
	w->pend_addr = addr;
	w->pending = 1;
	return true;
}

__noinline long mt_py_frame(struct mt_py_walk *w, struct mt_unwind_state *st,
			    struct mt_rec_stack *s, const struct mt_umaps *um)
{
	__u64 f, code = 0, type = 0, name = 0, file = 0;
	const struct mt_py *py;
	__u32 first = 0, off = 0;
	__u8 owner = 0, is_entry = 0;
	bool entry;
	int ok;

	if (!w || !st || !s || !um || !w->frame)
		return 1;
	py = &um->py;
	f = w->frame;
	if (py->chain >= MT_PY_CHAIN_311 && rd(&owner, 1, f + py->fr_owner))
		goto truncated;
	if (py->chain >= MT_PY_CHAIN_312 && owner == OWNED_BY_CSTACK) {
		if (w->pending) /* the eval loop's entry: its frames end at the last one */
			w->pend_object |= MT_PY_ENTRY;
		goto next;
	}
	entry = py->chain == MT_PY_CHAIN_310;
	if (py->chain == MT_PY_CHAIN_311) {
		if (rd(&is_entry, 1, f + py->fr_entry))
			goto truncated;
		entry = is_entry != 0;
	}
	if (rd(&code, sizeof(code), f + py->fr_code) || !code ||
	    rd(&type, sizeof(type), code + PYOBJ_TYPE) || type != py->code_type)
		goto truncated; /* not a code object: no frame rather than a wrong one */
	ok = frame_offset(py, f, code, owner, &off);
	if (ok < 0)
		goto truncated;
	if (!ok) {
		if (entry && w->pending)
			w->pend_object |= MT_PY_ENTRY;
		goto next;
	}
	if (st->n + w->pending >= MT_STACK_MAX || rd(&first, sizeof(first), code + py->co_first) ||
	    rd(&name, sizeof(name), code + py->co_name) ||
	    rd(&file, sizeof(file), code + py->co_file))
		goto truncated;
	if (!hold_frame(w, st, s, MT_PY_FRAME | (entry ? MT_PY_ENTRY : 0) | off,
			mt_py_key(w->pid, code, first, name, file), code))
		goto truncated;
next:
	if (rd(&w->frame, sizeof(w->frame), f + py->fr_back))
		goto truncated;
	return w->frame ? 0 : 1;
truncated:
	st->status = UNWIND_TRUNCATED;
	w->frame = 0;
	return 1;
}

/*
 * @v, at most @max, in a 64-bit register the verifier keeps the bound of:
 * 6.1's loses the upper half of a 32-bit value's bounds (a length compared
 * in a 32-bit register is unbounded at the helper call).
 */
static __always_inline __u64 at_most(__u64 v, __u64 max)
{
	asm volatile("" : "+r"(v));
	return v > max ? max : v;
}

/*
 * Copies at most @cap bytes of the characters of str object @str to @dst
 * (python.c's str_copy): their count, *@kind 0 (ASCII), 1, 2 or 4.
 */
static __always_inline __u64 str_copy(const struct mt_py *py, __u64 str, __u8 *dst, __u64 cap,
				      __u32 *kind)
{
	__u64 len = 0, data, k, bytes;
	__u32 state = 0;

	*kind = 0;
	if (!str || rd(&state, sizeof(state), str + py->str_state) ||
	    rd(&len, sizeof(len), str + py->str_length))
		return 0;
	k = state >> 2 & 7;
	if (!(state >> 5 & 1) || (k != 1 && k != 2 && k != 4) || len > (1u << 20))
		return 0;
	data = str + (state >> 6 & 1 ? py->str_ascii : py->str_compact);
	bytes = len * k;
	if (bytes > cap)
		bytes = cap & ~(k - 1); /* whole characters (k: 1, 2 or 4) */
	bytes = at_most(bytes, cap);
	if (bytes && bpf_probe_read_user(dst, bytes, (const void *)data))
		return 0;
	*kind = state >> 6 & 1 ? 0 : (__u32)k;
	return bytes;
}

__noinline long mt_py_code(struct mt_py_walk *w, struct mt_rec_stack *s, struct mt_rec_pycode *c,
			   const struct mt_umaps *um, __u64 idx)
{
	__u64 key, code, name = 0, qual = 0, file = 0, lines = 0, all = 0, size, ln, lq, lf, nl = 0;
	const struct mt_py *py;
	__u32 first = 0, kn, kq, kf;
	__u8 one = 1;

	if (!w || !s || !c || !um || idx >= w->n || idx >= MT_STACK_MAX)
		return 1;
	if (!(s->frames[idx].object & MT_PY_FRAME))
		return 0;
	key = s->frames[idx].addr;
	if (bpf_map_lookup_elem(&stacks_seen, &key))
		return 0;
	py = &um->py;
	code = w->codes[idx];
	if (rd(&first, sizeof(first), code + py->co_first) ||
	    rd(&name, sizeof(name), code + py->co_name) ||
	    rd(&qual, sizeof(qual), code + py->co_qual) ||
	    rd(&file, sizeof(file), code + py->co_file) ||
	    rd(&lines, sizeof(lines), code + py->co_lines))
		return 0; /* its frames stay unnamed rather than wrong */
	ln = at_most(str_copy(py, name, c->blob, MT_PYCODE_NAME_MAX, &kn), MT_PYCODE_NAME_MAX);
	lq = at_most(str_copy(py, qual, c->blob + ln, MT_PYCODE_QUAL_MAX, &kq), MT_PYCODE_QUAL_MAX);
	lf = at_most(str_copy(py, file, c->blob + ln + lq, MT_PYCODE_FILE_MAX, &kf),
		     MT_PYCODE_FILE_MAX);
	if (lines && !rd(&all, sizeof(all), lines + PYVAR_SIZE)) {
		nl = at_most(all, MT_PYCODE_LINES_MAX);
		if (nl && bpf_probe_read_user(c->blob + ln + lq + lf, nl,
					      (const void *)(lines + py->bytes_data)))
			nl = all = 0;
	}
	fill_hdr((struct mt_rec *)c, MT_PYCODE, 0, PYCODE_NFIELDS);
	c->f[PYCODE_KEY] = key;
	c->f[PYCODE_FIRSTLINE] = first;
	c->f[PYCODE_STRINGS] = MT_PYCODE_STR(ln, lq, lf, kn, kq, kf);
	c->f[PYCODE_LINES] = nl | (__u64)py->lines << 32;
	c->f[PYCODE_LINES_ALL] = all;
	size = at_most(__builtin_offsetof(struct mt_rec_pycode, blob) + ln + lq + lf + nl,
		       sizeof(*c));
	if (bpf_ringbuf_output(&events, c, size, BPF_RB_NO_WAKEUP)) {
		count_drop(MT_PYCODE);
		return 1; /* the stack still names it; a later stack writes it */
	}
	bpf_map_update_elem(&stacks_seen, &key, &one, BPF_ANY);
	return 0;
}
