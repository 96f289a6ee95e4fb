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

struct intern {
	char **slots;	 /* owned: open addressing on the string's hash, NULL = empty */
	uint64_t nslots; /* power of two */
	uint64_t n;	 /* strings held */
};

/* 0 or -ENOMEM. */
int intern_init(struct intern *t);

/* The stored copy of @s (added when new), or NULL on -ENOMEM. */
const char *intern(struct intern *t, const char *s);

/* Frees every string; @t can be initialised again. */
void intern_release(struct intern *t);

#endif /* MEMTRACK_INTERN_H */
