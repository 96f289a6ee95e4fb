# SPDX-License-Identifier: MIT
"""`memtrack report --html/--svg`: the timeline of a real run of heap_grow,
rendered by headless Chromium; the screenshot must show the plotted series
and the peak labels, and the page the exact peak values (the rest of the
--html page: test_report_html.py)."""
import re
import shutil
import struct
import xml.dom.minidom
import zlib
from pathlib import Path

from mtlib import MEMTRACK, check_eq, check_true, fixture, require, require_eq, run, shared_track

# timeline_render.c's geometry: the plot area and the colours drawn in it
PLOT = (90, 60, 90 + 1080, 60 + 460)        # x0, y0, x1, y1
HEAP_RGB = (0xd6, 0x27, 0x28)
RSS_RGB = (0x08, 0x51, 0x9c)
LABEL_RGB = (0xff, 0xe1, 0x4d)              # the peak labels' boxes


def chromium():
    exe = shutil.which("chromium")
    require(exe, "chromium is not installed (scripts/bootstrap.sh installs it)")
    return exe


def browse(tmp, url, *opts):
    """Runs headless Chromium on url; returns the finished Proc."""
    return run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                "--user-data-dir=%s" % (tmp / "chromium-profile"), "--window-size=1220,660"]
               + list(opts) + [url], timeout=120)


def read_png(path):
    """(width, height, rows of (r, g, b) tuples) of an 8-bit RGB/RGBA PNG."""
    data = Path(path).read_bytes()
    require(data[:8] == b"\x89PNG\r\n\x1a\n", "%s is not a PNG" % path)
    at, idat = 8, b""
    while at < len(data):
        n, kind = struct.unpack_from(">I4s", data, at)
        body = data[at + 8:at + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        at += 12 + n
    require(depth == 8 and ctype in (2, 6) and not interlace,
            "PNG depth %d colour type %d interlace %d" % (depth, ctype, interlace))
    bpp = 4 if ctype == 6 else 3
    raw, stride, rows, prev = zlib.decompress(idat), w * bpp, [], bytearray(w * bpp)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x * bpp:x * bpp + 3]) for x in range(w)])
        prev = line
    return w, h, rows


def near(px, rgb, tol=40):
    return sum(abs(p - q) for p, q in zip(px, rgb)) <= tol


def grow():
    return shared_track("grow_2M", [fixture("heap_grow"), "2000000", "1000"])


def test_timeline_svg_screenshot(tmp):
    """The timeline alone (--svg, what report --html's page embeds) drawn at
    its own coordinates: series, areas and the peak labels in the plot."""
    t = grow()
    page = tmp / "timeline.svg"
    p = run([MEMTRACK, "report", t.artifact.path, "--svg", page])
    require_eq((p.rc, p.stderr), (0, "memtrack: wrote %s\n" % page), "report --svg (rc, stderr)")
    shot = tmp / "shot.png"
    b = browse(tmp, page.as_uri(), "--screenshot=%s" % shot)
    require(shot.exists(), "chromium wrote no screenshot: " + b.describe())
    w, h, rows = read_png(shot)
    require(w >= PLOT[2] and h >= PLOT[3], "screenshot %dx%d smaller than the plot" % (w, h))
    x0, y0, x1, y1 = PLOT
    area = [rows[y][x] for y in range(y0 + 1, y1 - 1) for x in range(x0 + 1, x1 - 1)]
    heap_px = sum(1 for px in area if near(px, HEAP_RGB))
    rss_px = sum(1 for px in area if near(px, RSS_RGB))
    label_px = sum(1 for px in area if px == LABEL_RGB)
    # coloured (not white, not the grey of the grid and frame): series and areas
    coloured = sum(1 for px in area if max(px) - min(px) > 30)
    # the heap line climbs to 2 MB and falls back: hundreds of pixels
    check_true(heap_px >= 200, "heap-coloured pixels in the plot area: %d" % heap_px)
    check_true(rss_px >= 200, "RSS-coloured pixels in the plot area: %d" % rss_px)
    check_true(coloured >= 5000, "plot area not empty: %d coloured pixels of %d" % (coloured, len(area)))
    # two labels (heap, RSS) of about 180x19 pixels each
    check_true(label_px >= 2 * 150 * 15, "peak label pixels (#ffe14d): %d" % label_px)


