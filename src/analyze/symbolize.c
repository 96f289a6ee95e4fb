// SPDX-License-Identifier: MIT
/*
 * symbolize.c - addresses to functions and lines with elfutils' libdwfl;
 * see symbolize.h.  One Dwfl per object, opened on its first lookup; each
 * object keeps a hash of the addresses it resolved (and those its cache
 * file held) so every distinct address costs libdw once.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <elfutils/libdwfl.h>
#include <dwarf.h>
#include <unistd.h>
#include <sys/stat.h>
#include "analyze/intern.h"
#include "analyze/objfile.h"
#include "analyze/symbolize.h"
#include "analyze/symcache.h"
#include "analyze/symtab.h"
#include "analyze/mix64.h"
#include "util/hash_index.h"

/*
 * libstdc++'s demangler (the C++ ABI's, so any C++ name g++ or clang made);
 * <cxxabi.h> is C++ only, so C declares it.
 */
// NOLINTNEXTLINE(bugprone-reserved-identifier): the C++ ABI's own name
extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

#define SYM_MAX_INLINE 32 /* inlined frames kept per address */

enum obj_state { OBJ_NEW, OBJ_OPEN, OBJ_MISSING, OBJ_CHANGED };

struct sym_entry {
	uint64_t addr;
	uint32_t nframes;
	uint64_t first; /* index of its first frame in the object's frames */
};

/*
 * One file on disk, opened once however many objects of the artifact name
 * it (by other paths, symlinks, ids): a crafted artifact may name libc a
 * million times, and each libdwfl session of it costs megabytes.
 */
struct sym_file {
	dev_t dev;
	ino_t ino;
	Dwfl *dwfl; /* owned; NULL: refused or no ELF module (its objects are unresolved) */
	Dwfl_Module *mod;
	Dwarf_Addr bias;    /* module address = ELF virtual address + bias */
	struct symtab syms; /* its function symbols, once syms_loaded */
	bool syms_loaded;
};

struct sym_object {
	uint32_t id;
	enum obj_state state;
	const struct mt_object *obj; /* borrowed from the caller's stack table */
	struct sym_file *file;	     /* borrowed from the symbolizer, OBJ_OPEN only */
	struct sym_entry *entries;
	uint64_t nentries, entries_cap;
	struct hash_index index; /* owned: entries by addr */
	struct sym_frame *frames;
	uint64_t nframes, frames_cap;
	bool dirty; /* resolved addresses the cache file lacks */
};

struct symbolizer {
	struct sym_object **objs; /* owned; by id when id < nobjs */
	uint32_t nobjs;
	struct sym_file **files; /* owned, nfiles of them */
	uint64_t nfiles, files_cap;
	struct hash_index file_index; /* owned: files by (dev, ino) */
	struct intern strings;	      /* every function and file name */
	char *cache_dir;	      /* owned; NULL: no cache */
	char *debug_path;	      /* owned; libdwfl's debuginfo_path */
	Dwfl_Callbacks cb;
	symbolizer_notice *notice; /* may be NULL */
	void *notice_ctx;
};

static char *default_cache_dir(void)
{
	const char *x = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	char *dir = NULL;

	if (x && x[0] == '/')
		return asprintf(&dir, "%s/memtrack", x) < 0 ? NULL : dir;
	if (home && home[0] == '/')
		return asprintf(&dir, "%s/.cache/memtrack", home) < 0 ? NULL : dir;
	return NULL;
}

struct symbolizer *symbolizer__new(const struct symbolizer_opts *o)
{
	struct symbolizer *s = calloc(1, sizeof(*s));
	const char *dp = o && o->debug_path ? o->debug_path : ":.debug:/usr/lib/debug";

