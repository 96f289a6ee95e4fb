// SPDX-License-Identifier: MIT
/*
 * bpf_slot.c - a loaded BPF side kept across sessions; see bpf_slot.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kernel/kernel_features.h"
#include "record/attach.h"
#include "record/bpf_slot.h"
#include "record/loader.h"
#include "record/reaper.h"
#include "record/retire.h"
#include "record/stacks.h"

static const char *step_name(enum loader_step step)
{
	switch (step) {
	case LOADER_BTF: return "no kernel BTF";
	case LOADER_OPEN: return "opening the BPF object";
	case LOADER_LOAD: return "loading the programs";
	case LOADER_ATTACH: return "attaching the tracepoints";
	}
	return "?";
}

/*
 * Where the kernel cannot resume parked processes at the daemon's death
 * (KF_RESUME's fallback), the slot's reaper does.  Returns 0 or -errno.
 */
static int resume_at_death(struct bpf_slot *s, const struct kernel_features *kf)
{
	int parked, session, err;

	if (kf->mech[KF_RESUME] == KF_BEST || !s->key.allocators)
		return 0;
	err = loader_parked_fds(s->skel, &parked, &session);
	return err ? err : reaper_resume_at_end(s->reaper, parked, session);
}

struct bpf_slot *bpf_slot__new(const struct bpf_slot_key *key, const struct kernel_features *kf,
			       char *err, size_t errlen)
{
	struct bpf_slot *s = calloc(1, sizeof(*s));
	struct loader_opts lo = { 0 };
	enum loader_step step = LOADER_OPEN;
	int ret = -ENOMEM;

	if (!s)
		goto fail;
	s->key = *key;
	s->attach = attach_select(kf);
	/* the reaper first: its fork copies no thread of this slot's */
	s->reaper = reaper__new();
	s->retire = retire__new(s->reaper);
	if (!s->reaper || !s->retire)
		goto fail;
	lo = (struct loader_opts){
		.ring_bytes = key->ring_bytes,
		.wakeup_bytes = key->wakeup_bytes,
		.allocators = key->allocators,
		.uprobe_attach_type = s->attach->prog_attach_type,
		.stacks = key->stacks,
		.fast = key->fast,
		.unwind_rows = key->unwind_rows,
		.adopt_running = key->adopt_running,
		.owner_only = key->owner_only,
		.owner_uid = key->owner_uid,
		.owner_gid = key->owner_gid,
		.kf = kf,
	};
	ret = loader_open(&lo, &s->skel, &step);
	if (!ret)
		ret = resume_at_death(s, kf);
	if (!ret && key->stacks) {
		s->stacks = stacks__new(key->unwind_rows, NULL);
		ret = s->stacks ? stacks__attach(s->stacks, s->skel) : -errno;
		if (!ret) /* a typical tree's tables: their chunks made before any session */
			ret = stacks__reserve(s->stacks, BPF_SLOT_RESERVE_ROWS);
	}
	if (ret)
		goto fail;
	return s;

fail:
	snprintf(err, errlen, "cannot load memtrack's BPF programs (%s): %s", step_name(step),
		 strerror(-ret));
	bpf_slot__free(s);
	errno = -ret;
	return NULL;
}

int bpf_slot_reset(struct bpf_slot *s)
{
	return loader_reset(s->skel);
}

bool bpf_slot_key_eq(const struct bpf_slot_key *a, const struct bpf_slot_key *b)
{
	return a->ring_bytes == b->ring_bytes && a->wakeup_bytes == b->wakeup_bytes &&
	       a->unwind_rows == b->unwind_rows && a->allocators == b->allocators &&
	       a->stacks == b->stacks && a->fast == b->fast &&
	       a->adopt_running == b->adopt_running && a->owner_only == b->owner_only &&
	       a->owner_uid == b->owner_uid && a->owner_gid == b->owner_gid;
}

void bpf_slot__free(struct bpf_slot *s)
{
	if (!s)
		return;
	if (s->skel) {
		loader_stop_parking(s->skel);
		(void)loader_untrack_all(s->skel);
	}
	/* the retirer's queue first: links before the programs they run */
	retire__free(s->retire);
	stacks__free(s->stacks);
	loader_close(s->skel);
	reaper__free(s->reaper); /* after the last close */
	free(s);
}
