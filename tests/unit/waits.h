/* SPDX-License-Identifier: MIT */
/*
 * waits.h - lets a unit test see that another of its threads is blocked,
 * without sleeping: a thread parked on a mutex or condvar sits in futex().
 */
#ifndef MEMTRACK_TEST_WAITS_H
#define MEMTRACK_TEST_WAITS_H

#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

/* True when thread @tid is in a futex syscall (blocked on a lock or condvar). */
static inline bool in_futex(pid_t tid)
{
	char path[64], buf[64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)tid);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	return strtol(buf, NULL, 10) == SYS_futex;
}

/* Whether in_futex() can work here (a kernel with /proc/PID/task/TID/syscall). */
static inline bool can_see_syscalls(void)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)gettid());
	return access(path, R_OK) == 0;
}

#endif /* MEMTRACK_TEST_WAITS_H */
