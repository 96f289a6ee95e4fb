# SPDX-License-Identifier: MIT
"""memtrack as root and under sudo never does for a user what that user could
not have done (issue 27, items 1, 2, 9, 10, 12 and the control socket's
deadline).

Each test does what the attacker did.  sudo itself is not needed: memtrack
reads SUDO_UID/SUDO_GID as sudo sets them, so the tests set them to nobody's
ids (as test_sudo.py does) while running as root.  The directories live in a
0755 directory of their own under /tmp, so nobody can reach them.
"""
import os
import pwd
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from callsites import tracked
from mtlib import (MEMTRACK, ControlClient, Failure, check_eq, check_true, fixture, kv_lines, require, require_eq,
                   wait_until)

NOBODY = pwd.getpwnam("nobody")
VICTIM_TEXT = "root's own file\n"


@pytest.fixture
def pub():
    """A 0755 root-owned directory under /tmp (reachable by nobody)."""
    d = Path(tempfile.mkdtemp(prefix="mt-priv-"))
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def root_dir(parent, name="root"):
    """A directory only root may write (0755, root's), holding nothing."""
    d = parent / name
    d.mkdir(mode=0o755)
    os.chmod(d, 0o755)
    return d


def users_dir(parent, name="user"):
    """A directory nobody owns (the invoking user may write it)."""
    d = parent / name
    d.mkdir(mode=0o755)
    os.chown(d, NOBODY.pw_uid, NOBODY.pw_gid)
    return d


def victim(d, name="victim"):
    """A root-owned 0644 file with known content."""
    f = d / name
    f.write_text(VICTIM_TEXT)
    os.chmod(f, 0o644)
    return f


def check_untouched(f, what):
    st = f.stat()
    check_eq((st.st_uid, st.st_gid, f.read_text()), (0, 0, VICTIM_TEXT), what + ": owner and content")


def sudo_env(**extra):
    env = dict(os.environ, SUDO_UID=str(NOBODY.pw_uid), SUDO_GID=str(NOBODY.pw_gid),
               SUDO_USER="nobody")
    env.pop("XDG_CACHE_HOME", None)
    env.update(extra)
    return env


def root_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SUDO_")}
    env.pop("XDG_CACHE_HOME", None)
    env.update(extra)
    return env


def run_env(argv, env, timeout=60):
    return subprocess.run([str(a) for a in argv], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=timeout)


def one_line(p, start, what):
    check_true(p.stderr.startswith(start) and p.stderr.count("\n") == 1,
               "%s: one line starting %r, got %r" % (what, start, p.stderr))


# --- track -o and --control under sudo (item 1) ---------------------------

def test_sudo_output_over_root_file_refused(pub):
    """sudo memtrack track -o /etc/FILE: the root file is not handed over."""
    d = root_dir(pub)
    f = victim(d)
    p = run_env([MEMTRACK, "track", "-q", "-o", f, "--", "true"], sudo_env())
    check_eq(p.returncode, 1, "memtrack exit status")
    one_line(p, "memtrack: cannot write '%s': Permission denied; choose a writable path with -o" % f,
             "stderr")
    check_untouched(f, "the -o file")
    check_eq(sorted(os.listdir(d)), ["victim"], "files in the root-only directory")


def test_sudo_output_in_root_dir_refused(pub):
    """sudo memtrack track -o /etc/NEW: nothing is created there."""
    d = root_dir(pub)
    p = run_env([MEMTRACK, "track", "-q", "-o", d / "new.mtrk", "--", "true"], sudo_env())
    check_eq(p.returncode, 1, "memtrack exit status")
    one_line(p, "memtrack: cannot write '%s': Permission denied" % (d / "new.mtrk"), "stderr")
    check_eq(os.listdir(d), [], "files in the root-only directory")


