#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes the seeds of tests/fuzz/fuzz_drain.c into tests/fuzz/seeds_drain/:
rings as fuzz_drain.c's comment lays them out, one per thing a process may
write into its ring (the real library's heap records, and the forgeries of
tests/integration/test_hostile_ring.py).  Run it again after a layout change."""
import struct
from pathlib import Path

SLOTS = 8192
NOW = 1000000000000
PID = 4242
# record types and fn values (src/event.h)
MALLOC, CALLOC, REALLOC, ALIGNED_ALLOC, FREE = 1, 2, 3, 4, 5
FORK, EXIT, RSS, DISABLE, STACK = 10, 12, 13, 17, 20
FN_MALLOC, FN_CALLOC, FN_REALLOC, FN_MEMALIGN, FN_FREE, FN_NEW, FN_DELETE = 0, 1, 2, 5, 9, 12, 20
PARKED = 0x8000


def slot(rtype, fn, fields, how=0, seq=0, ts=NOW - 1000, tid=PID):
    rec = struct.pack("<HHIIIQ", rtype, fn, PID, tid, len(fields), ts)
    rec += b"".join(struct.pack("<Q", f) for f in (list(fields) + [0] * 4)[:4])
    return bytes([how]) + struct.pack("<Q", seq) + rec


def stack_id(frames, truncated):
    """unwind.bpf.h's id of (object, addr) frames."""
    h = 0xcbf29ce484222325
    for obj, addr in frames:
        h = ((h ^ obj) * 0x100000001b3) & (2**64 - 1)
        h = ((h ^ addr) * 0x100000001b3) & (2**64 - 1)
    return (h ^ (0x9e3779b97f4a7c15 if truncated else 0)) | 1


def stack(frames, truncated=0, sid=None, ts=NOW - 1000):
    """A STACK record as src/fast/ring.c writes it: a head slot (nfields 2,
    f[2] the frames), then 3 frames a slot (mark, index, frames).  With
    --stacks only (fuzz_drain.c: close_at's top bit)."""
    sid = stack_id(frames, truncated) if sid is None else sid
    rec = struct.pack("<HHIIIQ", STACK, 0, PID, PID, 2, ts)
    rec += struct.pack("<QQQQ", sid, truncated, len(frames), 0)
    out = [bytes([0]) + struct.pack("<Q", 0) + rec]
    for j in range(0, len(frames), 3):
        part = (list(frames[j:j + 3]) + [(0, 0)] * 3)[:3]
        body = struct.pack("<II", 0xffffffff, j // 3)
        body += b"".join(struct.pack("<IIQ", o, 0, a) for o, a in part)
        out.append(bytes([0]) + struct.pack("<Q", 0) + body)
    return out


def ring(slots, head=None, tail=0, close_at=0, until=0):
    head = tail + len(slots) if head is None else head
    return struct.pack("<QQBB", head, tail, close_at, until) + b"".join(slots)


def heap_calls():
    a = 0x55d3a0e4c010
    return [slot(MALLOC, FN_MALLOC, [a, 32, 0]),
            slot(CALLOC, FN_CALLOC, [a + 64, 96, 0]),
            slot(REALLOC, FN_REALLOC, [a + 256, 200, a, 0]),
            slot(ALIGNED_ALLOC, FN_MEMALIGN, [a + 4096, 100, 64, 0]),
            slot(MALLOC, FN_NEW, [a + 8192, 24, 0]),
            slot(FREE, FN_DELETE, [a + 8192]),
            slot(FREE, FN_FREE, [a + 256])]


SEEDS = {
    "heap_calls": ring(heap_calls()),
    "heap_calls_later_lap": ring(heap_calls(), tail=5 * SLOTS + 17, close_at=3),
    "heap_calls_until": ring(heap_calls(), close_at=1, until=1),
    "forged_fork_parked": ring([slot(FORK, PARKED, [PID, 1234, 0])]),
    "forged_fork_all": ring([slot(FORK, PARKED, [PID, 0xffffffff, 0])]),
    "forged_rss_exit_disable": ring([slot(RSS, 0, [1 << 50, 0, 0, 0]),
                                     slot(DISABLE, 0, []),
                                     slot(EXIT, 0, [0, 0])]),
    "malloc_bad_fn": ring([slot(MALLOC, 0x7777, [0x55d3a0e4c010, 1 << 40, 0])]),
    "malloc_past_va": ring([slot(MALLOC, FN_MALLOC, [0x55d3a0e4c010, 1 << 60, 0])]),
    "head_huge": ring(heap_calls(), head=1 << 62),
    "head_behind": ring(heap_calls(), head=0, tail=3 * SLOTS),
    "seq_other_lap": ring([slot(MALLOC, FN_MALLOC, [0x1000, 1, 0]),
                           slot(MALLOC, FN_MALLOC, [0x2000, 1, 0], how=3, seq=SLOTS + 2)]),
    "lost_then_written": ring([slot(MALLOC, FN_MALLOC, [0x1000, 1, 0], how=1)] + heap_calls(),
                              head=100),
    "stacks": ring(stack([(1, 0x1000), (2, 0x2000), (1, 0x1234), (3, 0x10)])
                   + stack([(1, 0x1000)], sid=5) + stack([(9, 0x1000)])
                   + [slot(MALLOC, FN_MALLOC, [0x1000, 1, stack_id([(1, 0x1000)], 0)])],
                   close_at=0x80),
    "scribbled": ring([bytes((i * 37 + 11) & 0xff for i in range(65))] * 40),
}


def main():
    out = Path(__file__).resolve().parent / "seeds_drain"
    out.mkdir(exist_ok=True)
    for name, data in SEEDS.items():
        (out / (name + ".ring")).write_bytes(data)


if __name__ == "__main__":
    main()
