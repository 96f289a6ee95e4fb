# SPDX-License-Identifier: MIT
"""browser.py - headless Chromium driven through the DevTools protocol over
its pipe (--remote-debugging-pipe: JSON messages separated by NUL bytes on
fds 3 and 4), with the standard library only.  What the tests of report
--html need: open a page at a viewport size, collect every console message
and uncaught exception, evaluate script in it, scroll, and take screenshots
of what a person sees (--screenshot alone cannot scroll: it draws a
scrolled page blank).

    with Browser(tmp) as b:
        b.open(page.as_uri(), 1400, 900)
        b.eval("document.title")
        b.screenshot(tmp / "shot.png")
        b.console          # ["error: Uncaught ReferenceError: ...", ...]
"""
import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import time

from mtlib import Failure, require


class Browser:
    def __init__(self, tmp, timeout=60):
        exe = shutil.which("chromium")
        require(exe, "chromium is not installed (scripts/bootstrap.sh installs it)")
        self.timeout = timeout
        self.console = []     # console messages and exceptions, "LEVEL: TEXT"
        self._events = []
        self._id = 0
        self._buf = b""
        cmd_r, self._cmd_w = os.pipe()
        self._resp_r, resp_w = os.pipe()
        # the child's ends moved above 4, so that putting them on 3 and 4 overwrites neither
        cmd_r, resp_w = [self._above4(fd) for fd in (cmd_r, resp_w)]

        # the browser reads commands on fd 3 and answers on fd 4: bash (dash takes
        # one-digit fds only) puts
        # the pipes there (subprocess closes what pass_fds does not name)
        self.proc = subprocess.Popen(
            ["bash", "-c", 'exec "$0" "$@" 3<&%d 4>&%d %d<&- %d>&-' % (cmd_r, resp_w, cmd_r, resp_w),
             exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--remote-debugging-pipe", "--user-data-dir=%s" % (tmp / "chromium-profile"),
             "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            pass_fds=(cmd_r, resp_w), start_new_session=True)
        os.close(cmd_r)
        os.close(resp_w)
        self.session = None

    @staticmethod
    def _above4(fd):
        high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(fd)
        return high

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        os.close(self._cmd_w)
        os.close(self._resp_r)

    def _read(self, deadline):
        """The next message from the browser."""
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._resp_r], [], [], left)[0]:
                raise Failure("chromium did not answer in %ss" % self.timeout)
            chunk = os.read(self._resp_r, 1 << 20)
            if not chunk:
                raise Failure("chromium closed its DevTools pipe (exit %s)" % self.proc.poll())
            self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        m = json.loads(msg)
        if "method" in m:
            self._event(m)
        return m

    def _event(self, m):
        p = m.get("params", {})
        if m["method"] == "Runtime.consoleAPICalled":
            self.console.append("%s: %s" % (p["type"], " ".join(
                str(a.get("value", a.get("description", ""))) for a in p.get("args", []))))
        elif m["method"] == "Runtime.exceptionThrown":
            d = p["exceptionDetails"]
            self.console.append("exception: %s %s" % (
                d.get("text", ""), d.get("exception", {}).get("description", "")))
        elif m["method"] == "Log.entryAdded":
            e = p["entry"]
            self.console.append("%s: %s %s" % (e["level"], e["text"], e.get("url", "")))
        self._events.append(m)

    def send(self, method, params=None, session=True):
        """Sends one command; returns its result (a Failure on an error)."""
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self._cmd_w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            m = self._read(deadline)
            if m.get("id") == self._id:
                if "error" in m:
                    raise Failure("%s: %s" % (method, m["error"]))
                return m.get("result", {})

    def wait_event(self, method):
        deadline = time.monotonic() + self.timeout
        for i, m in enumerate(self._events):
            if m["method"] == method:
                del self._events[i]
                return m
        while True:
            m = self._read(deadline)
            if m.get("method") == method:
                self._events.remove(m)
                return m

    def open(self, url, width, height):
        """Opens @url in a new tab of @width x @height CSS pixels; returns at its load event."""
        target = self.send("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True},
                                 session=False)["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.send(domain + ".enable")
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        self.send("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired")

    def eval(self, expr):
        """The value of the script @expr in the page (JSON-able)."""
        r = self.send("Runtime.evaluate", {"expression": expr, "returnByValue": True})
        if "exceptionDetails" in r:
            raise Failure("%s: %s" % (expr, r["exceptionDetails"]))
        return r["result"].get("value")

    def screenshot(self, path):
        """The viewport as it is now, into the PNG @path."""
        data = self.send("Page.captureScreenshot", {"format": "png"})["data"]
        with open(str(path), "wb") as f:
            f.write(base64.b64decode(data))
