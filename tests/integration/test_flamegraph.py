# SPDX-License-Identifier: MIT
"""memtrack flamegraph: folded stacks of the callsites fixture per metric,
exactly; the SVG rendered by headless Chromium (not blank, its frames named,
the root at the top, or at the bottom with --flame, as tall as its levels,
zoom and search working); a run without stacks refused; usage errors."""
import re
import subprocess

from mtlib import MEMTRACK, check_eq, check_true, require, run
from callsites import memtrack, own_cache, tracked
from test_timeline import browse, read_png

ROOT = "_start;__libc_start_main;__libc_start_call_main;main"


def folded(tmp, *args):
    return memtrack("flamegraph", tracked().artifact.path, "--folded", *args).stdout


def test_flamegraph_folded(tmp):
    """One line per distinct path, outermost first, the metric's value last."""
    own_cache(tmp)
    check_eq(folded(tmp).splitlines(), [ROOT + ";a;b 12000", ROOT + ";c 200"], "peak (default)")
    check_eq(folded(tmp, "--metric", "allocations").splitlines(),
             [ROOT + ";a;b 3", ROOT + ";c 100", ROOT + ";d 1"], "allocations")
    check_eq(folded(tmp, "--metric=allocated").splitlines(),
             [ROOT + ";a;b 12000", ROOT + ";c 20000", ROOT + ";d 777"], "allocated")
    check_eq(folded(tmp, "--metric", "leaked").splitlines(), [ROOT + ";d 777"], "leaked")
    out = tmp / "out.folded"
    memtrack("flamegraph", tracked().artifact.path, "--folded", "-o", out)
    check_eq(out.read_text(), folded(tmp), "-o writes what stdout shows")


def test_flamegraph_svg_chromium(tmp):
    """The SVG in headless Chromium: frames drawn, named, self-contained;
    its script zooms into a frame and highlights a search."""
    own_cache(tmp)
    svg = tmp / "fg.svg"
    p = memtrack("flamegraph", tracked().artifact.path, "-o", svg)
    check_eq(p.stderr, "memtrack: wrote %s\n" % svg, "flamegraph -o says what it wrote")
    text = svg.read_text()
    # 7 levels (all, _start, 2 of libc, main, a, b) of 16 px, 44 above, 20 below
    check_eq(re.search(r'<svg [^>]*height="(\d+)"', text).group(1), "176", "the SVG's height")
    check_true(not re.search(r'(src|href)\s*=\s*"(https?:|//)', text), "no external resource")
    check_eq(sorted(set(re.findall(r'data-n="([^"]*)"', text))),
             sorted(["all", "_start", "__libc_start_main", "__libc_start_call_main", "main", "a", "b", "c"]),
             "frames of the peak graph")
    shot = tmp / "fg.png"
    b = browse(tmp, svg.as_uri(), "--screenshot=%s" % shot)
    require(shot.exists(), "chromium wrote no screenshot: " + b.describe())
    w, h, rows = read_png(shot)
    # frames are warm colours: red high, blue low
    warm = sum(1 for row in rows for px in row if px[0] > 190 and px[2] < 80)
    # 7 levels of 1180x15 px for the 12000-byte path alone
    check_true(warm >= 6 * 1100 * 12, "warm frame pixels: %d" % warm)
    # an icicle: the root ("all", grey) is the row under the title, main's callees below
    check_eq(grey_rows(rows), list(range(44, 59)), "rows of the root frame (icicle)")
    # after the script ran: labels fitted; zooming into c makes it the full width
    dom = browse(tmp, svg.as_uri(), "--dump-dom").stdout
    check_true(re.search(r'data-n="b"[^>]*>.*?<text[^>]*>b</text>', dom, re.S),
               "b labelled after layout")
    # the same SVG with a probe that clicks c and searches once the page's own script ran
    probe = ("<script type='text/ecmascript'><![CDATA[\n"
             "window.addEventListener('load',function(){"
             "var f=function(n){return [].slice.call(document.querySelectorAll('g.f'))"
             ".filter(function(g){return g.getAttribute('data-n')==n;})[0];};"
             "var c=f('c');c.dispatchEvent(new MouseEvent('click'));search('^[ab]$');"
             "document.documentElement.setAttribute('data-result','width='+"
             "c.querySelector('rect').getAttribute('width')+' bshown='+(f('b').style.display!='none')+"
             "' info='+document.getElementById('info').textContent);});\n]]></script></svg>")
    zoom = tmp / "zoom.svg"
    zoom.write_text(text.replace("</svg>", probe))
    dom = browse(tmp, zoom.as_uri(), "--dump-dom").stdout
    result = re.search(r'data-result="([^"]*)"', dom)
    check_eq(result and result.group(1), "width=1180 bshown=false info=Matched: 98.36% (2 frames)",
             "after a click on c and a search for a or b")


def grey_rows(rows):
    """The screenshot rows in which the root frame's grey spans the graph."""
    return [y for y, row in enumerate(rows)
            if sum(1 for px in row[20:1180] if px == (200, 200, 200)) > 1100]


def test_flamegraph_classic(tmp):
    """--flame: the classic orientation, the root at the bottom of a picture
    as tall as before."""
    own_cache(tmp)
    svg = tmp / "flame.svg"
    memtrack("flamegraph", tracked().artifact.path, "--flame", "-o", svg)
    shot = tmp / "flame.png"
    b = browse(tmp, svg.as_uri(), "--screenshot=%s" % shot)
    require(shot.exists(), "chromium wrote no screenshot: " + b.describe())
    _, _, rows = read_png(shot)
    # 176 px tall: the root's row is 20 + 16 px above its bottom (y 140, 15 px high)
    check_eq(grey_rows(rows), list(range(140, 155)), "rows of the root frame (flame)")


def test_flamegraph_refuses_without_stacks(tmp):
    """No stacks, no graph: exit 1, no file, and the option that records them
    for the command that made the file."""
    path, out = tracked(stacks=False).artifact.path, tmp / "x.svg"
    for args in (["-o", out], ["--folded"]):
        p = memtrack("flamegraph", path, *args, rc=1)
        check_eq((p.stdout, p.stderr),
                 ("", "memtrack: '%s' has no call stacks: it was recorded with track --no-stacks; "
                  "record again without --no-stacks (stacks are track's default)\n" % path),
                 "flamegraph %s of a --no-stacks run" % args)
    check_true(not out.exists(), "no SVG written")
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        att = tmp / "att.mtrk"
        p = run([MEMTRACK, "attach", "--duration", "0.3", "-o", att, sleeper.pid])
        require(p.rc == 0, "attach: " + p.describe())
    finally:
        sleeper.kill()
        sleeper.wait()
    p = memtrack("flamegraph", att, "-o", out, rc=1)
    check_eq(p.stderr, "memtrack: '%s' has no call stacks: attach records them only with --stacks; "
             "record again with memtrack attach --stacks PID\n" % att, "flamegraph of an attach")
    check_true(not out.exists(), "no SVG written")


def test_flamegraph_usage(tmp):
    path = tracked().artifact.path
    for args, msg in ((["--metric", "rss"], "unknown metric 'rss'"), ([], "no output file"),
                      (["-o"], "-o needs a value")):
        p = memtrack("flamegraph", path, *args, rc=2)
        check_true(msg in p.stderr and p.stderr.count("\n") == 1, "%s: one line with %r: %r" % (args, msg, p.stderr))
