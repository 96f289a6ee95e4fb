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
	"	movl $1, fast_vfork_flag(%rip)\n"
	"	jmp *fast_real_vfork(%rip)\n"
	".size vfork, .-vfork\n");

void vfork_resolve(void)
{
	fast_real_vfork = next_sym("vfork", (const void *)vfork_resolve);
}
