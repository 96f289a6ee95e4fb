// SPDX-License-Identifier: MIT
/* vfork.c - libmemtrack-fast.so's vfork; see vfork.h. */
#include "fast/next_sym.h"
#include "fast/ring.h"
#include "fast/vfork.h"

HIDDEN void *fast_real_vfork;

__asm__(".text\n"
	".globl vfork\n"
	".type vfork, @function\n"
	"vfork:\n"
	"	movq fast_vfork_flag@gottpoff(%rip), %rax\n" /* the calling thread's (ring.h) */
	"	movl $1, %fs:(%rax)\n"
	"	jmp *fast_real_vfork(%rip)\n"
	".size vfork, .-vfork\n");

void vfork_resolve(void)
{
	fast_real_vfork = next_sym("vfork", (const void *)vfork_resolve);
}
