// SPDX-License-Identifier: MIT
/*
 * loader.c - the BPF side's lifecycle: open, configure, load, attach the
 * tracepoints; see loader.h.
 */
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "loader.h"
#include "memtrack.skel.h"

static bool verbose_libbpf;

/* libbpf's messages (the verifier's log among them) are shown under -v only. */
static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (!verbose_libbpf)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

static void set_alloc_autoload(struct memtrack_bpf *skel, bool on)
{
	struct bpf_program *progs[] = { skel->progs.alloc_enter, skel->progs.alloc_exit };

	for (size_t i = 0; i < sizeof(progs) / sizeof(progs[0]); i++) {
		bpf_program__set_autoload(progs[i], on);
		/* attached through uprobe-multi links (probes.c), which libbpf 1.1 does not know */
		bpf_program__set_expected_attach_type(progs[i], 48 /* BPF_TRACE_UPROBE_MULTI */);
	}
}

/* Attaches the tracepoint programs; uprobes are left to probes.c. */
static int attach_tracepoints(struct memtrack_bpf *skel)
{
	struct bpf_program *prog;

	bpf_object__for_each_program(prog, skel->obj) {
		enum bpf_prog_type t = bpf_program__type(prog);
		struct bpf_link *link;

		if (t == BPF_PROG_TYPE_KPROBE || !bpf_program__autoload(prog))
			continue;
		link = bpf_program__attach(prog);
		if (!link)
			return -errno;
		/* the skeleton's destroy() frees links it knows; keep ours in its slots */
		for (int i = 0; i < skel->skeleton->prog_cnt; i++)
			if (*skel->skeleton->progs[i].prog == prog)
				*skel->skeleton->progs[i].link = link;
	}
	return 0;
}

/*
 * libbpf reads the kernel's BTF (5.5 MB here) into fresh buffers and copies
 * it once more: ~2800 page faults, 35 of the ~50 ms it takes on these VMs.
 * Big buffers are made to come from the main heap instead of fresh
 * mappings, the heap is grown by 24 MB of free top space (M_TOP_PAD, so no
 * 24 MB block is ever allocated), and that space is marked for transparent
 * huge pages (THP is "madvise" here): a dozen faults instead.
 * heap_restore() gives it back once the BTF is freed.
 */
static void heap_prefer_huge_pages(void)
{
	const uintptr_t huge = 2u << 20, pad = 24u << 20;
	uintptr_t start, end;
	void *p;

	mallopt(M_MMAP_THRESHOLD, 32 << 20);
	mallopt(M_TRIM_THRESHOLD, 64 << 20);
	mallopt(M_TOP_PAD, pad);
	p = malloc(256 << 10);	/* more than the top holds: the heap grows by pad */
	end = (uintptr_t)sbrk(0);
	free(p);
	mallopt(M_TOP_PAD, 128 << 10);
	if (!p || end < pad)
		return;
	start = (end - pad + huge - 1) & ~(huge - 1);
	if (start < end)
		madvise((void *)start, end - start, MADV_HUGEPAGE);
}

static void heap_restore(void)
{
	mallopt(M_TRIM_THRESHOLD, 128 << 10);
	mallopt(M_MMAP_THRESHOLD, 128 << 10);
	malloc_trim(0);
}

static void set_physical_autoload(struct memtrack_bpf *skel, bool on)
{
	bpf_program__set_autoload(skel->progs.handle_page_alloc, on);
	bpf_program__set_autoload(skel->progs.handle_page_free, on);
	bpf_program__set_autoload(skel->progs.handle_page_free_batched, on);
}

/*
 * One past the highest page frame number of the machine, from the zones'
 * start_pfn and spanned pages in /proc/zoneinfo: the size of --physical's
 * bitmap.  Falls back to the RAM size, doubled for holes.
 */
static uint64_t max_pfn(void)
{
	unsigned long long start = 0, spanned = 0, top = 0;
	char line[256];
	FILE *f = fopen("/proc/zoneinfo", "re");

	while (f && fgets(line, sizeof(line), f)) {
		if (sscanf(line, " spanned %llu", &spanned) == 1)
			continue;
		if (sscanf(line, " start_pfn: %llu", &start) == 1 && start + spanned > top)
			top = start + spanned;
	}
	if (f)
		fclose(f);
	return top ? top : 2 * (uint64_t)sysconf(_SC_PHYS_PAGES);
}

static struct memtrack_bpf *open_and_load(const struct loader_opts *o, char *err, size_t errlen);

struct memtrack_bpf *loader_open(struct loader_opts *o, char *err, size_t errlen)
{
	struct memtrack_bpf *skel;

