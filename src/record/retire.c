// SPDX-License-Identifier: MIT
/*
 * retire.c - closing fds without waiting; see retire.h.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>
#include "record/fd_list.h"
#include "record/reaper.h"
#include "record/retire.h"

/*
 * Closer threads.  Each close of a uprobe-multi link blocks its thread for
 * an RCU-tasks-trace grace period (tens of ms, more on a busy machine);
 * concurrent closes share grace periods.  With enough of them, a link
 * leaves memtrack's fd table as soon as its process exits, so a killed
 * memtrack (whose fds the kernel then closes one grace period at a time)
 * holds little more than the links of live processes.
 */
#define CLOSERS 16
#define CLOSER_STACK (64u << 10)
/*
 * fds waiting for a closer, at most.  Closing competes with attaching for
 * the kernel's uprobe locks, so a fork storm can make links faster than they
 * close: past this, retire_fds() waits (see retire.h).
 */
#define QUEUE_MAX 64
/* Closing from many threads at once lets the kernel share grace periods. */
#define CLOSE_NOW_THREADS 32

struct retire {
	struct reaper *reaper;	   /* borrowed, may be NULL */
	pthread_mutex_t lock;	   /* guards queue and stop */
	pthread_cond_t wake;	   /* the queue got fds, or stop */
	pthread_cond_t drained;	   /* a closer took an fd */
	struct fd_list queue;	   /* fds for the closers */
	bool stop;		   /* the closers end (retire__free closes the rest) */
	unsigned nclosers;	   /* closer threads started */
	pthread_t closer[CLOSERS]; /* each closes one queued fd at a time */
};

struct retire *retire__new(struct reaper *reaper)
{
	struct retire *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->reaper = reaper;
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->wake, NULL);
	pthread_cond_init(&r->drained, NULL);
	return r;
}

/* Closer thread: closes queued fds one at a time, as they come; ends at stop. */
static void *closer_main(void *arg)
{
	struct retire *r = arg;
	int fd;

	pthread_mutex_lock(&r->lock);
	for (;;) {
		while (!r->queue.n && !r->stop)
			pthread_cond_wait(&r->wake, &r->lock);
		if (r->stop)
			break;
		fd = r->queue.fds[--r->queue.n];
		pthread_cond_signal(&r->drained);
		pthread_mutex_unlock(&r->lock);
		close(fd);
		pthread_mutex_lock(&r->lock);
	}
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

/*
 * Starts the closer threads, on the first fd the reaper cannot take (it
 * takes them all while it runs: nothing to start at every run's start).
 * Called with r->lock held.
 */
static void start_closers(struct retire *r)
{
	pthread_attr_t attr;
	sigset_t all, old;

	/* signals are main's (STYLE.md §8); without closers, fds close at the end */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, CLOSER_STACK);
	while (r->nclosers < CLOSERS &&
	       !pthread_create(&r->closer[r->nclosers], &attr, closer_main, r))
		r->nclosers++;
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/*
 * Queues @fds for the closers (without any, they wait for retire__free);
 * returns how many it queued (from the first).
 */
static unsigned queue_fds(struct retire *r, const int *fds, unsigned n)
{
	unsigned i = 0;

	pthread_mutex_lock(&r->lock);
	if (!r->nclosers && !r->stop)
		start_closers(r);
	for (; !r->stop && i < n; i++)
		if (fd_list_push(&r->queue, fds[i]))
			break;
	pthread_cond_broadcast(&r->wake);
	while (r->nclosers && !r->stop && r->queue.n > QUEUE_MAX)
		pthread_cond_wait(&r->drained, &r->lock);
	pthread_mutex_unlock(&r->lock);
	return i;
}

void retire_fds(struct retire *r, const int *fds, unsigned n)
{
	unsigned i = 0;

	if (r)
		i = reaper_hand(r->reaper, fds, n);
	if (r && i < n)
		i += queue_fds(r, fds + i, n - i);
	if (i < n) /* no room: pay the grace periods now */
		retire_fds_now(fds + i, n - i);
}

struct close_share {
	const int *fds;
	unsigned n;
};

static void *close_share(void *arg)
{
	const struct close_share *s = arg;

	for (unsigned i = 0; i < s->n; i++)
		close(s->fds[i]);
	return NULL;
}

void retire_fds_now(const int *fds, unsigned n)
{
	struct close_share share[CLOSE_NOW_THREADS];
	pthread_t tid[CLOSE_NOW_THREADS];
	bool started[CLOSE_NOW_THREADS] = { false };
	unsigned nthreads = n < CLOSE_NOW_THREADS ? n : CLOSE_NOW_THREADS, done = 0;

	for (unsigned t = 0; t < nthreads; t++) {
		unsigned cnt = (n - done) / (nthreads - t);

		share[t].fds = fds + done;
		share[t].n = cnt;
		done += cnt;
		started[t] = !pthread_create(&tid[t], NULL, close_share, &share[t]);
		if (!started[t])
			close_share(&share[t]);
	}
	for (unsigned t = 0; t < nthreads; t++)
		if (started[t])
			pthread_join(tid[t], NULL);
}

unsigned retire_end(struct retire *r)
{
	return r ? reaper_hand_all(r->reaper) : 0;
}

void retire__free(struct retire *r)
{
	if (!r)
		return;
	pthread_mutex_lock(&r->lock);
	r->stop = true;
	pthread_cond_broadcast(&r->wake);
	pthread_mutex_unlock(&r->lock);
	for (unsigned i = 0; i < r->nclosers; i++)
		pthread_join(r->closer[i], NULL);
	/* the rest together: their grace periods overlap */
	retire_fds_now(r->queue.fds, r->queue.n);
	fd_list_release(&r->queue);
	pthread_mutex_destroy(&r->lock);
	pthread_cond_destroy(&r->wake);
	pthread_cond_destroy(&r->drained);
	free(r);
}