def test_sudo_output_in_invokers_dir_is_theirs(pub):
    """The normal sudo path: the artifact is made by nobody, in nobody's
    directory, also through a symbolic link to that directory (a link in the
    directory part is followed as given)."""
    d = users_dir(pub)
    os.symlink(d, pub / "link")
    for out in (d / "run.mtrk", pub / "link" / "via-link.mtrk"):
        p = run_env([MEMTRACK, "track", "-q", "-o", out, "--", "true"], sudo_env())
        require_eq(p.returncode, 0, "memtrack exit status (stderr %s)" % p.stderr)
        st = out.stat()
        check_eq((st.st_uid, st.st_gid), (NOBODY.pw_uid, NOBODY.pw_gid), "owner of %s" % out)
    check_eq(sorted(os.listdir(d)), ["run.mtrk", "via-link.mtrk"], "files in nobody's directory")


def test_plain_root_output_unchanged(pub):
    """Without sudo the artifact is root's, where root asked for it."""
    out = root_dir(pub) / "run.mtrk"
    p = run_env([MEMTRACK, "track", "-q", "-o", out, "--", "true"], root_env())
    require_eq(p.returncode, 0, "memtrack exit status (stderr %s)" % p.stderr)
    check_eq(out.stat().st_uid, 0, "the artifact's owner")


def test_sudo_control_in_root_dir_refused(pub):
    """sudo memtrack track --control /etc/x.sock: no socket there, not even
    while the command runs (the command, as nobody, looks for it)."""
    d, out_dir = root_dir(pub), users_dir(pub)
    sock = d / "x.sock"
    p = run_env([MEMTRACK, "track", "-q", "-o", out_dir / "run.mtrk", "--control", sock, "--",
                 "stat", "-c", "%u %F", sock], sudo_env())
    check_eq(p.stdout, "", "what the command saw at the socket's path")
    check_true("memtrack: cannot create control socket '%s': Permission denied; choose a path in a "
               "directory you can write (the command runs without control, heap recording on)\n"
               % sock in p.stderr, "stderr: %r" % p.stderr)
    check_eq(os.listdir(d), [], "files in the root-only directory")


def test_sudo_control_chown_race(pub):
    """Item 2: a racer (as nobody, in nobody's directory) renames a symbolic
    link to a root file over the socket the moment it exists, for about 3 s
    of runs; the root file's owner must never change.  The runs end early
    (--fast with no TMPDIR: the --fast socket fails right after the control
    socket is made), so there are hundreds of them."""
    d, rd = users_dir(pub), root_dir(pub)
    f = victim(rd)
    env = sudo_env(TMPDIR=str(pub / "none"))

    def as_nobody():
        os.setgroups([])
        os.setgid(NOBODY.pw_gid)
        os.setuid(NOBODY.pw_uid)

    racer = subprocess.Popen([fixture("swap_racer"), d, "c.sock", f, "3"], stdout=subprocess.PIPE,
                             text=True, preexec_fn=as_nobody)
    runs = 0
    try:
        while racer.poll() is None:
            run_env([MEMTRACK, "track", "-q", "-o", d / "o.mtrk", "--control", d / "c.sock",
                     "--fast", "--", "true"], env)
            runs += 1
            if os.path.lexists(d / "c.sock"):
                os.unlink(d / "c.sock")  # the racer's link (memtrack removes only its socket)
    finally:
        if racer.poll() is None:
            racer.kill()
        out = kv_lines(racer.communicate()[0])
    check_true(runs >= 10 and out.get("swaps", 0) >= 5,
               "the race ran (%d runs, racer said %r)" % (runs, out))
    check_untouched(f, "the root file behind the racer's link")


# --- readers' outputs (item 9) ---------------------------------------------

def reader_argvs(art, out):
    return [
        ["report", art, "--html", out],
        ["report", art, "--svg", out],
        ["flamegraph", art, "-o", out],
        ["flamegraph", art, "--folded", "-o", out],
        ["export", "--format=perfetto", art, "-o", out],
        ["export", "--format=csv", art, "-o", out],
        ["export", "--format=pprof", art, "-o", out],
    ]


