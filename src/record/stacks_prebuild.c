// SPDX-License-Identifier: MIT
/*
 * stacks_prebuild.c - the unwind tables of the files a command will map,
 * built while the BPF side loads (stacks_prebuild.h).
 */
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "inspect/elf_needed.h"
#include "inspect/unwind_cache.h"
#include "inspect/unwind_table.h"
#include "record/stacks.h"
#include "record/stacks_prebuild.h"

/* One file of a prebuild (stacks_prebuild.h). */
struct prebuilt {
	char *path;
	struct stat st;		/* of @path when the build began */
	struct unwind_table *t; /* the build's (NULL: it failed, or taken) */
	struct stacks_slice sl; /* where it was stored (nbuckets 0: not) */
	bool done;		/* under the prebuild's lock */
};

#define PREBUILD_MAX 48 /* files: the command's own, then the libraries they need */

/*
 * Two threads build: one takes cc1 (55 ms), the other its libraries
 * (30 ms), which ld.so maps right after the exec, one park each.
 */
#define PREBUILD_THREADS 2

struct stacks_prebuild {
	pthread_t threads[PREBUILD_THREADS];
	unsigned nthreads;
	unsigned started; /* threads that ran, under the lock */
	pthread_mutex_t lock;
	pthread_cond_t built; /* another file's build is done */
	struct prebuilt files[PREBUILD_MAX];
	unsigned n;		    /* under the lock once the threads run */
	unsigned next;		    /* the next file to build, under the lock */
	bool listed;		    /* the needed libraries are listed, under the lock */
	struct unwind_cache *cache; /* borrowed, may be NULL */
	struct stacks *stacks;	    /* borrowed: stacks_prestore() */
};

/* Appends @path unless it is a file already listed; under the lock once the thread runs. */
static void prebuild_add(struct stacks_prebuild *pb, const char *path)
{
	struct prebuilt *f;
	struct stat st;

	if (pb->n == PREBUILD_MAX || stat(path, &st) || !S_ISREG(st.st_mode))
		return;
	for (unsigned i = 0; i < pb->n; i++)
		if (pb->files[i].st.st_dev == st.st_dev && pb->files[i].st.st_ino == st.st_ino)
			return;
	f = &pb->files[pb->n];
	f->path = strdup(path);
	if (!f->path)
		return;
	f->st = st;
	pthread_mutex_lock(&pb->lock);
	pb->n++;
	pthread_mutex_unlock(&pb->lock);
}

/*
 * The libraries the listed files need, breadth first (elf_needed.h's
 * guess): read before any build, since ld.so maps them a millisecond after
 * the exec.
 */
static void prebuild_needed(struct stacks_prebuild *pb)
{
	static char found[PREBUILD_MAX][ELF_NEEDED_PATH_MAX]; /* this thread's only */

	for (unsigned i = 0; i < pb->n && pb->n < PREBUILD_MAX; i++) {
		unsigned k = elf_needed(pb->files[i].path, found, PREBUILD_MAX);

		for (unsigned j = 0; j < k; j++)
			prebuild_add(pb, found[j]);
	}
}

/* The index of the next file to build, or -1 once every file is taken. */
static int prebuild_next(struct stacks_prebuild *pb)
{
	int i = -1;

	pthread_mutex_lock(&pb->lock);
	while (pb->next == pb->n && !pb->listed) /* more may come */
		pthread_cond_wait(&pb->built, &pb->lock);
	if (pb->next < pb->n)
		i = (int)pb->next++;
	pthread_mutex_unlock(&pb->lock);
	return i;
}

