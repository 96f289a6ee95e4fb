// SPDX-License-Identifier: MIT
/*
 * unwind_cache.c - unwind tables kept across runs (unwind_cache.h).
 *
 * An entry is one file: a header (struct entry_head: what it was built
 * from, the table's scalars, a checksum), then the rows, then the index.
 */
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "inspect/mapped_file.h"
#include "inspect/unwind_cache.h"
#include "util/pread_all.h"

#define ENTRY_MAGIC "MTUWTAB1"
#define ENTRY_VERSION 2		   /* 2: rows carry the return address rule (aarch64) */
#define ENTRY_MAX_ROWS (64u << 20) /* --unwind-rows' own ceiling */
#define ENTRY_NAME_LEN 16	   /* hex digits of the key's hash */
#define SUM_SEED 0xcbf29ce484222325ull
/* An entry larger than this stays in its file, read a piece at a time as it
 * is stored (cc1's 9 MB, libc's 0.5 MB), so memtrack's RSS never holds it
 * whole: cc1's run peaks at 15.5 MiB instead of 26.6. */
#define UNWIND_CACHE_IN_MEMORY_BYTES (256u << 10)
#define CHECK_PIECE_BYTES (64u << 10) /* a multiple of a row's and of 8 bytes */

struct unwind_cache {
	int dirfd;
	uint8_t builder[MT_BUILD_ID_MAX]; /* memtrack's own build-id */
};

/* What an entry was built from; zeroed whole first (compared with memcmp). */
struct entry_key {
	uint64_t dev, ino, size;
	int64_t mtime_s, mtime_ns, ctime_s, ctime_ns;
	uint8_t builder[MT_BUILD_ID_MAX];
	uint32_t pad; /* zero: no padding byte is compared unset */
};

struct entry_head {
	char magic[8];
	uint32_t version, row_bytes;
	struct entry_key key;
	uint64_t nrows, nindex, sum;
	uint32_t text_lo, shift, nloads;
	uint8_t build_id_len, libdw_fallback;
	uint8_t build_id[MT_BUILD_ID_MAX];
	struct unwind_load loads[UNWIND_MAX_LOADS];
};

static uint64_t mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A word-at-a-time FNV-style hash: cc1's 9 MB in about a millisecond. */
static uint64_t sum_words(uint64_t h, const void *p, size_t bytes)
{
	const uint8_t *b = p;
	uint64_t w;

	for (size_t i = 0; i + 8 <= bytes; i += 8) {
		memcpy(&w, b + i, 8);
		h = (h ^ w) * 0x100000001b3ull;
	}
	for (size_t i = bytes & ~(size_t)7; i < bytes; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

static uint64_t table_sum(const struct unwind_table *t)
{
	uint64_t h = sum_words(SUM_SEED, t->rows, t->nrows * sizeof(*t->rows));

	return sum_words(h, t->index, t->nindex * sizeof(*t->index));
}

/* dl_iterate_phdr: the GNU build-id note of the first object, the executable. */
static int builder_note(struct dl_phdr_info *info, size_t size, void *arg)
{
	uint8_t *out = arg;

	(void)size;
	for (unsigned i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		const uint8_t *p = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr);
		const uint8_t *end = p + ph->p_memsz;

		if (ph->p_type != PT_NOTE)
			continue;
		while (p + sizeof(ElfW(Nhdr)) <= end) {
			const ElfW(Nhdr) *n = (const ElfW(Nhdr) *)p;
			const uint8_t *name = p + sizeof(*n);
			const uint8_t *desc = name + ((n->n_namesz + 3) & ~3u);

			if (desc + n->n_descsz > end)
				break;
			if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 &&
			    !memcmp(name, "GNU", 4) && n->n_descsz) {
				memcpy(out, desc,
				       n->n_descsz < MT_BUILD_ID_MAX ? n->n_descsz
								     : MT_BUILD_ID_MAX);
				return 1;
			}
			p = desc + ((n->n_descsz + 3) & ~3u);
		}
	}
	return 1; /* only the first object */
}

