# SPDX-License-Identifier: MIT
"""memtrack run through sudo: the command runs as the invoking user.

sudo itself is not needed: memtrack reads SUDO_UID/SUDO_GID (as sudo sets
them) when it runs as root, so the test sets them to nobody's ids.
"""
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

from mtlib import MEMTRACK, check_eq, fixture, kv_lines, require_eq


def test_sudo_runs_command_as_invoker(tmp):
    nobody = pwd.getpwnam("nobody")
    # a directory and binary nobody can reach, wherever the checkout lives; the
    # directory is nobody's: the artifact is made by nobody, so only where nobody may write
    pub = Path(tempfile.mkdtemp(prefix="mt-sudo-"))
    try:
        os.chmod(pub, 0o755)
        os.chown(pub, nobody.pw_uid, nobody.pw_gid)
        exe = pub / "whoami"
        shutil.copy(fixture("whoami"), exe)
        os.chmod(exe, 0o755)
        out = pub / "run.mtrk"
        env = dict(os.environ, SUDO_UID=str(nobody.pw_uid), SUDO_GID=str(nobody.pw_gid),
                   SUDO_USER="nobody")
        p = run_env([MEMTRACK, "track", "-q", "-o", str(out), "--", str(exe)], env)
        require_eq(p.returncode, 0, "memtrack exit status (stderr %s)" % p.stderr)
        ids = kv_lines(p.stdout)
        check_eq(ids.get("uid"), nobody.pw_uid, "the command's uid")
        check_eq(ids.get("gid"), nobody.pw_gid, "the command's gid")
        check_eq(out.stat().st_uid, nobody.pw_uid, "the artifact's owner")
        check_eq(out.stat().st_gid, nobody.pw_gid, "the artifact's group")
    finally:
        shutil.rmtree(pub, ignore_errors=True)


def run_env(argv, env):
    return subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=60)