	if (!s)
		return NULL;
	/*
	 * libdwfl asks debuginfod servers for missing debug files when this is
	 * set: symbolization is local only.
	 */
	unsetenv("DEBUGINFOD_URLS");
	if (!o || !o->cache_dir)
		s->cache_dir = default_cache_dir();
	else if (o->cache_dir[0])
		s->cache_dir = strdup(o->cache_dir);
	s->debug_path = strdup(dp);
	if (o) {
		s->notice = o->notice;
		s->notice_ctx = o->notice_ctx;
	}
	if (!s->debug_path || intern_init(&s->strings)) {
		symbolizer__free(s);
		errno = ENOMEM;
		return NULL;
	}
	s->cb.find_elf = dwfl_build_id_find_elf;
	/* the standard one open()s paths the binary names, blocking on a FIFO */
	s->cb.find_debuginfo = objfile_find_debuginfo;
	s->cb.section_address = dwfl_offline_section_address;
	s->cb.debuginfo_path = &s->debug_path;
	return s;
}

/* ---- resolved addresses of one object ----------------------------------- */

static bool entry_has(const void *ctx, uint64_t pos, const void *addr)
{
	const struct sym_object *o = ctx;

	return o->entries[pos].addr == *(const uint64_t *)addr;
}

static uint64_t entry_hash(const void *ctx, uint64_t pos)
{
	const struct sym_object *o = ctx;

	return mix64(o->entries[pos].addr);
}

static const struct sym_entry *entry_find(const struct sym_object *o, uint64_t addr)
{
	uint64_t at = hash_index_find(&o->index, mix64(addr), entry_has, o, &addr);

	return at ? &o->entries[at - 1] : NULL;
}

static int grow(void **arr, uint64_t need, uint64_t *cap, size_t size)
{
	uint64_t c = *cap ? *cap : 64;
	void *p;

	if (need <= *cap)
		return 0;
	while (c < need)
		c *= 2;
	p = realloc(*arr, c * size);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = c;
	return 0;
}

/* Adds @addr's frames (strings interned here); an address already known keeps its first answer. */
static int entry_add(struct symbolizer *s, struct sym_object *o, uint64_t addr,
		     const struct sym_frame *fr, uint32_t n)
{
	struct sym_entry *e;

	if (entry_find(o, addr))
		return 0;
	if (hash_index_reserve(&o->index, 256, entry_hash, o))
		return -ENOMEM;
	if (grow((void **)&o->entries, o->nentries + 1, &o->entries_cap, sizeof(*e)) ||
	    grow((void **)&o->frames, o->nframes + n, &o->frames_cap, sizeof(*fr)))
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		struct sym_frame *f = &o->frames[o->nframes + i];

		f->function = fr[i].function ? intern(&s->strings, fr[i].function) : NULL;
		f->file = fr[i].file ? intern(&s->strings, fr[i].file) : NULL;
		f->line = fr[i].line;
		if ((fr[i].function && !f->function) || (fr[i].file && !f->file))
			return -ENOMEM;
	}
	e = &o->entries[o->nentries++];
	e->addr = addr;
	e->nframes = n;
	e->first = o->nframes;
	o->nframes += n;
	hash_index_add(&o->index, mix64(addr), o->nentries - 1);
	return 0;
}

struct cache_ctx {
	struct symbolizer *s;
	struct sym_object *o;
};

static int cache_add(void *ctx, uint64_t addr, const struct sym_frame *fr, uint32_t n)
{
	struct cache_ctx *c = ctx;

	return entry_add(c->s, c->o, addr, fr, n);
}

/* ---- opening an object -------------------------------------------------- */

static uint64_t file_hash(dev_t dev, ino_t ino)
{
	return mix64((uint64_t)dev * 0x9e3779b97f4a7c15ull ^ (uint64_t)ino);
}

static bool file_is(const void *ctx, uint64_t pos, const void *st)
{
	const struct sym_file *f = ((const struct symbolizer *)ctx)->files[pos];
	const struct stat *want = st;

	return f->dev == want->st_dev && f->ino == want->st_ino;
}

static uint64_t file_hash_at(const void *ctx, uint64_t pos)
{
	const struct sym_file *f = ((const struct symbolizer *)ctx)->files[pos];

	return file_hash(f->dev, f->ino);
}

/* The file (@st's dev and inode) when it was seen before, else NULL. */
static struct sym_file *file_find(const struct symbolizer *s, const struct stat *st)
{
	uint64_t at =
		hash_index_find(&s->file_index, file_hash(st->st_dev, st->st_ino), file_is, s, st);

