/* SPDX-License-Identifier: MIT */
/*
 * compiler.h - attributes the userspace headers use.
 */
#ifndef MEMTRACK_COMPILER_H
#define MEMTRACK_COMPILER_H

/*
 * An action whose result must not be dropped (STYLE.md §5): gcc and clang
 * warn when a caller ignores it, and make check builds with -Werror.
 * Writer calls whose errors are sticky (mt_writer__add, __flush) are left
 * unmarked on purpose: callers check once, at mt_writer__finish.
 */
#define MT_MUST_CHECK __attribute__((warn_unused_result))

#endif /* MEMTRACK_COMPILER_H */
