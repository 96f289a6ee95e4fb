/* SPDX-License-Identifier: MIT */
/*
 * artifact.h - the memtrack artifact (.mtrk): streaming writer and reader.
 *
 * Layout (docs/FORMAT.md is normative): a self-describing header, then a
 * sequence of independent zstd-compressed frames, each carrying its event
 * count, first/last timestamp, compressed length and a checksum, and finally
 * a trailer frame.  A file without trailer, or cut inside a frame, reads as
 * truncated up to its last complete frame.
 *
 * THREAD NOTES: a writer or reader belongs to one thread at a time.
 */
#ifndef MEMTRACK_ARTIFACT_H
#define MEMTRACK_ARTIFACT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/types.h>
#include "event.h"
#include "compiler.h"

#define MT_CMDLINE_MAX 4096

/* One decoded record, as the reader hands it out. */
struct mt_event {
	struct mt_rec_hdr h;	/* type, fn, pid, tid, nfields, ts */
	__u64 f[MT_MAX_FIELDS]; /* h.nfields of them are meaningful */
	char str[MT_PATH_MAX];	/* string field (EXEC path, OBJECT path), "" if none */
	__u64 stack;		/* heap and mmap records: stack id, 0 = none (or a v1 file) */
	/* STACK records (also in f[STACK_ID], f[STACK_TRUNCATED]) */
	__u32 nframes; /* frames[0..nframes): innermost first */
	bool truncated;
	struct {
		__u32 object; /* OBJECT id, 0: no known file (addr is the pc) */
		__u64 addr;   /* ELF virtual address of a return address */
	} frames[MT_STACK_MAX];
	/* OBJECT records */
	__u8 build_id[MT_BUILD_ID_MAX];
	__u8 build_id_len; /* 0: none */
	/* PYCODE records: name, qualname, file, line table (lengths in f[PYCODE_STRINGS], f[PYCODE_LINES]) */
	__u16 blob_len;
	__u8 blob[MT_PYCODE_BLOB_MAX];
};

/*
 * The facilities of memtrack's BPF side that have a mechanism per kernel
 * (kernel/kernel_features.h), with the names of their mechanisms: the
 * preferred one, its fallback.  The header says which one a run used
 * (keys kernel_<facility>, FORMAT.md §2.2).
 */
/* clang-format off */
#define MT_KERNEL_FACILITIES(X)                                             \
	X(PARK, "park", "bpf_send_signal_task", "first-return")             \
	X(RESUME, "resume", "bpf", "reaper")                                \
	X(UPROBES, "uprobes", "uprobe-multi", "perf-event")                 \
	X(RSS, "rss", "percpu_counter", "atomic")                           \
	X(EXIT, "exit", "group_dead", "signal-live")
/* clang-format on */
#define MT_X_KF_ENUM(N, name, best, fallback) MT_KF_##N,
enum mt_kernel_facility { MT_KERNEL_FACILITIES(MT_X_KF_ENUM) MT_KERNEL_NFACILITIES };
#undef MT_X_KF_ENUM
#define MT_KERNEL_MECH_MAX 24 /* bytes of a mechanism's name the reader keeps, NUL included */

struct mt_header {
	uint32_t format_version;   /* MT_FORMAT_VERSION of the writer */
	char memtrack_version[32]; /* "0.1.0" */
	uint32_t page_size;	   /* bytes */
	uint32_t clock_id;	   /* CLOCK_MONOTONIC: clock of every ts */
	int64_t wall_offset_ns;	   /* CLOCK_REALTIME - clock_id at start */
	uint64_t start_ns;	   /* clock_id time when tracking started */
	char kernel_release[65];   /* uname -r */
	char arch[65];		   /* uname -m: x86_64, aarch64; "" from older writers */
	/* per facility (MT_KERNEL_FACILITIES) the mechanism used, "" if unsaid */
	char kernel_mech[MT_KERNEL_NFACILITIES][MT_KERNEL_MECH_MAX];
	char command[MT_CMDLINE_MAX]; /* the command line, argv joined by ' ' */
	uint32_t flags;		      /* MT_HDR_* */
	uint64_t attach_ns; /* memtrack attach: clock_id time the tree was tracked, else 0 */
};

