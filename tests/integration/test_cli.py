# SPDX-License-Identifier: MIT
"""memtrack track's refusals: command not found, unwritable output, bad
options.  In each case the command must not run (fixtures/touch creates a
file when it does) and no artifact may be left behind."""
import os

from mtlib import MEMTRACK, Artifact, check_eq, check_true, fixture, of_type, run


def refused(tmp, argv, rc, what, out=None, ran=None):
    p = run([MEMTRACK, "track"] + argv)
    check_eq(p.rc, rc, "exit status of memtrack track %s (%s)" % (" ".join(argv), what))
    check_eq(p.stdout, "", "stdout (%s)" % what)
    check_true(p.stderr.startswith("memtrack: "), "an error message on stderr (%s): %r"
               % (what, p.stderr))
    if out is not None:
        check_eq(os.path.exists(out), False, "an artifact %s was left (%s)" % (out, what))
    if ran is not None:
        check_eq(os.path.exists(ran), False, "the command ran (%s created) (%s)" % (ran, what))
    return p


def test_command_not_found(tmp):
    out = str(tmp / "x.mtrk")
    refused(tmp, ["-o", out, "--", str(tmp / "no-such-command")], 127, "missing path", out)
    refused(tmp, ["-o", out, "--", "memtrack-test-no-such-command"], 127,
            "name not on PATH", out)



def test_command_not_executable_or_directory(tmp):
    """Issue 13 (7): like a shell, a command that exists but cannot run
    exits 126 with "Permission denied" or "Is a directory" (was 127, "not
    found")."""
    out = str(tmp / "x.mtrk")
    f = tmp / "not-exec"
    f.write_text("#!/bin/sh\n")
    p = refused(tmp, ["-o", out, "--", str(f)], 126, "file without x bit", out)
    check_true("Permission denied" in p.stderr, "the reason: %r" % p.stderr)
    d = tmp / "a-dir"
    d.mkdir()
    p = refused(tmp, ["-o", out, "--", str(d)], 126, "a directory", out)
    check_true("Is a directory" in p.stderr, "the reason: %r" % p.stderr)


def test_output_not_writable(tmp):
    ran = str(tmp / "ran")
    for out in (str(tmp / "no-such-dir" / "x.mtrk"), "/proc/x.mtrk"):
        p = refused(tmp, ["-o", out, "--", fixture("touch"), ran], 1, "output " + out,
                    out, ran)
        check_true(out in p.stderr, "stderr names %s: %r" % (out, p.stderr))
    # the fixture does create the file when it runs
    p = run([fixture("touch"), ran])
    check_eq((p.rc, os.path.exists(ran)), (0, True), "touch run directly (rc, created)")


def test_fd_limit_too_low_is_named(tmp):
    """Under `ulimit -n 40` (soft and hard, which root here cannot raise)
    memtrack runs out of fds while loading its BPF side, at the load or
    the attach step: one line names the fd limit and the fix (was "the
    kernel rejected memtrack's BPF programs" or "this kernel needs BTF raw
    tracepoints"); the command does not run, no artifact is left."""
    out, ran = str(tmp / "x.mtrk"), str(tmp / "ran")
    for limit in (40, 60):
        p = run(["bash", "-c", "ulimit -n %d; exec %s track -o %s -- %s %s"
                 % (limit, MEMTRACK, out, fixture("touch"), ran)])
        what = "ulimit -n %d" % limit
        if p.rc == 0:  # memtrack got its limit raised (CAP_SYS_RESOURCE)
            check_true(os.path.exists(ran), "the command ran (%s)" % what)
            os.unlink(ran)
            continue
        check_eq(p.rc, 1, "exit status (%s): %s" % (what, p.describe()))
        check_eq(p.stderr.count("\n"), 1, "one line (%s): %r" % (what, p.stderr))
        check_true("out of file descriptors" in p.stderr and "(limit %d)" % limit in p.stderr
                   and "ulimit -n" in p.stderr, "the problem and the fix named: %r" % p.stderr)
        check_eq((os.path.exists(out), os.path.exists(ran)), (False, False),
                 "artifact left, command run (%s)" % what)


