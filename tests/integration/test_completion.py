# SPDX-License-Identifier: MIT
"""Issue 24: bash completion (scripts/bash-completion/memtrack, installed as
share/bash-completion/completions/memtrack).  Each test sources it in a
plain bash (no bash-completion package), sets COMP_WORDS and COMP_CWORD as
readline would, calls _memtrack and reads COMPREPLY."""
from mtlib import REPO, check_eq, require_eq, run
from test_help import COMMANDS, options_of

SCRIPT = str(REPO / "scripts" / "bash-completion" / "memtrack")


def complete(words, cwd):
    """COMPREPLY for the command line `words` (the last one is being typed)."""
    p = run(["bash", "--norc", "--noprofile", "-c",
             'source "$0" && cd "$1" && shift && COMP_WORDS=("$@") && '
             'COMP_CWORD=$(($# - 1)) && _memtrack && printf "%s\\n" "${COMPREPLY[@]}"',
             SCRIPT, str(cwd)] + words)
    require_eq((p.rc, p.stderr), (0, ""), "completing %r (rc, stderr)" % words)
    return sorted(line for line in p.stdout.split("\n") if line)


def scratch(tmp):
    for name in ("a.mtrk", "b.mtrk", "notes.txt", "out.svg", "page.html"):
        (tmp / name).write_text("")
    (tmp / "runs").mkdir()
    return tmp


def test_commands_and_options(tmp):
    check_eq(complete(["memtrack", ""], tmp), sorted(COMMANDS + ["--help", "--version"]),
             "memtrack <TAB>")
    check_eq(complete(["memtrack", "fl"], tmp), ["flamegraph"], "memtrack fl<TAB>")
    check_eq(complete(["memtrack", "help", "d"], tmp), ["daemon", "diff", "dump"], "memtrack help d<TAB>")
    for cmd in COMMANDS:
        if cmd == "help":
            continue
        check_eq(complete(["memtrack", cmd, "-"], tmp), sorted(options_of(cmd)),
                 "memtrack %s -<TAB> (the options of memtrack help %s)" % (cmd, cmd))
    check_eq(complete(["memtrack", "report", "a.mtrk", "--j"], tmp), ["--json"],
             "report FILE --j<TAB>")


def test_files_by_extension(tmp):
    d = scratch(tmp)
    for words in (["memtrack", "report", ""], ["memtrack", "dump", ""],
                  ["memtrack", "diff", "a.mtrk", ""], ["memtrack", "flamegraph", ""],
                  ["memtrack", "export", "--format=csv", ""], ["memtrack", "top", ""],
                  ["memtrack", "top", "--interval", "2", ""]):
        check_eq(complete(words, d), ["a.mtrk", "b.mtrk", "runs"], "%s<TAB>" % " ".join(words))
    check_eq(complete(["memtrack", "diff", "a.mtrk", "b.mtrk", ""], d), [],
             "diff with its two files: nothing more")
    check_eq(complete(["memtrack", "report", "a.mtrk", "--svg", ""], d), ["out.svg", "runs"],
             "report --svg <TAB>")
    check_eq(complete(["memtrack", "report", "a.mtrk", "--html", ""], d), ["page.html", "runs"],
             "report --html <TAB>")
    check_eq(complete(["memtrack", "track", "-o", ""], d), ["a.mtrk", "b.mtrk", "runs"],
             "track -o <TAB>")
    check_eq(complete(["memtrack", "export", "--format=csv", "-o", "n"], d), ["notes.txt"],
             "export -o n<TAB> (any file)")


def test_option_values(tmp):
    check_eq(complete(["memtrack", "diff", "--metric", "peak_"], tmp),
             ["peak_heap_bytes", "peak_mapped_bytes", "peak_memory_bytes", "peak_physical_bytes",
              "peak_rss_bytes"], "diff --metric peak_<TAB>")
    check_eq(complete(["memtrack", "flamegraph", "a.mtrk", "--metric", "a"], tmp),
             ["allocated", "allocations"], "flamegraph --metric a<TAB>")
    check_eq(complete(["memtrack", "report", "a.mtrk", "--sort", "p"], tmp), ["peak", "pid"],
             "report --sort p<TAB>")
    for cmd in (["report", "a.mtrk"], ["diff", "a.mtrk", "b.mtrk"]):
        check_eq(complete(["memtrack"] + cmd + ["--by", ""], tmp), ["function", "stack"],
                 "%s --by <TAB>" % cmd[0])
    check_eq(complete(["memtrack", "diff", "--metric", "stack"], tmp),
             ["stack:allocated", "stack:allocations", "stack:leaked", "stack:live_at_end",
              "stack:memory", "stack:peak", "stack:temporary"], "diff --metric stack<TAB>")
    check_eq(complete(["memtrack", "dump", "--pid", ""], tmp), [], "dump --pid <TAB>: a number, no file")
    # bash breaks --format=p into "--format" "=" "p" (= is in COMP_WORDBREAKS)
    check_eq(complete(["memtrack", "export", "--format", "=", "p"], tmp), ["perfetto", "pprof"],
             "export --format=p<TAB>")
    check_eq(complete(["memtrack", "export", "--format", "="], tmp), ["csv", "perfetto", "pprof"],
             "export --format=<TAB>")
    check_eq(complete(["memtrack", "export", "--format=c"], tmp), ["--format=csv"],
             "export --format=c<TAB> as one word")
    check_eq(complete(["memtrack", "export", "--format", "c"], tmp), ["csv"],
             "export --format c<TAB>")
    check_eq(complete(["memtrack", "report", "a.mtrk", "--top", ""], tmp), [],
             "report --top <TAB> (a number: nothing)")
    check_eq(complete(["memtrack", "ctl", "sock", "e"], tmp), ["enable"], "ctl PATH e<TAB>")


def test_tracked_command(tmp):
    """After track's options the tracked command completes as a command,
    whether or not `--` comes first; option values are skipped."""
    d = scratch(tmp)
    for words in (["memtrack", "track", "-o", "x.mtrk", "--stacks", "ech"],
                  ["memtrack", "track", "--", "ech"], ["memtrack", "track", "ech"]):
        got = complete(words, d)
        check_eq("echo" in got and all(w.startswith("ech") for w in got), True,
                 "%s<TAB> offers echo: %r" % (" ".join(words), got))
    check_eq(complete(["memtrack", "track", "--", "ls", "n"], d), ["notes.txt"],
             "the tracked command's arguments: files")
    check_eq(complete(["memtrack", "track", "-o", "x.mtrk", "ls", "--s"], d), [],
             "an option after the command belongs to it, not to track")