/* Whether directory @st may hold root's cache: no one else can change what it holds. */
static int dir_safe(const struct stat *st, bool last, const char *dir, char *why, size_t len)
{
	if (!S_ISDIR(st->st_mode)) {
		snprintf(why, len,
			 "unwind cache %s: a component is not a directory; give a directory", dir);
		return -ENOTDIR;
	}
	if ((st->st_uid != 0 && st->st_uid != geteuid()) ||
	    (st->st_mode & (S_IWGRP | S_IWOTH) && (last || !(st->st_mode & S_ISVTX)))) {
		snprintf(
			why, len,
			"unwind cache %s: it or a directory above it can be written by another user (owner uid %u, mode %04o); give a directory only root can write, or --no-unwind-cache",
			dir, (unsigned)st->st_uid, (unsigned)(st->st_mode & 07777));
		return -EPERM;
	}
	return 0;
}

/* Opens @name in directory @at, a directory, no link followed; -errno. */
static int open_component(int at, const char *name, bool last, const char *dir, char *why,
			  size_t len)
{
	struct stat st;
	int fd, err;

	if (fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW)) {
		if (errno != ENOENT || !last || (mkdirat(at, name, 0700) && errno != EEXIST)) {
			err = -errno;
			snprintf(why, len, "unwind cache %s: %s; give an existing directory", dir,
				 strerror(-err));
			return err;
		}
		if (fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW))
			return -errno;
	}
	if (S_ISLNK(st.st_mode)) {
		snprintf(why, len,
			 "unwind cache %s: it goes through a symbolic link; give the real path",
			 dir);
		return -ELOOP;
	}
	err = dir_safe(&st, last, dir, why, len);
	if (err)
		return err;
	fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		snprintf(why, len, "unwind cache %s: %s", dir, strerror(-err));
		return err;
	}
	return fd;
}

/* Walks @dir from / one component at a time; returns its fd or -errno (@why set). */
static int open_dir(const char *dir, char *why, size_t len)
{
	char path[4096], *comp, *save = NULL;
	struct stat st;
	int fd, err;

	if (dir[0] != '/' || strlen(dir) >= sizeof(path) || strstr(dir, "/./") ||
	    strstr(dir, "/../")) {
		snprintf(why, len, "unwind cache %s: give an absolute path without . or ..", dir);
		return -EINVAL;
	}
	fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	err = fstat(fd, &st) ? -errno : dir_safe(&st, false, dir, why, len);
	if (err) {
		close(fd);
		return err;
	}
	snprintf(path, sizeof(path), "%s", dir);
	for (comp = strtok_r(path, "/", &save); comp; comp = strtok_r(NULL, "/", &save)) {
		const char *next_comp = save + strspn(save, "/");
		int next;

		if (!strcmp(comp, ".") || !strcmp(comp, "..")) {
			close(fd);
			snprintf(why, len, "unwind cache %s: give an absolute path without . or ..",
				 dir);
			return -EINVAL;
		}
		next = open_component(fd, comp, !*next_comp, dir, why, len);
		close(fd);
		if (next < 0)
			return next;
		fd = next;
	}
	return fd;
}

int unwind_cache_open(const char *dir, struct unwind_cache **out, char *why, size_t whylen)
{
	static const uint8_t none[MT_BUILD_ID_MAX];
	struct unwind_cache *c;
	int fd;

	*out = NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	dl_iterate_phdr(builder_note, c->builder);
	if (!memcmp(c->builder, none, sizeof(none))) {
		snprintf(
			why, whylen,
			"unwind cache %s: this memtrack has no build-id (link it with --build-id), so its entries could not be told from another build's",
			dir);
		free(c);
		return -ENOTSUP;
	}
	fd = open_dir(dir, why, whylen);
	if (fd < 0) {
		free(c);
		return fd;
	}
	c->dirfd = fd;
	*out = c;
	return 0;
}

void unwind_cache_close(struct unwind_cache *c)
{
	if (!c)
		return;
	close(c->dirfd);
	free(c);
}

static void entry_key_of(const struct unwind_cache *c, const struct stat *st, struct entry_key *k)
{
	memset(k, 0, sizeof(*k));
	k->dev = st->st_dev;
	k->ino = st->st_ino;
	k->size = (uint64_t)st->st_size;
	k->mtime_s = st->st_mtim.tv_sec;
	k->mtime_ns = st->st_mtim.tv_nsec;
	k->ctime_s = st->st_ctim.tv_sec;
	k->ctime_ns = st->st_ctim.tv_nsec;
	memcpy(k->builder, c->builder, sizeof(k->builder));
}

