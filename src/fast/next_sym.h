/* SPDX-License-Identifier: MIT */
/*
 * next_sym.h - find a function's definitions in the loaded objects, in the
 * global search order, without allocating (dlsym may allocate, and every
 * allocation the library made would be one the program did not).
 */
#ifndef MEMTRACK_NEXT_SYM_H
#define MEMTRACK_NEXT_SYM_H

#include <stdbool.h>

/*
 * The first definition of @name in an object loaded after the one holding
 * @self (RTLD_NEXT for the caller's own object), or NULL.  @self NULL: the
 * first definition in any object (RTLD_DEFAULT).
 */
void *next_sym(const char *name, const void *self);

/*
 * @name's definition in the program itself (the executable), or NULL; its
 * size in bytes in *@size.  *@lo, *@hi (if not NULL) receive the bounds of
 * the executable's code (its executable PT_LOAD segments).
 */
void *exe_sym(const char *name, unsigned long *size, unsigned long *lo, unsigned long *hi);

/* Whether some loaded object defines both @a and @b. */
bool one_object_defines(const char *a, const char *b);

#endif /* MEMTRACK_NEXT_SYM_H */