/* Header flags: what the run recorded. */
#define MT_HDR_ALLOCATORS 1u	 /* heap probes were attached */
#define MT_HDR_PHYSICAL 2u	 /* PHYSICAL records were requested */
#define MT_HDR_START_DISABLED 4u /* heap recording was off at start (--start-disabled) */
#define MT_HDR_STACKS 8u	 /* call stacks were recorded (--stacks) */
#define MT_HDR_ATTACHED 16u	 /* memtrack attach: the tree ran before the recording */

struct mt_trailer {
	uint64_t events[MT_TYPE_MAX];  /* records written, per type */
	uint64_t dropped[MT_TYPE_MAX]; /* records lost in the ring buffer; [0] = type unknown */
	int32_t exit_code;	       /* the command's exit code, -1 if killed */
	int32_t exit_signal;	       /* signal that killed it, 0 if none */
	uint64_t duration_ns;	       /* from start_ns to the command's end */
	uint64_t frames;	       /* event frames before the trailer */
	uint64_t unprobed;	       /* processes left without (all) their allocator probes */
	uint64_t killed_in_call;       /* in-process heap calls a killed thread never finished */
	uint64_t env_overflow; /* in-process processes that exec'd one image on the uprobes */
	/* --stacks: the kernel unwinder's tables (record/stacks.h's stacks_stats) */
	uint64_t stack_table_bytes;   /* kernel memory of the tables */
	uint64_t stack_rows;	      /* unwind rows loaded */
	uint64_t stack_index_entries; /* entries of their address index */
	uint64_t stack_rows_cap;      /* the --unwind-rows ceiling */
	uint64_t stack_objects;	      /* distinct executable objects seen */
	uint64_t stack_no_room;	      /* objects left without rows: over the ceiling */
	uint64_t stack_no_cfi;	      /* objects without usable .eh_frame */
};

/* Writer statistics, valid at any time. */
struct mt_writer_stats {
	uint64_t frames;     /* event frames written */
	uint64_t events;     /* records added */
	uint64_t raw_bytes;  /* encoded bytes before compression */
	uint64_t file_bytes; /* bytes written to the fd, header included */
	uint64_t encode_ns;  /* time spent encoding + compressing + writing */
};

struct mt_writer;
struct mt_encoder;

/*
 * Writes the header to @fd (borrowed: never closed) and returns a writer, or
 * NULL with errno set.  @zstd_level: 0 picks the default.
 */
struct mt_writer *mt_writer__new(int fd, const struct mt_header *hdr, int zstd_level);

/*
 * Appends one record to the current frame.  @f holds hdr->nfields values,
 * @str is the string field or NULL; for OBJECT and STACK records it is the
 * whole struct mt_rec_object / mt_rec_stack (build-id, path, frames).  Errors are sticky: they are returned by
 * this and every later call, and by mt_writer__finish().
 */
int mt_writer__add(struct mt_writer *w, const struct mt_rec_hdr *hdr, const __u64 *f,
		   const void *str);

/* Compresses and writes the current frame; no-op when it is empty. */
int mt_writer__flush(struct mt_writer *w);

/*
 * Flushes, then writes the trailer.  trailer->events and ->frames are filled
 * in by the writer (its own counts); the rest is taken from @t.  Returns the
 * first error the writer ever met, or 0.
 */
MT_MUST_CHECK int mt_writer__finish(struct mt_writer *w, const struct mt_trailer *t);

void mt_writer__stats(const struct mt_writer *w, struct mt_writer_stats *st);

/* Frees the writer (NULL is fine).  Does not close the fd. */
void mt_writer__free(struct mt_writer *w);

