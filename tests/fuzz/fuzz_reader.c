// SPDX-License-Identifier: MIT
/*
 * fuzz_reader.c - libFuzzer target for the artifact reader (artifact.h):
 * every input is a file handed to mt_reader__open(), read to its end with
 * mt_reader__next(), its header and trailer looked at.  The reader must
 * neither crash nor overrun (ASan), nor invoke undefined behaviour (UBSan),
 * nor hang, whatever the bytes; every outcome it returns is acceptable.
 *
 * The input goes through a memfd (the reader takes a path): /proc/self/fd/N.
 * `make fuzz` builds it with clang -fsanitize=fuzzer,address,undefined and
 * runs it FUZZ_SECONDS (default 60) from tests/fuzz/seeds/, real artifacts.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "artifact.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int memfd = -1;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[64], err[512];
	struct mt_reader *r;
	struct mt_event ev;
	uint64_t n = 0, sum = 0;
	int ret;

	if (memfd < 0) {
		memfd = memfd_create("fuzz-artifact", MFD_CLOEXEC);
		if (memfd < 0)
			return 0;
	}
	if (ftruncate(memfd, 0) || pwrite(memfd, data, size, 0) != (ssize_t)size)
		return 0;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", memfd);
	r = mt_reader__open(path, err, sizeof(err));
	if (!r)
		return 0;
	while ((ret = mt_reader__next(r, &ev)) == 1) {
		/* touch everything the reader hands out */
		sum += ev.h.type + ev.h.pid + ev.h.ts + strlen(ev.str);
		for (unsigned i = 0; i < ev.h.nfields && i < MT_MAX_FIELDS; i++)
			sum += ev.f[i];
		n++;
	}
	sum += strlen(mt_reader__error(r)) + strlen(mt_reader__header(r)->command);
	if (mt_reader__trailer(r))
		sum += mt_reader__trailer(r)->frames;
	mt_reader__free(r);
	return (int)(sum & 0) + (int)(n & 0);
}
