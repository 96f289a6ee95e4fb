// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * phys.bpf.c - the physical memory the tree occupies (track --physical),
 * each physical page counted once however many processes map it.
 *
 * A page belongs to the tree from the moment a task of the tree makes the
 * kernel allocate it (an anonymous or copy-on-write fault, page cache it
 * reads in, a page table) until the page is freed, by whoever frees it.
 * Pages are keyed by their struct page, so a page shared after fork, or a
 * file page mapped by several processes, is one entry.  See
 * docs/METRICS.md for what this counts and what it does not.
 *
 * Only BTF raw tracepoints are used (mm_page_alloc, mm_page_free,
 * mm_page_free_batched): fentry and kprobes are refused on these machines.
 * The free hooks run for every page freed on the machine; they do one hash
 * lookup, and nothing else unless the page is the tree's.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "common.bpf.h"

#define PAGE_SHIFT 12
#define MT_MAX_PHYS_PAGES 1 /* sized by userspace: --physical-max, 1 without --physical */

/* User pages (anonymous, page cache) are movable; page tables are zeroed and accounted. */
#define GFP_MOVABLE (1u << ___GFP_MOVABLE_BIT)
#define GFP_PGTABLE ((1u << ___GFP_ZERO_BIT) | (1u << ___GFP_ACCOUNT_BIT))

/* report after 32 pages (128 KiB) of change: a record per page copied costs more than the page */
const volatile __u64 phys_granularity_pages = 32;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, MT_MAX_PHYS_PAGES);
	__type(key, __u64);	/* struct page * */
	__type(value, __u32);	/* order */
} tree_pages SEC(".maps");

/* [0]: pages the tree holds now; [1]: pages last reported. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} phys_total SEC(".maps");

static __always_inline void report(__s64 delta)
{
	__u32 k0 = 0, k1 = 1;
	__u64 *total = bpf_map_lookup_elem(&phys_total, &k0);
	__u64 *last = bpf_map_lookup_elem(&phys_total, &k1);
	__u64 now, prev;
	struct mt_rec *r;

	if (!total || !last)
		return;
	now = __sync_add_and_fetch(total, delta);
	prev = *last;
	if ((now > prev ? now - prev : prev - now) < phys_granularity_pages)
		return;
	*last = now;
	r = rec_reserve(MT_PHYSICAL, 0, 1);
	if (!r)
		return;
	r->f[0] = now << PAGE_SHIFT;
	rec_submit(r, false);
}

SEC("tp_btf/mm_page_alloc")
int BPF_PROG(handle_page_alloc, struct page *page, unsigned int order, gfp_t gfp, int migratetype)
{
	__u64 key = (__u64)page;

	if (!page || (!(gfp & GFP_MOVABLE) && (gfp & GFP_PGTABLE) != GFP_PGTABLE))
		return 0;
	if (!is_tracked(bpf_get_current_pid_tgid() >> 32))
		return 0;
	if (bpf_map_update_elem(&tree_pages, &key, &order, BPF_NOEXIST)) {
		count_drop(MT_PHYSICAL); /* table full: this page goes uncounted */
		return 0;
	}
	report(1ll << order);
	return 0;
}

static __always_inline void page_freed(struct page *page)
{
	__u64 key = (__u64)page;
	__u32 *order = bpf_map_lookup_elem(&tree_pages, &key);
	__u32 o;

	if (!order)
		return;
	o = *order;
	if (bpf_map_delete_elem(&tree_pages, &key))
		return; /* another CPU freed it first */
	report(-(1ll << (o & 31)));
}

SEC("tp_btf/mm_page_free")
int BPF_PROG(handle_page_free, struct page *page, unsigned int order)
{
	page_freed(page);
	return 0;
}

SEC("tp_btf/mm_page_free_batched")
int BPF_PROG(handle_page_free_batched, struct page *page)
{
	page_freed(page);
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
