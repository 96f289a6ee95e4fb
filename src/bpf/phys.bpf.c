// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * phys.bpf.c - the physical memory the tree occupies (track --physical),
 * each physical page counted once however many processes map it.
 *
 * A page belongs to the tree from the moment a task of the tree makes the
 * kernel allocate it (an anonymous or copy-on-write fault, page cache it
 * reads in, a page table) until the page is freed, by whoever frees it.
 * The tree's pages are one bit each in a bitmap over the machine's page
 * frames, so a page shared after fork, or a file page mapped by several
 * processes, is one bit.  See docs/METRICS.md for what this counts and what
 * it does not.
 *
 * The bit of a page is its struct page's index in the kernel's vmemmap
 * array, modulo the bitmap's size: userspace sizes the bitmap to the
 * highest page frame number, so distinct frames never share a bit, and the
 * vmemmap base (unknown here: no data symbols in kallsyms) is a constant
 * offset.  Setting or clearing a bit is one atomic instruction: a hash
 * table of pages cost ~1 us a page (an element allocated and freed), 15%
 * on `tar -xf`.
 *
 * memtrack attach marks the pages the tree has resident at the attach
 * (src/record/phys_adopt.c): it learns the vmemmap offset from one page it
 * faults in itself while phys_calib_tid names its thread (the kernel hands
 * the page's struct page to the alloc hook, /proc/self/pagemap its frame
 * number), and sets the frames' bits with atomic operations of its own on
 * the bitmap, mapped into userspace (BPF_F_MMAPABLE).
 *
 * Only BTF raw tracepoints are used (mm_page_alloc, mm_page_free,
 * mm_page_free_batched): fentry and kprobes are refused on these machines.
 * The free hooks run for every page freed on the machine; they read one
 * bitmap word, and do nothing else unless the page is the tree's.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "bpf/common.bpf.h"

/* User pages (anonymous, page cache) are movable; page tables are zeroed and accounted. */
#define GFP_MOVABLE (1u << ___GFP_MOVABLE_BIT)
#define GFP_PGTABLE ((1u << ___GFP_ZERO_BIT) | (1u << ___GFP_ACCOUNT_BIT))

/* report after 32 pages (128 KiB) of change: a record per page copied costs more than the page */
const volatile __u64 phys_granularity_pages = 32;

/* bits in tree_pages: 64 * its max_entries, set by userspace */
const volatile __u64 phys_bitmap_bits = 64;

/*
 * attach: while nonzero, the thread id whose next order-0 user page is not
 * the tree's but the calibration's; the alloc hook writes that page's
 * struct page index (its address / sizeof(struct page)) to phys_calib_idx.
 * In .data with heap_enabled: a .bss would be one more map, one more fd
 * (the fd-limit tests count memtrack's).
 */
volatile __u32 phys_calib_tid SEC(".data");
volatile __u64 phys_calib_idx SEC(".data");

/* One bit per page frame of the machine (resized by userspace, 1 without --physical). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE); /* attach sets the resident pages' bits */
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} tree_pages SEC(".maps");

/* [0]: pages the tree holds now; [1]: pages last reported. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE); /* attach adds the resident pages */
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
	r = rec_reserve(MT_PHYSICAL, 0, PHYSICAL_NFIELDS);
	if (!r)
		return;
	r->f[PHYSICAL_BYTES] = now * page_size;
	rec_submit(r, false);
}

/*
 * The index in vmemmap, plus a constant, of the struct page passed as
 * tracepoint argument 0.  The pointer is read from the context as a
 * number: the verifier forbids arithmetic on the typed pointer itself.
 */
static __always_inline __u64 page_index(unsigned long long *ctx)
{
	__u64 pv = 0;

	bpf_probe_read_kernel(&pv, sizeof(pv), &ctx[0]);
	return pv / bpf_core_type_size(struct page);
}

/* The bitmap word of the tracepoint's struct page, and its bit in @mask. */
static __always_inline __u64 *page_word(unsigned long long *ctx, __u64 *mask)
{
	__u64 idx = page_index(ctx) % phys_bitmap_bits;
	__u32 w = idx / 64;

	*mask = 1ull << (idx % 64);
	return bpf_map_lookup_elem(&tree_pages, &w);
}

SEC("tp_btf/mm_page_alloc")
int BPF_PROG(handle_page_alloc, struct page *page, unsigned int order, gfp_t gfp, int migratetype)
{
	__u64 *word, mask;

	if (!page || (!(gfp & GFP_MOVABLE) && (gfp & GFP_PGTABLE) != GFP_PGTABLE))
		return 0;
	if (phys_calib_tid && (__u32)bpf_get_current_pid_tgid() == phys_calib_tid) {
		if (!order && (gfp & GFP_MOVABLE)) /* the user page, not its page table */
			phys_calib_idx = page_index(ctx);
		return 0;
	}
	if (!is_tracked(bpf_get_current_pid_tgid() >> 32))
		return 0;
	word = page_word(ctx, &mask);
	if (word && !(__sync_fetch_and_or(word, mask) & mask))
		report(1ll << (order & 31));
	return 0;
}

static __always_inline void page_freed(unsigned long long *ctx, unsigned int order)
{
	__u64 *word, mask;

	word = page_word(ctx, &mask);
	/* a plain read first: most pages freed on the machine are not the tree's */
	if (!word || !(*word & mask))
		return;
	if (__sync_fetch_and_and(word, ~mask) & mask)
		report(-(1ll << (order & 31)));
}

SEC("tp_btf/mm_page_free")
int BPF_PROG(handle_page_free, struct page *page, unsigned int order)
{
	page_freed(ctx, order);
	return 0;
}

SEC("tp_btf/mm_page_free_batched")
int BPF_PROG(handle_page_free_batched, struct page *page)
{
	page_freed(ctx, 0);
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
