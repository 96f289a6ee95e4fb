# SPDX-License-Identifier: MIT
"""Issue 24: `make install` into a scratch root (DESTDIR) gives a memtrack
that works from there (it finds libmemtrack-fast.so relative to itself),
and `make uninstall` removes exactly what install put there, nothing
else.  Before, there was no uninstall target."""
import os
import subprocess

from mtlib import BUILD, REPO, Artifact, check_eq, fixture, of_type, require_eq, run

# what install puts under the prefix (PREFIX=/usr)
INSTALLED = sorted([
    "usr/bin/memtrack",
    "usr/include/memtrack-ctl.h",
    "usr/lib/libmemtrack-ctl.a",
    "usr/lib/memtrack/libmemtrack-fast.so",
    "usr/lib/pkgconfig/memtrack-ctl.pc",
    "usr/lib/systemd/system/memtrack.service",
    "usr/lib/systemd/system/memtrack.socket",
    "usr/share/bash-completion/completions/memtrack",
    "usr/share/man/man1/memtrack.1",
] + ["usr/share/doc/memtrack/" + f for f in
     ("README.md", "FORMAT.md", "METRICS.md", "CONTROL.md", "DESIGN.md")])


def make(target, root):
    p = subprocess.run(["make", "-s", "--no-print-directory", "-C", str(REPO), "OUT=%s" % BUILD,
                        "PREFIX=/usr", "DESTDIR=%s" % root, target],
                       capture_output=True, text=True, timeout=600)
    require_eq((p.returncode, p.stderr), (0, ""), "make %s DESTDIR=%s (rc, stderr)" % (target, root))


def files_under(root):
    return sorted(os.path.relpath(os.path.join(d, f), root)
                  for d, _, fs in os.walk(root) for f in fs)


def test_install_runs_and_uninstall_removes_it(tmp):
    root = tmp / "root"
    # files of others in the directories memtrack shares
    for other in ("usr/bin/other", "usr/lib/pkgconfig/other.pc", "usr/share/doc/other/README"):
        (root / other).parent.mkdir(parents=True, exist_ok=True)
        (root / other).write_text("not memtrack's\n")
    others = files_under(root)
    make("install", root)
    check_eq(files_under(root), sorted(INSTALLED + others), "files after make install")
    check_eq(os.stat(root / "usr/bin/memtrack").st_mode & 0o7777, 0o755, "mode of the binary")
    pc = (root / "usr/lib/pkgconfig/memtrack-ctl.pc").read_text()
    check_eq(pc.splitlines()[0], "prefix=/usr", "the .pc names the prefix it is installed under")

    memtrack = str(root / "usr/bin/memtrack")
    p = run([memtrack, "--version"])
    check_eq((p.rc, p.stdout.startswith("memtrack "), p.stderr), (0, True, ""), "--version")
    # --fast finds root/usr/lib/memtrack/libmemtrack-fast.so beside its bin/
    out = tmp / "x.mtrk"
    p = run([memtrack, "track", "--fast", "-q", "-o", out, "--", fixture("heap_pairs")])
    require_eq((p.rc, p.stderr), (0, ""), "the installed memtrack track --fast (rc, stderr)")
    art = Artifact(out)
    check_eq([q["heap_path"] for q in art.report["processes"]], ["in-process"],
             "heap_path of the process")
    check_eq(len([e for e in of_type(art.events, "malloc") if e["size"] == 4099]), 3,
             "mallocs of 4099 bytes")

    make("uninstall", root)
    check_eq(files_under(root), others, "files left after make uninstall")
    for d in ("usr/lib/memtrack", "usr/share/doc/memtrack"):
        check_eq((root / d).exists(), False, "%s removed" % d)
    make("uninstall", root)  # again: nothing to do, no error
