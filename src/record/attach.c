// SPDX-License-Identifier: MIT
/*
 * attach.c - picks the attachment mechanism; see attach.h.
 */
#include <stddef.h>
#include "record/attach.h"

/* In order of preference: a mechanism for older kernels goes after the first. */
static const struct attach_ops *const mechanisms[] = {
	&attach_uprobe_multi,
	&attach_perf_uprobe,
};

const struct attach_ops *attach_select(void)
{
	size_t n = sizeof(mechanisms) / sizeof(mechanisms[0]);

	for (size_t i = 0; i + 1 < n; i++)
		if (mechanisms[i]->available())
			return mechanisms[i];
	return mechanisms[n - 1];
}
