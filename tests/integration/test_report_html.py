# SPDX-License-Identifier: MIT
"""`memtrack report --html`: the whole report in one page, opened in headless
Chromium at 1400x900 (browser.py: the DevTools protocol).  The page loads
with no console message; each section holds the run's exact values (read
from the DOM after the page's script ran); a screenshot of each section,
scrolled to, shows it drawn, and the first one, without scrolling, the peak
and the top call site."""
import re

from mtlib import MEMTRACK, check_eq, check_true, fixture, require, require_eq, run, shared_track
from browser import Browser
from callsites import own_cache, tracked
from test_timeline import read_png

W, H = 1400, 900
LABEL_RGB = (0xff, 0xe1, 0x4d)    # the timeline's peak labels
TOPSITE_RGB = (0xff, 0xf7, 0xe0)  # the top-site banner of the summary
TH_RGB = (0xf0, 0xf2, 0xf7)       # a table's header row


def page_of(tmp, art, name="report.html"):
    page = tmp / name
    p = run([MEMTRACK, "report", art, "--html", page])
    require_eq((p.rc, p.stderr), (0, "memtrack: wrote %s\n" % page), "report --html (rc, stderr)")
    return page


def opened(tmp, page):
    """A Browser with @page open at 1400x900, its console checked at the end."""
    b = Browser(tmp)
    b.open(page.as_uri(), W, H)
    return b


def rows(b, table):
    """The cells of @table's body rows: [[data-v or None, text], ...] each."""
    return b.eval("[].map.call(document.querySelectorAll('#%s tbody tr.row'),function(tr){"
                  "return [].map.call(tr.cells,function(td){"
                  "return [td.getAttribute('data-v'),td.textContent];});})" % table)


def shot(b, tmp, section):
    """A screenshot of the viewport scrolled to @section (None: the top)."""
    if section:
        b.eval("document.getElementById('%s').scrollIntoView()" % section)
    png = tmp / ("%s.png" % (section or "first"))
    b.screenshot(png)
    w, h, px = read_png(png)
    require_eq((w, h), (W, H), "screenshot size")
    return px


def hover(b, js_point):
    """Moves the mouse to the viewport point [x, y] that @js_point computes
    (after its own scrolling), as a person would."""
    x, y = b.eval(js_point)
    b.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y})


def pixels(px, pred, y0=0, y1=H):
    return sum(1 for y in range(y0, y1) for p in px[y] if pred(p))


FRAMES = ("[].map.call(document.querySelectorAll('#flame-svg g.fr'),function(g){"
          "return [g.getAttribute('data-n'),g.getAttribute('data-v')];})")


def frame_rect(name, attr):
    return ("[].filter.call(document.querySelectorAll('#flame-svg g.fr'),function(g){"
            "return g.getAttribute('data-n')=='%s';}).map(function(g){"
            "return g.querySelector('rect').getAttribute('%s');})" % (name, attr))


