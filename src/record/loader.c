// SPDX-License-Identifier: MIT
/*
 * loader.c - the BPF side's lifecycle: open, configure, load, attach the
 * tracepoints; see loader.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "bpf_abi.h"
#include "kernel/kernel_features.h"
#include "record/loader.h"
#include "record/stacks.h"
#include "memtrack.skel.h"

static bool verbose_libbpf;

/*
 * Whether libbpf reported running out of fds since the load began: its
 * feature probes (global data, BTF) take fds too, and one that fails for
 * want of an fd makes libbpf take a feature for missing, so the load
 * fails later with EINVAL ("the kernel rejected memtrack's BPF programs")
 * instead of EMFILE.  Main only, during open_and_load().
 */
static bool libbpf_out_of_fds;

/* libbpf's messages (the verifier's log among them) are shown under -v only. */
static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	char msg[512];
	va_list cp;

	va_copy(cp, ap);
	vsnprintf(msg, sizeof(msg), fmt, cp);
	va_end(cp);
	/* the probes' messages are short; ENFILE's text holds EMFILE's */
	if (strstr(msg, strerror(EMFILE)))
		libbpf_out_of_fds = true;
	if (!verbose_libbpf)
		return 0;
	return vfprintf(stderr, fmt, ap); /* whole: a verifier log is longer than msg */
}

/*
 * Whether the fd limit leaves room for the load: every map and program
 * takes an fd, and libbpf's feature probes a few more.  Checked before
 * libbpf runs because a probe that fails for want of an fd does not always
 * say so: libbpf takes the feature for missing and the load fails later
 * with EINVAL, not EMFILE.  A limit that passes may still run out at the
 * attach step, which reports EMFILE itself.
 */
static bool fds_left_for_load(struct bpf_object *obj)
{
	struct bpf_program *prog;
	const struct bpf_map *map;
	unsigned long need = 8, open_fds = 0; /* 8: BTF, libbpf's probes */
	struct rlimit rl;
	struct dirent *d;
	DIR *dir;

	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur == RLIM_INFINITY)
		return true;
	bpf_object__for_each_map (map, obj)
		need++;
	bpf_object__for_each_program (prog, obj)
		need += bpf_program__autoload(prog);
	dir = opendir("/proc/self/fd");
	if (!dir)
		return true; /* no /proc: the load finds out itself */
	while ((d = readdir(dir)))
		open_fds += d->d_name[0] != '.';
	closedir(dir);
	return open_fds + need <= rl.rlim_cur;
}

static void set_alloc_autoload(struct memtrack_bpf *skel, bool on, unsigned attach_type)
{
	struct bpf_program *progs[] = { skel->progs.alloc_enter, skel->progs.alloc_exit };

	for (size_t i = 0; i < sizeof(progs) / sizeof(progs[0]); i++) {
		bpf_program__set_autoload(progs[i], on);
		/* attached by the mechanism of attach.h, which libbpf 1.1 may not know */
		bpf_program__set_expected_attach_type(progs[i], (enum bpf_attach_type)attach_type);
	}
}

/* The in-process heap path's programs (fast.bpf.c) load only with --fast. */
static void set_fast_autoload(struct memtrack_bpf *skel, bool on)
{
	bpf_program__set_autoload(skel->progs.handle_fast_marker, on);
	bpf_program__set_autoload(skel->progs.handle_fast_exec, on);
}

