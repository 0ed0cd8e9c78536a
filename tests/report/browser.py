"""Headless Chromium driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``): real
clicks and screenshots without a WebSocket client or a second browser download.

Chromium reads NUL-terminated JSON commands on fd 3 and writes replies and events on fd 4. Every
wait is on a reply or an event of Chromium's (a page load, a command's answer); the long timeout
only turns a hung browser into a failure instead of a hung test.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
HUNG = 120.0  # seconds without any message from Chromium: it hung (never expected)


def _high(*fds: int) -> tuple[int, ...]:
    """The fds moved to 10 or above, so the shell's ``3<&FD 4>&FD`` never overwrites one of them."""
    out = tuple(fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in fds)
    for fd in fds:
        os.close(fd)
    return out


class Browser:
    """One headless Chromium with one page (tab) attached in flat mode."""

    def __init__(self, width: int = 1280, height: int = 900) -> None:
        assert CHROMIUM is not None
        self._profile = tempfile.TemporaryDirectory()
        to_chrome_r, self._to_chrome = _high(*os.pipe())
        self._from_chrome, from_chrome_w = _high(*os.pipe())
        args = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--hide-scrollbars", "--remote-debugging-pipe", f"--user-data-dir={self._profile.name}"]  # fmt: skip
        shell = f'exec "$@" 3<&{to_chrome_r} 4>&{from_chrome_w} {to_chrome_r}<&- {from_chrome_w}>&-'
        self._proc = subprocess.Popen(["bash", "-c", shell, "chromium", *args], pass_fds=(to_chrome_r, from_chrome_w),
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buf = b""
        self._next = 0
        self._events: list[dict[str, Any]] = []
        self._session: str | None = None
        target = self.send("Target.createTarget", url="about:blank")["targetId"]
        self._session = self.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.send("Page.enable")
        self.send("Runtime.enable")
        self.resize(width, height)

    def _read(self) -> dict[str, Any]:
        while b"\0" not in self._buf:
            ready, _, _ = select.select([self._from_chrome], [], [], HUNG)
            assert ready, "Chromium sent nothing for two minutes"
            chunk = os.read(self._from_chrome, 1 << 20)
            assert chunk, "Chromium closed its pipe"
            self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        out: dict[str, Any] = json.loads(msg)
        return out

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one command and wait for its reply (events that arrive meanwhile are kept)."""
        self._next += 1
        msg: dict[str, Any] = {"id": self._next, "method": method, "params": params}
        if self._session is not None:
            msg["sessionId"] = self._session
        os.write(self._to_chrome, json.dumps(msg).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self._next:
                assert "error" not in reply, (method, reply["error"])
                result: dict[str, Any] = reply.get("result", {})
                return result
            self._events.append(reply)

    def wait_event(self, method: str) -> dict[str, Any]:
        """Wait for the next event ``method`` (one already received counts)."""
        while True:
            for i, ev in enumerate(self._events):
                if ev.get("method") == method:
                    return self._events.pop(i)
            self._events.append(self._read())

    def resize(self, width: int, height: int) -> None:
        self.send("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                  mobile=width < 600)  # fmt: skip

    def open(self, url: str) -> None:
        """Load ``url`` afresh (as a link opened from elsewhere) and wait for its load event."""
        self._events.clear()
        self.send("Page.navigate", url="about:blank")
        self.wait_event("Page.loadEventFired")
        self.send("Page.navigate", url=url)
        self.wait_event("Page.loadEventFired")

    def js(self, expression: str) -> Any:
        """Evaluate ``expression`` in the page (promises awaited) and return its JSON value."""
        res = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        assert "exceptionDetails" not in res, res["exceptionDetails"]
        return res["result"].get("value")

    def click(self, selector: str) -> None:
        """A real mouse click (press and release) on the middle of the element ``selector``."""
        box = self.js(f"""(function () {{
            var el = document.querySelector({json.dumps(selector)});
            el.scrollIntoView({{block: 'center'}});
            var r = el.getBoundingClientRect();
            return [r.left + r.width / 2, r.top + r.height / 2];
        }})()""")
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1], button="left", clickCount=1)

    def screenshot(self, path: Path) -> None:
        """The viewport as a PNG."""
        data = self.send("Page.captureScreenshot", format="png")["data"]
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        try:
            self._session = None
            os.write(self._to_chrome, json.dumps({"id": 0, "method": "Browser.close"}).encode() + b"\0")
        except OSError:
            pass
        try:
            self._proc.wait(timeout=HUNG)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        os.close(self._to_chrome)
        os.close(self._from_chrome)
        self._profile.cleanup()
