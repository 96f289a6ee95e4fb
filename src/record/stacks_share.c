// SPDX-License-Identifier: MIT
/*
 * stacks_share.c - the unwind tables and per-process mappings shared with
 * the in-process unwinder; see stacks_share.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "fast/fast_ring.h"
#include "record/stacks_share.h"

/* what a library may do with a shared memfd: map it to read, nothing else */
#define SHARE_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL)
#define UMAPS_BYTES ((sizeof(struct mt_fast_umaps) + 4095) & ~(size_t)4095)

struct share_proc {
	pid_t pid;
	struct mt_fast_umaps *area; /* UMAPS_BYTES, mapped writable */
};

struct stacks_share {
	int fd; /* the tables' memfd */
	char *map;
	struct stacks_share_info info;
	struct share_proc *procs;
	unsigned nprocs, procs_cap;
};

/* A memfd of @bytes, mapped writable at *@map, then sealed.  Returns the fd or -errno. */
static int sealed_memfd(const char *name, size_t bytes, void **map)
{
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING), err;

	*map = NULL;
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)bytes))
		goto fail;
	*map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (*map == MAP_FAILED)
		goto fail;
	/* after our writable mapping: F_SEAL_FUTURE_WRITE refuses any later one */
	if (fcntl(fd, F_ADD_SEALS, SHARE_SEALS)) {
		err = -errno;
		munmap(*map, bytes);
		close(fd);
		return err;
	}
	return fd;
fail:
	err = -errno;
	close(fd);
	return err;
}

struct stacks_share *stacks_share__new(uint32_t rows_cap, uint32_t index_cap)
{
	struct stacks_share *sh = calloc(1, sizeof(*sh));
	size_t rows_bytes =
		((size_t)rows_cap * sizeof(struct mt_unwind_row) + 4095) & ~(size_t)4095;
	size_t index_bytes = ((size_t)index_cap * sizeof(uint64_t) + 4095) & ~(size_t)4095;
	void *map = NULL;

	if (!sh)
		return NULL;
	sh->fd = sealed_memfd("memtrack-unwind", rows_bytes + index_bytes, &map);
	if (sh->fd < 0) {
		errno = -sh->fd;
		free(sh);
		return NULL;
	}
	sh->map = map;
	sh->info = (struct stacks_share_info){ rows_bytes + index_bytes, rows_bytes, rows_cap,
					       index_cap };
	return sh;
}

/*
 * Copies @len bytes to the tables at @off a MiB at a time, each MiB's whole
 * pages then dropped from memtrack's mapping (MADV_DONTNEED on a shared
 * mapping keeps the memfd's contents: a later write faults them back): the
 * tables are the processes' to read, not memtrack's RSS to hold (cc1's
 * 13 MB of rows and index).  The mapping has to stay: F_SEAL_FUTURE_WRITE
 * refuses a new writable one.
 */
static void share_write(struct stacks_share *sh, size_t off, const void *src, size_t len)
{
	const size_t piece = 1u << 20, page = 4096;

	for (size_t done = 0; done < len; done += piece) {
		size_t n = len - done < piece ? len - done : piece;
		uintptr_t lo = (uintptr_t)sh->map + off + done, hi = lo + n;

		memcpy((void *)lo, (const char *)src + done, n);
		lo = (lo + page - 1) & ~(uintptr_t)(page - 1);
		hi &= ~(uintptr_t)(page - 1);
		if (lo < hi)
			(void)madvise((void *)lo, hi - lo, MADV_DONTNEED);
	}
}

void stacks_share_rows(struct stacks_share *sh, uint32_t start, const struct mt_unwind_row *rows,
		       uint32_t n)
{
	if (!sh || start > sh->info.rows_cap || n > sh->info.rows_cap - start)
		return;
	share_write(sh, (size_t)start * sizeof(*rows), rows, (size_t)n * sizeof(*rows));
}

void stacks_share_index(struct stacks_share *sh, uint32_t start, const uint64_t *index, uint32_t n)
{
	if (!sh || start > sh->info.index_cap || n > sh->info.index_cap - start)
		return;
	share_write(sh, sh->info.index_off + (size_t)start * sizeof(*index), index,
		    (size_t)n * sizeof(*index));
}

static struct share_proc *proc_find(struct stacks_share *sh, pid_t pid)
{
	for (unsigned i = 0; i < sh->nprocs; i++)
		if (sh->procs[i].pid == pid)
			return &sh->procs[i];
	return NULL;
}

/* The seqlock's write side: the process is parked, a thread of it may have been mid-walk. */
static void write_maps(struct mt_fast_umaps *a, const struct mt_umaps *um)
{
	uint64_t gen = __atomic_load_n(&a->gen, __ATOMIC_RELAXED);

	__atomic_store_n(&a->gen, gen + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	a->maps.n = um->n <= MT_MAX_UMAPS ? um->n : MT_MAX_UMAPS;
	memcpy(a->maps.m, um->m, a->maps.n * sizeof(um->m[0]));
	a->maps.py = um->py;
	__atomic_store_n(&a->gen, gen + 2, __ATOMIC_RELEASE);
}

void stacks_share_maps(struct stacks_share *sh, pid_t pid, const struct mt_umaps *um)
{
	struct share_proc *p = sh ? proc_find(sh, pid) : NULL;

	if (p)
		write_maps(p->area, um);
}

int stacks_share_open(struct stacks_share *sh, pid_t pid, const struct mt_umaps *um, int *tables_fd,
		      int *maps_fd, struct stacks_share_info *info)
{
	struct share_proc *p;
	void *area = NULL;
	int fd;

	stacks_share_forget(sh, pid); /* an exec'd image's, or a ring handed over again */
	if (sh->nprocs == sh->procs_cap) {
		unsigned cap = sh->procs_cap ? sh->procs_cap * 2 : 64;
		struct share_proc *v = realloc(sh->procs, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		sh->procs = v;
		sh->procs_cap = cap;
	}
	fd = sealed_memfd("memtrack-umaps", UMAPS_BYTES, &area);
	if (fd < 0)
		return fd;
	if (!area) { /* not after a success; for the analyzer */
		close(fd);
		return -ENOMEM;
	}
	*tables_fd = fcntl(sh->fd, F_DUPFD_CLOEXEC, 0);
	if (*tables_fd < 0) {
		int err = -errno;

		munmap(area, UMAPS_BYTES);
		close(fd);
		return err;
	}
	p = &sh->procs[sh->nprocs++];
	p->pid = pid;
	p->area = area;
	write_maps(p->area, um);
	*maps_fd = fd;
	*info = sh->info;
	return 0;
}

void stacks_share_forget(struct stacks_share *sh, pid_t pid)
{
	struct share_proc *p = sh ? proc_find(sh, pid) : NULL;

	if (!p)
		return;
	munmap(p->area, UMAPS_BYTES);
	*p = sh->procs[--sh->nprocs];
}

void stacks_share__free(struct stacks_share *sh)
{
	if (!sh)
		return;
	for (unsigned i = 0; i < sh->nprocs; i++)
		munmap(sh->procs[i].area, UMAPS_BYTES);
	free(sh->procs);
	munmap(sh->map, sh->info.tables_bytes);
	close(sh->fd);
	free(sh);
}
