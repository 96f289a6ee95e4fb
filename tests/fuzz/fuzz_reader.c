// SPDX-License-Identifier: MIT
/*
 * fuzz_reader.c - libFuzzer target for the artifact reader (artifact.h):
 * every input is a file handed to mt_reader__open(), read to its end with
 * mt_reader__next(), its header and trailer looked at.  The reader must
 * neither crash nor overrun (ASan), nor invoke undefined behaviour (UBSan),
 * nor hang, whatever the bytes; every outcome it returns is acceptable.
 *
 * Two modes, by the input's first byte.  Odd: the rest is a whole file, as
 * is (seeds are real artifacts; checksums are not checked in this build,
 * see mt_crc32_ok()).  Even: bytes 1-4 are an event count, the rest the
 * raw payload of one events frame, which this target compresses and frames
 * behind a valid header; compressed bytes hardly survive a mutation, so
 * this is how mutations reach the record decoder.  The file goes through a
 * memfd (the reader takes a path): /proc/self/fd/N.
 * `make fuzz` builds it with clang -fsanitize=fuzzer,address,undefined and
 * runs it FUZZ_SECONDS (default 60) from tests/fuzz/seeds/, real artifacts.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zstd.h>
#include "format/artifact.h"
#include "format/artifact_format.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int memfd = -1;

/* Writes a valid header, then one events frame with @raw as its payload. */
static int write_framed(const uint8_t *data, size_t size)
{
	static uint8_t out[MT_FRAME_HDR_LEN + (1 << 17)];
	struct mt_header hdr = { .format_version = MT_FORMAT_VERSION, .page_size = 4096 };
	struct mt_frame_hdr fh = { .kind = MT_FRAME_EVENTS };
	struct mt_writer *w;
	size_t z;

	if (size < 5 || size - 5 > (1 << 16))
		return -1;
	snprintf(hdr.command, sizeof(hdr.command), "fuzz");
	w = mt_writer__new(memfd, &hdr, 0); /* writes the header */
	mt_writer__free(w);
	if (!w)
		return -1;
	z = ZSTD_compress(out + MT_FRAME_HDR_LEN, sizeof(out) - MT_FRAME_HDR_LEN, data + 5,
			  size - 5, 1);
	if (ZSTD_isError(z))
		return -1;
	fh.comp_len = z;
	fh.raw_len = size - 5;
	fh.event_count = mt_get_le32(data + 1);
	fh.payload_crc = mt_crc32(out + MT_FRAME_HDR_LEN, z);
	mt_frame_hdr_put(out, &fh);
	return write(memfd, out, MT_FRAME_HDR_LEN + z) == (ssize_t)(MT_FRAME_HDR_LEN + z) ? 0 : -1;
}

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
	if (!size || ftruncate(memfd, 0) || lseek(memfd, 0, SEEK_SET))
		return 0;
	if (data[0] & 1) {
		if (write(memfd, data + 1, size - 1) != (ssize_t)(size - 1))
			return 0;
	} else if (write_framed(data, size)) {
		return 0;
	}
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