static void entry_name(const struct entry_key *k, char name[ENTRY_NAME_LEN + 1])
{
	snprintf(name, ENTRY_NAME_LEN + 1, "%016llx",
		 (unsigned long long)sum_words(SUM_SEED, k, sizeof(*k)));
}

static int write_all(int fd, const void *buf, size_t n)
{
	for (size_t done = 0; done < n;) {
		ssize_t r = write(fd, (const char *)buf + done, n - done);

		if (r < 0)
			return -errno;
		done += (size_t)r;
	}
	return 0;
}

/* The header's scalars within what a table can be. */
static bool head_sane(const struct entry_head *h, const struct entry_key *key)
{
	return !memcmp(h->magic, ENTRY_MAGIC, 8) && h->version == ENTRY_VERSION &&
	       h->row_bytes == sizeof(struct mt_unwind_row) &&
	       !memcmp(&h->key, key, sizeof(*key)) && h->nrows <= ENTRY_MAX_ROWS &&
	       (h->nrows ? h->nindex >= 1 : !h->nindex) && h->nindex <= (1ull << 32) &&
	       h->shift <= 8 && h->nloads <= UNWIND_MAX_LOADS &&
	       h->build_id_len <= MT_BUILD_ID_MAX && h->libdw_fallback <= 1;
}

/*
 * The checks of an entry's rows and index, fed a piece at a time (a large
 * entry is never whole in memory): the checksum, and that they are what
 * unwind_table.c builds: ascending pcs, known rules, and an index whose
 * buckets each hold at most MT_UNWIND_BUCKET_ROWS rows (the unwinders'
 * searches count on it).  Pieces of rows come first, all of them.
 */
struct entry_check {
	uint64_t sum;
	size_t rows, entries; /* fed so far */
	uint32_t first_pc, last_pc, last_entry;
	bool bad;
};

static void check_rows(struct entry_check *k, const struct mt_unwind_row *r, size_t n)
{
	k->sum = sum_words(k->sum, r, n * sizeof(*r));
	for (size_t i = 0; i < n; i++, k->rows++) {
		if (!k->rows)
			k->first_pc = r[i].pc;
		else if (r[i].pc <= k->last_pc)
			k->bad = true;
		k->bad |= r[i].cfa > MT_CFA_END || r[i].rbp > MT_RBP_LOST || r[i].ra > MT_RA_LR ||
			  r[i].pad;
		k->last_pc = r[i].pc;
	}
}

static void check_index(struct entry_check *k, const uint32_t *x, size_t n, size_t nrows)
{
	k->sum = sum_words(k->sum, x, n * sizeof(*x));
	for (size_t i = 0; i < n; i++, k->entries++) {
		if (!k->entries)
			k->bad |= x[i] != 0;
		else
			k->bad |= x[i] < k->last_entry ||
				  x[i] - k->last_entry + 1 > MT_UNWIND_BUCKET_ROWS;
		k->bad |= x[i] >= nrows;
		k->last_entry = x[i];
	}
}

static bool check_done(const struct entry_check *k, const struct entry_head *h)
{
	if (k->bad || k->sum != h->sum)
		return false;
	return !h->nrows || (h->text_lo == k->first_pc &&
			     h->nindex == ((uint64_t)(k->last_pc - k->first_pc) >> h->shift) + 1 &&
			     h->nrows - k->last_entry <= MT_UNWIND_BUCKET_ROWS);
}

/* @h's table, its rows and index allocated (@arrays) or left in the entry. */
static struct unwind_table *table_of_head(const struct entry_head *h, bool arrays)
{
	struct unwind_table *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->nrows = h->nrows;
	t->nindex = h->nindex;
	t->text_lo = h->text_lo;
	t->shift = h->shift;
	t->nloads = h->nloads;
	memcpy(t->loads, h->loads, sizeof(t->loads));
	t->build_id_len = h->build_id_len;
	memcpy(t->build_id, h->build_id, sizeof(t->build_id));
	t->libdw_fallback = h->libdw_fallback;
	if (!arrays || !t->nrows) /* as unwind_table_build(): no rows, no arrays */
		return t;
	t->rows = malloc(t->nrows * sizeof(*t->rows));
	t->index = malloc(t->nindex * sizeof(*t->index));
	if (!t->rows || !t->index) {
		unwind_table_free(t);
		return NULL;
	}
	return t;
}

