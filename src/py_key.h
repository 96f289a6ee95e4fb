/* SPDX-License-Identifier: MIT */
/*
 * py_key.h - the key of a Python code object in a stack's frames and in
 * its PYCODE record (issue 37, FORMAT.md §8.3): the process, the code
 * object's address and what it names (first line, the name and file
 * string objects), so that a code object freed and another made at its
 * address is another key, and each process has keys of its own (a fork
 * child's frames name records the child writes).  Both takers of Python
 * frames compute it (src/fast/python.c, src/bpf/python.bpf.h); odd, never 0.
 */
#ifndef MEMTRACK_PY_KEY_H
#define MEMTRACK_PY_KEY_H

#ifndef __VMLINUX_H__ /* BPF: vmlinux.h has the types */
#include <linux/types.h>
#endif

static inline __u64 mt_py_key(__u32 pid, __u64 code, __u64 first, __u64 name, __u64 file)
{
	__u64 h = 0xcbf29ce484222325ull;

	h = (h ^ pid) * 0x100000001b3ull;
	h = (h ^ code) * 0x100000001b3ull;
	h = (h ^ first) * 0x100000001b3ull;
	h = (h ^ name) * 0x100000001b3ull;
	h = (h ^ file) * 0x100000001b3ull;
	h ^= h >> 29;
	return h | 1;
}

#endif /* MEMTRACK_PY_KEY_H */