def test_report_html_callsites(tmp):
    """The callsites fixture (tests/fixtures/callsites.c): its three sites,
    its leak, its process and its flame graph, exactly; the flame graph's
    controls (metric, zoom, search, orientation)."""
    own_cache(tmp)
    t = tracked()
    rep = t.report
    page = page_of(tmp, t.artifact.path)
    html = page.read_text()
    check_true(not re.search(r'(src|href)\s*=\s*"(https?:|//)', html) and "<link" not in html,
               "self-contained: no external script, style or link")
    with opened(tmp, page) as b:
        cards = dict(b.eval("[].map.call(document.querySelectorAll('.card .value'),function(v){"
                            "return [v.getAttribute('data-key'),v.getAttribute('data-v')];})"))
        check_eq(cards, {"peak_heap_bytes": "12200", "peak_rss_bytes": str(rep["peak_rss_bytes"]),
                         "peak_memory_bytes": str(rep["peak_memory_bytes"]), "alloc_count": "104",
                         "leaked_bytes": "777", "processes": "1", "temporary_count": "100"},
                 "summary cards")
        check_eq(b.eval("document.getElementById('topsite-fn').textContent"), "b", "top site")
        check_eq(b.eval("document.getElementById('topsite-bytes').getAttribute('data-v')"), "12000",
                 "top site's bytes at the peak")
        sites = [r for r in rows(b, "sites-table") if r[0][1] in ("b", "c", "d")]
        # function, location, peak, allocations, allocated, leaked, by peak
        check_eq([(r[0][1], r[1][1], r[2][0], r[4][0], r[6][0], r[7][0]) for r in sites],
                 [("b", "callsites.c:20", "12000", "3", "12000", "0"),
                  ("c", "callsites.c:31", "200", "100", "20000", "0"),
                  ("d", "callsites.c:38", "0", "1", "777", "777")], "the fixture's sites, by peak")
        b.eval("document.querySelector('#sites-table th[data-key=allocs]').click()")
        check_eq(rows(b, "sites-table")[0][0][1], "c", "sorted by allocations: c first")
        b.eval("document.querySelector('#sites-table tbody tr.row').click()")
        check_eq(b.eval("[].map.call(document.querySelectorAll('#sites-table tr.stack .frames > div'),"
                        "function(d){return d.firstChild.textContent;}).slice(0,3)"),
                 ["c", "main", "__libc_start_call_main"], "c's stack, opened by a click")
        fns = [r for r in rows(b, "functions-table") if r[0][1] in ("b", "c", "d")]
        # function, location, peak, allocations, temporary, allocated, leaked, stacks
        check_eq([[c[0] if c[0] is not None else c[1] for c in r[:8]] + [r[8][0]] for r in fns],
                 [["b", "callsites.c", "12000", "12000", "3", "0", "12000", "0", "1"],
                  ["c", "callsites.c", "200", "200", "100", "100", "20000", "0", "1"],
                  ["d", "callsites.c", "0", "0", "1", "0", "777", "777", "1"]],
                 "the fixture's functions, by peak")
        b.eval("document.querySelector('#functions-table tbody tr.row').click()")
        check_eq(b.eval("[].map.call(document.querySelectorAll('#functions-table table.callers tr'),"
                        "function(tr){return tr.cells[0].textContent;})"), ["a"], "b's caller")
        check_eq([(r[0][1], r[2][0], r[3][0], r[4][1]) for r in rows(b, "temporary-table")],
                 [("c", "100", "100", "100.0%")], "temporary allocations by function")
        check_eq([(r[0][1], r[1][0], r[3][0]) for r in rows(b, "sizes-table")],
                 [("128 B \u2013 <256 B", "100", "20000"), ("512 B \u2013 <1.0 KiB", "1", "777"),
                  ("2.0 KiB \u2013 <4.0 KiB", "3", "12000")], "allocation sizes")
        leaks = rows(b, "leaks-table")
        check_eq([(r[0][1], r[2][0], r[3][0]) for r in leaks], [("d", "777", "1")], "leaks table")
        check_true(leaks and 0 < int(leaks[0][4][0]) < rep["duration_ns"],
                   "the leak's age is within the run: %s" % leaks)
        p0 = rep["processes"][0]
        check_eq([(r[0][0], r[2][1], r[3][0], r[5][0], r[7][0], r[8][0])
                  for r in rows(b, "processes-table")],
                 [(str(p0["pid"]), "callsites", "104", "12200", str(p0["peak_rss_bytes"]), "777")],
                 "processes table")
        check_eq(dict(b.eval(FRAMES)), {
            "all": "12200", "_start": "12200", "__libc_start_main": "12200",
            "__libc_start_call_main": "12200", "main": "12200", "a": "12000", "b": "12000",
            "c": "200"}, "flame graph frames (peak)")
        check_eq(b.eval(frame_rect("all", "y")), ["0"], "the root at the top")
        width = b.eval("document.getElementById('flame-svg').viewBox.baseVal.width")
        b.eval("mtFlame.metric('allocations')")
        fr = dict(b.eval(FRAMES))
        check_eq((fr.get("all"), fr.get("c"), fr.get("d")), ("104", "100", "1"), "allocations")
        b.eval("mtFlame.zoom('c')")
        check_eq((b.eval(frame_rect("c", "width")), b.eval(frame_rect("b", "width"))),
                 (["%g" % (width - 0.5)], []), "zoomed into c: full width, b not drawn")
        b.eval("mtFlame.search('main')")
        check_eq(b.eval("document.getElementById('flame-matched').textContent"), "Matched: 100.0%",
                 "a search for main")
        b.eval("mtFlame.flip()")
        # zoomed into c: all, _start, 2 of libc, main, c: 6 levels of 17 px
        check_eq(b.eval(frame_rect("all", "y")), [str(5 * 17)], "root at the bottom after a flip")
        check_eq(b.console, [], "console messages")