static void *prebuild_main(void *arg)
{
	struct stacks_prebuild *pb = arg;
	bool lister;
	int i;

	pthread_mutex_lock(&pb->lock);
	lister = !pb->started++; /* the first thread to run lists the libraries */
	pthread_mutex_unlock(&pb->lock);
	if (lister) {
		prebuild_needed(pb);
		pthread_mutex_lock(&pb->lock);
		pb->listed = true;
		pthread_cond_broadcast(&pb->built);
		pthread_mutex_unlock(&pb->lock);
	}
	while ((i = prebuild_next(pb)) >= 0) {
		struct unwind_table *t = NULL;

		struct stacks_slice sl = { 0 };

		if (unwind_cache_build(pb->cache, pb->files[i].path, &t))
			t = NULL;
		if (t && pb->stacks && !stacks_prestore(pb->stacks, t, &sl))
			unwind_table_drop_rows(t);
		pthread_mutex_lock(&pb->lock);
		pb->files[i].t = t;
		pb->files[i].sl = sl;
		pb->files[i].done = true;
		pthread_cond_broadcast(&pb->built);
		pthread_mutex_unlock(&pb->lock);
	}
	return NULL;
}

static void prebuild_release(struct stacks_prebuild *pb)
{
	for (unsigned i = 0; i < pb->n; i++) {
		unwind_table_free(pb->files[i].t);
		free(pb->files[i].path);
	}
	pthread_mutex_destroy(&pb->lock);
	pthread_cond_destroy(&pb->built);
	free(pb);
}

/*
 * The C library and dynamic loader memtrack runs on, as /proc/self/maps
 * names them: nearly every command maps the same files.
 */
static void add_own_runtime(struct stacks_prebuild *pb)
{
	char line[4096 + 128], *path;
	FILE *f = fopen("/proc/self/maps", "re");

	while (f && fgets(line, sizeof(line), f)) {
		path = strchr(line, '/');
		if (!path || !strstr(line, " r-xp ") ||
		    (!strstr(path, "/libc.so") && !strstr(path, "/ld-linux")))
			continue;
		path[strcspn(path, "\n")] = 0;
		prebuild_add(pb, path);
	}
	if (f)
		fclose(f);
}

struct stacks_prebuild *stacks_prebuild_start(const char *exe, const char *fast_lib,
					      struct unwind_cache *cache, struct stacks *stacks)
{
	struct stacks_prebuild *pb = calloc(1, sizeof(*pb));
	sigset_t all, old;
	int err;

	if (!pb)
		return NULL;
	pb->cache = cache;
	pb->stacks = stacks;
	pthread_mutex_init(&pb->lock, NULL);
	pthread_cond_init(&pb->built, NULL);
	if (exe)
		prebuild_add(pb, exe);
	if (fast_lib)
		prebuild_add(pb, fast_lib);
	add_own_runtime(pb);
	if (!pb->n)
		goto fail;
	sigfillset(&all); /* signals are main's */
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_mutex_lock(&pb->lock); /* nthreads is whole before a thread can read listed */
	for (unsigned i = 0; i < PREBUILD_THREADS; i++) {
		err = pthread_create(&pb->threads[pb->nthreads], NULL, prebuild_main, pb);
		if (err)
			break;
		pb->nthreads++;
	}
	pb->listed = pb->listed || !pb->nthreads; /* no lister: nobody may wait for it */
	pthread_mutex_unlock(&pb->lock);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (pb->nthreads)
		return pb;
fail:
	prebuild_release(pb);
	return NULL;
}

void stacks_prebuild_free(struct stacks_prebuild *pb)
{
	if (!pb)
		return;
	for (unsigned i = 0; i < pb->nthreads; i++)
		pthread_join(pb->threads[i], NULL);
	prebuild_release(pb);
}

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
	       a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

struct unwind_table *stacks_prebuild_take(struct stacks_prebuild *pb, const char *full,
					  struct stacks_slice *slice)
{
	struct unwind_table *t = NULL;
	struct stat st;

	*slice = (struct stacks_slice){ 0 };
	if (!pb || stat(full, &st))
		return NULL;
	pthread_mutex_lock(&pb->lock);
	for (unsigned i = 0; i < pb->n; i++) {
		struct prebuilt *f = &pb->files[i];

		if (!same_file(&st, &f->st))
			continue;
		while (!f->done)
			pthread_cond_wait(&pb->built, &pb->lock);
		t = f->t;
		*slice = f->sl;
		f->t = NULL;
		break;
	}
	pthread_mutex_unlock(&pb->lock);
	return t;
}
