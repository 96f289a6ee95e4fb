// SPDX-License-Identifier: MIT
/* env.c - the library's environment entries; see env.h. */
#include <dlfcn.h>
#include <elf.h>
#include <limits.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>
#include <sys/un.h>
#include "fast/env.h"
#include "fast/fast_ring.h"

#define PRELOAD "LD_PRELOAD="
#define SOCKET MT_FAST_SOCKET_ENV "="

/*
 * Small enough to stay in the page .data ends in: a .bss past it is an
 * anonymous mapping ld.so makes, counted as the program's mapped memory
 * (test_mapped checks the default path maps what --no-fast maps).  A
 * socket path is at most sun_path long (link_connect could not use a
 * longer one); a library path longer than ENV_LIB_MAX stays in LD_PRELOAD.
 */
#define ENV_LIB_MAX 1024
static struct {
	bool taken;
	char socket[sizeof(SOCKET) + sizeof(((struct sockaddr_un *)0)->sun_path)];
	char lib[ENV_LIB_MAX]; /* the library's LD_PRELOAD entry, "" if none */
	size_t lib_len;
} E;

static bool starts(const char *s, const char *prefix)
{
	return !strncmp(s, prefix, strlen(prefix));
}

/* ld.so splits LD_PRELOAD at spaces and colons. */
static bool is_sep(char c)
{
	return c == ':' || c == ' ';
}

/* Whether the entry @e (@len bytes) is this library. */
static bool is_lib(const char *e, size_t len, const char *self)
{
	static const char base[] = "libmemtrack-fast.so";

	if (self && strlen(self) == len && !memcmp(e, self, len))
		return true;
	if (self)
		return false;
	return len >= sizeof(base) - 1 &&
	       !memcmp(e + len - (sizeof(base) - 1), base, sizeof(base) - 1) &&
	       (len == sizeof(base) - 1 || e[len - sizeof(base)] == '/');
}

/*
 * Finds the library's entry in the list @v (LD_PRELOAD's value): its
 * start in *@at and length in *@len.  By the name ld.so loaded it under,
 * else by its file name.
 */
static bool find_lib(const char *v, const char **at, size_t *len)
{
	Dl_info info;
	const char *self =
		dladdr((void *)env_take, &info) && info.dli_fname ? info.dli_fname : NULL;

	for (int pass = 0; pass < 2; pass++, self = NULL)
		for (const char *p = v; *p;) {
			size_t n = 0;

			while (p[n] && !is_sep(p[n]))
				n++;
			if (n && is_lib(p, n, self)) {
				*at = p;
				*len = n;
				return true;
			}
			p += n;
			while (is_sep(*p))
				p++;
		}
	return false;
}

/*
 * Cuts the library's entry (and one separator) out of the LD_PRELOAD
 * string @s, in place, keeping it in E.lib.  Returns whether the list is
 * empty now.
 */
static bool cut_lib(char *s)
{
	char *v = s + strlen(PRELOAD), *at;
	const char *found;
	size_t len;

	if (!find_lib(v, &found, &len) || len >= sizeof(E.lib))
		return false;
	at = v + (found - v);
	memcpy(E.lib, at, len);
	E.lib[len] = 0;
	E.lib_len = len;
	if (is_sep(at[len]))
		len++;
	else if (at > v && is_sep(at[-1]))
		at--, len++;
	memmove(at, at + len, strlen(at + len) + 1);
	return !*v;
}

static bool is_gone(size_t i, const size_t *gone, size_t k)
{
	for (size_t g = 0; g < k; g++)
		if (gone[g] == i)
			return true;
	return false;
}

/*
 * Removes the k entries at @gone from @env (n entries) in place.  An even
 * k: the rest move down and the freed slots up to the old NULL become
 * (AT_IGNORE, 0) pairs, so that a reader that finds the auxiliary vector
 * past the environment's NULL (Go's runtime does) still finds it.  An odd
 * k: the rest move up and `environ` starts k slots later (the first slots
 * keep their old pointers: a reader that starts from argv sees those
 * entries twice; nobody sees memtrack's).
 */
