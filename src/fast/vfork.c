// SPDX-License-Identifier: MIT
/* vfork.c - libmemtrack-fast.so's vfork; see vfork.h. */
#include "fast/next_sym.h"
#include "fast/ring.h"
#include "fast/vfork.h"

HIDDEN void *fast_real_vfork;

#if defined(__x86_64__)
__asm__(".text\n"
	".globl vfork\n"
	".type vfork, @function\n"
	"vfork:\n"
	"	movq fast_vfork_flag@gottpoff(%rip), %rax\n" /* the calling thread's (ring.h) */
	"	movl $1, %fs:(%rax)\n"
	"	jmp *fast_real_vfork(%rip)\n"
	".size vfork, .-vfork\n");
#elif defined(__aarch64__)
/*
 * The same on arm64, in x16 and x17 only (the intra-procedure-call
 * scratch registers a PLT stub may clobber too, so no caller keeps
 * anything there); bti c lands the program's indirect call when BTI is
 * enforced (a NOP otherwise), and br x16 may land on libc's.
 */
__asm__(".text\n"
	".globl vfork\n"
	".type vfork, %function\n"
	"vfork:\n"
	"	hint 34\n" /* bti c */
	"	adrp x16, :gottprel:fast_vfork_flag\n"
	"	ldr x16, [x16, #:gottprel_lo12:fast_vfork_flag]\n"
	"	mrs x17, tpidr_el0\n"
	"	add x16, x16, x17\n"
	"	mov w17, #1\n"
	"	str w17, [x16]\n"
	"	adrp x16, fast_real_vfork\n"
	"	ldr x16, [x16, #:lo12:fast_real_vfork]\n"
	"	br x16\n"
	".size vfork, .-vfork\n");
#else
// cppcheck-suppress preprocessorErrorDirective
#error "libmemtrack-fast.so's vfork is written for x86-64 and arm64 only"
#endif

void vfork_resolve(void)
{
	fast_real_vfork = next_sym("vfork", (const void *)vfork_resolve);
}