	return at ? s->files[at - 1] : NULL;
}

/* A new file entry for @st, in the index; NULL on -ENOMEM. */
static struct sym_file *file_add(struct symbolizer *s, const struct stat *st)
{
	struct sym_file *f;

	if (hash_index_reserve(&s->file_index, 64, file_hash_at, s))
		return NULL;
	// NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers
	if (grow((void **)&s->files, s->nfiles + 1, &s->files_cap, sizeof(*s->files)))
		return NULL;
	f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->dev = st->st_dev;
	f->ino = st->st_ino;
	s->files[s->nfiles] = f;
	hash_index_add(&s->file_index, file_hash(f->dev, f->ino), s->nfiles++);
	return f;
}

/* Makes @f's libdwfl session from @fd (taken) of @path; f->dwfl stays NULL when that fails. */
static void file_report(struct symbolizer *s, struct sym_file *f, const char *path, int fd)
{
	void **ud = NULL;

	f->dwfl = dwfl_begin(&s->cb);
	f->mod = f->dwfl ? dwfl_report_offline(f->dwfl, path, path, fd) : NULL;
	if (f->dwfl)
		dwfl_report_end(f->dwfl, NULL, NULL);
	if (!f->mod) /* the module takes the fd only when it was made */
		close(fd);
	if (f->mod) { /* objfile_find_debuginfo() finds the debug path there */
		dwfl_module_info(f->mod, &ud, NULL, NULL, NULL, NULL, NULL, NULL);
		*ud = s->debug_path;
	}
	if (!f->mod || !dwfl_module_getelf(f->mod, &f->bias)) {
		if (f->dwfl)
			dwfl_end(f->dwfl);
		f->dwfl = NULL;
		f->mod = NULL;
	}
}

/*
 * The file at @path, opened as untrusted input (objfile.h) the first time
 * any object names it; NULL when there is none to look at.  A refusal is
 * told once per file.  *@err: 0 or -ENOMEM.
 */
static struct sym_file *file_get(struct symbolizer *s, const char *path, int *err)
{
	const char *why = "";
	struct stat st;
	int fd = objfile_open(path, &why, &st);
	struct sym_file *f = st.st_ino ? file_find(s, &st) : NULL;

	*err = 0;
	if (f || !st.st_ino) { /* seen before, or nothing there (a temporary binary): no notice */
		if (fd >= 0)
			close(fd);
		return f;
	}
	f = file_add(s, &st);
	if (!f) {
		if (fd >= 0)
			close(fd);
		*err = -ENOMEM;
		return NULL;
	}
	if (fd >= 0)
		file_report(s, f, path, fd);
	else if (*why && s->notice)
		s->notice(s->notice_ctx, path, why);
	return f;
}

/* Opens @o's file; its state says how that went.  Only -ENOMEM is an error. */
static int object_open(struct symbolizer *s, struct sym_object *o)
{
	const struct mt_object *obj = o->obj;
	const unsigned char *bits = NULL;
	struct sym_file *f;
	GElf_Addr vaddr;
	int len, err;

	o->state = OBJ_MISSING;
	f = file_get(s, obj->path, &err);
	if (!f || !f->mod)
		return err;
	len = dwfl_module_build_id(f->mod, &bits, &vaddr);
	if (obj->build_id_len &&
	    (len != obj->build_id_len || memcmp(bits, obj->build_id, obj->build_id_len) != 0)) {
		o->state = OBJ_CHANGED;
		return 0;
	}
	if (!f->syms_loaded && symtab_load(&f->syms, f->mod))
		return -ENOMEM;
	f->syms_loaded = true;
	o->file = f;
	o->state = OBJ_OPEN;
	return 0;
}

/* The state of object @obj, made (and its cache file read) on first use; NULL on -ENOMEM. */
static struct sym_object *object_get(struct symbolizer *s, const struct mt_object *obj)
{
	struct sym_object *o = NULL;
	uint32_t slot = obj->id;