/* Attaches the tracepoint programs; uprobes are left to probes.c. */
static int attach_tracepoints(struct memtrack_bpf *skel)
{
	struct bpf_program *prog;

	bpf_object__for_each_program (prog, skel->obj) {
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
 * libbpf 1.1 reads the kernel's BTF (5.5 MB here) with read(), 4 KiB a
 * call, into a buffer it then copies: ~1,350 syscalls, and two 5.5 MB
 * buffers at once, the peak of memtrack's RSS.  The kernel lets
 * /sys/kernel/btf/vmlinux be mapped read-only; this definition, to which
 * libbpf's own calls bind (they go through its PLT; memtrack exports it),
 * parses the BTF from the mapping: one copy, btf__new()'s.  Where the file
 * cannot be mapped it reads it as libbpf would.  NULL with errno set on
 * failure, as libbpf's.
 */
struct btf *btf__load_vmlinux_btf(void)
{
	const char *path = "/sys/kernel/btf/vmlinux";
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct btf *btf = NULL;
	struct stat st;
	void *p;

	if (fd < 0)
		return NULL;
	p = fstat(fd, &st) || st.st_size <= 0
		    ? MAP_FAILED
		    : mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return btf__parse_raw(path);
	btf = btf__new(p, (__u32)st.st_size);
	munmap(p, (size_t)st.st_size);
	return btf;
}

/*
 * libbpf copies the kernel's BTF (5.5 MB here) into a fresh buffer and
 * indexes it: over a thousand page faults, a large part of the load on
 * these VMs.  Big buffers are made to come from the main heap instead of fresh
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
	p = malloc(256 << 10); /* more than the top holds: the heap grows by pad */
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

/*
 * Per facility, the programs of the mechanism record/kernel_features.c
 * chose: the others may call kfuncs this kernel lacks, so they are not
 * loaded at all.
 */
#if defined(__aarch64__)
#define MT_FORK_RETURNS_BY_RSEQ 1
#else
#define MT_FORK_RETURNS_BY_RSEQ 0
#endif
static void set_mechanism_autoload(struct memtrack_bpf *skel, const struct kernel_features *kf)
{
	bool park_kfunc = kf->mech[KF_PARK] == KF_BEST;
	bool release_kfunc = kf->mech[KF_RESUME] == KF_BEST;

	bpf_program__set_autoload(skel->progs.handle_fork, park_kfunc);
	bpf_program__set_autoload(skel->progs.handle_fork_deferred, !park_kfunc);
	bpf_program__set_autoload(skel->progs.handle_fork_return, !park_kfunc);
	/* arm64's fork child returns without a sys_exit (proc.bpf.c handle_fork_rseq) */
	bpf_program__set_autoload(skel->progs.handle_fork_rseq,
				  !park_kfunc && MT_FORK_RETURNS_BY_RSEQ);
	bpf_program__set_autoload(skel->progs.handle_exit, release_kfunc);
	bpf_program__set_autoload(skel->progs.handle_exit_nokfunc, !release_kfunc);
}

static void set_physical_autoload(struct memtrack_bpf *skel, bool on)
{
	bpf_program__set_autoload(skel->progs.handle_page_alloc, on);
	bpf_program__set_autoload(skel->progs.handle_page_free, on);
	bpf_program__set_autoload(skel->progs.handle_page_free_batched, on);
}


/*
 * The unwinder's outer maps: slots for the chunks of a @rows ceiling
 * (bpf_abi.h; stacks.c creates the chunks as objects need them).  Their
 * inner template is a chunk made here (libbpf 1.1 cannot resize the one the
 * object declares: its inner map has no object), of the size stacks.c
 * gives its chunks; @fds[2] get the templates, closed once loaded.  0 rows
 * (no --stacks): one slot, one-entry templates.
 */
static int size_unwind_maps(struct memtrack_bpf *skel, uint32_t rows, int fds[2])
{
	struct bpf_map_create_opts opts = { .sz = sizeof(opts), .map_flags = BPF_F_MMAPABLE };
	uint32_t index = MT_UNWIND_INDEX_CAP(rows);
	uint32_t per_row = rows ? stacks_chunk_entries(rows, MT_UNWIND_CHUNK_ROWS) : 1;
	uint32_t per_index = index ? stacks_chunk_entries(index, MT_UNWIND_CHUNK_INDEX) : 1;

	bpf_map__set_max_entries(skel->maps.unwind_rows,
				 stacks_chunk_slots(rows, MT_UNWIND_CHUNK_ROWS));
	bpf_map__set_max_entries(skel->maps.unwind_index,
				 stacks_chunk_slots(index, MT_UNWIND_CHUNK_INDEX));
	fds[0] = bpf_map_create(BPF_MAP_TYPE_ARRAY, "unwind_chunk", sizeof(__u32),
				sizeof(struct mt_unwind_row), per_row, &opts);
	if (fds[0] < 0)
		return -errno;
	fds[1] = bpf_map_create(BPF_MAP_TYPE_ARRAY, "unwind_chunk", sizeof(__u32), sizeof(__u64),
				per_index, &opts);
	if (fds[1] < 0)
		return -errno;
	if (bpf_map__set_inner_map_fd(skel->maps.unwind_rows, fds[0]) ||
	    bpf_map__set_inner_map_fd(skel->maps.unwind_index, fds[1]))
		return -EINVAL;
	return 0;
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

static int open_and_load(const struct loader_opts *o, struct memtrack_bpf **skel,
			 enum loader_step *step);

int loader_open(struct loader_opts *o, struct memtrack_bpf **skel, enum loader_step *step)
{
	int err;

	*skel = NULL;
	verbose_libbpf = o->verbose;
	libbpf_set_print(libbpf_print);
	if (access("/sys/kernel/btf/vmlinux", R_OK)) {
		*step = LOADER_BTF;
		return -ENOENT;
	}
	heap_prefer_huge_pages();
	err = open_and_load(o, skel, step);
	if (err && o->physical) {
		o->physical = false;
		o->physical_err = err;
		o->physical_step = *step;
		err = open_and_load(o, skel, step);
	}
	heap_restore();
	return err;
}

static int open_and_load(const struct loader_opts *o, struct memtrack_bpf **out,
			 enum loader_step *step)
{
	struct memtrack_bpf *skel;
	int ret, tmpl[2] = { -1, -1 };

	*step = LOADER_OPEN;
	skel = memtrack_bpf__open();
	if (!skel)
		return -errno;
	bpf_map__set_max_entries(skel->maps.events, o->ring_bytes);
	skel->rodata->wakeup_bytes = o->wakeup_bytes;
	skel->rodata->stop_on_spawn = o->allocators;
	skel->rodata->nr_cpus = libbpf_num_possible_cpus() > 0 ? libbpf_num_possible_cpus() : 1;
	skel->rodata->page_size = sysconf(_SC_PAGESIZE);
	skel->data->heap_enabled = !o->heap_disabled;
	skel->rodata->memtrack_tgid = getpid();
	skel->rodata->adopt_running = o->adopt_running;
	skel->rodata->owner_only = o->owner_only;
	skel->rodata->owner_uid = o->owner_uid;
	skel->rodata->owner_gid = o->owner_gid;
	skel->rodata->stacks_on = o->stacks;
	skel->rodata->sample_bytes = o->sample_bytes;
	/*
	 * The sampler's maps (alloc.bpf.c) only with --sample-bytes: without
	 * it the verifier drops the code that uses them (sample_bytes is 0),
	 * and the fds they would take count against a low fd limit.
	 */
	bpf_map__set_autocreate(skel->maps.sample_left, o->sample_bytes != 0);
	bpf_map__set_autocreate(skel->maps.sampled_blocks, o->sample_bytes != 0);
	bpf_map__set_autocreate(skel->maps.heap_counts, o->sample_bytes != 0);
	ret = size_unwind_maps(skel, o->stacks ? o->unwind_rows : 0, tmpl);
	if (ret)
		goto out;
	bpf_map__set_max_entries(skel->maps.proc_maps, o->stacks ? MT_MAX_MMS : 1);
	bpf_map__set_max_entries(skel->maps.stacks_seen, !o->stacks ? 1
							 : o->fast && o->allocators
								 ? MT_STACKS_SEEN_FAST
								 : MT_STACKS_SEEN);
	set_alloc_autoload(skel, o->allocators, o->uprobe_attach_type);
	set_physical_autoload(skel, o->physical);
	set_mechanism_autoload(skel, o->kf);
	skel->rodata->exit_has_group_dead = o->kf->mech[KF_EXIT] == KF_BEST;
	skel->rodata->fast_path = o->fast && o->allocators;
	set_fast_autoload(skel, o->fast && o->allocators);
	if (o->physical) {
		uint64_t words = (max_pfn() + 63) / 64;

		bpf_map__set_max_entries(skel->maps.tree_pages, words);
		skel->rodata->phys_bitmap_bits = words * 64;
	}
	*step = LOADER_LOAD;
	if (!fds_left_for_load(skel->obj)) {
		ret = -EMFILE;
		goto out;
	}
	libbpf_out_of_fds = false;
	ret = memtrack_bpf__load(skel);
	if (ret && libbpf_out_of_fds)
		ret = -EMFILE; /* the cause, whatever the step that failed of it */
	if (!ret) {
		*step = LOADER_ATTACH;
		ret = attach_tracepoints(skel);
	}
out:
	for (int i = 0; i < 2; i++)
		if (tmpl[i] >= 0)
			close(tmpl[i]);
	if (ret) {
		memtrack_bpf__destroy(skel);
		return ret;
	}
	*out = skel;
	return 0;
}

int loader_track_root(struct memtrack_bpf *skel, pid_t pid)
{
	struct tracked_proc v = { 0 };
	__u32 key = pid;

	if (bpf_map__update_elem(skel->maps.tracked, &key, sizeof(key), &v, sizeof(v), BPF_ANY))
		return -errno;
	return 0;
}

int loader_track_running(struct memtrack_bpf *skel, pid_t pid)
{
	struct tracked_proc v = { .flags = MT_PROC_ADOPT_MM | MT_PROC_ARMING };
	__u32 key = pid;

	if (bpf_map__update_elem(skel->maps.tracked, &key, sizeof(key), &v, sizeof(v), BPF_NOEXIST))
		return -errno;
	return 0;
}

void loader_heap_armed(struct memtrack_bpf *skel, pid_t pid)
{
	struct tracked_proc v;
	__u32 key = pid;

	/* a process gone, or untracked by the BPF side (it left), stays so */
	if (bpf_map__lookup_elem(skel->maps.tracked, &key, sizeof(key), &v, sizeof(v), 0) ||
	    !(v.flags & MT_PROC_ARMING))
		return;
	v.flags &= ~MT_PROC_ARMING;
	(void)bpf_map__update_elem(skel->maps.tracked, &key, sizeof(key), &v, sizeof(v), BPF_EXIST);
}

int loader_untrack_children(struct memtrack_bpf *skel, pid_t pid)
{
	struct tracked_proc v;
	__u32 key = pid;

	if (bpf_map__lookup_elem(skel->maps.tracked, &key, sizeof(key), &v, sizeof(v), 0))
		return -errno;
	v.flags |= MT_PROC_NO_CHILDREN;
	if (bpf_map__update_elem(skel->maps.tracked, &key, sizeof(key), &v, sizeof(v), BPF_EXIST))
		return -errno;
	return 0;
}

void loader_resume(struct memtrack_bpf *skel, pid_t pid)
{
	__u32 key = pid;

	kill(pid, SIGCONT);
	bpf_map__delete_elem(skel->maps.parked, &key, sizeof(key), 0);
}

/* struct session_state in maps.bpf.h: the value of `session`. */
struct session_value {
	__u32 parking_off;
	__u32 pad;
};

int loader_stop_parking(struct memtrack_bpf *skel)
{
	struct session_value v = { 1, 0 };
	__u32 zero = 0, next;
	int n = 0;

	if (!skel)
		return 0;
	/* the update is a syscall, a full barrier: see park_process() in common.bpf.h */
	bpf_map__update_elem(skel->maps.session, &zero, sizeof(zero), &v, sizeof(v), BPF_ANY);
	/*
	 * Each entry goes once resumed: the reaper, which sweeps the map again
	 * where the kernel cannot (KF_RESUME's fallback), then finds nothing.
	 */
	while (n < MT_MAX_TRACKED &&
	       !bpf_map__get_next_key(skel->maps.parked, NULL, &next, sizeof(next))) {
		kill(next, SIGCONT);
		bpf_map__delete_elem(skel->maps.parked, &next, sizeof(next), 0);
		n++;
	}
	return n;
}

int loader_untrack_all(struct memtrack_bpf *skel)
{
	int n = 0;
	__u32 key;

	/* a fork may add a child while we delete: go on until it is empty */
	while (n < 1 << 20 && !bpf_map__get_next_key(skel->maps.tracked, NULL, &key, sizeof(key))) {
		if (bpf_map__delete_elem(skel->maps.tracked, &key, sizeof(key), 0))
			break;
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
	int ncpu = libbpf_num_possible_cpus(), err = 0;
	uint64_t *vals;

	if (ncpu < 0)
		return ncpu;
	vals = calloc(ncpu, sizeof(*vals));
	if (!vals)
		return -ENOMEM;
	for (__u32 k = 0; k < MT_DROP_SLOTS; k++) {
		drops[k] = 0;
		if (bpf_map__lookup_elem(skel->maps.drops, &k, sizeof(k), vals,
					 ncpu * sizeof(*vals), 0)) {
			err = -errno; /* keep summing the others */
			continue;
		}
		for (int c = 0; c < ncpu; c++)
			drops[k] += vals[c];
	}
	free(vals);
	return err;
}

volatile __u32 *loader_heap_switch(struct memtrack_bpf *skel)
{
	return &skel->data->heap_enabled;
}

int loader_parked_fds(struct memtrack_bpf *skel, int *parked_fd, int *session_fd)
{
	*parked_fd = bpf_map__fd(skel->maps.parked);
	*session_fd = bpf_map__fd(skel->maps.session);
	return *parked_fd < 0 || *session_fd < 0 ? -EBADF : 0;
}

void loader_close(struct memtrack_bpf *skel)
{
	memtrack_bpf__destroy(skel);
}

/* Ring callback of loader_reset(): what an ended session left unread goes. */
static int discard_record(void *ctx, void *data, size_t len)
{
	(void)ctx;
	(void)data;
	(void)len;
	return 0;
}

/* Drains the ring @map of what is left in it (nothing reads it between sessions). */
static int drain_ring(struct bpf_map *map)
{
	struct ring_buffer *rb = ring_buffer__new(bpf_map__fd(map), discard_record, NULL, NULL);
	int ret;

	if (!rb)
		return -errno;
	ret = ring_buffer__consume(rb);
	ring_buffer__free(rb);
	return ret < 0 ? ret : 0;
}

/* Deletes every key of the hash or map-in-map @map.  Returns 0 or -errno. */
static int empty_keys(struct bpf_map *map)
{
	char key[64], next[64];
	unsigned n = 0;
	int fd = bpf_map__fd(map);

	if (bpf_map__key_size(map) > sizeof(key))
		return -E2BIG;
	/* a delete moves the iteration: always from the first key left */
	while (n++ < (1u << 22) && !bpf_map_get_next_key(fd, NULL, next)) {
		memcpy(key, next, sizeof(key));
		if (bpf_map_delete_elem(fd, key) && errno != ENOENT)
			return -errno;
	}
	return 0;
}

/* Zeroes every entry of the array (per-CPU or not) @map.  Returns 0 or -errno. */
static int zero_array(struct bpf_map *map, bool percpu)
{
	int ncpu = percpu ? libbpf_num_possible_cpus() : 1;
	size_t vsz = percpu ? ((bpf_map__value_size(map) + 7) & ~7u) * (size_t)ncpu
			    : bpf_map__value_size(map);
	void *zero = ncpu > 0 ? calloc(1, vsz) : NULL;
	int ret = 0;

	if (!zero)
		return -ENOMEM;
	for (__u32 k = 0; k < bpf_map__max_entries(map) && !ret; k++)
		if (bpf_map_update_elem(bpf_map__fd(map), &k, zero, BPF_ANY))
			ret = -errno;
	free(zero);
	return ret;
}

int loader_reset(struct memtrack_bpf *skel)
{
	struct bpf_map *map;
	int ret = 0;

	bpf_object__for_each_map (map, skel->obj) {
		if (ret)
			break;
		if (bpf_map__fd(map) < 0 || bpf_map__is_internal(map))
			continue; /* not loaded, or .rodata/.data: set below */
		switch (bpf_map__type(map)) {
		case BPF_MAP_TYPE_RINGBUF: ret = drain_ring(map); break;
		case BPF_MAP_TYPE_ARRAY_OF_MAPS:
			break; /* the unwinder's chunks: the slot's, kept */
		case BPF_MAP_TYPE_HASH:
		case BPF_MAP_TYPE_LRU_HASH:
		case BPF_MAP_TYPE_HASH_OF_MAPS: ret = empty_keys(map); break;
		case BPF_MAP_TYPE_ARRAY: ret = zero_array(map, false); break;
		case BPF_MAP_TYPE_PERCPU_ARRAY: ret = zero_array(map, true); break;
		default: ret = -EOPNOTSUPP; /* a map kind added since: never reuse it unreset */
		}
	}
	if (!ret)
		skel->data->heap_enabled = 1;
	return ret;
}
