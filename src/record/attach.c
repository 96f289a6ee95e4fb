// SPDX-License-Identifier: MIT
/*
 * attach.c - picks the attachment mechanism; see attach.h.
 */
#include <stddef.h>
#include "kernel/kernel_features.h"
#include "record/attach.h"

/*
 * By kernel_features' choice for KF_UPROBES: its best mechanism first, the
 * fallback for kernels without uprobe-multi links (or forced) second.
 */
static const struct attach_ops *const mechanisms[] = {
	[KF_BEST] = &attach_uprobe_multi,
	[KF_FALLBACK] = &attach_perf_uprobe,
};

const struct attach_ops *attach_select(const struct kernel_features *kf)
{
	return mechanisms[kf->mech[KF_UPROBES]];
}
