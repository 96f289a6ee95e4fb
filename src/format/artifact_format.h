/* SPDX-License-Identifier: MIT */
/*
 * artifact_format.h - on-disk constants and byte layouts of the artifact,
 * shared by artifact_writer.c, artifact_reader.c and the unit tests (which
 * hand-craft files from them).  docs/FORMAT.md is the normative description;
 * keep the two in sync.
 */
#ifndef MEMTRACK_ARTIFACT_FORMAT_H
#define MEMTRACK_ARTIFACT_FORMAT_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <zlib.h>
#include <linux/types.h>
#include "event.h"

/* File header: magic, u16 version, u16 reserved, u32 body length, body, u32 crc. */
#define MT_FILE_MAGIC "MTRK\r\n\x1a\n"
#define MT_FILE_MAGIC_LEN 8
#define MT_FILE_PREFIX_LEN 16	      /* magic .. body length */
#define MT_HEADER_BODY_MAX (1u << 20) /* readers refuse longer bodies */

/* Frame header: 44 bytes, all little-endian. */
#define MT_FRAME_MAGIC "FRM1"
#define MT_FRAME_HDR_LEN 44
#define MT_FRAME_OFF_KIND 4
#define MT_FRAME_OFF_COMP_LEN 8
#define MT_FRAME_OFF_RAW_LEN 12
#define MT_FRAME_OFF_COUNT 16
#define MT_FRAME_OFF_FIRST_TS 20
#define MT_FRAME_OFF_LAST_TS 28
#define MT_FRAME_OFF_PAYLOAD_CRC 36
#define MT_FRAME_OFF_HDR_CRC 40

#define MT_FRAME_EVENTS 1
#define MT_FRAME_TRAILER 2

/* Readers refuse frames whose compressed or raw length is larger. */
#define MT_FRAME_LEN_MAX (64u << 20)

/*
 * The writer closes a frame once its raw (uncompressed) records reach this
 * many bytes, even if the caller never flushes: it bounds the writer's and
 * every reader's memory and what a crash can lose.  See FORMAT.md, rationale.
 */
#define MT_FRAME_RAW_TARGET (1u << 20)

/*
 * Upper bound of one encoded record: type (1) + body length (2) + ts (10) +
 * pid (5) + tid (5) + fn (3) + nfields (1) + 7 fields (70) + string length (2)
 * + string (255) = 354; a STACK record: the same 107 up to its fields, then
 * nframes (1) + 127 frames of object (5) + addr (10) = 2013.
 */
#define MT_REC_MAX 2304

/* Default zstd level of the writer (FORMAT.md, rationale). */
#define MT_ZSTD_LEVEL_DEFAULT 1

static inline void mt_put_le16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static inline void mt_put_le32(uint8_t *p, uint32_t v)
{
	mt_put_le16(p, (uint16_t)v);
	mt_put_le16(p + 2, (uint16_t)(v >> 16));
}

static inline void mt_put_le64(uint8_t *p, uint64_t v)
{
	mt_put_le32(p, (uint32_t)v);
	mt_put_le32(p + 4, (uint32_t)(v >> 32));
}

static inline uint16_t mt_get_le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static inline uint32_t mt_get_le32(const uint8_t *p)
{
	return mt_get_le16(p) | (uint32_t)mt_get_le16(p + 2) << 16;
}

static inline uint64_t mt_get_le64(const uint8_t *p)
{
	return mt_get_le32(p) | (uint64_t)mt_get_le32(p + 4) << 32;
}

/* zlib's crc32 (the IEEE 802.3 / ISO-HDLC CRC-32) of @len bytes. */
static inline uint32_t mt_crc32(const void *buf, size_t len)
{
	return (uint32_t)crc32(0L, (const Bytef *)buf, (uInt)len);
}

/*
 * Whether @stored is the checksum of @len bytes at @buf.  A fuzzing build
 * (FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION, the libFuzzer convention, see
 * tests/fuzz/) takes any checksum, so mutated files reach the decoding
 * behind the checks.
 */
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
static inline bool mt_crc32_ok(uint32_t stored, const void *buf, size_t len)
{
	return true;
}
#else
static inline bool mt_crc32_ok(uint32_t stored, const void *buf, size_t len)
{
	return stored == mt_crc32(buf, len);
}
#endif /* FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION */

struct mt_frame_hdr {
	uint8_t kind;	      /* MT_FRAME_* */
	uint32_t comp_len;    /* payload bytes on disk */
	uint32_t raw_len;     /* payload bytes after decompression */
	uint32_t event_count; /* records in the payload, of every type */
	uint64_t first_ts;    /* ts of the first record, base of its delta */
	uint64_t last_ts;     /* ts of the last record */
	uint32_t payload_crc; /* mt_crc32 of the comp_len payload bytes */
};

/* Serializes @h into @b (MT_FRAME_HDR_LEN bytes), header checksum included. */
static inline void mt_frame_hdr_put(uint8_t *b, const struct mt_frame_hdr *h)
{
	memcpy(b, MT_FRAME_MAGIC, 4);
	b[MT_FRAME_OFF_KIND] = h->kind;
	b[5] = 0;	       /* reserved */
	mt_put_le16(b + 6, 0); /* reserved */
	mt_put_le32(b + MT_FRAME_OFF_COMP_LEN, h->comp_len);
	mt_put_le32(b + MT_FRAME_OFF_RAW_LEN, h->raw_len);
	mt_put_le32(b + MT_FRAME_OFF_COUNT, h->event_count);
	mt_put_le64(b + MT_FRAME_OFF_FIRST_TS, h->first_ts);
	mt_put_le64(b + MT_FRAME_OFF_LAST_TS, h->last_ts);
	mt_put_le32(b + MT_FRAME_OFF_PAYLOAD_CRC, h->payload_crc);
	mt_put_le32(b + MT_FRAME_OFF_HDR_CRC, mt_crc32(b, MT_FRAME_OFF_HDR_CRC));
}

/* Parses @b; the caller checks the magic and header checksum first. */
static inline void mt_frame_hdr_get(const uint8_t *b, struct mt_frame_hdr *h)
{
	h->kind = b[MT_FRAME_OFF_KIND];
	h->comp_len = mt_get_le32(b + MT_FRAME_OFF_COMP_LEN);
	h->raw_len = mt_get_le32(b + MT_FRAME_OFF_RAW_LEN);
	h->event_count = mt_get_le32(b + MT_FRAME_OFF_COUNT);
	h->first_ts = mt_get_le64(b + MT_FRAME_OFF_FIRST_TS);
	h->last_ts = mt_get_le64(b + MT_FRAME_OFF_LAST_TS);
	h->payload_crc = mt_get_le32(b + MT_FRAME_OFF_PAYLOAD_CRC);
}

/* Known record types are coded in one varint byte (the writer relies on it). */
_Static_assert(MT_TYPE_MAX <= 128, "record types must stay below 128");
/* Body lengths are coded in at most two varint bytes. */
_Static_assert(MT_REC_MAX < 16384, "record body length must fit 2 varint bytes");

#endif /* MEMTRACK_ARTIFACT_FORMAT_H */
