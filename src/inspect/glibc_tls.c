// SPDX-License-Identifier: MIT
/*
 * glibc_tls.c - the offset of glibc's specific_1stblock in struct pthread,
 * measured; see glibc_tls.h.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include "inspect/glibc_tls.h"

#define KEY_1ST 32		   /* PTHREAD_KEY_2NDLEVEL_SIZE */
#define KEY_DATA 16		   /* sizeof(struct pthread_key_data): seq, data */
#define SCAN_BYTES 1536		   /* searched from struct pthread's start (it is larger) */
#define MARK 0x6d74746c73a5c3e1ull /* a value no field holds */

#if defined(__x86_64__) || defined(__aarch64__)
/* The device and inode of the libc.so.6 memtrack maps; false: none found. */
static bool own_libc(dev_t *dev, ino_t *ino)
{
	char line[4096 + 128];
	bool found = false;
	FILE *f = fopen("/proc/self/maps", "re");

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		unsigned maj, min;
		unsigned long long inode;
		int pos = 0;
		const char *path, *base;

		line[strcspn(line, "\n")] = 0;
		if (sscanf(line, "%*x-%*x %*s %*x %x:%x %llu %n", &maj, &min, &inode, &pos) < 3 ||
		    !pos || line[pos] != '/')
			continue;
		path = line + pos;
		base = strrchr(path, '/') + 1;
		if (strcmp(base, "libc.so.6") != 0)
			continue;
		*dev = makedev(maj, min);
		*ino = (ino_t)inode;
		found = true;
	}
	fclose(f);
	return found;
}

/* The thread pointer, the register the kernel keeps for the task. */
static uintptr_t thread_pointer(void)
{
#if defined(__aarch64__)
	return (uintptr_t)__builtin_thread_pointer(); /* TPIDR_EL0 */
#else
	return (uintptr_t)pthread_self(); /* fsbase: struct pthread's start */
#endif
}

/*
 * specific_1stblock's offset from the thread pointer: where
 * pthread_setspecific put MARK (and then ~MARK, the same slot), less its
 * key's place; 0 when it does not fit (never a guess).
 */
static int16_t measure(void)
{
	volatile const uint64_t *self = (const uint64_t *)(uintptr_t)pthread_self();
	pthread_key_t key;
	int16_t off = 0;

	if (pthread_key_create(&key, NULL))
		return 0;
	if (key < KEY_1ST && !pthread_setspecific(key, (void *)(uintptr_t)MARK)) {
		for (unsigned i = 0; i < SCAN_BYTES / 8; i++) {
			long at = (long)i * 8 - (long)key * KEY_DATA - 8;

			if (self[i] != MARK || at <= 0 ||
			    pthread_setspecific(key, (void *)(uintptr_t)~MARK) || self[i] != ~MARK)
				continue;
			at += (long)((uintptr_t)self - thread_pointer());
			if (at != 0 && at >= INT16_MIN && at <= INT16_MAX)
				off = (int16_t)at;
			break;
		}
		pthread_setspecific(key, NULL);
	}
	pthread_key_delete(key);
	return off;
}

int16_t glibc_specific_offset(dev_t *dev, ino_t *ino)
{
	static bool measured;
	static int16_t off;
	static dev_t libc_dev;
	static ino_t libc_ino;

	if (!measured) {
		measured = true;
		if (own_libc(&libc_dev, &libc_ino))
			off = measure();
	}
	*dev = libc_dev;
	*ino = libc_ino;
	return off;
}
#else
int16_t glibc_specific_offset(dev_t *dev, ino_t *ino)
{
	(void)dev;
	(void)ino;
	return 0; /* a thread pointer memtrack has not placed struct pthread against */
}
#endif
