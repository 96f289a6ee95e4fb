// SPDX-License-Identifier: MIT
/*
 * attach_perf.c - per-process perf-event uprobes with BPF cookies (Linux
 * 5.15+), where the kernel has no uprobe-multi links (6.6); see attach.h.
 *
 * One perf event per site, made for the process (pid, any CPU) through the
 * "uprobe" PMU, and a BPF_PERF_EVENT link carrying the site's cookie.  The
 * link holds the event, so the event's fd is closed at once: one fd per
 * site stays (uprobe-multi: one per request), retired like a link.  Such an
 * event fires for every task of the address space it was made for, a vfork
 * child too: its cookie carries the process's tgid (MT_COOKIE_TGID), and
 * alloc.bpf.c ignores it in any other process.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/perf_event.h>
#include <bpf/bpf.h>
#include "event.h"
#include "record/attach.h"

/* An unsigned number from the sysfs file @path (after @prefix), or -1. */
static long sysfs_number(const char *path, const char *prefix)
{
	char buf[64] = "";
	FILE *f = fopen(path, "re");
	size_t plen = strlen(prefix);
	long v = -1;

	if (!f)
		return -1;
	if (fgets(buf, sizeof(buf), f) && !strncmp(buf, prefix, plen))
		sscanf(buf + plen, "%ld", &v);
	fclose(f);
	return v;
}

static long uprobe_pmu_type(void)
{
	return sysfs_number("/sys/bus/event_source/devices/uprobe/type", "");
}

/* The config bit that makes a uretprobe ("config:0"). */
static long uprobe_retprobe_bit(void)
{
	return sysfs_number("/sys/bus/event_source/devices/uprobe/format/retprobe", "config:");
}

static bool perf_available(void)
{
	return uprobe_pmu_type() >= 0 && uprobe_retprobe_bit() >= 0;
}

/* One site: its event, then its link; returns the link's fd or -errno. */
static int attach_one(const struct attach_sites *s, unsigned i, long type, long retbit)
{
	LIBBPF_OPTS(bpf_link_create_opts, opts);
	struct perf_event_attr attr;
	int pfd, lfd, err;

	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = (__u32)type;
	attr.config = s->ret ? 1ull << retbit : 0;
	attr.config1 = (uintptr_t)s->path; /* uprobe_path */
	attr.config2 = s->offsets[i];	   /* probe_offset */
	pfd = syscall(__NR_perf_event_open, &attr, s->pid, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (pfd < 0)
		return -errno;
	opts.perf_event.bpf_cookie = s->cookies[i] | (__u64)(__u32)s->pid << MT_COOKIE_TGID_SHIFT;
	lfd = bpf_link_create(s->prog_fd, pfd, BPF_PERF_EVENT, &opts);
	err = lfd < 0 ? -errno : 0;
	close(pfd); /* the link holds the event */
	return err ? err : lfd;
}

static int perf_attach(const struct attach_sites *s, struct fd_list *out)
{
	long type = uprobe_pmu_type(), retbit = uprobe_retprobe_bit();

	if (type < 0 || retbit < 0)
		return -EOPNOTSUPP;
	for (unsigned i = 0; i < s->n; i++) {
		int fd = attach_one(s, i, type, retbit), err;

		if (fd < 0)
			return fd;
		err = fd_list_push(out, fd);
		if (err) {
			close(fd);
			return err;
		}
	}
	return 0;
}

const struct attach_ops attach_perf_uprobe = {
	.name = "perf-event",
	.prog_attach_type = 0,
	.available = perf_available,
	.attach = perf_attach,
};
