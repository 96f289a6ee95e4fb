// SPDX-License-Identifier: MIT
/*
 * test_glibc_tls.c - src/inspect/glibc_tls.c: the offset the kernel
 * unwinder reads a thread's pthread_getspecific values at (issue 37's
 * Python frames), checked the way the kernel uses it: the thread pointer
 * register, read here with an instruction of its own (not the code under
 * test), plus the offset, plus the key's slot, holds what
 * pthread_setspecific stored, in the main thread and in another one; and
 * the libc it names is the one this process maps.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/sysmacros.h>
#include "harness.h"
#include "inspect/glibc_tls.h"

#define KEYS 3

static pthread_key_t keys[KEYS];

#if defined(__x86_64__) || defined(__aarch64__)
/* The thread pointer as the kernel saves it for the task. */
static uintptr_t thread_pointer_register(void)
{
	uintptr_t tp;

#if defined(__x86_64__)
	__asm__ volatile("mov %%fs:0, %0" : "=r"(tp)); /* the TCB's self pointer: fsbase */
#else
	__asm__ volatile("mrs %0, tpidr_el0" : "=r"(tp));
#endif
	return tp;
}

/* Stores a value per key and reads each back where the kernel would; 0: all equal. */
static int read_back(uintptr_t tag)
{
	dev_t dev;
	ino_t ino;
	int16_t off = glibc_specific_offset(&dev, &ino);
	uintptr_t tp = thread_pointer_register();
	int wrong = 0;

	if (!off)
		return -1;
	for (unsigned k = 0; k < KEYS; k++) {
		uintptr_t want = tag + k, got;

		if (pthread_setspecific(keys[k], (void *)want))
			return -1;
		got = *(volatile const uintptr_t *)(tp + (intptr_t)off + (uintptr_t)keys[k] * 16 +
						    8);
		if (got != want) {
			fprintf(stderr, "  key %u: %#lx at the offset, %#lx stored\n", keys[k],
				(unsigned long)got, (unsigned long)want);
			wrong++;
		}
	}
	return wrong;
}

static void *thread_main(void *arg)
{
	return (void *)(intptr_t)read_back((uintptr_t)arg);
}

static void test_reads_what_pthread_setspecific_stored(void)
{
	pthread_t t;
	void *ret = (void *)-1;

	CHECK_EQ(read_back(0x6d740000), 0);
	CHECK_EQ(pthread_create(&t, NULL, thread_main, (void *)0x6d750000), 0);
	CHECK_EQ(pthread_join(t, &ret), 0);
	CHECK_EQ((intptr_t)ret, 0);
}

/*
 * The device and inode /proc/self/maps gives libc.so.6 (stat() would not
 * do: on overlayfs, the arm64 guests' root, maps names the file beneath).
 */
static void test_names_the_libc_mapped(void)
{
	char line[4096 + 128];
	unsigned maj = 0, min = 0;
	unsigned long long inode = 0;
	dev_t dev;
	ino_t ino;
	FILE *f = fopen("/proc/self/maps", "re");
	int found = 0;

	glibc_specific_offset(&dev, &ino);
	while (f && !found && fgets(line, sizeof(line), f))
		found = strstr(line, "/libc.so.6\n") &&
			sscanf(line, "%*x-%*x %*s %*x %x:%x %llu", &maj, &min, &inode) == 3;
	if (f)
		fclose(f);
	CHECK(found);
	CHECK_U64(dev, makedev(maj, min));
	CHECK_U64(ino, inode);
}
#endif

int main(void)
{
	for (unsigned k = 0; k < KEYS; k++)
		if (pthread_key_create(&keys[k], NULL))
			return 1;
#if defined(__x86_64__) || defined(__aarch64__)
	RUN(test_reads_what_pthread_setspecific_stored);
	RUN(test_names_the_libc_mapped);
#else
	printf("SKIP test_glibc_tls (x86-64 and arm64 only)\n");
#endif
	HARNESS_EXIT();
}
