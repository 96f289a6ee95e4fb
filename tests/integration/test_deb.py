# SPDX-License-Identifier: MIT
"""Issue 24: `make deb` builds build/memtrack_VERSION_ARCH.deb.  Its
Depends name the package of every library the binary and
libmemtrack-fast.so link (as dpkg -S finds them here); unpacked into a
scratch root (dpkg -x) its memtrack runs from there and finds its
libmemtrack-fast.so; its md5sums match; its man page renders cleanly."""
import os
import re
import subprocess

from mtlib import (BUILD, MEMTRACK, REPO, Artifact, check_eq, check_true, fixture, of_type,
                   require, require_eq, run)


def sh(argv, **kw):
    p = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=600, **kw)
    require_eq((p.returncode, p.stderr), (0, ""), "%s (rc, stderr)" % " ".join(map(str, argv)))
    return p.stdout


def kernel_floor():
    """MT_KERNEL_FLOOR: the one definition of the oldest kernel memtrack runs on."""
    text = (REPO / "src/kernel/kernel_features.h").read_text()
    m = re.findall(r'^#define MT_KERNEL_FLOOR "([0-9.]+)"$', text, re.M)
    require(len(m) == 1, "one MT_KERNEL_FLOOR in kernel_features.h: %s" % m)
    return m[0]


def project_vars():
    """The variables of the tree's PROJECT file (make syntax: NAME := value)."""
    out = {}
    for line in (REPO / "PROJECT").read_text().splitlines():
        m = re.match(r"^(\w+)\s*:=\s*(.*)$", line)
        if m:
            out[m.group(1)] = m.group(2).strip()
    return out


def test_kernel_floor_one_source(tmp):
    """Issue 39: README, the man page, the .deb's Description and memtrack
    --version say the kernel floor that kernel_features.h defines (the
    refusal below it prints the same), and nothing says another."""
    floor = kernel_floor()
    p = run([MEMTRACK, "--version"])
    version = p.stdout.split()[1]
    check_eq(p.stdout, "memtrack %s (needs Linux %s or newer with BTF, and root or CAP_BPF and "
             "CAP_PERFMON)\n" % (version, floor), "--version: the version and the requirements")
    newer = re.compile(r"(?:Linux|\*\*)\s+(\d+\.\d+) or newer")
    readme = (REPO / "README.md").read_text()
    found = newer.findall(readme)
    check_true(len(found) >= 2 and set(found) == {floor},
               "README's 'Linux X or newer': %s (floor %s)" % (found, floor))
    for path in ("docs/memtrack.1.scd", "scripts/deb/control.in"):
        text = (REPO / path).read_text()
        check_eq(newer.findall(text), [], "%s hard-codes no kernel version" % path)
        check_true("Linux @KERNEL_FLOOR@ or newer" in text, "%s takes the floor" % path)
    man = run(["env", "MANWIDTH=200", "man", "-l", BUILD / "memtrack.1"]).stdout
    req = man[man.index("REQUIREMENTS"):man.index("EXAMPLES")]
    check_true(("Linux %s or newer with BTF" % floor) in " ".join(req.split()),
               "the man page's REQUIREMENTS: %r" % req)


def build_deb():
    version = run([MEMTRACK, "--version"]).stdout.split()[1]
    arch = sh(["dpkg", "--print-architecture"]).strip()
    sh(["make", "-s", "--no-print-directory", "-C", REPO, "OUT=%s" % BUILD, "deb"])
    deb = BUILD / ("memtrack_%s_%s.deb" % (version, arch))
    require(deb.exists(), "make deb made %s" % deb)
    return deb, version, arch


def package_of_needed(elf):
    """The Debian packages of the libraries @elf links directly."""
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.*?)\]", sh(["readelf", "-d", elf]))
    paths = dict(re.findall(r"^\s*(\S+) => (\S+)", sh(["ldd", elf]), re.M))
    pkgs = set()
    for soname in needed:
        require(soname in paths, "ldd resolves %s of %s" % (soname, elf))
        real = os.path.realpath(paths[soname])
        out = subprocess.run(["dpkg", "-S", real], capture_output=True, text=True).stdout
        if not out:  # dpkg knows the /lib path of a merged-/usr file
            out = sh(["dpkg", "-S", real.replace("/usr/lib/", "/lib/", 1)])
        pkgs.add(out.split(":")[0])
    return pkgs


