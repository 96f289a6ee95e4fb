/* SPDX-License-Identifier: MIT */
/*
 * python_elf.h - whether an ELF file is a CPython interpreter whose frames
 * memtrack can take (issue 37), read from the file alone: its runtime
 * (_PyRuntime), its code type (PyCode_Type), its version (Py_Version, 3.11+;
 * 3.10: the version string in .rodata with the file's name), and for that
 * version the offsets of python_elf.c's table, which 3.13's own
 * _Py_DebugOffsets (the runtime's first bytes, in .data) must confirm.  A
 * version the table lacks, or offsets the interpreter contradicts, is
 * "unsupported": native frames only, never frames read with wrong offsets.
 *
 * The file is untrusted (a tracked process mapped it): opened as
 * mapped_file.h opens files, every section bounded.
 */
#ifndef MEMTRACK_PYTHON_ELF_H
#define MEMTRACK_PYTHON_ELF_H

#include <stdbool.h>
#include <stdint.h>
#include <linux/types.h>
#include "bpf_abi.h"
#include "event.h"

struct py_interp {
	enum mt_py_verdict verdict; /* MT_PY_ON, MT_PY_UNSUPPORTED, MT_PY_UNREADABLE */
	uint32_t version;	    /* PY_VERSION_HEX, 0: not read */
	struct mt_py py;	    /* offsets; runtime and code_type are ELF addresses */
};

/* Whether @path's name is an interpreter's (python3.X, libpython3.X.so...): the others are not read. */
bool py_interp_candidate(const char *path);

/*
 * Reads @path (a candidate).  Returns 1 with @out set when it is an
 * interpreter (supported or not: out->verdict), 0 when it is none (no
 * _PyRuntime), or -errno.
 */
int py_interp_read(const char *path, struct py_interp *out);

#endif /* MEMTRACK_PYTHON_ELF_H */
