/* SPDX-License-Identifier: MIT */
/*
 * symbolize.h - local, lazy symbolization of the addresses of a recorded
 * stack: function (demangled), file:line and inlined frames from DWARF when
 * the object or its separate debug file has it (found by build-id under
 * /usr/lib/debug/.build-id/ or by .gnu_debuglink), else the function from
 * .symtab/.dynsym.  Nothing goes to the network.  Every file is opened as
 * untrusted input (objfile.h): the paths come from the artifact.
 *
 * An object is opened the first time one of its addresses is asked for;
 * a file on disk (device and inode) is opened once, however many objects
 * name it.
 * The file on disk must still have the recorded build-id; when it differs
 * every address of it resolves to "<path changed since recording>" rather
 * than to wrong names.  Resolved addresses are kept in memory and, for
 * objects with a build-id, in an on-disk cache (one file per build-id under
 * the cache directory, written by symbolizer__save()), so a second report
 * opens no ELF file at all.  A cache file that is corrupt, truncated or
 * names another build-id is ignored; one that cannot be written is not an
 * error.
 *
 * Ownership: the symbolizer owns every string it returns; they stay valid
 * until symbolizer__free().  THREAD NOTES: one thread at a time.
 */
#ifndef MEMTRACK_SYMBOLIZE_H
#define MEMTRACK_SYMBOLIZE_H

#include <stdbool.h>
#include <stdint.h>
#include "analyze/stacks.h"

/* One source-level frame of an address. */
struct sym_frame {
	const char *function; /* demangled; NULL when unknown */
	const char *file;     /* source file, NULL when unknown */
	uint32_t line;	      /* 0 when unknown */
};

/* What an address is: inlined frames first, the function it lies in last. */
struct sym_result {
	uint32_t nframes;		/* >= 1 */
	const struct sym_frame *frames; /* owned by the symbolizer */
};

/*
 * Told once per file the symbolizer refuses to open (objfile.h: a FIFO, a
 * device, a directory, over the size bound, not ELF), however many objects
 * name it: the path it was first named by and why ("is a FIFO, not a
 * regular file").  Its frames stay unresolved.
 */
typedef void symbolizer_notice(void *ctx, const char *path, const char *why);

struct symbolizer_opts {
	const char
		*cache_dir; /* NULL: $XDG_CACHE_HOME/memtrack or ~/.cache/memtrack; "": no cache */
	const char *debug_path;	   /* NULL: ":.debug:/usr/lib/debug" (libdwfl's debuginfo_path) */
	symbolizer_notice *notice; /* NULL: refusals are silent */
	void *notice_ctx;
};

/* Returns a symbolizer (@o NULL: defaults), or NULL with errno set. */
struct symbolizer *symbolizer__new(const struct symbolizer_opts *o);

/*
 * Resolves @addr, an ELF virtual address inside @obj (callers pass a return
 * address minus one, so the call's line is found).  @obj NULL means the
 * address lay in no known file: one frame with no function (so does every
 * address when @s is NULL: no symbolizer, nothing resolved).  Returns 0, or
 * -ENOMEM.  An object that cannot be opened, or an address no symbol
 * covers, is not an error: the frame's function is NULL.
 */
int symbolizer__lookup(struct symbolizer *s, const struct mt_object *obj, uint64_t addr,
		       struct sym_result *out);

/* Writes the cache files of objects that resolved new addresses; failures are ignored. */
void symbolizer__save(struct symbolizer *s);

/* Frees the symbolizer (NULL is fine); does not save. */
void symbolizer__free(struct symbolizer *s);

/* The text an address of an object changed on disk resolves to. */
#define SYM_CHANGED "<path changed since recording>"

#endif /* MEMTRACK_SYMBOLIZE_H */