def test_deb_contents_depends_and_scratch_root(tmp):
    deb, version, arch = build_deb()
    fields = {f: sh(["dpkg-deb", "-f", deb, f]).strip()
              for f in ("Package", "Version", "Architecture", "Maintainer", "Depends")}
    check_eq((fields["Package"], fields["Version"], fields["Architecture"]),
             ("memtrack", version, arch), "Package, Version, Architecture")
    project = project_vars()
    check_eq(fields["Maintainer"], "%s maintainers <%s>" % (project["PROJECT_NAME"],
                                                            project["PROJECT_CONTACT"]),
             "Maintainer: PROJECT's name and contact")
    description = sh(["dpkg-deb", "-f", deb, "Description"])
    check_true(" memtrack needs Linux %s or newer with BTF" % kernel_floor() in description,
               "the Description names the kernel floor: %r" % description)
    depends = {d.split()[0] for d in fields["Depends"].split(", ")}
    expected = package_of_needed(BUILD / "memtrack") | package_of_needed(
        BUILD / "libmemtrack-fast.so")
    check_eq(sorted(depends), sorted(expected), "Depends: the packages of the linked libraries")

    multiarch = sh(["dpkg-architecture", "-qDEB_HOST_MULTIARCH"]).strip()
    files = sorted(line.split()[-1][2:] for line in sh(["dpkg-deb", "-c", deb]).splitlines()
                   if not line.endswith("/"))
    check_eq(files, sorted([
        "usr/bin/memtrack", "usr/include/memtrack-ctl.h",
        "usr/lib/memtrack/libmemtrack-fast.so",
        "usr/lib/%s/libmemtrack-ctl.a" % multiarch,
        "usr/lib/%s/pkgconfig/memtrack-ctl.pc" % multiarch,
        "usr/lib/systemd/system/memtrack.service", "usr/lib/systemd/system/memtrack.socket",
        "usr/share/bash-completion/completions/memtrack", "usr/share/man/man1/memtrack.1.gz",
        "usr/share/doc/memtrack/copyright", "usr/share/doc/memtrack/changelog.gz",
    ] + ["usr/share/doc/memtrack/%s.md.gz" % d
         for d in ("README", "FORMAT", "METRICS", "CONTROL", "DESIGN")]), "files of the package")
    owners = {tuple(line.split()[1].split("/")) for line in sh(["dpkg-deb", "-c", deb]).splitlines()}
    check_eq(owners, {("root", "root")}, "owners of the package's files")

    root, ctl = tmp / "root", tmp / "DEBIAN"
    sh(["dpkg", "-x", deb, root])
    sh(["dpkg-deb", "-e", deb, ctl])
    sh(["md5sum", "--quiet", "-c", ctl / "md5sums"], cwd=root)
    pc = (root / ("usr/lib/%s/pkgconfig/memtrack-ctl.pc" % multiarch)).read_text().splitlines()
    check_eq(pc[:3], ["prefix=/usr", "includedir=${prefix}/include",
                      "libdir=${prefix}/lib/%s" % multiarch], "the .pc's directories")
    p = run(["env", "MANWIDTH=80", "man", "--warnings", "-l", root / "usr/share/man/man1/memtrack.1.gz"])
    check_eq((p.rc, p.stderr, "memtrack help" in p.stdout), (0, "", True), "man -l the page")

    memtrack = str(root / "usr/bin/memtrack")
    p = run([memtrack, "--version"])
    check_eq((p.rc, p.stdout.split()[:2], p.stderr), (0, ["memtrack", version], ""),
             "--version from the root")
    # --fast needs root/usr/lib/memtrack/libmemtrack-fast.so, found from the binary's place
    out = tmp / "x.mtrk"
    p = run([memtrack, "track", "--fast", "-q", "-o", out, "--", fixture("heap_pairs")])
    require_eq((p.rc, p.stderr), (0, ""), "the package's memtrack track --fast (rc, stderr)")
    art = Artifact(out)
    check_eq([q["heap_path"] for q in art.report["processes"]], ["in-process"], "heap_path")
    check_eq(len([e for e in of_type(art.events, "malloc") if e["size"] == 4099]), 3,
             "mallocs of 4099 bytes")
