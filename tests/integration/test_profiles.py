# SPDX-License-Identifier: MIT
"""Periodic pprof profiles (issue 38): `track`/`attach --profile-every
DURATION --profile-dir DIR`, read back with Go's own `go tool pprof -raw`
(Debian's golang-go), not only with memtrack's decoder.

The fixture heap_hold holds 200 blocks of 3001 bytes (at hold_block) for
a while, frees them, and waits as long again: a profile during the hold
has them in use (inuse_objects 200, inuse_space 600200), the last one,
written after the trailer, has them allocated and none in use."""
import os
import pwd
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from mtlib import MEMTRACK, check_eq, check_true, fixture, require, require_eq, run

HOLD = ("200", "3001")
TYPES = "alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes[dflt]"


def go_pprof():
    if not shutil.which("go"):
        pytest.skip("go is not installed (Debian's golang-go): go tool pprof reads the profiles")
    return ["go", "tool", "pprof"]


def raw(path):
    """(header lines, {function: [values]} summed over samples, mapping lines) from -raw."""
    p = subprocess.run(go_pprof() + ["-raw", "-symbolize=none", str(path)],
                       capture_output=True, text=True, timeout=120)
    require_eq(p.returncode, 0, "go tool pprof -raw %s: %s" % (path, p.stderr))
    text = p.stdout
    head, rest = text.split("Samples:\n", 1)
    samples, rest = rest.split("Locations\n", 1)
    locs, maps = rest.split("Mappings\n", 1)
    names = {}
    for ln in locs.splitlines():
        m = re.match(r"\s+(\d+): 0x[0-9a-f]+ M=\d+ (\S+)", ln)
        if m:
            names[int(m.group(1))] = m.group(2)
    lines = samples.splitlines()
    by_fn = {}
    for ln in lines[1:]:
        vals, ids = ln.split(":")
        inner = names.get(int(ids.split()[0]), "?")  # the innermost frame's function
        v = [int(x) for x in vals.split()]
        by_fn[inner] = [a + b for a, b in zip(by_fn.get(inner, [0] * len(v)), v)]
    return head.splitlines() + [lines[0]], by_fn, maps.splitlines()


def profiles(d):
    return sorted(n for n in os.listdir(d))


def check_profiles(d, what):
    """The profile files are profile-000001.pb.gz... with no gap and nothing
    else (no temporary left); returns their paths."""
    names = profiles(d)
    check_eq(names, ["profile-%06d.pb.gz" % i for i in range(1, len(names) + 1)],
             "%s: the files in the profile directory" % what)
    return [os.path.join(d, n) for n in names]


def test_profile_every_track(tmp):
    """track --profile-every 200ms: profiles every 200 ms and one at the end,
    each read by go tool pprof: Go's four sample types, period space/bytes
    1, the fixture's mapping with its build-id; hold_block's 200 blocks in
    use while held and none in the last, 200 allocated in every one that
    saw them."""
    d = tmp / "prof"
    d.mkdir()
    out = tmp / "hold.mtrk"
    p = run([MEMTRACK, "track", "-q", "--profile-every", "200ms", "--profile-dir", d, "-o", out,
             "--", fixture("heap_hold"), *HOLD, "1500"], timeout=120)
    require_eq(p.rc, 0, "memtrack track --profile-every: " + p.describe())
    paths = check_profiles(d, "track")
    check_true(len(paths) >= 8, "profiles of a 3 s run every 200 ms: %d" % len(paths))
    held = []
    for path in paths:
        head, by_fn, maps = raw(path)
        check_eq(head[:2], ["PeriodType: space bytes", "Period: 1"], "%s: period" % path)
        check_eq(head[-1].split(), TYPES.split(), "%s: sample types" % path)
        if "hold_block" in by_fn:
            check_eq(by_fn["hold_block"][:2], [200, 200 * 3001], "%s: hold_block allocated" % path)
            held.append(tuple(by_fn["hold_block"][2:]))
    check_true((200, 200 * 3001) in held, "a profile with the 200 blocks in use: %s" % held)
    check_eq(held[-1], (0, 0), "in use in the last profile (written after the trailer)")
    exe = fixture("heap_hold")
    check_true(any(exe in m and re.search(r" [0-9a-f]{40} ", m) for m in maps),
               "the fixture's mapping with its build-id: %s" % maps)


def test_profile_every_attach(tmp):
    """attach --profile-every to a running heap_hold: the profile during the
    hold has the blocks allocated after the attach in use."""
    d = tmp / "aprof"
    d.mkdir()
    out = tmp / "att.mtrk"
    target = subprocess.Popen([fixture("heap_hold"), "1", "64", "3000"], stdout=subprocess.PIPE,
                              text=True)
    try:
        require_eq(target.stdout.readline().strip(), "held", "the target runs")
        p = run([MEMTRACK, "attach", "-q", "--stacks", "--duration", "1.5", "--profile-every",
                 "300ms", "--profile-dir", d, "-o", out, str(target.pid)], timeout=120)
        require_eq(p.rc, 0, "memtrack attach --profile-every: " + p.describe())
    finally:
        target.kill()
        target.wait()
    paths = check_profiles(d, "attach")
    check_true(len(paths) >= 3, "profiles of a 1.5 s attach every 300 ms: %d" % len(paths))
    for path in paths:
        head, _, _ = raw(path)
        check_eq(head[-1].split(), TYPES.split(), "%s: sample types" % path)