	if (slot < s->nobjs && s->objs[slot])
		return s->objs[slot];
	if (slot >= s->nobjs) {
		uint32_t n = slot + 16;
		size_t each = sizeof(struct sym_object *);
		struct sym_object **p = realloc(s->objs, n * each);

		if (!p)
			return NULL;
		memset(p + s->nobjs, 0, (n - s->nobjs) * each);
		s->objs = p;
		s->nobjs = n;
	}
	o = calloc(1, sizeof(*o));
	if (!o)
		return NULL;
	o->id = obj->id;
	o->obj = obj;
	s->objs[slot] = o;
	if (s->cache_dir && obj->build_id_len) {
		struct cache_ctx c = { s, o };

		if (symcache_load(s->cache_dir, obj->build_id, obj->build_id_len, cache_add, &c) <
		    0)
			return NULL;
	}
	return o;
}

/* ---- resolving with libdw ----------------------------------------------- */

/* @name demangled when it is a C++ name; malloc'd, NULL on -ENOMEM. */
static char *demangle(const char *name)
{
	int status = -1;
	char *d = NULL;

	if (!strncmp(name, "_Z", 2))
		d = __cxa_demangle(name, NULL, NULL, &status);
	if (d && !status)
		return d;
	free(d);
	return strdup(name);
}

/* The name of a subprogram or inlined-subroutine DIE: its linkage name demangled, else its name. */
static char *die_function(Dwarf_Die *die)
{
	Dwarf_Attribute attr;
	const char *name = NULL;

	if (dwarf_attr_integrate(die, DW_AT_linkage_name, &attr) ||
	    dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr))
		name = dwarf_formstring(&attr);
	if (!name && dwarf_attr_integrate(die, DW_AT_name, &attr))
		name = dwarf_formstring(&attr);
	return name ? demangle(name) : NULL;
}

/* Where the inlined subroutine @die was called from: file (borrowed from libdw) and line. */
static const char *call_site(Dwarf_Die *cu, Dwarf_Die *die, uint32_t *line)
{
	Dwarf_Attribute attr;
	Dwarf_Files *files;
	Dwarf_Word v = 0;
	size_t nfiles;

	*line = 0;
	if (dwarf_formudata(dwarf_attr(die, DW_AT_call_line, &attr), &v) == 0)
		*line = v;
	if (dwarf_formudata(dwarf_attr(die, DW_AT_call_file, &attr), &v) != 0 ||
	    dwarf_getsrcfiles(cu, &files, &nfiles) != 0 || v >= nfiles)
		return NULL;
	return dwarf_filesrc(files, v, NULL, NULL);
}

/*
 * Fills @fr (SYM_MAX_INLINE of them) for module address @a of @f: the inlined
 * frames from DWARF scopes, innermost first, then the function @a lies in.
 * Names in @fr are malloc'd (the caller frees them); returns the count.
 */
static uint32_t resolve_dwarf(struct sym_file *f, Dwarf_Addr a, struct sym_frame *fr)
{
	Dwarf_Addr dbias = 0;
	Dwarf_Die *cu = dwfl_module_addrdie(f->mod, a, &dbias), *scopes = NULL;
	Dwfl_Line *l = dwfl_module_getsrc(f->mod, a);
	const char *file = NULL, *sym;
	uint32_t n = 0, line = 0;
	int nscopes, iline = 0;
	char *outer = NULL;

	if (l && (file = dwfl_lineinfo(l, NULL, &iline, NULL, NULL, NULL)))
		line = iline > 0 ? iline : 0;
	nscopes = cu ? dwarf_getscopes(cu, a - dbias, &scopes) : 0;
	for (int i = 0; i < nscopes; i++) {
		int tag = dwarf_tag(&scopes[i]);

		if (tag == DW_TAG_subprogram) {
			outer = die_function(&scopes[i]);
			break;
		}
		if (tag != DW_TAG_inlined_subroutine || n == SYM_MAX_INLINE - 1)
			continue;
		fr[n].function = die_function(&scopes[i]);
		fr[n].file = file ? strdup(file) : NULL;
		fr[n++].line = line;
		file = call_site(cu, &scopes[i], &line);
	}
	free(scopes);
	/* the symbol table names the real function best (a DWARF name lacks its scope in C) */
	sym = symtab_find(&f->syms, a);
	if (sym) {
		free(outer);
		outer = demangle(sym);
		/* a versioned definition: "__libc_start_main@@GLIBC_2.34" is __libc_start_main */
		if (outer && strchr(outer, '@') && strncmp(outer, "operator", 8) != 0)
			*strchr(outer, '@') = 0;
	}
	fr[n].function = outer;
	fr[n].file = file ? strdup(file) : NULL;
	fr[n++].line = line;
	return n;
}

