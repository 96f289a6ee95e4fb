/* SPDX-License-Identifier: MIT */
/*
 * queue.h - a bounded blocking FIFO of pointers (mutex + condvar).
 *
 * The pipeline uses two: full batches travel poller -> writer, empty ones
 * come back writer -> poller.  Because the second starts with every batch
 * there is, memory in flight is bounded, and a slow writer makes the poller
 * wait (the ring buffer then absorbs the burst, and counts what it drops).
 *
 * THREAD NOTES: any thread may push or pop; q->lock guards every field.
 */
#ifndef MEMTRACK_QUEUE_H
#define MEMTRACK_QUEUE_H

#include <stdbool.h>
#include <stddef.h>

struct queue;

/* Returns a queue holding at most @cap items, or NULL with errno set. */
struct queue *queue__new(size_t cap);

/* Appends @item, waiting while the queue is full.  -EPIPE once closed. */
int queue__push(struct queue *q, void *item);

/* Removes the oldest item, waiting while empty; NULL once closed and empty. */
void *queue__pop(struct queue *q);

/* Wakes every waiter; later pushes fail, pops drain what is left. */
void queue__close(struct queue *q);

/* Items now in the queue, and the most it ever held. */
size_t queue__len(struct queue *q);
size_t queue__max_len(struct queue *q);

/* Frees the queue, not its items (NULL is fine). */
void queue__free(struct queue *q);

#endif /* MEMTRACK_QUEUE_H */