def test_profile_options_refused(tmp):
    """One line naming the problem and the fix, exit 2, nothing run: one of
    the two options alone, a bad duration, a directory that is not there."""
    for opts, want in (
            (["--profile-every", "1s"], "--profile-every and --profile-dir go together"),
            (["--profile-dir", str(tmp)], "--profile-every and --profile-dir go together"),
            (["--profile-every", "10ms", "--profile-dir", str(tmp)], "invalid --profile-every '10ms'"),
            (["--profile-every", "soon", "--profile-dir", str(tmp)], "invalid --profile-every 'soon'"),
            (["--profile-every", "1s", "--profile-dir", str(tmp / "none")],
             "--profile-dir '%s' is not a directory; create it first" % (tmp / "none"))):
        p = run([MEMTRACK, "track", "-o", tmp / "x.mtrk"] + opts + ["--", "true"])
        check_eq(p.rc, 2, "%s: exit status" % opts)
        check_eq(len(p.stderr.splitlines()), 1, "%s: one line: %r" % (opts, p.stderr))
        check_true(want in p.stderr, "%s: %r names %r" % (opts, p.stderr, want))
        check_true(not (tmp / "x.mtrk").exists(), "%s: no artifact" % opts)


def test_profiles_of_a_command_that_never_ran(tmp):
    """A command whose exec fails (a #! naming no interpreter): 127 at once,
    no artifact, and the follower stopped, not waited for (it waited for
    the writer's lock while the session still held it: 300 s)."""
    script = tmp / "bad.sh"
    script.write_text("#!/nonexistent/interpreter\n")
    script.chmod(0o755)
    d = tmp / "p"
    d.mkdir()
    t0 = time.monotonic()
    p = run([MEMTRACK, "track", "-q", "--profile-every", "1s", "--profile-dir", d, "-o",
             tmp / "bad.mtrk", "--", script], timeout=60)
    took = time.monotonic() - t0
    check_eq(p.rc, 127, "exit status: " + p.describe())
    check_true(took < 20, "memtrack returned after %.1f s" % took)
    check_true(not (tmp / "bad.mtrk").exists(), "no artifact")


def test_profiles_under_sudo_are_the_users(tmp):
    """Under sudo (SUDO_UID/SUDO_GID) the profiles are written by the
    invoking user: theirs, in their directory; a directory they cannot
    write gets one line and the run's artifact and status are unharmed."""
    nobody = pwd.getpwnam("nobody")
    env = dict(os.environ, SUDO_UID=str(nobody.pw_uid), SUDO_GID=str(nobody.pw_gid),
               SUDO_USER="nobody")
    base = Path(tempfile.mkdtemp(prefix="mt-prof-"))  # pytest's tmp is not nobody's to reach
    os.chmod(base, 0o755)
    tmp = base / "run"
    tmp.mkdir()
    mine = tmp / "mine"
    mine.mkdir()
    os.chown(tmp, nobody.pw_uid, nobody.pw_gid)
    os.chown(mine, nobody.pw_uid, nobody.pw_gid)
    p = subprocess.run([MEMTRACK, "track", "-q", "--profile-every", "300ms", "--profile-dir", mine,
                        "-o", tmp / "s.mtrk", "--", fixture("heap_hold"), *HOLD, "400"],
                       capture_output=True, text=True, env=env, timeout=120)
    require_eq(p.returncode, 0, "track under sudo: %r" % p.stderr)
    paths = check_profiles(mine, "under sudo")
    check_true(paths, "profiles written")
    check_eq({os.stat(x).st_uid for x in paths}, {nobody.pw_uid}, "the profiles' owner")
    roots = tmp / "roots"
    roots.mkdir(mode=0o755)  # root's: nobody cannot write it
    p = subprocess.run([MEMTRACK, "track", "-q", "--profile-every", "300ms", "--profile-dir", roots,
                        "-o", tmp / "r.mtrk", "--", fixture("heap_hold"), *HOLD, "100"],
                       capture_output=True, text=True, env=env, timeout=120)
    check_eq(p.returncode, 0, "the command's status, the profiles failing: %r" % p.stderr)
    check_true(re.search(r"memtrack: --profile-every: cannot write profile 1 into '.*roots': "
                         r"Permission denied", p.stderr), "the line: %r" % p.stderr)
    check_eq(profiles(roots), [], "nothing in root's directory")
    check_true(run([MEMTRACK, "report", tmp / "r.mtrk"]).rc == 0, "the artifact reads")
    shutil.rmtree(base)