def test_unknown_option(tmp):
    out, ran = str(tmp / "x.mtrk"), str(tmp / "ran")
    p = refused(tmp, ["--no-such-option", "-o", out, "--", fixture("touch"), ran], 2,
                "unknown long option", out, ran)
    check_true("--no-such-option" in p.stderr, "stderr names the option: %r" % p.stderr)
    refused(tmp, ["-Z", "-o", out, "--", fixture("touch"), ran], 2, "unknown short option",
            out, ran)
    refused(tmp, ["--ring-size", "3000", "-o", out, "--", fixture("touch"), ran], 2,
            "ring size not a power of two", out, ran)
    refused(tmp, ["-o"], 2, "-o without its argument")
    # issue 13 (7): was accepted, then failed as a rejected BPF program, exit 1
    p = refused(tmp, ["--ring-size", "4G", "-o", out, "--", fixture("touch"), ran], 2,
                "ring size above 2G", out, ran)
    check_true("--ring-size" in p.stderr, "stderr names the option: %r" % p.stderr)


def test_no_command(tmp):
    out = str(tmp / "x.mtrk")
    refused(tmp, [], 2, "no arguments at all", out)
    refused(tmp, ["-o", out], 2, "options but no command", out)
    refused(tmp, ["-o", out, "--"], 2, "-- and no command", out)


def test_exec_failure_leaves_no_artifact(tmp):
    """The command exists and is executable but cannot be executed (its
    interpreter is missing): like a command that is not found, exit 127 with
    a message, and no artifact (nothing of the command ran)."""
    script = tmp / "bad-interpreter"
    script.write_text("#!/nonexistent/interpreter\n")
    script.chmod(0o755)
    out = str(tmp / "x.mtrk")
    p = run([MEMTRACK, "track", "-q", "-o", out, "--", str(script)])
    check_eq(p.rc, 127, "exit status")
    check_true(str(script) in p.stderr, "stderr names the command: %r" % p.stderr)
    check_eq(os.path.exists(out), False, "an artifact %s was left" % out)


def test_dashdash_single_argument_is_not_shell(tmp):
    """After `--` the argument is the command itself even when it contains a
    space (README: `track [options] -- CMD [ARGS...]` runs CMD); only the
    form without `--` goes through /bin/sh -c."""
    d = tmp / "dir with space"
    d.mkdir()
    prog = d / "touch"
    prog.write_bytes(open(fixture("touch"), "rb").read())
    prog.chmod(0o755)
    out = tmp / "x.mtrk"
    # touch with no argument exits 2: proves it ran (sh would exit 127)
    p = run([MEMTRACK, "track", "-q", "-o", out, "--", str(prog)])
    check_eq(p.rc, 2, "exit status (touch without its argument exits 2; stderr %r)" % p.stderr)
    if os.path.exists(out):
        execs = of_type(Artifact(out).events, "exec")
        check_eq([e["path"] for e in execs], [str(prog)], "exec records' paths")


def test_dump_and_report_refusals(tmp):
    junk = tmp / "junk"
    junk.write_text("not an artifact\n")
    for argv, rc, what in (
            (["dump", str(junk)], 1, "dump of a file that is no artifact"),
            (["dump", str(tmp / "missing.mtrk")], 1, "dump of a missing file"),
            (["dump"], 2, "dump without a file"),
            (["report", str(junk), "--json"], 1, "report of a file that is no artifact"),
            (["report", "--bogus", str(junk)], 2, "report with an unknown option"),
            (["report"], 2, "report without a file"),
            (["bogus-command"], 2, "unknown subcommand")):
        p = run([MEMTRACK] + argv)
        check_eq(p.rc, rc, "exit status of memtrack %s (%s)" % (" ".join(argv), what))
        check_eq(p.stdout, "", "stdout (%s)" % what)
        check_true(p.stderr.startswith("memtrack: "), "message on stderr (%s): %r"
                   % (what, p.stderr))
