/* SPDX-License-Identifier: MIT */
/*
 * fd_list.h - a growable array of owned fds: what an attachment mechanism
 * (attach.h) hands back and the probe registry (probes.c) keeps per process.
 *
 * THREAD NOTES: none; a list belongs to whoever holds it.
 */
#ifndef MEMTRACK_FD_LIST_H
#define MEMTRACK_FD_LIST_H

#include <errno.h>
#include <stdlib.h>

struct fd_list {
	int *fds; /* owned fds, [0..n) */
	unsigned n;
	unsigned cap;
};

/*
 * Appends @fd, owned by @l from then on.  Returns 0, or -ENOMEM (then @fd
 * is still the caller's).
 */
static inline int fd_list_push(struct fd_list *l, int fd)
{
	if (l->n == l->cap) {
		unsigned cap = l->cap ? l->cap * 2 : 8;
		int *grown = (int *)realloc(l->fds, cap * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		l->fds = grown;
		l->cap = cap;
	}
	l->fds[l->n++] = fd;
	return 0;
}

/* Frees the array, not the fds (they were closed or handed on); empties @l. */
static inline void fd_list_release(struct fd_list *l)
{
	free(l->fds);
	l->fds = NULL;
	l->n = l->cap = 0;
}

#endif /* MEMTRACK_FD_LIST_H */
