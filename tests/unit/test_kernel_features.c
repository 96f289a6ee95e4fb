// SPDX-License-Identifier: MIT
/*
 * test_kernel_features.c - record/kernel_features.c: the one line below
 * memtrack's floor (the kernel found, what is missing, the version that
 * brought it), the mechanism names per facility, and what this kernel's BTF
 * says (this host: 6.18, every preferred mechanism).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "harness.h"
#include "kernel/kernel_features.h"

static struct kernel_features with(bool btf, bool loop)
{
	struct kernel_features kf;

	memset(&kf, 0, sizeof(kf));
	strcpy(kf.release, "5.15.0-91-generic");
	kf.btf = btf;
	kf.bpf_loop = loop;
	return kf;
}

static void test_below_floor(void)
{
	struct kernel_features kf = with(false, false);
	char buf[256];

	CHECK_STR(
		kernel_features_below_floor(&kf, buf, sizeof(buf)),
		"this kernel (Linux 5.15.0-91-generic) lacks BTF (/sys/kernel/btf/vmlinux: "
		"CONFIG_DEBUG_INFO_BTF=y), which came in Linux 5.5; memtrack needs Linux 6.1 or newer");
	kf = with(true, false);
	CHECK_STR(kernel_features_below_floor(&kf, buf, sizeof(buf)),
		  "this kernel (Linux 5.15.0-91-generic) lacks the BPF helper bpf_loop, which came "
		  "in Linux 5.17; memtrack needs Linux 6.1 or newer");
	kf = with(true, true);
	CHECK(kernel_features_below_floor(&kf, buf, sizeof(buf)) == NULL);
}

static void test_names(void)
{
	struct kernel_features kf = with(true, true);

	kf.mech[KF_PARK] = KF_FALLBACK;
	kf.mech[KF_UPROBES] = KF_BEST;
	CHECK_STR(kernel_features_facility(KF_PARK), "park");
	CHECK_STR(kernel_features_mech(&kf, KF_PARK), "first-return");
	CHECK_STR(kernel_features_facility(KF_UPROBES), "uprobes");
	CHECK_STR(kernel_features_mech(&kf, KF_UPROBES), "uprobe-multi");
	CHECK_STR(kernel_features_facility(KF_EXIT), "exit");
}

/* This host's kernel: BTF, every preferred mechanism; forced: every fallback but rss. */
static void test_this_kernel(void)
{
	struct kernel_features kf;

	if (access("/sys/kernel/btf/vmlinux", R_OK)) {
		printf("SKIP test_this_kernel (no /sys/kernel/btf/vmlinux)\n");
		return;
	}
	unsetenv("MEMTRACK_FORCE_FALLBACKS");
	CHECK_EQ(kernel_features_probe(&kf), 0);
	CHECK(kf.btf && kf.bpf_loop && kf.send_signal_task && kf.task_from_pid && kf.uprobe_multi &&
	      kf.rss_percpu && kf.exit_group_dead);
	for (int f = 0; f < KF_NFACILITIES; f++)
		CHECK_EQ(kf.mech[f], KF_BEST);
	setenv("MEMTRACK_FORCE_FALLBACKS", "1", 1);
	CHECK_EQ(kernel_features_probe(&kf), 0);
	CHECK(kf.forced);
	CHECK_EQ(kf.mech[KF_PARK], KF_FALLBACK);
	CHECK_EQ(kf.mech[KF_RESUME], KF_FALLBACK);
	CHECK_EQ(kf.mech[KF_UPROBES], KF_FALLBACK);
	CHECK_EQ(kf.mech[KF_EXIT], KF_FALLBACK);
	CHECK_EQ(kf.mech[KF_RSS], KF_BEST); /* the layout is the kernel's */
	setenv("MEMTRACK_FORCE_FALLBACKS", "park,resume", 1);
	CHECK_EQ(kernel_features_probe(&kf), 0);
	CHECK(kf.forced);
	CHECK_EQ(kf.mech[KF_PARK], KF_FALLBACK);
	CHECK_EQ(kf.mech[KF_RESUME], KF_FALLBACK);
	CHECK_EQ(kf.mech[KF_UPROBES], KF_BEST);
	CHECK_EQ(kf.mech[KF_EXIT], KF_BEST);
	setenv("MEMTRACK_FORCE_FALLBACKS", "0", 1);
	CHECK_EQ(kernel_features_probe(&kf), 0);
	CHECK(!kf.forced);
	CHECK_EQ(kf.mech[KF_PARK], KF_BEST);
	unsetenv("MEMTRACK_FORCE_FALLBACKS");
}

int main(void)
{
	RUN(test_below_floor);
	RUN(test_names);
	RUN(test_this_kernel);
	HARNESS_EXIT();
}
