/* cc ctl_example.c $(pkg-config --cflags --libs memtrack-ctl) -o ctl_example */
#include <stdio.h>
#include <stdlib.h>
#include <memtrack-ctl.h>

int main(void)
{
	struct memtrack_ctl c;
	void *volatile p;

	if (memtrack_ctl_open(&c, NULL)) /* NULL: $MEMTRACK_CONTROL */
		return fprintf(stderr, "%s\n", memtrack_ctl_error(&c)), 1;
	memtrack_ctl_enable(&c);
	memtrack_ctl_mark(&c, "work");
	p = malloc(1000); /* the code to measure */
	free(p);
	memtrack_ctl_disable(&c); /* returns once recording is off */
	memtrack_ctl_close(&c);
	return 0;
}
