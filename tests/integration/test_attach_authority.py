# SPDX-License-Identifier: MIT
"""Issue 41: `memtrack attach` run through sudo records only what the
invoking user could trace themselves (ptrace's rule, PTRACE_MODE_ATTACH_
REALCREDS): their own processes, not setuid-gained, not undumpable; at the
attach and for every process that joins the tree while attached.

sudo itself is not needed: memtrack reads SUDO_UID/SUDO_GID when it runs as
root (as test_sudo.py does), so the tests set them to nobody's ids; the
targets run as nobody (setpriv), as root, or as another user."""
import json
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest

from mtlib import MEMTRACK, Artifact, check_eq, check_true, fixture, require, require_eq
from test_attach import Lines, check_window_leaks, start_fixture, stop_fixture, window_run

FORK_LEAKS, FORK_LEAK_SIZE = 5, 4321  # fixtures/server.c
SPIN_SIZE = 5001  # fixtures/spinner.c
RULE = ("under sudo, memtrack attach records only processes the invoking user could "
        "trace (ptrace's rule: real, effective and saved uid and gid theirs); run memtrack "
        "as root without sudo to record it")


@pytest.fixture
def pub():
    """A directory nobody owns (the artifact is made by nobody), holding a
    setuid-root copy of the spinner fixture."""
    require(os.geteuid() == 0, "needs root")
    nobody = pwd.getpwnam("nobody")
    d = Path(tempfile.mkdtemp(prefix="mt-authority-"))
    os.chmod(d, 0o755)
    os.chown(d, nobody.pw_uid, nobody.pw_gid)
    suid = d / "suid_spinner"
    shutil.copy(fixture("spinner"), suid)
    os.chmod(suid, 0o4755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def sudo_env():
    nobody = pwd.getpwnam("nobody")
    return dict(os.environ, SUDO_UID=str(nobody.pw_uid), SUDO_GID=str(nobody.pw_gid),
                SUDO_USER="nobody")


def attach_as_nobody(pid, out):
    """memtrack attach under simulated sudo from nobody; returns (Popen, Lines of stderr)."""
    p = subprocess.Popen([MEMTRACK, "attach", "-o", str(out), str(pid)], env=sudo_env(),
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, start_new_session=True)
    return p, Lines(p.stderr)


def refused(pid, out):
    """An attach that must be refused: returns (rc, stderr)."""
    p = subprocess.run([MEMTRACK, "attach", "-o", str(out), str(pid)], env=sudo_env(),
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    return p.returncode, p.stderr


def refused_spinner_as_nobody(spinner, out):
    """`spinner forever` run as nobody, and a sudo attach of it that must be
    refused: returns (its pid, memtrack's rc, its stderr)."""
    p = subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                          str(spinner), "forever"], stdout=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        Lines(p.stdout).expect("ready")
        rc, err = refused(p.pid, out)
    finally:
        p.kill()
        p.wait()
    return p.pid, rc, err


def test_sudo_attach_root_process_refused(pub):
    """A root process: exit 2, one line naming root and the rule, no artifact."""
    srv, srv_out = start_fixture([fixture("server")])
    try:
        rc, err = refused(srv.pid, pub / "root.mtrk")
    finally:
        stop_fixture(srv, srv_out)
    check_eq((rc, err), (2, "memtrack: process %d belongs to root (uid 0), not to nobody "
                            "(uid 65534) who ran sudo: %s\n" % (srv.pid, RULE)),
             "sudo memtrack attach of root's process")
    check_eq(sorted(os.listdir(pub)), ["suid_spinner"], "files left in the output directory")


def test_sudo_attach_other_user_refused(pub):
    """A process of another unprivileged user (daemon, uid 1): refused likewise."""
    other = pwd.getpwnam("daemon")
    srv, srv_out = start_fixture([fixture("server")], user="daemon")
    try:
        rc, err = refused(srv.pid, pub / "other.mtrk")
    finally:
        stop_fixture(srv, srv_out)
    check_eq((rc, err), (2, "memtrack: process %d belongs to daemon (uid %d), not to nobody "
                            "(uid 65534) who ran sudo: %s\n" % (srv.pid, other.pw_uid, RULE)),
             "sudo memtrack attach of daemon's process")
    check_eq(sorted(os.listdir(pub)), ["suid_spinner"], "files left in the output directory")


def test_sudo_attach_setuid_gained_refused(pub):
    """nobody's own process, but running a setuid-root program (real uid
    nobody, effective and saved uid root): refused as privileges gained."""
    pid, rc, err = refused_spinner_as_nobody(pub / "suid_spinner", pub / "suid.mtrk")
    check_eq(rc, 2, "exit status (stderr %r)" % err)
    check_eq(err, "memtrack: process %d runs with privileges it gained (effective uid 0, saved "
                  "0, gids 65534/65534/65534: a setuid or setgid program), which nobody "
                  "(uid 65534) could not trace: under sudo, memtrack attach follows ptrace's "
                  "rule; run memtrack as root without sudo to record it\n" % pid,
             "its message")
    check_eq(sorted(os.listdir(pub)), ["suid_spinner"], "files left in the output directory")


def run_window(srv, srv_out, mt, mt_err):
    """The server's window, open half a second (a window closed at once may
    hold no leak under load, and would check nothing)."""
    mt_err.expect("memtrack: attached to %d " % srv.pid)
    closed, rc, lines = window_run(srv, srv_out, mt, mt_err)
    require(int(closed["leaks"]) > 0, "the server leaked nothing in its window (%r)" % closed)
    return closed, rc, lines


def test_sudo_attach_own_process_and_setuid_child(pub):
    """nobody's own server: recorded exactly (its leaks in the window), the
    artifact nobody's; its child, forked while attached, makes its 5 leaks,
    then execs a setuid-root program: a LEFT record (reason 1), and not one
    record of the child after it (the spinner's 1000 pairs are not there)."""
    srv, srv_out = start_fixture([fixture("server"), "10000", "0",
                                  pub / "suid_spinner", "1000"], user="nobody")
    out = pub / "own.mtrk"
    mt, mt_err = attach_as_nobody(srv.pid, out)
    closed, rc, lines = run_window(srv, srv_out, mt, mt_err)
    child = [line for line in srv_out.seen if line.startswith("child ")]
    stop_fixture(srv, srv_out)
    check_eq(rc, 0, "memtrack attach's exit status (%r)" % lines)
    require_eq(len(child), 1, "the fixture's child line (%r)" % srv_out.seen)
    cpid = int(child[0].split()[1])
    check_eq(out.stat().st_uid, 65534, "the artifact's owner")
    evs = Artifact(out).events
    check_window_leaks(evs, srv.pid, closed, "nobody's server")
    left = [e for e in evs if e["type"] == "left"]
    check_eq([(e["pid"], e["reason"]) for e in left], [(cpid, 1)], "left records")
    pre = [e for e in evs if e["pid"] == cpid and e["type"] == "malloc"
           and e["size"] == FORK_LEAK_SIZE]
    check_eq(len(pre), FORK_LEAKS, "the child's mallocs before its exec")
    after = [e for e in evs if e["pid"] == cpid and e["ts"] > left[0]["ts"]]
    check_eq(after, [], "records of the child after it left")
    check_eq([e for e in evs if e["pid"] == cpid and e["type"] in ("exec", "exit")], [],
             "exec or exit records of the child")
    check_eq(sum(1 for e in evs if e.get("size") == SPIN_SIZE), 0,
             "the setuid spinner's mallocs")
    rep = report_json(out)
    check_eq((rep["left_processes"], [p.get("left") for p in rep["processes"]
                                      if p["pid"] == cpid]),
             (1, ["privileged exec"]), "report --json: left_processes, the child's left")
    check_true(any("not yours to trace: 0 left out at the attach, 1 left at a privileged "
                   "exec or prctl" in line for line in lines),
               "the summary line names the process that left (%r)" % lines)


def test_sudo_attach_tree_with_setuid_child(pub):
    """nobody's shell whose child already runs a setuid-root program at the
    attach: the shell is recorded, the child is left out (and named so)."""
    sh = subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                           "sh", "-c", '"$0" forever; exit 0', str(pub / "suid_spinner")],
                          stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                          start_new_session=True)
    try:
        Lines(sh.stdout).expect("ready")
        kids = open("/proc/%d/task/%d/children" % (sh.pid, sh.pid)).read().split()
        require_eq(len(kids), 1, "the shell's children")
        out = pub / "tree.mtrk"
        mt, mt_err = attach_as_nobody(sh.pid, out)
        mt_err.expect("memtrack: attached to %d (1 processes)" % sh.pid)
        mt.send_signal(signal.SIGINT)
        lines = mt_err.seen + mt_err.rest()
        rc = mt.wait(timeout=60)
    finally:
        os.killpg(sh.pid, signal.SIGKILL)
        sh.wait()
    check_eq(rc, 0, "memtrack attach's exit status (%r)" % lines)
    evs = Artifact(out).events
    check_eq(sorted({e["pid"] for e in evs if e["pid"]}), [sh.pid], "processes recorded")
    check_true(any("not yours to trace: 1 left out at the attach, 0 left" in line
                   for line in lines), "the summary line names it (%r)" % lines)