/* Reads and checks entry @fd's rows and index into @t's arrays. */
static bool read_whole(int fd, const struct entry_head *h, struct unwind_table *t)
{
	struct entry_check k = { .sum = SUM_SEED };
	size_t rows_bytes = t->nrows * sizeof(*t->rows);

	if (pread_all(fd, t->rows, rows_bytes, sizeof(*h)) ||
	    pread_all(fd, t->index, t->nindex * sizeof(*t->index),
		      (off_t)(sizeof(*h) + rows_bytes)))
		return false;
	check_rows(&k, t->rows, t->nrows);
	check_index(&k, t->index, t->nindex, t->nrows);
	return check_done(&k, h);
}

/* Checks entry @fd's rows and index a piece at a time, leaving them there. */
static bool check_in_file(int fd, const struct entry_head *h)
{
	struct entry_check k = { .sum = SUM_SEED };
	const size_t piece = CHECK_PIECE_BYTES;
	uint64_t rows_end = sizeof(*h) + h->nrows * sizeof(struct mt_unwind_row);
	uint64_t end = rows_end + h->nindex * sizeof(uint32_t);
	void *buf = malloc(piece);
	bool ok = buf != NULL;

	for (uint64_t at = sizeof(*h), n; ok && at < rows_end; at += n) { /* whole rows */
		n = rows_end - at < piece ? rows_end - at : piece;
		ok = !pread_all(fd, buf, n, (off_t)at);
		if (ok)
			check_rows(&k, buf, n / sizeof(struct mt_unwind_row));
	}
	for (uint64_t at = rows_end, n; ok && at < end; at += n) { /* whole entries */
		n = end - at < piece ? end - at : piece;
		ok = !pread_all(fd, buf, n, (off_t)at);
		if (ok)
			check_index(&k, buf, n / sizeof(uint32_t), h->nrows);
	}
	free(buf);
	return ok && check_done(&k, h);
}

/* The entry @name if it is a good one for @key: 0 and @out set, else -errno. */
static int entry_read(const struct unwind_cache *c, const char *name, const struct entry_key *key,
		      struct unwind_table **out)
{
	struct unwind_table *t = NULL;
	struct entry_head h;
	struct stat st;
	uint64_t bytes;
	bool in_file;
	int fd, err;

	fd = openat(c->dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	err = -EBADMSG;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & (S_IWGRP | S_IWOTH)) || (size_t)st.st_size < sizeof(h) ||
	    pread_all(fd, &h, sizeof(h), 0) || !head_sane(&h, key))
		goto out;
	bytes = h.nrows * sizeof(struct mt_unwind_row) + h.nindex * sizeof(uint32_t);
	if ((uint64_t)st.st_size != sizeof(h) + bytes)
		goto out;
	in_file = bytes > UNWIND_CACHE_IN_MEMORY_BYTES;
	t = table_of_head(&h, !in_file);
	if (!t) {
		err = -ENOMEM;
		goto out;
	}
	if (in_file ? !check_in_file(fd, &h) : !read_whole(fd, &h, t))
		goto out;
	(void)futimens(fd, NULL); /* used now: the last to be evicted */
	if (in_file) {		  /* the table's now */
		t->in_file = true;
		t->file_fd = fd;
		t->file_rows_off = sizeof(h);
		t->file_index_off = sizeof(h) + h.nrows * sizeof(struct mt_unwind_row);
		fd = -1;
	}
	*out = t;
	t = NULL;
	err = 0;
out:
	unwind_table_free(t);
	if (fd >= 0)
		close(fd);
	return err;
}

/* An entry's or a store's temporary file: what eviction may remove. */
static bool ours(const char *name)
{
	if (!strncmp(name, ".tmp-", 5))
		return true;
	return strlen(name) == ENTRY_NAME_LEN && strspn(name, "0123456789abcdef") == ENTRY_NAME_LEN;
}

struct aged {
	struct timespec used;
	off_t bytes;
	char name[64];
};

static int aged_cmp(const void *a, const void *b)
{
	const struct timespec *x = &((const struct aged *)a)->used;
	const struct timespec *y = &((const struct aged *)b)->used;

	if (x->tv_sec != y->tv_sec)
		return x->tv_sec < y->tv_sec ? -1 : 1;
	return (x->tv_nsec > y->tv_nsec) - (x->tv_nsec < y->tv_nsec);
}

