// SPDX-License-Identifier: MIT
/* heap_switch.c - the heap-recording switch in both places; see heap_switch.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include "record/heap_switch.h"

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010 /* Linux 5.1 */
#endif

struct heap_switch {
	volatile __u32 *bpf_flag; /* borrowed: the skeleton's heap_enabled */
	volatile __u32 *page;	  /* the libraries' page, mapped read-write here */
	int page_fd;
};

struct heap_switch *heap_switch__new(volatile __u32 *bpf_flag)
{
	const int seals = F_SEAL_FUTURE_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
	struct heap_switch *s = calloc(1, sizeof(*s));
	void *page;
	int err;

	if (!s)
		return NULL;
	s->bpf_flag = bpf_flag;
	s->page_fd = memfd_create("memtrack-heap-switch", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (s->page_fd < 0 || ftruncate(s->page_fd, HEAP_SWITCH_PAGE_BYTES))
		goto fail;
	page = mmap(NULL, HEAP_SWITCH_PAGE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, s->page_fd,
		    0);
	if (page == MAP_FAILED)
		goto fail;
	s->page = page;
	*s->page = __atomic_load_n(bpf_flag, __ATOMIC_SEQ_CST);
	/* after the mapping: the seal forbids only writable mappings made later */
	if (fcntl(s->page_fd, F_ADD_SEALS, seals))
		goto fail;
	return s;
fail:
	err = errno;
	heap_switch__free(s);
	errno = err;
	return NULL;
}

void heap_switch__set(struct heap_switch *s, bool on)
{
	__atomic_store_n(s->bpf_flag, on, __ATOMIC_SEQ_CST);
	__atomic_store_n(s->page, on, __ATOMIC_SEQ_CST);
}

bool heap_switch__on(const struct heap_switch *s)
{
	return __atomic_load_n(s->bpf_flag, __ATOMIC_SEQ_CST) != 0;
}

int heap_switch__page_fd(const struct heap_switch *s)
{
	return s->page_fd;
}

void heap_switch__free(struct heap_switch *s)
{
	if (!s)
		return;
	if (s->page)
		munmap((void *)s->page, HEAP_SWITCH_PAGE_BYTES);
	if (s->page_fd >= 0)
		close(s->page_fd);
	free(s);
}
