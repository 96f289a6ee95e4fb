// SPDX-License-Identifier: MIT
/*
 * phys_adopt.c - the tree's resident pages at attach, in the physical
 * bitmap; see phys_adopt.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "pipeline/pipeline.h"
#include "record/phys_adopt.h"
#include "memtrack.skel.h"

/* /proc/kpageflags bits (include/uapi/linux/kernel-page-flags.h) */
#define KPF_SLAB (1ull << 7)
#define KPF_COMPOUND_HEAD (1ull << 15)
#define KPF_COMPOUND_TAIL (1ull << 16)
#define KPF_HUGE (1ull << 17)
#define KPF_NOPAGE (1ull << 20)
#define KPF_ZERO_PAGE (1ull << 24)
#define KPF_RESERVED (1ull << 32)
/* never the tree's: the zero page, hugetlb, slab, the kernel's own (vdso) */
#define KPF_NOT_TREE (KPF_SLAB | KPF_HUGE | KPF_NOPAGE | KPF_ZERO_PAGE | KPF_RESERVED)

/* pagemap entries (Documentation/admin-guide/mm/pagemap.rst) */
#define PM_PRESENT (1ull << 63)
#define PM_PFN_MASK ((1ull << 55) - 1)

/* the largest folio the buddy allocator hands out: order 10 (MAX_PAGE_ORDER) */
#define FOLIO_MAX_PAGES 1024u
#define CALIB_PAGES 4
#define PM_CHUNK 512 /* pagemap entries read at once */

static void *map_array(struct bpf_map *m, uint64_t page, size_t *len)
{
	void *p;

	*len = ((size_t)bpf_map__max_entries(m) * sizeof(uint64_t) + page - 1) / page * page;
	p = mmap(NULL, *len, PROT_READ | PROT_WRITE, MAP_SHARED, bpf_map__fd(m), 0);
	return p == MAP_FAILED ? NULL : p;
}

/* The PFN backing @addr of this process, 0 if none or hidden. */
static uint64_t self_pfn(int pm_fd, const void *addr, uint64_t page)
{
	uint64_t e = 0;

	if (pread(pm_fd, &e, sizeof(e), (off_t)((uintptr_t)addr / page * sizeof(e))) != sizeof(e))
		return 0;
	return e & PM_PRESENT ? e & PM_PFN_MASK : 0;
}

/*
 * The struct page index of PFN 0, from CALIB_PAGES pages faulted in by
 * this thread with phys_calib_tid naming it (phys.bpf.c): every page must
 * give the same one.  Returns 0 or -errno.
 */
static int calibrate(struct phys_adopt *pa, struct memtrack_bpf *skel)
{
	size_t len = CALIB_PAGES * pa->page;
	char *buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int pm_fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC), ret = 0;
	uint32_t tid = (uint32_t)gettid();

	if (buf == MAP_FAILED || pm_fd < 0) {
		ret = -errno;
		goto out;
	}
	/* one base page each, not a (m)THP the hook leaves out */
	(void)madvise(buf, len, MADV_NOHUGEPAGE);
	for (unsigned i = 0; i < CALIB_PAGES && !ret; i++) {
		uint64_t idx, pfn, base;

		skel->data->phys_calib_idx = 0;
		__atomic_store_n(&skel->data->phys_calib_tid, tid, __ATOMIC_SEQ_CST);
		*(volatile char *)(buf + i * pa->page) =
			1; /* the fault runs the hook on this thread */
		__atomic_store_n(&skel->data->phys_calib_tid, 0, __ATOMIC_SEQ_CST);
		idx = skel->data->phys_calib_idx;
		pfn = self_pfn(pm_fd, buf + i * pa->page, pa->page);
		if (!pfn)
			ret = -EPERM; /* pagemap hides PFNs without CAP_SYS_ADMIN */
		else if (!idx || idx < pfn)
			ret = -EPROTO;
		base = idx - pfn;
		if (!ret && i && base != pa->base)
			ret = -EPROTO;
		pa->base = base;
	}
out:
	if (pm_fd >= 0)
		close(pm_fd);
	if (buf != MAP_FAILED)
		munmap(buf, len);
	return ret;
}

