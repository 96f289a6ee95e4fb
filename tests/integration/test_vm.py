# SPDX-License-Identifier: MIT
"""Mapping records: mmap (anonymous and file), munmap, mremap, brk; failing
calls; and --no-allocators."""
from mtlib import (HEAP_TYPES, check_eq, count, fixture, kv_lines, of_type,
                   proj, root_pid, shared_track, track, window)

ANON_LEN = 196608
GROWN_LEN = 786432
FILE_LEN = 4096
BRK_STEP = 65536
PROT_READ, PROT_WRITE = 1, 2
MAP_PRIVATE, MAP_ANONYMOUS = 0x02, 0x20
MREMAP_MAYMOVE = 1
VM_TYPES = ("mmap", "munmap", "mremap", "brk")


def vm_run():
    t = shared_track("vm", [fixture("vm")])
    return t, kv_lines(t.stdout)


def expected_vm(a):
    return [
        {"type": "mmap", "addr": a["anon"], "len": ANON_LEN, "prot": PROT_READ | PROT_WRITE,
         "flags": MAP_PRIVATE | MAP_ANONYMOUS, "fd": -1, "offset": 0},
        {"type": "mmap", "addr": a["file"], "len": FILE_LEN, "prot": PROT_READ,
         "flags": MAP_PRIVATE, "fd": a["fd"], "offset": 0},
        {"type": "munmap", "addr": a["file"], "len": FILE_LEN},
        {"type": "mremap", "addr": a["grown"], "len": GROWN_LEN, "old_addr": a["anon"],
         "old_len": ANON_LEN, "flags": MREMAP_MAYMOVE},
        {"type": "munmap", "addr": a["grown"], "len": GROWN_LEN},
        # sbrk(+65536): the new break; sbrk(-65536): back to the old one
        {"type": "brk", "addr": a["brk1"]},
        {"type": "brk", "addr": a["brk2"]},
    ]


def test_mmap_munmap_mremap_brk(tmp):
    t, a = vm_run()
    check_eq(a["fd"] >= 0, True, "the file's fd is valid")
    check_eq(a["brk1"] - a["brk2"], BRK_STEP, "sbrk moved the break by 65536")
    win = [proj(e) for e in of_type(window(t.events, root_pid(t.events)), *VM_TYPES)]
    check_eq(win, expected_vm(a), "mapping records between the markers")


def test_failed_vm_calls_not_recorded(tmp):
    t, a = vm_run()
    # what the fixture saw: each of these failed
    check_eq((a["bad_mmap"], a["bad_munmap"], a["bad_mremap"]), (-1, -1, -1),
             "bad mmap, munmap, mremap returned -1")
    check_eq(a["bad_brk"], a["brk2"], "brk(4096) was refused (returned the break)")
    win = window(t.events, root_pid(t.events))
    check_eq(len(of_type(win, "mmap")), 2, "mmap records between the markers")
    check_eq(len(of_type(win, "munmap")), 2, "munmap records between the markers")
    check_eq(len(of_type(win, "mremap")), 1, "mremap records between the markers")
    check_eq(len(of_type(win, "brk")), 2, "brk records between the markers")
    check_eq([proj(e) for e in win if e.get("addr") in (4096, a["grown"] + 1)
              or e.get("old_addr") == 4096], [],
             "records of the failed calls")


def test_no_allocators(tmp):
    t = track(tmp, [fixture("vm")], opts=["--no-allocators"])
    a = kv_lines(t.stdout)
    evs = t.events
    root = root_pid(evs)
    check_eq(sum(1 for e in evs if e["type"] in HEAP_TYPES), 0, "heap records")
    check_eq(t.report["alloc_count"], 0, "report --json alloc_count")
    # no markers without heap probes: the fixture's calls are the 7 mapping
    # records from its anonymous mmap on (found by value, it is unique)
    vm = [proj(e) for e in evs if e["pid"] == root and e["type"] in VM_TYPES]
    exp = expected_vm(a)
    check_eq(vm.count(exp[0]), 1, "records %r" % exp[0])
    i = vm.index(exp[0]) if exp[0] in vm else 0
    check_eq(vm[i:i + len(exp)], exp, "the mapping records from the anonymous mmap on")
    check_eq(count(evs, type="exec", pid=root, path=fixture("vm")), 1, "exec record")
    check_eq([(e["pid"], e["code"], e["signal"]) for e in of_type(evs, "exit")],
             [(root, 0, 0)], "exit records (pid, code, signal)")