static const struct sym_frame *entry_frames(const struct sym_object *o, const struct sym_entry *e)
{
	return &o->frames[e->first];
}

/* Resolves @addr of the open object @o into its table. */
static int resolve(struct symbolizer *s, struct sym_object *o, uint64_t addr)
{
	struct sym_frame fr[SYM_MAX_INLINE];
	uint32_t n;
	int err;

	if (o->state == OBJ_CHANGED) {
		fr[0] = (struct sym_frame){ SYM_CHANGED, NULL, 0 };
		return entry_add(s, o, addr, fr, 1);
	}
	if (o->state != OBJ_OPEN) {
		fr[0] = (struct sym_frame){ NULL, NULL, 0 };
		return entry_add(s, o, addr, fr, 1);
	}
	n = resolve_dwarf(o->file, addr + o->file->bias, fr);
	err = entry_add(s, o, addr, fr, n);
	for (uint32_t i = 0; i < n; i++) {
		free((char *)fr[i].function);
		free((char *)fr[i].file);
	}
	o->dirty = true;
	return err;
}

int symbolizer__lookup(struct symbolizer *s, const struct mt_object *obj, uint64_t addr,
		       struct sym_result *out)
{
	const struct sym_entry *e;
	struct sym_object *o;
	int err;

	static const struct sym_frame unresolved;

	out->nframes = 1;
	out->frames = &unresolved;
	/* ids are small and dense (1, 2, 3...): a huge one is no object we can index */
	if (!s || !obj || obj->id > (1u << 20))
		return 0;
	o = object_get(s, obj);
	if (!o)
		return -ENOMEM;
	e = entry_find(o, addr);
	if (!e) {
		if (o->state == OBJ_NEW && object_open(s, o))
			return -ENOMEM;
		err = resolve(s, o, addr);
		if (err)
			return err;
		e = entry_find(o, addr);
	}
	out->nframes = e->nframes;
	out->frames = entry_frames(o, e);
	return 0;
}

void symbolizer__save(struct symbolizer *s)
{
	for (uint32_t i = 0; s->cache_dir && i < s->nobjs; i++) {
		struct sym_object *o = s->objs[i];
		struct symcache_entry *e;

		/* an object changed on disk resolved nothing worth keeping */
		if (!o || !o->dirty || o->state != OBJ_OPEN || !o->obj->build_id_len)
			continue;
		e = calloc(o->nentries, sizeof(*e));
		if (!e)
			continue;
		for (uint64_t k = 0; k < o->nentries; k++)
			e[k] = (struct symcache_entry){ o->entries[k].addr, o->entries[k].nframes,
							entry_frames(o, &o->entries[k]) };
		symcache_save(s->cache_dir, o->obj->build_id, o->obj->build_id_len, e, o->nentries);
		free(e);
		o->dirty = false;
	}
}

void symbolizer__free(struct symbolizer *s)
{
	if (!s)
		return;
	for (uint32_t i = 0; i < s->nobjs; i++) {
		struct sym_object *o = s->objs[i];

		if (!o)
			continue;
		free(o->entries);
		hash_index_release(&o->index);
		free(o->frames);
		free(o);
	}
	free(s->objs);
	for (uint64_t i = 0; i < s->nfiles; i++) {
		struct sym_file *f = s->files[i];

		symtab_release(&f->syms);
		if (f->dwfl)
			dwfl_end(f->dwfl);
		free(f);
	}
	free(s->files);
	hash_index_release(&s->file_index);
	intern_release(&s->strings);
	free(s->cache_dir);
	free(s->debug_path);
	free(s);
}