int phys_adopt_open(struct phys_adopt *pa, struct memtrack_bpf *skel, char *err, size_t errlen)
{
	int ret = 0;

	memset(pa, 0, sizeof(*pa));
	pa->kpf_fd = -1;
	pa->page = (uint64_t)sysconf(_SC_PAGESIZE);
	pa->bits = skel->rodata->phys_bitmap_bits;
	pa->words = map_array(skel->maps.tree_pages, pa->page, &pa->words_len);
	pa->total = map_array(skel->maps.phys_total, pa->page, &pa->total_len);
	if (!pa->words || !pa->total || !skel->data) {
		ret = -errno ?: -EINVAL;
		snprintf(err, errlen, "cannot map the physical bitmap: %s", strerror(-ret));
		goto out;
	}
	ret = calibrate(pa, skel);
	if (ret == -EPERM)
		snprintf(err, errlen,
			 "/proc/PID/pagemap shows no page frame numbers without "
			 "CAP_SYS_ADMIN");
	else if (ret == -EPROTO)
		snprintf(err, errlen, "memtrack's own pages did not give one struct page offset");
	else if (ret)
		snprintf(err, errlen, "cannot learn the struct page offset: %s", strerror(-ret));
	/* without it every page counts one, a large folio's pages too */
	pa->kpf_fd = open("/proc/kpageflags", O_RDONLY | O_CLOEXEC);
out:
	if (ret)
		phys_adopt_close(pa);
	return ret;
}

static bool kpf(const struct phys_adopt *pa, uint64_t pfn, uint64_t *flags)
{
	return pread(pa->kpf_fd, flags, sizeof(*flags), (off_t)(pfn * sizeof(*flags))) ==
	       sizeof(*flags);
}

/*
 * The frame whose bit stands for @pfn and the pages it counts: the head
 * of its large folio with all the folio's pages, as the alloc hook counts
 * it, or @pfn alone.  Returns false for a page that is not the tree's.
 */
static bool folio_of(struct phys_adopt *pa, uint64_t pfn, uint64_t *head, uint64_t *pages)
{
	uint64_t fl, f;
	unsigned i;

	*head = pfn;
	*pages = 1;
	if (pa->span && pfn >= pa->head && pfn - pa->head < pa->span) {
		*head = pa->head;
		*pages = pa->span;
		return true;
	}
	if (pa->kpf_fd < 0 || !kpf(pa, pfn, &fl))
		return true;
	if (fl & KPF_NOT_TREE)
		return false;
	if (!(fl & (KPF_COMPOUND_HEAD | KPF_COMPOUND_TAIL)))
		return true;
	if (fl & KPF_COMPOUND_TAIL) {
		for (i = 1;; i++) {
			/* no head found: counted as a page of its own */
			if (i >= FOLIO_MAX_PAGES || i > pfn || !kpf(pa, pfn - i, &f) ||
			    !(f & (KPF_COMPOUND_HEAD | KPF_COMPOUND_TAIL)))
				return true;
			if (f & KPF_COMPOUND_HEAD)
				break;
		}
		*head = pfn - i;
	}
	while (*pages < FOLIO_MAX_PAGES && kpf(pa, *head + *pages, &f) && (f & KPF_COMPOUND_TAIL) &&
	       !(f & KPF_COMPOUND_HEAD))
		(*pages)++;
	pa->head = *head;
	pa->span = *pages;
	return true;
}

/* Sets @pfn's bit (its folio head's); counts the pages if it was clear. */
static void mark_pfn(struct phys_adopt *pa, uint64_t pfn)
{
	uint64_t head, pages, bit, mask;

	if (!folio_of(pa, pfn, &head, &pages))
		return;
	bit = (head + pa->base) % pa->bits;
	mask = 1ull << (bit % 64);
	if (!(__atomic_fetch_or(&pa->words[bit / 64], mask, __ATOMIC_RELAXED) & mask))
		pa->marked += pages;
}

