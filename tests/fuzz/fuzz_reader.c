// SPDX-License-Identifier: MIT
/*
 * fuzz_reader.c - libFuzzer target for the artifact reader (`make fuzz`):
 * any bytes given to mt_reader__open/__next must end in a clean end,
 * -ENODATA, -EBADMSG or another -errno, never in a crash, a leak or
 * undefined behaviour (built with ASan + UBSan).  The input reaches the
 * reader as a file (a memfd), the way dump and report read one.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include <linux/types.h>
#include "artifact.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[64], err[256];
	struct mt_reader *r;
	struct mt_event ev;
	int fd = memfd_create("mtrk", MFD_CLOEXEC), ret;

	if (fd < 0 || write(fd, data, size) != (ssize_t)size)
		abort();
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	r = mt_reader__open(path, err, sizeof(err));
	if (r) {
		while ((ret = mt_reader__next(r, &ev)) == 1)
			;
		if (ret < 0 && !mt_reader__error(r)[0])
			abort(); /* every failure says what and where */
		mt_reader__free(r);
	}
	close(fd);
	return 0;
}
