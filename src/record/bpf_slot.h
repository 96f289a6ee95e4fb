/* SPDX-License-Identifier: MIT */
/*
 * bpf_slot.h - one loaded BPF side that outlives a session: what the
 * daemon (daemon/pool.h) hands each session instead of loading anew.
 *
 * A slot is a skeleton loaded and attached (its tracepoints) with one set
 * of load-time options (struct bpf_slot_key: what the rodata freezes and
 * the map sizes), its own reaper and retirer (reaper.h, retire.h: the
 * links a session lets go of, and, where the kernel cannot, the resume of
 * what is parked should the daemon die), so sessions never share a map, a
 * ring or a link: per-session state separates by being in different
 * objects.  Between two sessions, bpf_slot_reset() empties every map.
 *
 * THREAD NOTES: a slot is used by one thread at a time (the daemon's pool
 * hands it over under its lock); bpf_slot__new() forks (the reaper), which
 * is safe from a threaded process because the reaper runs only its own
 * code after the fork.
 */
#ifndef MEMTRACK_BPF_SLOT_H
#define MEMTRACK_BPF_SLOT_H

#include <stdbool.h>
#include <stdint.h>
#include "compiler.h"

struct kernel_features;
struct memtrack_bpf;
struct reaper;
struct retire;
struct stacks;
struct attach_ops;

/* Rows (and index entries) whose chunks a slot makes as it loads: 6 MiB of kernel memory. */
#define BPF_SLOT_RESERVE_ROWS (256u << 10)

/* The load-time options a slot was loaded with: sessions take a slot of equal key. */
struct bpf_slot_key {
	uint64_t ring_bytes;   /* the events ring, bytes */
	uint64_t wakeup_bytes; /* wake the poller at this much unread data */
	uint32_t unwind_rows;  /* 0 without stacks */
	bool allocators;       /* heap uprobes and parking */
	bool stacks;	       /* call stacks */
	bool fast;	       /* the in-process heap path's programs (fast.bpf.c) */
	bool adopt_running;    /* attach: processes found running */
	bool owner_only;       /* attach for a user: only what owner_uid may trace (rodata) */
	uint32_t owner_uid;    /* that user's uid and gid */
	uint32_t owner_gid;
};

struct bpf_slot {
	struct bpf_slot_key key;
	struct memtrack_bpf *skel;	 /* owned */
	struct reaper *reaper;		 /* owned, NULL: none could be forked */
	struct retire *retire;		 /* owned */
	const struct attach_ops *attach; /* how this kernel attaches uprobes */
	/* with key.stacks: the unwinder's registry, its chunks published in the
	 * skeleton and the objects' rows kept from session to session (owned) */
	struct stacks *stacks;
	unsigned sessions;     /* sessions it has served */
	bool giving;	       /* the pool's: on its way back (pool_giving) */
	struct bpf_slot *next; /* the pool's list */
};

/*
 * Loads a slot of @key on the kernel @kf describes (borrowed, must outlive
 * the slot).  Returns it (bpf_slot__free), or NULL with a one-line reason in
 * @err and errno set.
 */
struct bpf_slot *bpf_slot__new(const struct bpf_slot_key *key, const struct kernel_features *kf,
			       char *err, size_t errlen);

/* Empties every map for the next session (loader_reset).  Returns 0 or -errno. */
MT_MUST_CHECK int bpf_slot_reset(struct bpf_slot *s);

bool bpf_slot_key_eq(const struct bpf_slot_key *a, const struct bpf_slot_key *b);

/* Unloads the slot: links and programs go (NULL is fine). */
void bpf_slot__free(struct bpf_slot *s);

#endif /* MEMTRACK_BPF_SLOT_H */