/*
 * An encoder builds one events frame at a time, independently of any
 * writer: records in, then seal (compress), then mt_writer__put() appends it
 * to a file.  Frames share no state (FORMAT.md §3.2), so several threads can
 * each encode and compress their own frames and one writer appends them in
 * the order it chooses.  The writer's own mt_writer__add() uses a private
 * encoder the same way.
 *
 * THREAD NOTES: an encoder belongs to one thread at a time; mt_writer__put()
 * needs the writer's thread (or a lock the callers share).
 */

/* Returns an encoder (@zstd_level 0: the default), or NULL with errno set. */
struct mt_encoder *mt_encoder__new(int zstd_level);

/*
 * Appends one record to the frame (arguments as mt_writer__add()).  Returns
 * 0, -EINVAL for a record the format cannot describe, -ENOMEM, or -EBUSY
 * when the frame is sealed and not yet put.  Errors other than -EBUSY are
 * sticky and returned again by mt_encoder__seal() and mt_writer__put().
 */
int mt_encoder__add(struct mt_encoder *e, const struct mt_rec_hdr *hdr, const __u64 *f,
		    const void *str);

/* True once the frame's raw records reach MT_FRAME_RAW_TARGET: seal and put it. */
bool mt_encoder__full(const struct mt_encoder *e);

/* Compresses the frame; no-op when empty or already sealed.  0 or -errno. */
int mt_encoder__seal(struct mt_encoder *e);

/*
 * Seals @e's frame if needed, appends it to @w's file and empties @e for the
 * next frame (no-op for an empty frame).  An encoder's error becomes the
 * writer's (sticky).  Returns 0 or the writer's first error.
 */
int mt_writer__put(struct mt_writer *w, struct mt_encoder *e);

/* Frees the encoder (NULL is fine). */
void mt_encoder__free(struct mt_encoder *e);

struct mt_reader;

/*
 * Opens @path and reads its header.  On failure returns NULL and writes a
 * one-line reason into @err (e.g. the file's format version is newer than
 * this reader's, or @path is a FIFO, a device or a directory: only regular
 * files are read, and those are opened without blocking).
 */
struct mt_reader *mt_reader__open(const char *path, char *err, size_t errlen);

/*
 * Reads the next record into @ev.  Returns 1 for a record, 0 at the clean end
 * (trailer read), -ENODATA when the file ends before its trailer (truncated:
 * everything before the last complete frame was returned), -EBADMSG for a
 * corrupt frame or record, -EAGAIN when following (mt_reader__follow) and
 * the next frame is not all written yet, or another -errno for I/O errors.  After a
 * negative return mt_reader__error() says what and at which file offset.
 * Memory use does not depend on the file's length.
 */
MT_MUST_CHECK int mt_reader__next(struct mt_reader *r, struct mt_event *ev);

/*
 * Follows a file another process is still writing (`memtrack top`): from
 * now on, where the file ends before its trailer, mt_reader__next() returns
 * -EAGAIN instead of -ENODATA, and that is not sticky: the next call reads
 * on from the start of the unfinished frame.  A frame is checked only once
 * it is whole, so a partly written one is never taken for a corrupt one.
 * Returns 0, or -ESPIPE when the file is not a regular file (it cannot be
 * read again), or another -errno.
 */
MT_MUST_CHECK int mt_reader__follow(struct mt_reader *r);

/*
 * Following: whether a writer still holds the file (the LOCK_EX flock a
 * recording keeps on its artifact until it is finished, FORMAT.md §2; the
 * kernel drops it when the writer dies, SIGKILL included).  False for a
 * file nobody writes: a finished, copied or truncated one.
 */
bool mt_reader__writer_holds(const struct mt_reader *r);

const struct mt_header *mt_reader__header(const struct mt_reader *r);

/* The trailer, or NULL when it has not been (or cannot be) read. */
const struct mt_trailer *mt_reader__trailer(const struct mt_reader *r);

/* Human-readable last error with its offset, "" when none. */
const char *mt_reader__error(const struct mt_reader *r);

void mt_reader__free(struct mt_reader *r);

#endif /* MEMTRACK_ARTIFACT_H */