def test_report_html_hover(tmp):
    """The mouse over the timeline at the heap's peak shows the heap there;
    over a flame graph frame, its value and share."""
    own_cache(tmp)
    t = tracked()
    page = page_of(tmp, t.artifact.path)
    with opened(tmp, page) as b:
        hover(b, "(function(){var s=document.getElementById('timeline');s.scrollIntoView();"
              "var ts=+document.querySelector('.peak-label[data-series=heap]').getAttribute('data-ts-ns');"
              "var c=Math.floor(ts/MT.span_ns*MT.w),r=s.getBoundingClientRect(),k=MT.width/r.width;"
              # a whole pixel whose column (the page's own mapping) is c
              "for(var x=Math.floor(r.left+(MT.x0+c)/k);Math.floor((x-r.left)*k-MT.x0)<c;x++);"
              "return [x,Math.round(r.top+r.height/2)];})()")
        tip = b.eval("document.getElementById('tip').textContent")
        check_true(b.eval("document.getElementById('tip').style.display") == "block" and
                   re.search(r"\nheap: (?:[^\n]* \.\. )?11\.9 KiB\n", tip),
                   "the timeline's readout at the heap peak: %r" % tip)
        hover(b, "(function(){var g=[].filter.call(document.querySelectorAll('#flame-svg g.fr'),"
              "function(g){return g.getAttribute('data-n')=='b';})[0];g.scrollIntoView({block:'center'});"
              "var r=g.getBoundingClientRect();return [r.left+r.width/2,r.top+r.height/2];})()")
        check_eq((b.eval("document.getElementById('ftip').textContent"),
                  b.eval("document.getElementById('flame-info').textContent")),
                 ("b: 11.7 KiB (98.4% of heap at the peak)",) * 2, "the flame graph's readout over b")
        check_eq(b.console, [], "console messages")


def marked_run():
    """sh runs the callsites fixture twice, with a mark between (control socket)."""
    import tempfile
    sock = tempfile.mktemp(prefix="mt-html-", suffix=".sock")
    cs = fixture("callsites")
    return shared_track("html-marked", "%s; %s ctl %s mark between; %s" % (cs, MEMTRACK, sock, cs),
                        ["--control", sock])