def test_timeline_html_values(tmp):
    """The page after its script ran: peak labels with report's values, and
    the hover values at the heap's peak (page.html#t=SECONDS)."""
    t = grow()
    page = tmp / "timeline.html"
    require_eq(run([MEMTRACK, "report", t.artifact.path, "--html", page]).rc, 0, "report --html")
    rep = t.report
    labels = re.findall(r'<g class="peak-label" data-series="(\w+)" data-bytes="(\d+)" '
                        r'data-ts-ns="(\d+)">.*?<text[^>]*>([^<]*)</text>', page.read_text())
    got = {s: int(v) for s, v, _, _ in labels}
    # memory: heap + mapped (ld.so's and libc's own mappings at least)
    check_eq(got, {"heap": rep["peak_heap_bytes"], "rss": rep["peak_rss_bytes"],
                   "memory": rep["peak_memory_bytes"]}, "peak labels' values")
    check_eq(rep["peak_heap_bytes"], 2000000, "report's peak heap")
    heap = [l for l in labels if l[0] == "heap"]
    require(heap, "no heap peak label")
    secs = int(heap[0][2]) / 1e9
    check_eq(heap[0][3], "peak heap 1.9 MiB at %.3f s" % secs, "heap peak label text")
    b = browse(tmp, page.as_uri() + "#t=%.6f" % secs, "--dump-dom")
    tip = re.search(r'<div id="tip"[^>]*>([^<]*)</div>', b.stdout)
    require(tip, "no tip in the rendered page: " + b.describe())
    # the column's min .. max, or one value when it held one
    check_true(re.search(r"\nheap: (?:[^\n]* \.\. )?1\.9 MiB\n", tip.group(1)),
               "hover at the heap peak shows it: %r" % tip.group(1))
    check_true('style="display: block' in b.stdout, "the tip is shown")


def test_timeline_svg(tmp):
    t = grow()
    out = tmp / "timeline.svg"
    p = run([MEMTRACK, "report", t.artifact.path, "--svg", out, "--per-process", "--json"])
    require_eq((p.rc, p.stderr), (0, "memtrack: wrote %s\n" % out), "report --svg --per-process --json (rc, stderr)")
    doc = xml.dom.minidom.parse(str(out))
    paths = {g.getAttribute("data-series") for g in doc.getElementsByTagName("path")
             if g.getAttribute("class") == "series"}
    child = int(t.stdout.split()[0])
    check_true({"heap", "RSS", "%d heap_grow RSS" % child, "%d heap_grow heap" % child} <= paths,
               "series drawn: %s" % sorted(paths))
    marks = sorted(g.getAttribute("data-kind") for g in doc.getElementsByTagName("g")
                   if g.getAttribute("class") == "mark")
    check_eq(marks, ["exec", "exit", "exit", "fork"], "fork/exec/exit marks")


def test_timeline_usage_errors(tmp):
    t = grow()
    for args, msg in ((["--html"], "--html needs an output file"),
                      (["--per-process"], "--per-process shapes the timeline")):
        p = run([MEMTRACK, "report", t.artifact.path] + args)
        check_eq((p.rc, p.stderr.startswith("memtrack: " + msg), p.stderr.count("\n")),
                 (2, True, 1), "report %s (rc, message, lines): %r" % (args, p.stderr))
    p = run([MEMTRACK, "report", t.artifact.path, "--svg", tmp / "no" / "x.svg"])
    check_eq((p.rc, "cannot write" in p.stderr), (1, True), "unwritable --svg: %r" % p.stderr)
