// SPDX-License-Identifier: MIT
/* load.c - a whole artifact through the analysis; see load.h. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "analyze/load.h"

int load_artifact(const char *path, struct loaded *l, const struct load_hooks *hooks)
{
	struct mt_reader *rd;
	struct mt_event ev;
	int ret;

	memset(l, 0, sizeof(*l));
	analysis_init(&l->a);
	rd = mt_reader__open(path, l->error, sizeof(l->error));
	if (!rd)
		return -EIO;
	analysis_set_page_size(&l->a, mt_reader__header(rd)->page_size);
	analysis_set_attached(&l->a, mt_reader__header(rd)->flags & MT_HDR_ATTACHED);
	l->a.filtered = hooks && hooks->filter && proc_filter_active(hooks->filter);
	if (hooks) {
		l->a.observer = hooks->observer;
		l->a.observer_ctx = hooks->ctx;
		if (hooks->header)
			hooks->header(hooks->ctx, mt_reader__header(rd));
	}
	while ((ret = mt_reader__next(rd, &ev)) == 1) {
		int keep = hooks && hooks->filter ? proc_filter_keep(hooks->filter, &ev) : 1;

		if (keep < 0 || (keep && analysis_add(&l->a, &ev))) {
			ret = -ENOMEM;
			break;
		}
	}
	analysis_finish(&l->a);
	l->hdr = *mt_reader__header(rd);
	if (mt_reader__trailer(rd)) {
		l->trailer = *mt_reader__trailer(rd);
		l->has_trailer = true;
	}
	l->truncated = ret == -ENODATA;
	l->physical = l->a.has_physical || (l->hdr.flags & MT_HDR_PHYSICAL);
	if (ret == -ENOMEM)
		snprintf(l->error, sizeof(l->error), "out of memory");
	else if (ret < 0)
		snprintf(l->error, sizeof(l->error), "%s", mt_reader__error(rd));
	mt_reader__free(rd);
	return ret < 0 && ret != -ENODATA ? ret : 0;
}

uint64_t loaded_duration_ns(const struct loaded *l)
{
	uint64_t end = l->a.last_ts > l->hdr.start_ns ? l->a.last_ts - l->hdr.start_ns : 0;

	if (l->has_trailer && l->trailer.duration_ns > end)
		return l->trailer.duration_ns;
	return end;
}
