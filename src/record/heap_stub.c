// SPDX-License-Identifier: MIT
/*
 * heap_stub.c - stand-ins for the heap programs; see heap_stub.h.
 *
 * The stubs are five instructions each, written here rather than compiled:
 * they need neither BTF nor a second skeleton, and load in microseconds.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <linux/bpf.h>
#include <bpf/bpf.h>
#include "record/heap_stub.h"

/* r1 = ctx (as called); r2 = the array; r3 = @slot; tail call; return 0 */
static int load_stub(int map_fd, int slot, const char *name, unsigned attach_type)
{
	struct bpf_insn insns[] = {
		{ .code = BPF_LD | BPF_DW | BPF_IMM,
		  .dst_reg = BPF_REG_2,
		  .src_reg = BPF_PSEUDO_MAP_FD,
		  .imm = map_fd },
		{ 0 }, /* the second half of the 64-bit immediate */
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_3, .imm = slot },
		{ .code = BPF_JMP | BPF_CALL, .imm = BPF_FUNC_tail_call },
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	struct bpf_prog_load_opts opts = {
		.sz = sizeof(opts),
		.expected_attach_type = (enum bpf_attach_type)attach_type,
	};
	int fd = bpf_prog_load(BPF_PROG_TYPE_KPROBE, name, "GPL", insns,
			       sizeof(insns) / sizeof(insns[0]), &opts);

	return fd < 0 ? -errno : fd;
}

int heap_stub_load(struct heap_stub *s, unsigned attach_type)
{
	int err;

	s->enter_fd = s->exit_fd = -1;
	s->map_fd = bpf_map_create(BPF_MAP_TYPE_PROG_ARRAY, "mt_heap_progs", sizeof(__u32),
				   sizeof(__u32), 2, NULL);
	if (s->map_fd < 0) {
		err = -errno;
		goto out_close;
	}
	s->enter_fd = load_stub(s->map_fd, 0, "mt_stub_enter", attach_type);
	s->exit_fd = load_stub(s->map_fd, 1, "mt_stub_exit", attach_type);
	err = s->enter_fd < 0 ? s->enter_fd : s->exit_fd < 0 ? s->exit_fd : 0;
	if (!err)
		return 0;
out_close:
	heap_stub_close(s);
	return err;
}

int heap_stub_arm(const struct heap_stub *s, int enter_fd, int exit_fd)
{
	__u32 slot0 = 0, slot1 = 1, enter = enter_fd, exit = exit_fd;

	if (bpf_map_update_elem(s->map_fd, &slot0, &enter, BPF_ANY) ||
	    bpf_map_update_elem(s->map_fd, &slot1, &exit, BPF_ANY))
		return -errno;
	return 0;
}

void heap_stub_close(struct heap_stub *s)
{
	int *fds[] = { &s->map_fd, &s->enter_fd, &s->exit_fd };

	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++) {
		if (*fds[i] >= 0)
			close(*fds[i]);
		*fds[i] = -1;
	}
}
