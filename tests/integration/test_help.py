# SPDX-License-Identifier: MIT
"""Issue 24: every command has help (`memtrack help COMMAND`, `memtrack
COMMAND --help` and `-h`: exit 0, on stdout, starting with its usage line),
and usage errors point there.  Before, only `track --help` worked; `report
--help` and the others were "unknown argument" errors (exit 2)."""
import re

from mtlib import BUILD, MEMTRACK, REPO, check_eq, check_true, require, run

# every command main.c runs, in the order `memtrack help` lists them
COMMANDS = ["track", "attach", "daemon", "top", "dump", "report", "diff", "export", "flamegraph", "ctl", "help"]


def help_text(cmd):
    """`memtrack help CMD`'s output, checked to be a clean success."""
    p = run([MEMTRACK, "help", cmd])
    check_eq((p.rc, p.stderr), (0, ""), "memtrack help %s (rc, stderr)" % cmd)
    return p.stdout


def test_every_command_has_help(tmp):
    for cmd in COMMANDS:
        text = help_text(cmd)
        check_true(text.startswith("usage: memtrack %s" % cmd),
                   "help %s starts with its usage line: %r" % (cmd, text[:80]))
        long_lines = [line for line in text.splitlines() if len(line) > 80]
        check_eq(long_lines, [], "help %s: lines over 80 columns" % cmd)
        for flag in ("--help", "-h"):
            argv = [MEMTRACK, cmd, flag] if cmd != "help" else [MEMTRACK, "help", flag]
            p = run(argv)
            check_eq((p.rc, p.stdout, p.stderr), (0, text, ""),
                     "memtrack %s %s (rc, stdout = memtrack help %s, stderr)" % (cmd, flag, cmd))


def test_help_after_other_arguments(tmp):
    """--help among the other arguments of a reader wins over them (nothing is
    read: the file does not exist); after `--` it belongs to the command."""
    missing = str(tmp / "missing.mtrk")
    for argv in (["report", missing, "--json", "--help"], ["diff", missing, missing, "-h"],
                 ["export", "--format=csv", missing, "-o", str(tmp / "x.csv"), "--help"],
                 ["flamegraph", missing, "--folded", "--help"], ["dump", missing, "--help"],
                 ["top", "--interval", "2", missing, "--help"]):
        p = run([MEMTRACK] + argv)
        check_eq((p.rc, p.stdout, p.stderr), (0, help_text(argv[0]), ""),
                 "memtrack %s (rc, stdout, stderr)" % " ".join(argv[:1] + argv[2:]))
    check_eq((tmp / "x.csv").exists(), False, "export --help wrote its output file")


def test_list_of_commands(tmp):
    """`memtrack help` and `memtrack --help` list every command with a
    summary; `memtrack` alone prints the same list on stderr, exit 2."""
    p = run([MEMTRACK, "help"])
    check_eq((p.rc, p.stderr), (0, ""), "memtrack help (rc, stderr)")
    listed = re.findall(r"^  ([a-z]+) +\S", p.stdout, re.M)
    check_eq(listed, COMMANDS, "commands listed by memtrack help")
    for flag in ("--help", "-h"):
        q = run([MEMTRACK, flag])
        check_eq((q.rc, q.stdout, q.stderr), (0, p.stdout, ""), "memtrack %s" % flag)
    q = run([MEMTRACK])
    check_eq((q.rc, q.stdout, q.stderr), (2, "", p.stdout), "memtrack without a command")


def test_help_of_unknown_command(tmp):
    p = run([MEMTRACK, "help", "nosuch"])
    check_eq((p.rc, p.stdout), (2, ""), "memtrack help nosuch (rc, stdout)")
    check_eq(p.stderr, "memtrack: no command 'nosuch'; the commands are track, attach, daemon, top, dump, report, "
             "diff, export, flamegraph, ctl or help (see memtrack help)\n", "its message")
    p = run([MEMTRACK, "help", "report", "extra"])
    check_eq((p.rc, p.stdout, p.stderr.count("\n")), (2, "", 1),
             "memtrack help report extra (rc, stdout, lines of stderr): %r" % p.stderr)
    p = run([MEMTRACK, "nosuch"])
    check_eq((p.rc, p.stderr), (2, "memtrack: unknown command 'nosuch'; see memtrack help for "
             "the list\n"), "memtrack nosuch")


