// SPDX-License-Identifier: MIT
/* queue.c - bounded blocking FIFO; see queue.h. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include "pipeline/queue.h"

struct queue {
	pthread_mutex_t lock;
	pthread_cond_t not_empty;
	pthread_cond_t not_full;
	void **items; /* ring of cap slots */
	size_t cap;
	size_t head; /* index of the oldest item */
	size_t len;
	size_t max_len;
	bool closed;
};

struct queue *queue__new(size_t cap)
{
	struct queue *q = calloc(1, sizeof(*q));

	if (!q)
		return NULL;
	q->items = calloc(cap, sizeof(*q->items));
	if (!q->items) {
		free(q);
		return NULL;
	}
	q->cap = cap;
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->not_empty, NULL);
	pthread_cond_init(&q->not_full, NULL);
	return q;
}

int queue__push(struct queue *q, void *item)
{
	int err = 0;

	pthread_mutex_lock(&q->lock);
	while (q->len == q->cap && !q->closed)
		pthread_cond_wait(&q->not_full, &q->lock);
	if (q->closed) {
		err = -EPIPE;
	} else {
		q->items[(q->head + q->len) % q->cap] = item;
		q->len++;
		if (q->len > q->max_len)
			q->max_len = q->len;
		pthread_cond_signal(&q->not_empty);
	}
	pthread_mutex_unlock(&q->lock);
	return err;
}

void *queue__pop(struct queue *q)
{
	void *item = NULL;

	pthread_mutex_lock(&q->lock);
	while (!q->len && !q->closed)
		pthread_cond_wait(&q->not_empty, &q->lock);
	if (q->len) {
		item = q->items[q->head];
		q->head = (q->head + 1) % q->cap;
		q->len--;
		pthread_cond_signal(&q->not_full);
	}
	pthread_mutex_unlock(&q->lock);
	return item;
}

void queue__close(struct queue *q)
{
	pthread_mutex_lock(&q->lock);
	q->closed = true;
	pthread_cond_broadcast(&q->not_empty);
	pthread_cond_broadcast(&q->not_full);
	pthread_mutex_unlock(&q->lock);
}

size_t queue__len(struct queue *q)
{
	size_t n;

	pthread_mutex_lock(&q->lock);
	n = q->len;
	pthread_mutex_unlock(&q->lock);
	return n;
}

size_t queue__max_len(struct queue *q)
{
	size_t n;

	pthread_mutex_lock(&q->lock);
	n = q->max_len;
	pthread_mutex_unlock(&q->lock);
	return n;
}

void queue__free(struct queue *q)
{
	if (!q)
		return;
	pthread_mutex_destroy(&q->lock);
	pthread_cond_destroy(&q->not_empty);
	pthread_cond_destroy(&q->not_full);
	free(q->items);
	free(q);
}
