/* SPDX-License-Identifier: MIT */
/*
 * phys_adopt.h - `memtrack attach --physical`: the pages the tree already
 * has resident when memtrack attaches, counted in the physical bitmap
 * (src/bpf/phys.bpf.c) like the pages it faults in later.
 *
 * The bitmap's bit of a page is its struct page's index in vmemmap (plus
 * the constant vmemmap_base / sizeof(struct page), which kallsyms does not
 * show) modulo the bitmap's size.  phys_adopt_open() learns that constant
 * from pages memtrack faults in itself: the BPF alloc hook reports their
 * struct page index, /proc/self/pagemap their page frame number (PFN).
 * phys_adopt_mark() then reads each process's /proc/PID/smaps (the
 * mappings with resident pages) and /proc/PID/pagemap (their PFNs, which
 * only CAP_SYS_ADMIN sees) and sets each frame's bit with an atomic OR on
 * the bitmap, mapped from the kernel, so a page the BPF side counted
 * already, or another process of the tree maps too, is one page.  A large
 * folio is counted as the BPF side counts it: its head page's bit, with
 * all its pages (/proc/kpageflags); the zero page, hugetlb pages and the
 * kernel's own (reserved) pages are not the tree's.  phys_adopt_record()
 * adds what was marked to the running total and makes the PHYSICAL record
 * the timeline starts from.
 *
 * A page freed between its pagemap read and its mark stays counted (its
 * free went by with the bit clear): a window of microseconds a page.
 *
 * THREAD NOTES: phys_adopt_open() and _close() on main; _mark() and
 * _record() on the poller (adopt_sync()), between them.  The bitmap is
 * shared with the BPF programs, hence the atomic operations.
 */
#ifndef MEMTRACK_PHYS_ADOPT_H
#define MEMTRACK_PHYS_ADOPT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "compiler.h"
#include "event.h"

struct memtrack_bpf;

struct phys_adopt {
	uint64_t *words;	     /* the bitmap (tree_pages), mapped */
	uint64_t *total;	     /* phys_total: [0] pages now, [1] last reported */
	size_t words_len, total_len; /* their mappings' lengths */
	uint64_t bits;		     /* the bitmap's size in bits */
	uint64_t base;		     /* struct page index of PFN 0 */
	uint64_t page;		     /* page size */
	int kpf_fd;		     /* /proc/kpageflags, -1: none */
	uint64_t marked;	     /* pages newly marked, not yet in the total */
	uint64_t head, span;	     /* the last large folio met: [head, head + span) */
};

/*
 * Maps @skel's bitmap and total, and learns the vmemmap offset.  Returns 0
 * or -errno with @err (a sentence) filled; then @pa holds nothing.
 */
MT_MUST_CHECK int phys_adopt_open(struct phys_adopt *pa, struct memtrack_bpf *skel, char *err,
				  size_t errlen);

/*
 * Marks the pages @pid has resident.  Returns 0, -ENOENT/-ESRCH (the
 * process is gone) or another -errno (-EPERM: no PFNs in pagemap).
 */
MT_MUST_CHECK int phys_adopt_mark(struct phys_adopt *pa, pid_t pid);

/* Adds the marked pages to the total; @r becomes the PHYSICAL record of it. */
void phys_adopt_record(struct phys_adopt *pa, struct mt_rec *r);

void phys_adopt_close(struct phys_adopt *pa);

#endif /* MEMTRACK_PHYS_ADOPT_H */
