// SPDX-License-Identifier: MIT
/* symcache.c - the on-disk cache of resolved addresses; see symcache.h. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "analyze/symcache.h"
#include "util/as_user.h"
#include "fnv1a.h"

#define SYMCACHE_MAGIC "memtrack-symcache 1"
#define SYMCACHE_MAX_BYTES (256u << 20) /* a bigger file is not ours */
#define SYMCACHE_MAX_FRAMES 64		/* inlined frames of one address */

static void hex(char *out, const uint8_t *b, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		sprintf(out + 2 * (size_t)i, "%02x", b[i]);
	out[2 * (size_t)n] = 0;
}

/* The file name of @bid's cache file in the cache directory (@buf: 64 bytes). */
static int cache_name(char *buf, size_t len, const uint8_t *bid, unsigned bid_len)
{
	char h[41];

	if (!bid_len || bid_len > 20)
		return -EINVAL;
	hex(h, bid, bid_len);
	return snprintf(buf, len, "%s.syms", h) < (int)len ? 0 : -ENAMETOOLONG;
}

/* Whether the directory @fd belongs to @uid. */
static bool owned_by(int fd, uid_t uid)
{
	struct stat st;

	return !fstat(fd, &st) && st.st_uid == uid;
}

/*
 * Opens (O_PATH) the directory @name under @at without following a link,
 * creating it (0700, as the invoking user) when @create and absent, but
 * only in a directory of @uid's own (root run with a user's HOME makes
 * nothing in it); it must belong to @uid (or, for the cache's parent,
 * @or_root: to root).  Returns the fd or -errno (-EPERM: someone else's).
 */
static int open_step(int at, const char *name, bool create, uid_t uid, bool or_root)
{
	int fd = as_user_openat(at, name, O_PATH | O_DIRECTORY, 0);
	struct stat st;

	if (fd == -ENOENT && create && owned_by(at, uid) && !as_user_mkdirat(at, name, 0700))
		fd = as_user_openat(at, name, O_PATH | O_DIRECTORY, 0);
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) || !(st.st_uid == uid || (or_root && st.st_uid == 0))) {
		close(fd);
		return -EPERM;
	}
	return fd;
}

/*
 * Opens the cache directory @dir (…/.cache/memtrack) for the user memtrack
 * works for (as_user_uid(): the sudo invoker, else root).  What is above
 * its parent (HOME, say) is followed as given; the parent and the directory
 * are opened with O_NOFOLLOW, and the directory must be that user's own
 * (its parent theirs or root's), or the cache is not used at all: a link
 * or someone else's directory never receives memtrack's files.  Under sudo
 * both are opened, and made when @create, by the user.  Returns an O_PATH
 * fd or -errno.
 */
static int open_cache_dir(const char *dir, bool create)
{
	char parent[4096];
	const char *leaf, *pname;
	int top, mid, fd;
	uid_t uid = as_user_uid();
	size_t len = strlen(dir);

	while (len > 1 && dir[len - 1] == '/')
		len--;
	if (len >= sizeof(parent))
		return -ENAMETOOLONG;
	memcpy(parent, dir, len);
	parent[len] = 0;
	leaf = strrchr(parent, '/');
	if (!leaf || leaf == parent || !leaf[1])
		return -EINVAL; /* needs a parent below / */
	parent[leaf++ - parent] = 0;
	top = as_user_open_dir(parent, &pname);
	if (top < 0)
		return top;
	mid = open_step(top, pname, create, uid, true);
	close(top);
	if (mid < 0)
		return mid;
	fd = open_step(mid, leaf, create, uid, false);
	close(mid);
	return fd;
}

/* The next \t- or \n-ended field of *@p, NUL-terminated in place; NULL at the line's end. */
static char *field(char **p, char *end, char *stop)
{
	char *s = *p, *q = s;

	while (q < end && *q != '\t' && *q != '\n')
		q++;
	if (q == end)
		return NULL;
	*stop = *q;
	*q = 0;
	*p = q + 1;
	return s;
}

static int parse_u64(const char *s, int base, uint64_t *v)
{
	char *e;

	if (!*s || *s == '-' || *s == ' ')
		return -EINVAL;
	errno = 0;
	*v = strtoull(s, &e, base);
	return *e || errno ? -EINVAL : 0;
}

/*
 * Parses one entry line at *@p (advanced past it) into @fr; NUL-terminates
 * its fields in place, so a buffer is parsed once.  Returns 0 or -EINVAL.
 */
