/* SPDX-License-Identifier: MIT */
/*
 * kernel_features.h - what the running kernel offers memtrack's BPF side,
 * found out at start, and the mechanism chosen per facility.
 *
 * Each facility has a preferred mechanism and, where an older kernel lacks
 * it, a fallback that gives the same records (a fallback that could not is
 * refused instead: see kernel_features_refusal()).  The choices are printed
 * under -v and said by the artifact's header flags.
 *
 * Probing reads the kernel's BTF (kfuncs, helper ids, attach types, the
 * layout of mm_struct), not its version: a distribution kernel with
 * backports gets what it has.  MEMTRACK_FORCE_FALLBACKS=1 in the
 * environment makes every facility take its fallback, =park,resume (a
 * comma-separated list of facility names) those named (tests run the host
 * kernel that way and compare the records).
 *
 * THREAD NOTES: kernel_features_probe() is main's, before the load; the
 * struct is read-only after it.
 */
#ifndef MEMTRACK_KERNEL_FEATURES_H
#define MEMTRACK_KERNEL_FEATURES_H

#include <stdbool.h>
#include <stddef.h>
#include "compiler.h"
#include "format/artifact.h"

/*
 * The facilities (MT_KERNEL_FACILITIES in format/artifact.h): KF_PARK stops a new process before it runs, KF_RESUME resumes
 * the parked ones when memtrack is killed, KF_UPROBES attaches the
 * allocator probes, KF_RSS reads mm_struct's counters, KF_EXIT tells a
 * process's last thread at sched_process_exit.
 */
#define KF_X_ENUM(N, name, best, fallback) KF_##N,
enum kf_facility { MT_KERNEL_FACILITIES(KF_X_ENUM) KF_NFACILITIES };
#undef KF_X_ENUM

/* The mechanism of each facility: 0 is the preferred one, 1 its fallback. */
enum kf_mech { KF_BEST = 0, KF_FALLBACK = 1 };

struct kernel_features {
	char release[65];      /* uname -r */
	bool btf;	       /* /sys/kernel/btf/vmlinux readable */
	bool bpf_loop;	       /* helper bpf_loop (Linux 5.17) */
	bool send_signal_task; /* kfunc bpf_send_signal_task (6.13) */
	bool task_from_pid;    /* kfuncs bpf_task_from_pid/bpf_task_release (6.2) */
	bool uprobe_multi;     /* BPF_TRACE_UPROBE_MULTI links (6.6) */
	bool rss_percpu;       /* mm_struct.rss_stat is percpu_counter[] (6.2) */
	bool exit_group_dead;  /* sched_process_exit passes group_dead */
	bool forced;	       /* MEMTRACK_FORCE_FALLBACKS=1 */
	enum kf_mech mech[KF_NFACILITIES];
};

/*
 * Fills @kf for the running kernel and chooses the mechanisms.  Returns 0,
 * or -errno when the kernel's BTF cannot be read (kf->btf false).  Prints
 * nothing.
 */
int kernel_features_probe(struct kernel_features *kf);

/*
 * Below memtrack's floor: writes into @buf one line naming the kernel,
 * the version needed and what is missing, and returns @buf; NULL when the
 * kernel has what memtrack cannot do without.
 */
const char *kernel_features_below_floor(const struct kernel_features *kf, char *buf, size_t len);

/* "park", "resume", ... (for -v). */
const char *kernel_features_facility(enum kf_facility f);

/* The name of the mechanism chosen for @f, e.g. "bpf_send_signal_task". */
const char *kernel_features_mech(const struct kernel_features *kf, enum kf_facility f);

/* Writes the mechanisms chosen into @h's kernel_mech (the artifact's header). */
void kernel_features_header(const struct kernel_features *kf, struct mt_header *h);

/*
 * The minimum kernel memtrack is tested on, "6.1": its one definition.  The
 * Makefile reads it from this line for the man page and the .deb's
 * Description; `memtrack --version` prints MT_REQUIREMENTS.
 */
#define MT_KERNEL_FLOOR "6.1"
#define MT_REQUIREMENTS \
	"needs Linux " MT_KERNEL_FLOOR " or newer with BTF, and root or CAP_BPF and CAP_PERFMON"

#endif