def opt_of(argv):
    return next(a for a in argv if a in ("--html", "--svg", "-o"))


@pytest.mark.parametrize("sudo", [False, True], ids=["root", "sudo"])
def test_readers_refuse_link_to_root_file(pub, sudo):
    """report --html, flamegraph -o, export -o onto a symbolic link the user
    placed, pointing at a root file: refused, the file unchanged."""
    art = tracked().artifact.path
    d = users_dir(pub)
    f = victim(root_dir(pub))
    link = d / "out"
    os.symlink(f, link)
    env = sudo_env(HOME=str(pub / "nohome")) if sudo else root_env(HOME=str(pub / "nohome"))
    for argv in reader_argvs(art, link):
        p = run_env([MEMTRACK] + argv, env)
        check_eq(p.returncode, 1, "%s: exit status" % argv[0])
        one_line(p, "memtrack: '%s' exists and is not a regular file (a symbolic link); memtrack "
                 "replaces only regular files: choose another path with %s" % (link, opt_of(argv)),
                 " ".join(map(str, argv[:1] + argv[2:])))
        check_untouched(f, " ".join(map(str, argv)))


def test_sudo_readers_write_as_invoker(pub):
    """Under sudo a reader's output is the invoker's: made in their directory,
    refused where only root may write (the file there unchanged)."""
    art = tracked().artifact.path
    d, rd = users_dir(pub), root_dir(pub)
    f = victim(rd)
    env = sudo_env(HOME=str(pub / "nohome"))
    for i, argv in enumerate(reader_argvs(art, None)):
        out = d / ("out%d" % i)
        argv[argv.index(None)] = out
        p = run_env([MEMTRACK] + argv, env)
        require_eq(p.returncode, 0, "%s: exit status (stderr %s)" % (argv[0], p.stderr))
        check_eq((out.stat().st_uid, out.stat().st_size > 0), (NOBODY.pw_uid, True),
                 "%s: the output's owner, non-empty" % " ".join(map(str, argv[2:])))
        argv[argv.index(out)] = f
        p = run_env([MEMTRACK] + argv, env)
        check_eq(p.returncode, 1, "%s over a root file: exit status" % argv[0])
        one_line(p, "memtrack: cannot write '%s': Permission denied" % f, argv[0])
        check_untouched(f, " ".join(map(str, argv)))


# --- the symbol cache (item 10) ---------------------------------------------

def home_with_cache_link(pub, link_at):
    """A user's HOME (nobody's) whose .cache/memtrack (or .cache) is a link
    into a root-only directory; returns (home, the root-only directory)."""
    home = users_dir(pub, "home")
    secret = pub / "secret"
    secret.mkdir(mode=0o700)
    if link_at == ".cache":
        os.symlink(secret, home / ".cache")
    else:
        (home / ".cache").mkdir()
        os.chown(home / ".cache", NOBODY.pw_uid, NOBODY.pw_gid)
        os.symlink(secret, home / ".cache" / "memtrack")
    return home, secret


@pytest.mark.parametrize("sudo", [False, True], ids=["root", "sudo"])
@pytest.mark.parametrize("link_at", [".cache/memtrack", ".cache"])
def test_symcache_link_into_root_dir(pub, sudo, link_at):
    """Run as root (or sudo) with a user's HOME whose cache is a link into a
    root-only directory: nothing is written there, the report still right."""
    home, secret = home_with_cache_link(pub, link_at)
    env = (sudo_env if sudo else root_env)(HOME=str(home))
    out = home / "flame.folded"
    p = run_env([MEMTRACK, "flamegraph", tracked().artifact.path, "--folded", "-o", out], env)
    require_eq(p.returncode, 0, "flamegraph exit status (stderr %s)" % p.stderr)
    check_true(";main;a;b " in out.read_text(), "the folded stacks name main;a;b")
    check_eq(os.listdir(secret), [], "files in the root-only directory")