static int parse_entry(char **p, char *end, uint64_t *addr, struct sym_frame *fr, uint32_t *n)
{
	char stop = 0, *f;
	uint64_t v;

	f = field(p, end, &stop);
	if (!f || stop != '\t' || parse_u64(f, 16, addr))
		return -EINVAL;
	f = field(p, end, &stop);
	if (!f || parse_u64(f, 10, &v) || !v || v > SYMCACHE_MAX_FRAMES)
		return -EINVAL;
	*n = v;
	for (uint32_t i = 0; i < *n; i++) {
		char *fn, *file, *line;

		if (stop != '\t')
			return -EINVAL;
		fn = field(p, end, &stop);
		if (!fn || stop != '\t')
			return -EINVAL;
		file = field(p, end, &stop);
		if (!file || stop != '\t')
			return -EINVAL;
		line = field(p, end, &stop);
		if (!line || parse_u64(line, 10, &v) || v > UINT32_MAX)
			return -EINVAL;
		fr[i] = (struct sym_frame){ *fn ? fn : NULL, *file ? file : NULL, (uint32_t)v };
	}
	return stop == '\n' ? 0 : -EINVAL;
}

/*
 * The last cache directory opened, kept for the process (one fd): under
 * sudo every open costs three forks (as_user.h), and a report opens it for
 * each object.  A directory that fails is not kept, so a later save may
 * create it.
 */
static struct {
	pthread_mutex_t lock;
	char *dir;
	int fd;
} opened = { PTHREAD_MUTEX_INITIALIZER, NULL, -1 };

/* open_cache_dir(), remembered: returns an fd of the caller's own or -errno. */
static int cache_dir_fd(const char *dir, bool create)
{
	char *copy;
	int fd;

	pthread_mutex_lock(&opened.lock);
	if (opened.dir && !strcmp(opened.dir, dir)) {
		fd = fcntl(opened.fd, F_DUPFD_CLOEXEC, 0);
		fd = fd < 0 ? -errno : fd;
		goto out;
	}
	fd = open_cache_dir(dir, create);
	copy = fd >= 0 ? strdup(dir) : NULL;
	if (copy) {
		if (opened.fd >= 0)
			close(opened.fd);
		free(opened.dir);
		opened.dir = copy;
		opened.fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
		if (opened.fd < 0) {
			free(opened.dir);
			opened.dir = NULL;
		}
	}
out:
	pthread_mutex_unlock(&opened.lock);
	return fd;
}

/*
 * Reads the whole file @name under @dirfd (bounded; as the invoking user,
 * never a link, never blocking on a FIFO); NULL if absent or unreadable.
 */
static char *read_all(int dirfd, const char *name, size_t *len)
{
	int fd = as_user_openat(dirfd, name, O_RDONLY | O_NONBLOCK, 0);
	char *buf = NULL;
	struct stat st;
	size_t got = 0;

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size > SYMCACHE_MAX_BYTES)
		goto out;
	buf = malloc(st.st_size + 1);
	while (buf && got < (size_t)st.st_size) {
		ssize_t r = read(fd, buf + got, st.st_size - got);

		if (r <= 0) {
			free(buf);
			buf = NULL;
			break;
		}
		got += r;
	}
	if (buf) {
		buf[got] = 0;
		*len = got;
	}
out:
	close(fd);
	return buf;
}

/*
 * Checks the header, every entry and the end line of @buf (@feed false), or
 * feeds the entries to @add (@feed true: only after a check passed, on a
 * fresh copy).  Returns the entry count or -EINVAL.
 */
static int64_t walk(char *buf, size_t len, const char *want, bool feed, symcache_add_fn *add,
		    void *ctx)
{
	char *p = buf, *end = buf + len, *nl = memchr(buf, '\n', len);
	struct sym_frame fr[SYMCACHE_MAX_FRAMES];
	uint64_t h = FNV1A_BASIS, count = 0, want_count, want_h;
	char tail[64];

	if (!nl || (size_t)(nl - buf) != strlen(want) || memcmp(buf, want, nl - buf) != 0)
		return -EINVAL;
	p = nl + 1;
	while (p < end && strncmp(p, "end ", 4) != 0) {
		char *start = p;
		uint64_t addr;
		uint32_t n;
		int err;

		nl = memchr(p, '\n', end - p);
		if (!nl)
			return -EINVAL;
		h = fnv1a(h, start, nl + 1 - start);
		if (parse_entry(&p, end, &addr, fr, &n))
			return -EINVAL;
		count++;
		if (feed && (err = add(ctx, addr, fr, n)) < 0)
			return err;
	}
	if (end - p >= (ptrdiff_t)sizeof(tail))
		return -EINVAL;
	memcpy(tail, p, end - p);
	tail[end - p] = 0;
	if (sscanf(tail, "end %" SCNu64 " %" SCNx64 "\n", &want_count, &want_h) != 2 ||
	    want_count != count || want_h != h || tail[end - p - 1] != '\n')
		return -EINVAL;
	return (int64_t)count;
}

