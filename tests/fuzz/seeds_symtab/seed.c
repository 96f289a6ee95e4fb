// SPDX-License-Identifier: MIT
/* seed.c - the source of fuzz_symtab's seeds: functions, an inlined one, a C++-free global. */
static inline __attribute__((always_inline)) int twice(int x)
{
	return 2 * x;
}

__attribute__((noinline)) int leaf(int x)
{
	return twice(x) + 1;
}

int counter;

int main(int argc, char **argv)
{
	(void)argv;
	counter = leaf(argc);
	return counter > 100;
}