@pytest.mark.parametrize("sudo", [False, True], ids=["root", "sudo"])
def test_symcache_used_when_its_own(pub, sudo):
    """The cache still works: created under HOME by the user memtrack writes
    for (root, or the sudo invoker in their own HOME), and theirs."""
    home = users_dir(pub, "home") if sudo else root_dir(pub, "home")
    env = (sudo_env if sudo else root_env)(HOME=str(home))
    p = run_env([MEMTRACK, "flamegraph", tracked().artifact.path, "--folded", "-o", home / "f"],
                env)
    require_eq(p.returncode, 0, "flamegraph exit status (stderr %s)" % p.stderr)
    cache = home / ".cache" / "memtrack"
    files = sorted(os.listdir(cache)) if cache.is_dir() else []
    check_true(files and all(n.endswith(".syms") for n in files), "cache files: %r" % files)
    want = NOBODY.pw_uid if sudo else 0
    check_eq({(cache / n).stat().st_uid for n in files} | {cache.stat().st_uid,
                                                          cache.parent.stat().st_uid},
             {want}, "owners of the cache, its directory and .cache")


def test_symcache_root_with_users_home_makes_nothing(pub):
    """Root run with a user's HOME (su, sudo -E) makes no ~/.cache there (a
    root-owned 0700 .cache would lock the user out of their own cache)."""
    home = users_dir(pub, "home")
    p = run_env([MEMTRACK, "flamegraph", tracked().artifact.path, "--folded", "-o", pub / "f"],
                root_env(HOME=str(home)))
    require_eq(p.returncode, 0, "flamegraph exit status (stderr %s)" % p.stderr)
    check_eq(os.listdir(home), [], "files in the user's HOME")


# --- a setuid binary in the tree (item 12) ---------------------------------

def test_sudo_setuid_binary_runs_as_invoker(pub):
    """A setuid-root copy of a program in the tracked tree runs as the
    invoker (no new privileges on exec), its euid nobody's."""
    exe = pub / "whoami"
    shutil.copy(fixture("whoami"), exe)
    os.chown(exe, 0, 0)
    os.chmod(exe, 0o4755)
    out = users_dir(pub) / "run.mtrk"
    p = run_env([MEMTRACK, "track", "-q", "-o", out, "--", exe], sudo_env())
    require_eq(p.returncode, 0, "memtrack exit status (stderr %s)" % p.stderr)
    ids = kv_lines(p.stdout)
    check_eq((ids.get("uid"), ids.get("euid")), (NOBODY.pw_uid, NOBODY.pw_uid),
             "the setuid program's uid and euid")
    # without memtrack the bit works on this file system: the test means something
    q = run_env([exe], root_env(), timeout=10)
    check_eq(kv_lines(q.stdout).get("euid"), 0, "euid of the setuid copy run by root")


# --- the control socket's deadline -----------------------------------------

def listening(pid, sock):
    """Whether process @pid listens on the unix socket @sock: one of its fds
    is a socket that /proc/net/unix says is listening (__SO_ACCEPTCON),
    bound (relative to its directory) under the temporary name memtrack
    renames to @sock once it listens.  A probing connect would take the
    one client slot."""
    try:
        fds = {os.readlink("/proc/%d/fd/%s" % (pid, fd)) for fd in os.listdir("/proc/%d/fd" % pid)}
    except OSError:
        return False
    with open("/proc/net/unix") as f:
        next(f)
        return any(len(w) >= 8 and int(w[3], 16) & 0x10000 and "socket:[%s]" % w[6] in fds
                   and re.fullmatch(r"\.memtrack-[0-9a-f]{8}", os.path.basename(w[7]))
                   for w in (line.split() for line in f))