def test_sudo_attach_undumpable_leaves(pub):
    """nobody's process calls prctl(PR_SET_DUMPABLE, 0) while attached: its
    3 blocks before are recorded, a LEFT record (reason 2), none of its 4 after."""
    p, p_out = start_fixture([fixture("undumpable")], user="nobody")
    out = pub / "undumpable.mtrk"
    mt, mt_err = attach_as_nobody(p.pid, out)
    mt_err.expect("memtrack: attached to %d " % p.pid)
    p.send_signal(signal.SIGUSR1)
    p_out.expect("done")
    mt.send_signal(signal.SIGINT)
    lines = mt_err.seen + mt_err.rest()
    rc = mt.wait(timeout=60)
    stop_fixture(p, p_out)
    check_eq(rc, 0, "memtrack attach's exit status (%r)" % lines)
    evs = Artifact(out).events
    sizes = [e["size"] for e in evs if e["type"] == "malloc" and e["size"] in (6007, 6011)]
    check_eq(sizes, [6007] * 3, "blocks recorded before and after the prctl")
    check_eq([(e["pid"], e["reason"]) for e in evs if e["type"] == "left"], [(p.pid, 2)],
             "left records")
    rep = report_json(out)
    check_eq((rep["left_processes"], [q.get("left") for q in rep["processes"]]),
             (1, ["undumpable"]), "report --json: left_processes, the process's left")