def test_report_html_sections_screenshots(tmp):
    """A run of several processes with a mark: the first screen shows the
    peak labels and the top site; each section, scrolled to, shows its
    content; the timeline's marks and the processes are the run's."""
    own_cache(tmp)
    t = marked_run()
    rep, evs = t.report, t.events
    page = page_of(tmp, t.artifact.path)
    with opened(tmp, page) as b:
        check_eq(b.eval("[].map.call(document.querySelectorAll('g.mark[data-kind=mark]'),"
                        "function(g){return g.getAttribute('data-name');})"), ["between"],
                 "the named mark on the timeline")
        want = {"fork": sum(1 for e in evs if e["type"] == "fork" and not e.get("thread")),
                "exec": sum(1 for e in evs if e["type"] == "exec"),
                "exit": sum(1 for e in evs if e["type"] == "exit")}
        got = b.eval("[].map.call(document.querySelectorAll('g.mark'),function(g){"
                     "return g.getAttribute('data-kind');})")
        check_eq({k: got.count(k) for k in want}, want, "fork/exec/exit marks: the dump's")
        procs = rows(b, "processes-table")
        key = sorted(rep["processes"], key=lambda p: -p["peak_rss_bytes"])
        check_eq([(int(r[0][0]), r[2][1]) for r in procs], [(p["pid"], p["command"]) for p in key],
                 "processes sorted by peak RSS, largest first")

        # the peak labels and the top function lie inside the first 1400x900 screen
        check_eq(b.eval("[].concat([].map.call(document.querySelectorAll('.peak-label rect'),function(e){"
                        "return e;}),[document.getElementById('topsite')]).map(function(e){"
                        "var r=e.getBoundingClientRect();"
                        "return r.top>=0&&r.bottom<=innerHeight&&r.left>=0&&r.right<=innerWidth;})"),
                 [True] * 4, "peak labels (heap, RSS, memory) and the top site without scrolling")
        px = shot(b, tmp, None)
        # peak labels (about 180x19 px each) and the top-site banner, without scrolling
        check_true(pixels(px, lambda p: p == LABEL_RGB) >= 3 * 150 * 15, "peak labels on the first screen")
        check_true(pixels(px, lambda p: p == TOPSITE_RGB) >= 1000 * 20, "top-site banner on the first screen")
        px = shot(b, tmp, "sites")
        check_true(pixels(px, lambda p: p == TH_RGB, 0, 200) >= 1000 * 15, "sites: table header at the top")
        check_true(pixels(px, lambda p: abs(p[0] - 0xf2) < 12 and abs(p[1] - 0xa4) < 20 and
                          abs(p[2] - 0x79) < 20) >= 50 * 6, "sites: the peak bars")
        px = shot(b, tmp, "flame")
        warm = pixels(px, lambda p: p[0] > 190 and p[2] < 80 and p[1] < 235)
        check_true(warm >= 5 * 1100 * 12, "flame: frames drawn (%d warm pixels)" % warm)
        for section in ("functions", "leaks", "temporary", "sizes", "processes"):
            px = shot(b, tmp, section)
            check_true(pixels(px, lambda p: p == TH_RGB, 0, 200) >= 1000 * 15,
                       "%s: table header at the top" % section)
        check_eq(b.console, [], "console messages")


def section_text(b, sec):
    return b.eval("document.getElementById('%s').textContent" % sec)


def test_report_html_without_stacks(tmp):
    """No stacks: the sites, flame graph and leaks sections say how to record
    them; the rest is there."""
    page = page_of(tmp, tracked(stacks=False).artifact.path)
    with opened(tmp, page) as b:
        for sec in ("sites", "flame", "leaks"):
            check_true("recorded without call stacks: memtrack track records them by default "
                       "(not with --no-stacks), memtrack attach with --stacks" in section_text(b, sec),
                       "%s says how to record stacks" % sec)
        check_true(section_text(b, "summary").find("Recorded without call stacks") >= 0, "summary")
        check_eq(len(rows(b, "processes-table")), 1, "the process table")
        check_eq(b.console, [], "console messages")


def test_report_html_hostile_names(tmp):
    """A command line with markup is text on the page, never markup."""
    bad = "</script><script>document.title='pwned'</script><b>x"
    t = shared_track("html-hostile", [fixture("callsites"), bad], ["--no-stacks"])
    page = page_of(tmp, t.artifact.path)
    with opened(tmp, page) as b:
        check_true(b.eval("document.title").endswith(bad), "the title names the command as text")
        check_eq(b.eval("document.getElementById('cmd').textContent").endswith(bad), True,
                 "the header shows it as text")
        check_eq(b.eval("document.querySelectorAll('main b, header b').length"), 0, "no element made of it")
        check_eq(b.console, [], "console messages")