def start_with_control(tmp):
    """memtrack --control on sleep 30, once @sock exists: the name appears
    only when memtrack listens on it (no connect() refused in between)."""
    sock = Path(tmp) / "c.sock"
    p = subprocess.Popen([MEMTRACK, "track", "-q", "-o", Path(tmp) / "out.mtrk", "--control", sock,
                          "--", "sleep", "30"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True)
    try:
        wait_until(lambda: sock.exists() or p.poll() is not None,
                   "memtrack's control socket %s" % sock, timeout=30, interval=0.001)
    except Failure:
        os.killpg(p.pid, signal.SIGKILL)
        raise Failure("memtrack made no control socket in 30 s: %s" % p.communicate()[1])
    if p.poll() is not None:
        raise Failure("memtrack exited %s before listening on %s: %s" % (p.returncode, sock, p.communicate()[1]))
    require(listening(p.pid, sock), "memtrack listens on %s the moment it exists" % sock)
    return p, sock


def stop(p):
    p.send_signal(signal.SIGTERM)
    try:
        return p.communicate(timeout=20)[1]
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        return p.communicate()[1]


def test_control_silent_client_loses_the_slot(tmp):
    """A client that connects and never sends a complete line holds the one
    client slot for 3 s, not for good: then another client is served.  The
    test waits for memtrack's word to the silent client (3 s at the
    earliest; on a loaded machine later) instead of sleeping past it."""
    p, sock = start_with_control(tmp)
    try:
        t0 = time.monotonic()
        silent = ControlClient(sock, timeout=30)
        early = ControlClient(sock)
        early.send(b"ping\n")
        check_eq(early.answer().startswith("error busy"), True, "a second client at once: busy")
        early.close()
        check_eq(silent.answer(), "error no complete line within 3 s; disconnecting\n",
                 "what the silent client was told")
        took = time.monotonic() - t0
        check_true(took >= 3.0, "the silent client kept the slot for 3 s (told after %.2f s)" % took)
        check_eq(silent.answer(), "", "then the silent client's connection is closed")
        other = ControlClient(sock)
        other.send(b"ping\n")
        check_eq(other.answer(), "ok\n", "another client once the silent one was disconnected")
        other.close()
        silent.close()
    finally:
        err = stop(p)
    check_true("memtrack: control: the client sent no complete line within 3 s; disconnected it"
               in err, "memtrack's notice: %r" % err)


def test_control_answered_client_may_idle(tmp):
    """A client that has been answered may stay connected idle (a program
    opens the socket early); a line it starts must end within 3 s.  (The
    3.5 s idle is the scenario, not a wait for memtrack; the unfinished
    line's answer is waited for, 3 s at the earliest.)"""
    p, sock = start_with_control(tmp)
    try:
        c = ControlClient(sock, timeout=30)
        c.send(b"ping\n")
        check_eq(c.answer(), "ok\n", "first ping")
        time.sleep(3.5)
        c.send(b"ping\n")
        check_eq(c.answer(), "ok\n", "a ping after 3.5 s idle")
        t0 = time.monotonic()
        c.send(b"pi")
        check_eq(c.answer(), "error no complete line within 3 s; disconnecting\n",
                 "a line left unfinished")
        took = time.monotonic() - t0
        check_true(took >= 3.0, "the unfinished line was given 3 s (answered after %.2f s)" % took)
        c.close()
    finally:
        stop(p)


def test_control_library_opened_early_still_works(tmp):
    """libmemtrack-ctl answers the deadline: a program that opens the socket
    at its start and sends its first command 4 s later is served (the
    library pings on open)."""
    out = Path(tmp) / "late.mtrk"
    p = run_env([MEMTRACK, "track", "-q", "-o", out, "--control", Path(tmp) / "c.sock", "--",
                 fixture("ctl_late"), "4"], root_env())
    require_eq(p.returncode, 0, "memtrack exit status (stderr %s)" % p.stderr)
    d = run_env([MEMTRACK, "dump", out], root_env())
    marks = [line for line in d.stdout.splitlines() if '"type":"mark"' in line]
    check_eq(len(marks), 1, "mark records")
    check_true(marks and '"name":"late"' in marks[0], "the mark is named late: %r" % marks)
