/* SPDX-License-Identifier: MIT */
/*
 * intern.h - a set of strings, each stored once: the function and file
 * names of symbolization repeat across thousands of addresses.
 * Ownership: the set owns every string intern() returns, until
 * intern_release().
 */
#ifndef MEMTRACK_INTERN_H
#define MEMTRACK_INTERN_H

#include <stdint.h>
#include "util/hash_index.h"

struct intern {
	char **strings;		 /* owned, n of them, in the order first interned */
	uint64_t n, cap;	 /* strings held, room */
	struct hash_index index; /* owned: strings by hash */
};

/* 0 or -ENOMEM. */
int intern_init(struct intern *t);

/* The stored copy of @s (added when new), or NULL on -ENOMEM. */
const char *intern(struct intern *t, const char *s);

/* Frees every string; @t can be initialised again. */
void intern_release(struct intern *t);

#endif /* MEMTRACK_INTERN_H */