def report_json(path):
    p = subprocess.run([MEMTRACK, "report", "--json", str(path)], capture_output=True,
                       text=True, timeout=60)
    require_eq(p.returncode, 0, "memtrack report --json (stderr %r)" % p.stderr)
    return json.loads(p.stdout)


YAMA = Path("/proc/sys/kernel/yama/ptrace_scope")


@pytest.fixture
def yama_scope():
    """Sets Yama's ptrace_scope for a test and puts it back (0 to 2 only: 3
    cannot be undone).  Skipped where the kernel has no Yama (this host's
    6.18); Debian's kernels have it, so test-kernels runs these."""
    if not YAMA.exists():
        pytest.skip("no Yama in this kernel (%s missing)" % YAMA)
    old = YAMA.read_text().strip()
    require(old in ("0", "1", "2"), "ptrace_scope is %s (3 cannot be set back)" % old)

    def set_scope(n):
        YAMA.write_text("%d\n" % n)

    yield set_scope
    YAMA.write_text(old + "\n")


def test_sudo_attach_yama_scope_1_needs_a_descendant(pub, yama_scope):
    """ptrace_scope 1: nobody's process that does not descend from the shell
    that ran sudo is refused (one line, no file); one started from that shell
    is recorded.  sudo is a setuid-root copy of setpriv here: the shell runs
    as nobody, its `sudo` makes memtrack root with SUDO_UID set."""
    yama_scope(1)
    pid, rc, err = refused_spinner_as_nobody(fixture("spinner"), pub / "unrelated.mtrk")
    check_eq((rc, err), (2, "memtrack: Yama's ptrace_scope is 1 and process %d does not "
                            "descend from the shell of nobody (uid 65534) that ran sudo, so "
                            "they could not trace it; start it from that shell, or run "
                            "memtrack as root without sudo to record it\n" % pid),
             "sudo memtrack attach of a process that is not the shell's")
    sudo = pub / "sudo"
    shutil.copy(shutil.which("setpriv"), sudo)
    os.chmod(sudo, 0o4755)
    out = pub / "descendant.mtrk"
    script = ('"$1" forever >/dev/null & t=$!; sleep 0.3; echo "target $t"; '
              '"$2" --reuid=0 --regid=0 --clear-groups env SUDO_UID=65534 SUDO_GID=65534 '
              'SUDO_USER=nobody "$3" attach --duration 0.5 -o "$4" "$t"; echo "rc $?"; '
              'kill "$t"')
    sh = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh",
                         "-c", script, "sh", fixture("spinner"), sudo, MEMTRACK, out],
                        capture_output=True, text=True, timeout=120)
    lines = sh.stdout.split("\n")
    require(lines[0].startswith("target "), "the shell's output %r %r" % (sh.stdout, sh.stderr))
    target = int(lines[0].split()[1])
    check_eq(lines[1], "rc 0", "memtrack attach's exit status (stderr %r)" % sh.stderr)
    check_eq(out.stat().st_uid, 65534, "the artifact's owner")
    evs = Artifact(out).events
    mallocs = [e["addr"] for e in evs if e["type"] == "malloc" and e["size"] == SPIN_SIZE]
    frees = [e for e in evs if e["type"] == "free" and e["addr"] in set(mallocs)]
    require(mallocs, "the spinner's mallocs: none recorded")
    check_eq(sorted({e["pid"] for e in evs if e["pid"]}), [target], "processes recorded")
    # pairs, but for one block in flight at either end of the window
    check_true(abs(len(mallocs) - len(frees)) <= 1,
               "the spinner's %d mallocs and %d frees pair up" % (len(mallocs), len(frees)))


def test_sudo_attach_yama_scope_2_refused(pub, yama_scope):
    """ptrace_scope 2: only CAP_SYS_PTRACE may trace; sudo attach of the
    user's own process is refused with one line, no file."""
    yama_scope(2)
    srv, srv_out = start_fixture([fixture("server")], user="nobody")
    try:
        rc, err = refused(srv.pid, pub / "scope2.mtrk")
    finally:
        stop_fixture(srv, srv_out)
    check_eq((rc, err), (2, "memtrack: Yama's ptrace_scope is 2: only a process with "
                            "CAP_SYS_PTRACE may trace process %d, and nobody (uid 65534) may "
                            "not; run memtrack as root without sudo to record it\n" % srv.pid),
             "sudo memtrack attach under ptrace_scope 2")
    check_eq(sorted(os.listdir(pub)), ["suid_spinner"], "files left in the output directory")
