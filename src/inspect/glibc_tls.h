/* SPDX-License-Identifier: MIT */
/*
 * glibc_tls.h - where glibc keeps a thread's pthread_getspecific values,
 * measured in memtrack's own libc (issue 37: the kernel unwinder reads a
 * Python thread's state there, src/bpf/python.bpf.h).  struct pthread is
 * glibc's private layout, so the offset holds only for processes that map
 * the very libc file memtrack runs with (same device and inode).
 * THREAD NOTES: the recorder's thread (src/record/stacks.c) only.
 */
#ifndef MEMTRACK_GLIBC_TLS_H
#define MEMTRACK_GLIBC_TLS_H

#include <stdint.h>
#include <sys/types.h>

/*
 * The offset of specific_1stblock from the thread pointer in memtrack's
 * libc, which is @dev/@ino: positive on x86-64 (the thread pointer, fsbase,
 * is pthread_self()), negative on arm64 (TPIDR_EL0 points just past struct
 * pthread, glibc's TLS_DTV_AT_TP layout); 0 when it could not be measured
 * (another libc, another architecture: no Python frames from the kernel).
 */
int16_t glibc_specific_offset(dev_t *dev, ino_t *ino);

#endif /* MEMTRACK_GLIBC_TLS_H */
