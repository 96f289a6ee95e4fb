/* SPDX-License-Identifier: MIT */
/*
 * attach.h - the attachment mechanism: how one set of uprobe sites becomes
 * kernel objects (fds).
 *
 * Three jobs are kept apart.  probes.c decides which sites of which file to
 * probe for which process, with which program and cookie (the site policy),
 * and keeps the fds per process (the link registry), which it retires when
 * the process exits (retire.h).  A mechanism only turns one request, "these
 * offsets of this file, for this process, running this program", into fds.
 *
 * The best mechanism is the uprobe-multi link (attach_multi.c, Linux 6.6+):
 * one link, one fd, per request, whatever its number of sites.  The other
 * (attach_perf.c: per-process perf-event uprobes for older kernels, one fd
 * per site) is one more struct attach_ops and one more row of
 * attach_select()'s table (attach.c); nothing else changes.
 *
 * THREAD NOTES: an ops struct is constant; attach() may run on any thread
 * (probes.c calls it from main before the pipeline runs, from the
 * preattach thread, then from the poller).
 */
#ifndef MEMTRACK_ATTACH_H
#define MEMTRACK_ATTACH_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "compiler.h"
#include "record/fd_list.h"

/* One request: sites of one file, one process, one program. */
struct attach_sites {
	pid_t pid;		 /* the process the probes fire for (never -1) */
	const char *path;	 /* the file, e.g. through /proc/PID/root */
	int prog_fd;		 /* the program the sites run (borrowed) */
	const uint64_t *offsets; /* file offsets of the sites, [0..n) */
	const uint64_t *cookies; /* each site's BPF cookie (enum mt_fn | MT_COOKIE_*) */
	unsigned n;		 /* > 0 */
	bool ret;		 /* return probes (uretprobes), else entry probes */
};

struct attach_ops {
	const char *name; /* for -v and messages: "uprobe-multi" */
	/*
	 * The expected_attach_type alloc_enter, alloc_exit and the heap stubs
	 * are loaded with (enum bpf_attach_type; 0 for perf-event uprobes).
	 */
	unsigned prog_attach_type;
	/* Whether this kernel has the mechanism (checked before a run). */
	bool (*available)(void);
	/*
	 * Attaches every site of @s.  Each fd it creates goes into @out,
	 * which owns it from then on; a failure past the first fd leaves the
	 * ones made in @out (the caller retires them with the rest).  Returns
	 * 0 or -errno (-ESRCH/-ENOENT: the process or file is gone).
	 */
	int (*attach)(const struct attach_sites *s, struct fd_list *out);
};

/* uprobe-multi links (attach_multi.c). */
extern const struct attach_ops attach_uprobe_multi;
/* per-process perf-event uprobes with cookies, one fd per site (attach_perf.c) */
extern const struct attach_ops attach_perf_uprobe;

struct kernel_features;

/*
 * The mechanism kernel_features chose for KF_UPROBES on this kernel (the
 * best, uprobe-multi links, or the fallback, perf-event uprobes, also when
 * forced).  Never NULL; the caller checks available() before a run that
 * needs the heap probes.
 */
const struct attach_ops *attach_select(const struct kernel_features *kf);

#endif /* MEMTRACK_ATTACH_H */