def test_did_you_mean(tmp):
    """A typo of a command (an edit or two: a letter missing, extra, wrong,
    two swapped) is named; a word that is no near typo is not."""
    for typo, cmd in (("trak", "track"), ("tarck", "track"), ("trackk", "track"),
                      ("reprot", "report"), ("flamegrap", "flamegraph"), ("dumb", "dump"),
                      ("atach", "attach"), ("expotr", "export"), ("tpo", "top")):
        p = run([MEMTRACK, typo, "x.mtrk"])
        check_eq((p.rc, p.stdout, p.stderr),
                 (2, "", "memtrack: unknown command '%s'; did you mean %s? (see memtrack help "
                  "for the list)\n" % (typo, cmd)), "memtrack %s" % typo)
        p = run([MEMTRACK, "help", typo])
        check_eq((p.rc, p.stderr), (2, "memtrack: no command '%s'; did you mean %s? (see memtrack "
                 "help)\n" % (typo, cmd)), "memtrack help %s" % typo)
    for word in ("xy", "cp", "records", "t" * 40):
        p = run([MEMTRACK, word])
        check_eq((p.rc, p.stderr), (2, "memtrack: unknown command '%s'; see memtrack help for "
                 "the list\n" % word), "memtrack %s: no suggestion" % word)


def test_help_to_full_disk(tmp):
    p = run(["sh", "-c", '"$0" help report >/dev/full', MEMTRACK])
    check_eq((p.rc, p.stderr.count("\n")), (1, 1), "help on /dev/full (rc, lines): %r" % p.stderr)


def test_usage_errors_point_to_help(tmp):
    """A wrong or missing argument: exit 2, one line on stderr ending with
    "see memtrack help COMMAND", nothing on stdout."""
    missing = str(tmp / "missing.mtrk")
    cases = [
        (["track", "--bogus", "--", "true"], "track"),
        (["track", "-Z", "--", "true"], "track"),
        (["track"], "track"),
        (["attach"], "attach"),
        (["attach", "--bogus", "1"], "attach"),
        (["attach", "1", "2"], "attach"),
        (["dump"], "dump"),
        (["dump", missing, missing], "dump"),
        (["report"], "report"),
        (["report", missing, "--bogus"], "report"),
        (["report", missing, "--between", "a"], "report"),
        (["diff", missing], "diff"),
        (["diff", missing, missing, "--bogus"], "diff"),
        (["export", missing, "-o", str(tmp / "x")], "export"),
        (["export", "--format=csv", missing], "export"),
        (["flamegraph", missing, "--bogus"], "flamegraph"),
        (["flamegraph"], "flamegraph"),
        (["ctl"], "ctl"),
        (["top"], "top"),
        (["top", missing, "--bogus"], "top"),
        (["top", missing, missing], "top"),
        (["top", missing, "--interval"], "top"),
        (["ctl", str(tmp / "sock"), "frobnicate"], "ctl"),
    ]
    for argv, cmd in cases:
        p = run([MEMTRACK] + argv)
        check_eq((p.rc, p.stdout, p.stderr.count("\n")), (2, "", 1),
                 "memtrack %s (rc, stdout, lines of stderr): %r" % (" ".join(argv), p.stderr))
        check_true(p.stderr.startswith("memtrack: ") and
                   p.stderr.endswith("; see memtrack help %s\n" % cmd),
                   "memtrack %s points to memtrack help %s: %r" % (" ".join(argv), cmd, p.stderr))


def options_of(cmd):
    """The options `memtrack help CMD` lists, e.g. ["-o", "--output", ...]:
    the lines that start with two blanks and a dash."""
    opts = []
    for line in help_text(cmd).splitlines():
        m = re.match(r"^  (?:(-\w), )?\s*(--[a-z][\w=-]*)", line)
        if m:
            opts += [o for o in m.groups() if o]
    return opts


def test_man_page_names_every_option(tmp):
    """memtrack(1) (docs/memtrack.1.scd, built by make into build/memtrack.1)
    documents every command and every option its help lists, and man
    renders it without a warning."""
    src = (REPO / "docs" / "memtrack.1.scd").read_text()
    for cmd in COMMANDS:
        check_true("## memtrack %s" % cmd in src, "the man page has a section for %s" % cmd)
        for opt in options_of(cmd):
            check_true("*%s*" % opt in src or "*%s " % opt in src,
                       "the man page names %s %s" % (cmd, opt))
    page = BUILD / "memtrack.1"
    require(page.exists(), "%s is not built (make man)" % page)
    p = run(["env", "MANWIDTH=80", "man", "--warnings", "-l", str(page)])
    check_eq((p.rc, p.stderr), (0, ""), "man --warnings -l %s (rc, stderr)" % page)
    for cmd in COMMANDS:
        check_true(re.search(r"^   memtrack %s\b" % cmd, p.stdout, re.M) is not None,
                   "the rendered page has the section of %s" % cmd)