/* Beyond UNWIND_CACHE_MAX_BYTES: removes the entries used longest ago, to 3/4 of it. */
static void evict(const struct unwind_cache *c)
{
	struct aged *v = NULL, *nv;
	size_t n = 0, cap = 0;
	uint64_t total = 0;
	struct dirent *d;
	struct stat st;
	int fd = dup(c->dirfd);
	DIR *dir = fd < 0 ? NULL : fdopendir(fd);

	if (!dir) {
		if (fd >= 0)
			close(fd);
		return;
	}
	rewinddir(dir);
	while ((d = readdir(dir))) {
		if (!ours(d->d_name) || fstatat(c->dirfd, d->d_name, &st, AT_SYMLINK_NOFOLLOW) ||
		    !S_ISREG(st.st_mode))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			nv = realloc(v, cap * sizeof(*v));
			if (!nv)
				goto out;
			v = nv;
		}
		v[n].used = st.st_mtim;
		v[n].bytes = st.st_size;
		snprintf(v[n++].name, sizeof(v->name), "%s", d->d_name);
		total += (uint64_t)st.st_size;
	}
	if (total <= UNWIND_CACHE_MAX_BYTES)
		goto out;
	qsort(v, n, sizeof(*v), aged_cmp);
	for (size_t i = 0; i < n && total > UNWIND_CACHE_MAX_BYTES / 4 * 3; i++)
		if (!unlinkat(c->dirfd, v[i].name, 0))
			total -= (uint64_t)v[i].bytes;
out:
	free(v);
	closedir(dir);
}

/* Stores @t as entry @name: written whole under a temporary name, then renamed. */
static void entry_write(const struct unwind_cache *c, const char *name, const struct entry_key *key,
			const struct unwind_table *t)
{
	static unsigned long seq; /* names of one process's concurrent stores apart */
	struct entry_head h;
	char tmp[64];
	int fd, err;

	memset(&h, 0, sizeof(h));
	memcpy(h.magic, ENTRY_MAGIC, 8);
	h.version = ENTRY_VERSION;
	h.row_bytes = sizeof(struct mt_unwind_row);
	h.key = *key;
	h.nrows = t->nrows;
	h.nindex = t->nindex;
	h.sum = table_sum(t);
	h.text_lo = t->text_lo;
	h.shift = t->shift;
	h.nloads = t->nloads;
	memcpy(h.loads, t->loads, sizeof(h.loads));
	h.build_id_len = t->build_id_len;
	memcpy(h.build_id, t->build_id, sizeof(h.build_id));
	h.libdw_fallback = t->libdw_fallback;
	snprintf(tmp, sizeof(tmp), ".tmp-%d-%lu-%s", (int)getpid(),
		 __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED), name);
	fd = openat(c->dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	err = write_all(fd, &h, sizeof(h));
	if (!err)
		err = write_all(fd, t->rows, t->nrows * sizeof(*t->rows));
	if (!err)
		err = write_all(fd, t->index, t->nindex * sizeof(*t->index));
	if (close(fd) || err || renameat(c->dirfd, tmp, c->dirfd, name)) {
		unlinkat(c->dirfd, tmp, 0);
		return;
	}
	evict(c);
}

int unwind_cache_build(struct unwind_cache *c, const char *path, struct unwind_table **out)
{
	char name[ENTRY_NAME_LEN + 1];
	struct unwind_table *t = NULL;
	uint64_t t0 = mono_now();
	struct entry_key key;
	struct stat st;
	int fd, err;

	*out = NULL;
	if (!c)
		return unwind_table_build(path, out);
	fd = mapped_file_open(path);
	if (fd < 0)
		return fd;
	if (fstat(fd, &st)) { /* the very file read: a path replaced since is another key */
		err = -errno;
		goto out;
	}
	entry_key_of(c, &st, &key);
	entry_name(&key, name);
	if (!entry_read(c, name, &key, &t) && t) {
		t->from_cache = true;
		t->build_ns = mono_now() - t0;
		*out = t;
		err = 0;
		goto out;
	}
	err = unwind_table_build_fd(fd, UNWIND_CFI_NATIVE, out);
	if (!err)
		entry_write(c, name, &key, *out);
out:
	close(fd);
	return err;
}