	verbose_libbpf = o->verbose;
	libbpf_set_print(libbpf_print);
	if (access("/sys/kernel/btf/vmlinux", R_OK)) {
		snprintf(err, errlen, "this kernel has no BTF (/sys/kernel/btf/vmlinux); memtrack needs a kernel built with CONFIG_DEBUG_INFO_BTF=y");
		return NULL;
	}
	heap_prefer_huge_pages();
	skel = open_and_load(o, err, errlen);
	if (!skel && o->physical) {
		fprintf(stderr, "memtrack: --physical is not available on this kernel (%s); recording without it\n", err);
		o->physical = false;
		skel = open_and_load(o, err, errlen);
	}
	heap_restore();
	return skel;
}

static struct memtrack_bpf *open_and_load(const struct loader_opts *o, char *err, size_t errlen)
{
	struct memtrack_bpf *skel;
	int ret;

	skel = memtrack_bpf__open();
	if (!skel) {
		snprintf(err, errlen, "cannot open the BPF object: %s", strerror(errno));
		return NULL;
	}
	bpf_map__set_max_entries(skel->maps.events, o->ring_bytes);
	skel->rodata->wakeup_bytes = o->wakeup_bytes;
	skel->rodata->stop_on_spawn = o->allocators;
	skel->rodata->nr_cpus = libbpf_num_possible_cpus() > 0 ? libbpf_num_possible_cpus() : 1;
	skel->rodata->page_size = sysconf(_SC_PAGESIZE);
	set_alloc_autoload(skel, o->allocators);
	set_physical_autoload(skel, o->physical);
	if (o->physical) {
		uint64_t words = (max_pfn() + 63) / 64;

		bpf_map__set_max_entries(skel->maps.tree_pages, words);
		skel->rodata->phys_bitmap_bits = words * 64;
	}
	ret = memtrack_bpf__load(skel);
	if (ret) {
		if (ret == -EPERM)
			snprintf(err, errlen, "not allowed to load BPF programs (%s); run as root or grant CAP_BPF and CAP_PERFMON", strerror(-ret));
		else
			snprintf(err, errlen, "the kernel rejected memtrack's BPF programs (%s); rerun with -v to see the verifier's log", strerror(-ret));
		goto fail;
	}
	ret = attach_tracepoints(skel);
	if (ret) {
		snprintf(err, errlen, "cannot attach memtrack's tracepoints (%s); this kernel needs BTF raw tracepoints (tp_btf, Linux 5.5+)", strerror(-ret));
		goto fail;
	}
	return skel;
fail:
	memtrack_bpf__destroy(skel);
	return NULL;
}

/* A `tracked` map value, as struct tracked_proc in maps.bpf.h. */
struct tracked_value {
	__u32 ppid;
	__u32 flags;	/* MT_PROC_NO_CHILDREN = 1 */
};

int loader_track_root(struct memtrack_bpf *skel, pid_t pid)
{
	struct tracked_value v = { 0, 0 };
	__u32 key = pid;

	if (bpf_map__update_elem(skel->maps.tracked, &key, sizeof(key), &v, sizeof(v), BPF_ANY))
		return -errno;
	return 0;
}

int loader_untrack_children(struct memtrack_bpf *skel, pid_t pid)
{
	struct tracked_value v;
	__u32 key = pid;

	if (bpf_map__lookup_elem(skel->maps.tracked, &key, sizeof(key), &v, sizeof(v), 0))
		return -errno;
	v.flags |= 1; /* MT_PROC_NO_CHILDREN, maps.bpf.h */
	if (bpf_map__update_elem(skel->maps.tracked, &key, sizeof(key), &v, sizeof(v), BPF_EXIST))
		return -errno;
	return 0;
}

int loader_untrack_all(struct memtrack_bpf *skel)
{
	int n = 0;
	__u32 key;

	/* a fork may add a child while we delete: go on until it is empty */
	while (n < 1 << 20 &&
	       !bpf_map__get_next_key(skel->maps.tracked, NULL, &key, sizeof(key))) {
		if (bpf_map__delete_elem(skel->maps.tracked, &key, sizeof(key), 0))
			break;
		kill((pid_t)key, SIGCONT);
		n++;
	}
	return n;
}

bool loader_tree_alive(struct memtrack_bpf *skel)
{
	__u32 key;

	return bpf_map__get_next_key(skel->maps.tracked, NULL, &key, sizeof(key)) == 0;
}

int loader_read_drops(struct memtrack_bpf *skel, uint64_t drops[MT_DROP_SLOTS])
{
	int ncpu = libbpf_num_possible_cpus();
	uint64_t *vals;

	if (ncpu < 0)
		return ncpu;
	vals = calloc(ncpu, sizeof(*vals));
	if (!vals)
		return -ENOMEM;
	for (__u32 k = 0; k < MT_DROP_SLOTS; k++) {
		drops[k] = 0;
		if (bpf_map__lookup_elem(skel->maps.drops, &k, sizeof(k), vals,
					 ncpu * sizeof(*vals), 0))
			continue;
		for (int c = 0; c < ncpu; c++)
			drops[k] += vals[c];
	}
	free(vals);
	return 0;
}

void loader_close(struct memtrack_bpf *skel)
{
	memtrack_bpf__destroy(skel);
}