static void remove_entries(char **env, size_t n, const size_t *gone, size_t k)
{
	size_t w = 0;

	if (k % 2 == 0) {
		for (size_t r = 0; r < n; r++)
			if (!is_gone(r, gone, k))
				env[w++] = env[r];
		env[w] = NULL;
		for (size_t i = w + 1; i + 1 <= n; i += 2) {
			env[i] = (char *)(unsigned long)AT_IGNORE;
			env[i + 1] = NULL;
		}
		return;
	}
	w = n;
	for (size_t r = n; r-- > 0;)
		if (!is_gone(r, gone, k))
			env[--w] = env[r];
	environ = env + w;
}

void env_take(void)
{
	size_t n, gone[2], k = 0;
	long sock = -1, pre = -1;
	char **env = environ;

	if (!env)
		return;
	for (n = 0; env[n]; n++) {
		if (sock < 0 && starts(env[n], SOCKET))
			sock = (long)n;
		else if (pre < 0 && starts(env[n], PRELOAD))
			pre = (long)n;
	}
	if (sock < 0 || strlen(env[sock]) >= sizeof(E.socket))
		return;
	memcpy(E.socket, env[sock], strlen(env[sock]) + 1);
	E.taken = true;
	gone[k++] = (size_t)sock;
	if (pre >= 0 && cut_lib(env[pre]))
		gone[k++] = (size_t)pre; /* nothing of the user's left in it */
	remove_entries(env, n, gone, k);
}

const char *env_socket(void)
{
	return E.taken ? E.socket + strlen(SOCKET) : NULL;
}

/* Whether the LD_PRELOAD list @v names the library already. */
static bool has_lib(const char *v)
{
	for (const char *p = v; *p;) {
		size_t n = 0;

		while (p[n] && !is_sep(p[n]))
			n++;
		if (n == E.lib_len && !memcmp(p, E.lib, n))
			return true;
		p += n;
		while (is_sep(*p))
			p++;
	}
	return false;
}

struct env_need env_need(char *const envp[])
{
	struct env_need need = { 0, 0, -1, false };
	size_t n;

	if (!E.taken)
		return need;
	for (n = 0; envp && envp[n]; n++) { /* NULL: empty (Linux), as clearenv() leaves it */
		if (starts(envp[n], SOCKET))
			return (struct env_need){ 0, 0, -1, false };
		if (need.preload_at < 0 && starts(envp[n], PRELOAD))
			need.preload_at = (long)n;
		if (n >= MT_FAST_ENV_MAX_ENTRIES)
			goto too_big;
	}
	need.slots = n + 3;
	if (!E.lib_len)
		return need;
	if (need.preload_at >= 0) {
		const char *v = envp[need.preload_at] + strlen(PRELOAD);

		if (has_lib(v))
			return need;
		need.preload_bytes = strlen(PRELOAD) + E.lib_len + 1 + strlen(v) + 1;
	} else {
		need.preload_bytes = strlen(PRELOAD) + E.lib_len + 1;
	}
	if (need.preload_bytes <= MT_FAST_ENV_MAX_PRELOAD)
		return need;
too_big:
	return (struct env_need){ 0, 0, -1, true };
}

/* Writes "LD_PRELOAD=lib[:old]" into @out. */
static void write_preload(char *out, const char *old)
{
	char *p = out;

	memcpy(p, PRELOAD, strlen(PRELOAD));
	p += strlen(PRELOAD);
	memcpy(p, E.lib, E.lib_len);
	p += E.lib_len;
	if (old && *old) {
		*p++ = ':';
		memcpy(p, old, strlen(old));
		p += strlen(old);
	}
	*p = 0;
}

char *const *env_build(char *const envp[], const struct env_need *need, char **slots, char *preload)
{
	size_t n = 0;

	if (!need->slots)
		return envp;
	for (; envp && envp[n]; n++)
		slots[n] = envp[n];
	if (need->preload_bytes) {
		/* preload_at is set only for an envp that has an LD_PRELOAD entry */
		bool replace = envp && need->preload_at >= 0;

		write_preload(preload, replace ? envp[need->preload_at] + strlen(PRELOAD) : NULL);
		if (replace)
			slots[need->preload_at] = preload;
		else
			slots[n++] = preload;
	}
	slots[n++] = E.socket;
	slots[n] = NULL;
	return slots;
}

void env_strip(char **env, const char *preload, char *orig_preload)
{
	size_t w = 0;

	if (!env)
		return;
	for (size_t r = 0; env[r]; r++) {
		if (env[r] == E.socket || (env[r] == preload && !orig_preload))
			continue;
		env[w++] = env[r] == preload ? orig_preload : env[r];
	}
	env[w] = NULL;
}
