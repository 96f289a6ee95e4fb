/* SPDX-License-Identifier: MIT */
/*
 * heap_switch.h - the heap-recording switch (`enable` and `disable` on the
 * control socket, --start-disabled) in its two places: the BPF side's
 * `heap_enabled` (the skeleton's mmapable .data), which alloc.bpf.c reads,
 * and one page that the in-process libraries (--fast) map read-only and
 * read at every call.
 *
 * The libraries cannot be handed the .data map: whoever holds its fd may
 * map it writable or update it, so any tracked program could switch heap
 * recording off (or on) for the whole tree without a record.  A read-only
 * BPF map fd cannot be mmapped (the kernel wants a VM_SHARED mapping, which
 * a read-only file does not get).  So the libraries' page is a memfd that
 * memtrack maps read-write and then seals: F_SEAL_FUTURE_WRITE (from then
 * on nobody maps it writable, writes or punches it, memtrack's own
 * mapping excepted), F_SEAL_SHRINK, F_SEAL_GROW and F_SEAL_SEAL.  memtrack
 * writes both places in each change, so they never disagree once a command
 * is answered.
 *
 * THREAD NOTES: heap_switch__set() runs on the poller thread (control.c),
 * or in main before the poller starts; heap_switch__on() anywhere.
 */
#ifndef MEMTRACK_HEAP_SWITCH_H
#define MEMTRACK_HEAP_SWITCH_H

#include <stdbool.h>
#include <linux/types.h>

struct heap_switch;

/* Bytes of the libraries' page; the switch is its first __u32. */
#define HEAP_SWITCH_PAGE_BYTES 4096u

/*
 * Makes the libraries' page from @bpf_flag (borrowed: the skeleton's
 * heap_enabled, which must outlive the switch) and its current value.
 * Returns NULL with errno set; the caller frees it with heap_switch__free().
 */
struct heap_switch *heap_switch__new(volatile __u32 *bpf_flag);

/* Switches heap recording in both places (sequentially consistent stores). */
void heap_switch__set(struct heap_switch *s, bool on);

bool heap_switch__on(const struct heap_switch *s);

/* The sealed page's fd (borrowed), to send to a library. */
int heap_switch__page_fd(const struct heap_switch *s);

/* Unmaps and closes the page (NULL is fine); the BPF flag stays as it is. */
void heap_switch__free(struct heap_switch *s);

#endif /* MEMTRACK_HEAP_SWITCH_H */
