/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * syscalls.bpf.h - the syscall numbers and pt_regs accessors the raw
 * sys_enter/sys_exit tracepoints need (vm.bpf.c, proc.bpf.c), per arch.
 * The USER_* ones read the user registers at a syscall's entry from the
 * tracepoint's BTF pt_regs (a direct read, no CORE_READ needed).
 */
#ifndef MEMTRACK_SYSCALLS_BPF_H
#define MEMTRACK_SYSCALLS_BPF_H

#if defined(__TARGET_ARCH_x86)
#define NR_mmap 9
#define NR_mprotect 10
#define NR_munmap 11
#define NR_brk 12
#define NR_mremap 25
#define NR_execve 59
#define NR_execveat 322
#define NR_prctl 157
#define NR_clone 56
#define NR_fork 57
#define NR_vfork 58
#define NR_clone3 435
#define SYSCALL_PARM1(regs) BPF_CORE_READ(regs, di)
#define SYSCALL_PARM2(regs) BPF_CORE_READ(regs, si)
#define SYSCALL_NR(regs) BPF_CORE_READ(regs, orig_ax)
#define SYSCALL_PARM6(regs) BPF_CORE_READ(regs, r9) /* libbpf 1.1 has no PT_REGS_PARM6 */
/* the user thread pointer of @task (the FS base: glibc's TCB) */
#define TASK_THREAD_POINTER(task) BPF_CORE_READ(task, thread.fsbase)
#define USER_PC(regs) ((regs)->ip)
#define USER_SP(regs) ((regs)->sp)
#define USER_FP(regs) ((regs)->bp)
#define USER_LR(regs) 0 /* no link register: the return address is on the stack */
#elif defined(__TARGET_ARCH_arm64)
#define NR_brk 214
#define NR_munmap 215
#define NR_mremap 216
#define NR_execve 221
#define NR_mmap 222
#define NR_mprotect 226
#define NR_execveat 281
#define NR_prctl 167
#define NR_clone 220
#define NR_fork -1  /* none on arm64 (clone) */
#define NR_vfork -1 /* none on arm64 (clone) */
#define NR_clone3 435
/* orig_x0: regs[0] holds the return value once the syscall has run */
#define SYSCALL_PARM1(regs) BPF_CORE_READ(regs, orig_x0)
#define SYSCALL_PARM2(regs) BPF_CORE_READ(regs, regs[1])
#define SYSCALL_NR(regs) BPF_CORE_READ(regs, syscallno)
#define SYSCALL_PARM6(regs) BPF_CORE_READ(regs, regs[5])
#define TASK_THREAD_POINTER(task) BPF_CORE_READ(task, thread.uw.tp_value)
#define USER_PC(regs) ((regs)->pc)
#define USER_SP(regs) ((regs)->sp)
#define USER_FP(regs) ((regs)->regs[29])
#define USER_LR(regs) ((regs)->regs[30])
#else
#error "memtrack knows the syscall numbers of x86 and arm64 only"
#endif

#endif /* MEMTRACK_SYSCALLS_BPF_H */
