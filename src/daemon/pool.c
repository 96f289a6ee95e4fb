// SPDX-License-Identifier: MIT
/*
 * pool.c - the daemon's loaded BPF sides; see pool.h.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "daemon/pool.h"

#define POOL_DEFAULTS_MAX 4

struct pool {
	const struct kernel_features *kf; /* borrowed */
	struct bpf_slot_key defaults[POOL_DEFAULTS_MAX];
	unsigned ndefaults;
	pthread_mutex_t lock; /* idle, nidle, stats, stop */
	pthread_cond_t wake;  /* the refill thread's */
	pthread_cond_t back;  /* a slot was given back (returning fell) */
	unsigned returning;   /* slots being reset in pool_give() */
	pthread_mutex_t load_lock;
	struct bpf_slot *idle;
	unsigned nidle;
	struct pool_stats st;
	bool stop;
	bool refilling; /* the thread was started */
	pthread_t refill;
};

static struct bpf_slot *load(struct pool *p, const struct bpf_slot_key *key, char *err,
			     size_t errlen)
{
	struct bpf_slot *s;

	pthread_mutex_lock(&p->load_lock);
	s = bpf_slot__new(key, p->kf, err, errlen);
	pthread_mutex_unlock(&p->load_lock);
	if (s) {
		pthread_mutex_lock(&p->lock);
		p->st.loads++;
		pthread_mutex_unlock(&p->lock);
	}
	return s;
}

/* Under the lock: unlinks and returns an idle slot of @key, or NULL. */
static struct bpf_slot *unlink_idle(struct pool *p, const struct bpf_slot_key *key)
{
	for (struct bpf_slot **pp = &p->idle; *pp; pp = &(*pp)->next) {
		struct bpf_slot *s = *pp;

		if (bpf_slot_key_eq(&s->key, key)) {
			*pp = s->next;
			s->next = NULL;
			p->nidle--;
			return s;
		}
	}
	return NULL;
}

/* Under the lock: the first default key with no idle slot, or NULL. */
static const struct bpf_slot_key *missing_default(struct pool *p)
{
	for (unsigned i = 0; i < p->ndefaults; i++) {
		bool have = false;

		for (struct bpf_slot *s = p->idle; s && !have; s = s->next)
			have = bpf_slot_key_eq(&s->key, &p->defaults[i]);
		if (!have)
			return &p->defaults[i];
	}
	return NULL;
}

/* Under the lock: keeps @s idle, or returns it when there is no room (to free). */
static struct bpf_slot *keep_idle(struct pool *p, struct bpf_slot *s)
{
	if (p->nidle >= POOL_IDLE_MAX || p->stop)
		return s;
	s->next = p->idle;
	p->idle = s;
	p->nidle++;
	return NULL;
}

/* The refill thread: one idle slot of each default key, loaded when missing. */
static void *refill_main(void *arg)
{
	struct pool *p = arg;
	char err[256];

	pthread_mutex_lock(&p->lock);
	while (!p->stop) {
		const struct bpf_slot_key *k = missing_default(p);
		struct bpf_slot_key key;
		struct bpf_slot *s;

		if (!k || p->nidle >= POOL_IDLE_MAX || p->returning) { /* one comes back */
			pthread_cond_wait(&p->wake, &p->lock);
			continue;
		}
		key = *k;
		pthread_mutex_unlock(&p->lock);
		s = load(p, &key, err, sizeof(err));
		pthread_mutex_lock(&p->lock);
		if (!s) { /* tried again at the next give: no busy loop on a failing load */
			pthread_cond_wait(&p->wake, &p->lock);
			continue;
		}
		s = keep_idle(p, s);
		if (s) {
			pthread_mutex_unlock(&p->lock);
			bpf_slot__free(s);
			pthread_mutex_lock(&p->lock);
		}
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

struct pool *pool__new(const struct kernel_features *kf, const struct bpf_slot_key *defaults,
		       unsigned ndefaults)
{
	struct pool *p = calloc(1, sizeof(*p));
	sigset_t all, old;

	if (!p)
		return NULL;
	p->kf = kf;
	p->ndefaults = ndefaults < POOL_DEFAULTS_MAX ? ndefaults : POOL_DEFAULTS_MAX;
	memcpy(p->defaults, defaults, p->ndefaults * sizeof(*defaults));
	pthread_mutex_init(&p->lock, NULL);
	pthread_mutex_init(&p->load_lock, NULL);
	pthread_cond_init(&p->wake, NULL);
	pthread_cond_init(&p->back, NULL);
	sigfillset(&all); /* signals are main's */
	pthread_sigmask(SIG_SETMASK, &all, &old);
	p->refilling = !pthread_create(&p->refill, NULL, refill_main, p);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return p;
}

struct bpf_slot *pool_take(struct pool *p, const struct bpf_slot_key *key, char *err, size_t errlen)
{
	struct bpf_slot *s;

	pthread_mutex_lock(&p->lock);
	/* a slot being reset is idle in a moment: far sooner than a load */
	while (!(s = unlink_idle(p, key)) && p->returning)
		pthread_cond_wait(&p->back, &p->lock);
	if (s) {
		p->st.reuses += s->sessions > 0;
		p->st.busy++;
		pthread_cond_signal(&p->wake); /* a default taken: load the next one */
	} else {
		p->st.misses++;
	}
	pthread_mutex_unlock(&p->lock);
	if (s)
		return s;
	s = load(p, key, err, errlen);
	if (s) {
		pthread_mutex_lock(&p->lock);
		p->st.busy++;
		pthread_mutex_unlock(&p->lock);
	}
	return s;
}

void pool_giving(struct pool *p, struct bpf_slot *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&p->lock);
	if (!s->giving)
		p->returning++;
	s->giving = true;
	pthread_mutex_unlock(&p->lock);
}

void pool_give(struct pool *p, struct bpf_slot *s)
{
	bool reset;

	if (!s)
		return;
	pool_giving(p, s);
	s->sessions++;
	reset = !bpf_slot_reset(s); /* a slot that cannot be reset is never reused */
	pthread_mutex_lock(&p->lock);
	p->st.busy--;
	p->returning--;
	s->giving = false;
	pthread_cond_broadcast(&p->back);
	if (reset)
		s = keep_idle(p, s);
	pthread_cond_signal(&p->wake);
	pthread_mutex_unlock(&p->lock);
	bpf_slot__free(s);
}

void pool_stats(struct pool *p, struct pool_stats *st)
{
	pthread_mutex_lock(&p->lock);
	*st = p->st;
	st->idle = p->nidle;
	pthread_mutex_unlock(&p->lock);
}

void pool__free(struct pool *p)
{
	struct bpf_slot *s;

	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_cond_broadcast(&p->wake);
	pthread_mutex_unlock(&p->lock);
	if (p->refilling)
		pthread_join(p->refill, NULL);
	while ((s = p->idle)) {
		p->idle = s->next;
		bpf_slot__free(s);
	}
	pthread_mutex_destroy(&p->lock);
	pthread_mutex_destroy(&p->load_lock);
	pthread_cond_destroy(&p->wake);
	pthread_cond_destroy(&p->back);
	free(p);
}