int symcache_load(const char *dir, const uint8_t *bid, unsigned bid_len, symcache_add_fn *add,
		  void *ctx)
{
	char name[64], want[64], h[41];
	char *buf = NULL, *copy = NULL;
	size_t len = 0;
	int64_t n = 0;
	int dirfd;

	if (!dir || !*dir || cache_name(name, sizeof(name), bid, bid_len))
		return 0;
	hex(h, bid, bid_len);
	snprintf(want, sizeof(want), SYMCACHE_MAGIC " %s", h);
	dirfd = cache_dir_fd(dir, false);
	if (dirfd < 0)
		return 0;
	buf = read_all(dirfd, name, &len);
	close(dirfd);
	if (!buf)
		return 0;
	copy = malloc(len + 1);
	if (!copy)
		goto out;
	memcpy(copy, buf, len + 1);
	/* the first walk cuts fields in place: the second one parses the copy */
	n = walk(buf, len, want, false, NULL, NULL);
	if (n > 0)
		n = walk(copy, len, want, true, add, ctx);
	else
		n = 0;
out:
	free(buf);
	free(copy);
	return n > INT32_MAX ? INT32_MAX : (int)n;
}

/* Writes @s with tabs and newlines (which would break a line) as spaces. */
static void put_clean(FILE *f, const char *s, uint64_t *h)
{
	for (; s && *s; s++) {
		char c = *s == '\t' || *s == '\n' ? ' ' : *s;

		*h = fnv1a(*h, &c, 1);
		fputc(c, f);
	}
}

static void put_str(FILE *f, const char *s, uint64_t *h)
{
	*h = fnv1a(*h, s, strlen(s));
	fputs(s, f);
}

static void put_entry(FILE *f, const struct symcache_entry *e, uint64_t *h)
{
	char num[64];

	snprintf(num, sizeof(num), "%" PRIx64 "\t%" PRIu32, e->addr, e->nframes);
	put_str(f, num, h);
	for (uint32_t i = 0; i < e->nframes; i++) {
		put_str(f, "\t", h);
		put_clean(f, e->frames[i].function, h);
		put_str(f, "\t", h);
		put_clean(f, e->frames[i].file, h);
		snprintf(num, sizeof(num), "\t%" PRIu32, e->frames[i].line);
		put_str(f, num, h);
	}
	put_str(f, "\n", h);
}

/* Writes the header, the entries and the end line of @bid's file to @f. */
static void put_file(FILE *f, const uint8_t *bid, unsigned bid_len, const struct symcache_entry *e,
		     uint64_t n)
{
	uint64_t sum = FNV1A_BASIS, count = 0;
	char h[41];

	hex(h, bid, bid_len);
	fprintf(f, SYMCACHE_MAGIC " %s\n", h);
	for (uint64_t i = 0; i < n; i++)
		if (e[i].nframes && e[i].nframes <= SYMCACHE_MAX_FRAMES) {
			put_entry(f, &e[i], &sum);
			count++;
		}
	fprintf(f, "end %" PRIu64 " %" PRIx64 "\n", count, sum);
}

void symcache_save(const char *dir, const uint8_t *bid, unsigned bid_len,
		   const struct symcache_entry *e, uint64_t n)
{
	char name[64], tmp[80];
	FILE *f = NULL;
	int dirfd, fd;

	if (!dir || !*dir || cache_name(name, sizeof(name), bid, bid_len))
		return;
	dirfd = cache_dir_fd(dir, true);
	if (dirfd < 0)
		return;
	snprintf(tmp, sizeof(tmp), "%s.XXXXXX", name);
	fd = as_user_mkstempat(dirfd, tmp, 0);
	if (fd < 0)
		goto out;
	f = fdopen(fd, "w");
	if (!f) {
		close(fd);
		goto fail;
	}
	put_file(f, bid, bid_len, e, n);
	if (fflush(f) || ferror(f) || fsync(fileno(f))) {
		fclose(f);
		goto fail;
	}
	if (fclose(f) || as_user_renameat(dirfd, tmp, name))
		goto fail;
	goto out;
fail:
	as_user_unlinkat(dirfd, tmp);
out:
	close(dirfd);
}