/* Marks the present pages of [start, end) from pagemap.  Returns 0 or -errno. */
static int mark_range(struct phys_adopt *pa, int pm_fd, uint64_t start, uint64_t end)
{
	uint64_t e[PM_CHUNK];

	for (uint64_t v = start / pa->page; v < end / pa->page;) {
		uint64_t want = end / pa->page - v < PM_CHUNK ? end / pa->page - v : PM_CHUNK;
		ssize_t n = pread(pm_fd, e, want * sizeof(e[0]), (off_t)(v * sizeof(e[0])));

		if (n < 0)
			return -errno;
		if (n < (ssize_t)sizeof(e[0]))
			return 0; /* the mapping went away */
		for (size_t i = 0; i < (size_t)n / sizeof(e[0]); i++) {
			if (!(e[i] & PM_PRESENT))
				continue;
			if (!(e[i] & PM_PFN_MASK))
				return -EPERM; /* PFNs hidden (no CAP_SYS_ADMIN) */
			mark_pfn(pa, e[i] & PM_PFN_MASK);
		}
		v += (uint64_t)n / sizeof(e[0]);
	}
	return 0;
}

/* Whether the smaps header @line names a mapping of the kernel's own pages. */
static bool kernel_mapping(const char *line)
{
	static const char *const names[] = { "[vdso]", "[vvar]", "[vvar_vclock]", "[vsyscall]" };
	int at = 0;
	size_t len;

	if (sscanf(line, "%*x-%*x %*s %*x %*s %*u %n", &at) < 0 || !at)
		return false;
	len = strcspn(line + at, "\n");
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (len == strlen(names[i]) && !strncmp(line + at, names[i], len))
			return true;
	return false;
}

/* Opens /proc/@pid/@what; returns the fd or -errno. */
static int open_proc(pid_t pid, const char *what)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, what);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

int phys_adopt_mark(struct phys_adopt *pa, pid_t pid)
{
	unsigned long long start = 0, end = 0, rss;
	int pm_fd = open_proc(pid, "pagemap"), sm_fd = open_proc(pid, "smaps"), ret = 0;
	bool vma = false;
	size_t cap = 0;
	char *line = NULL, c;
	FILE *sm = NULL;

	if (pm_fd < 0 || sm_fd < 0) {
		ret = pm_fd < 0 ? pm_fd : sm_fd;
		goto out;
	}
	sm = fdopen(sm_fd, "r");
	if (!sm) {
		ret = -errno;
		goto out;
	}
	sm_fd = -1;
	/* a mapping's header, then its keys; only the mappings with resident pages are read */
	while (!ret && getline(&line, &cap, sm) > 0) {
		if (sscanf(line, "%llx-%llx %c", &start, &end, &c) == 3) {
			vma = !kernel_mapping(line) && start < end;
		} else if (vma && sscanf(line, "Rss: %llu kB", &rss) == 1) {
			if (rss)
				ret = mark_range(pa, pm_fd, start, end);
			vma = false;
		}
	}
	if (!ret && ferror(sm))
		ret = -(errno ?: EIO);
out:
	free(line);
	if (sm)
		fclose(sm);
	if (sm_fd >= 0)
		close(sm_fd);
	if (pm_fd >= 0)
		close(pm_fd);
	return ret;
}

void phys_adopt_record(struct phys_adopt *pa, struct mt_rec *r)
{
	uint64_t now = __atomic_add_fetch(&pa->total[0], pa->marked, __ATOMIC_RELAXED);

	/* what phys.bpf.c's next report compares with */
	__atomic_store_n(&pa->total[1], now, __ATOMIC_RELAXED);
	pa->marked = 0;
	memset(r, 0, sizeof(*r));
	r->h.type = MT_PHYSICAL;
	r->h.pid = r->h.tid = (__u32)getpid();
	r->h.nfields = PHYSICAL_NFIELDS;
	r->h.ts = mono_ns();
	r->f[PHYSICAL_BYTES] = now * pa->page;
}

void phys_adopt_close(struct phys_adopt *pa)
{
	if (pa->words)
		munmap(pa->words, pa->words_len);
	if (pa->total)
		munmap(pa->total, pa->total_len);
	if (pa->kpf_fd >= 0)
		close(pa->kpf_fd);
	memset(pa, 0, sizeof(*pa));
	pa->kpf_fd = -1;
}
