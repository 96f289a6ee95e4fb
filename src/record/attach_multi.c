// SPDX-License-Identifier: MIT
/*
 * attach_multi.c - uprobe-multi links (Linux 6.6+); see attach.h.
 *
 * One link per request: every site of the request, with its cookie, for
 * one process.  Perf-event uprobes would need one event per site, and the
 * kernel tears each one down under a global mutex with a grace period of
 * its own (~56 ms here): 20 sites cost over a second at exit.  A multi
 * link pays one grace period for all its sites.  libbpf 1.1 does not know
 * these links (bpf_abi.h), so BPF_LINK_CREATE is issued here.
 */
#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/bpf.h>
#include "bpf_abi.h"
#include "record/attach.h"

/*
 * attach_select() returns this mechanism only where kernel_features found
 * the attach type in the kernel's BTF (kernel/kernel_features.c), so there
 * is nothing left to ask; parsing the BTF again cost ~25 ms a run.
 */
static bool multi_available(void)
{
	return true;
}

static int multi_attach(const struct attach_sites *s, struct fd_list *out)
{
	struct mt_uprobe_multi_attr attr;
	int fd, err;

	memset(&attr, 0, sizeof(attr));
	attr.prog_fd = s->prog_fd;
	attr.attach_type = MT_BPF_TRACE_UPROBE_MULTI;
	attr.path = (uintptr_t)s->path;
	attr.offsets = (uintptr_t)s->offsets;
	attr.cookies = (uintptr_t)s->cookies;
	attr.cnt = s->n;
	attr.umflags = s->ret ? MT_BPF_F_UPROBE_MULTI_RETURN : 0;
	attr.pid = s->pid;
	fd = syscall(__NR_bpf, BPF_LINK_CREATE, &attr, sizeof(attr));
	if (fd < 0)
		return -errno;
	err = fd_list_push(out, fd);
	if (err)
		close(fd);
	return err;
}

const struct attach_ops attach_uprobe_multi = {
	.name = "uprobe-multi",
	.prog_attach_type = MT_BPF_TRACE_UPROBE_MULTI,
	.available = multi_available,
	.attach = multi_attach,
};
