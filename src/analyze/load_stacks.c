// SPDX-License-Identifier: MIT
/* load_stacks.c - an artifact through the analysis and the stack table; see load.h. */
#include <errno.h>
#include <stdio.h>
#include "analyze/load.h"

struct stacks_ctx {
	struct stack_table *st;
	int err;
};

static void add_stack_event(void *ctx, const struct mt_event *ev, const struct proc_summary *p)
{
	struct stacks_ctx *c = ctx;

	if (!c->err && stack_table_add_event(c->st, ev) == -ENOMEM)
		c->err = -ENOMEM;
}

int load_artifact_stacks(const char *path, struct loaded *l, struct stack_table *st,
			 struct proc_filter *filter)
{
	struct stacks_ctx c = { .st = st };
	struct load_hooks hooks = { .observer = add_stack_event, .ctx = &c, .filter = filter };
	int err = load_artifact(path, l, &hooks);

	if (!err && c.err) {
		snprintf(l->error, sizeof(l->error), "out of memory");
		err = c.err;
	}
	return err;
}
