"""Headless Chromium driven over the DevTools protocol, for opening evidence pages from disk.

No driver package: Chromium speaks the DevTools protocol over two pipes when started with
``--remote-debugging-pipe`` (fd 3 in, fd 4 out, one JSON message per NUL-terminated chunk),
which the standard library can do, and which needs no download of a browser build or a driver
matched to its version. The browser runs with a fresh profile, none of its own background
traffic, and every network scheme blocked, so a page that needs the network fails visibly.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "chrome")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    "--disable-extensions",
    "--mute-audio",
    # Name resolution fails for every host: a page cannot reach the network even by accident.
    "--host-resolver-rules=MAP * ~NOTFOUND",
)
# Puts the two pipe ends at fds 3 and 4, where Chromium expects them, and becomes Chromium.
_TRAMPOLINE = (
    "import os, sys; os.dup2(int(sys.argv[1]), 3); os.dup2(int(sys.argv[2]), 4); "
    "os.execv(sys.argv[3], sys.argv[3:])"
)
BLOCKED = ["http://*", "https://*", "ws://*", "wss://*", "ftp://*"]
WIDTH, HEIGHT = 1280, 900
# What a page is asked once loaded: images that did not decode, tables, text and images that
# reach past the right edge, horizontal overflow of the page, its title, and the first element
# whose own text holds CJK characters.
PROBE = """(() => {
  const broken = [...document.images]
    .filter(i => !i.complete || i.naturalWidth === 0)
    .map(i => i.getAttribute('src').slice(0, 120));
  const cjk = [...document.querySelectorAll('td, th, p, li, pre, span, code')]
    .find(e => /[\\u4e00-\\u9fff]/.test(e.textContent) && e.children.length === 0);
  if (cjk) cjk.setAttribute('data-np-cjk', '1');
  const edge = document.documentElement.clientWidth;
  const wide = [...document.querySelectorAll('table, pre, img')]
    .filter(e => e.getBoundingClientRect().right > edge + 1)
    .map(e => e.tagName.toLowerCase() + ' ' + Math.round(e.getBoundingClientRect().right));
  return JSON.stringify({
    broken,
    wide,
    images: document.images.length,
    overflow: document.documentElement.scrollWidth - window.innerWidth,
    title: document.title,
    cjk: cjk ? cjk.textContent.trim().slice(0, 40) : null,
  });
})()"""


def find_chromium() -> str | None:
    """The Chromium (or Chrome) executable on PATH, if any."""
    return next((p for p in map(shutil.which, CANDIDATES) if p), None)


def cjk_families() -> set[str]:
    """Font families that cover Chinese, as fontconfig lists them (empty: none installed)."""
    fc = shutil.which("fc-list")
    if fc is None:
        return set()
    out = subprocess.run([fc, ":lang=zh", "family"], capture_output=True, text=True, timeout=30)
    return {name.strip() for line in out.stdout.splitlines() for name in line.split(",") if name}


def _above(fd: int, lowest: int) -> int:
    """``fd`` moved to a number of at least ``lowest`` (the old number is closed)."""
    import fcntl

    moved = fcntl.fcntl(fd, fcntl.F_DUPFD, lowest)
    os.close(fd)
    return moved


@dataclass
class PageReport:
    """What opening one page showed: failed requests, console errors, the probe's answers."""

    url: str
    failed: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    probe: dict[str, Any] = field(default_factory=dict)
    cjk_fonts: list[str] = field(default_factory=list)


class Browser:
    """One headless Chromium; ``open(path)`` loads a file in a fresh tab and reports on it."""

    def __init__(self, executable: str, timeout_s: float = 60.0) -> None:
        self.timeout_s = timeout_s
        self.profile = tempfile.mkdtemp(prefix="np-chromium-")
        to_child, self._out = os.pipe()  # we write commands into fd 3 of the browser
        self._in, from_child = os.pipe()  # it writes answers and events to fd 4
        # The trampoline moves them to 3 and 4; numbered above both, neither move overwrites
        # the other.
        to_child, from_child = (_above(fd, 10) for fd in (to_child, from_child))
        pipes = (str(to_child), str(from_child))
        args = [*FLAGS, f"--user-data-dir={self.profile}", "--remote-debugging-pipe"]
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _TRAMPOLINE, *pipes, executable, *args, "about:blank"],
            pass_fds=(to_child, from_child),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_child)
        os.close(from_child)
        self._buffer = b""
        self._next = 0
        self._events: list[dict[str, Any]] = []

    # --- the protocol -------------------------------------------------------------------------

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._in], [], [], left)[0]:
                raise TimeoutError("Chromium did not answer in time")
            chunk = os.read(self._in, 1 << 16)
            if not chunk:
                raise RuntimeError("Chromium closed its DevTools pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        """Send one command and return its result; events that arrive meanwhile are kept."""
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._out, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout_s
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error'].get('message')}")
                return reply.get("result", {})
            self._events.append(reply)

    def _wait_for(self, method: str, session: str) -> None:
        deadline = time.monotonic() + self.timeout_s
        while not any(
            e.get("method") == method and e.get("sessionId") == session for e in self._events
        ):
            self._events.append(self._read(deadline))

    def _drain(self, seconds: float) -> None:
        """Collect events for a short while (late requests, errors after load)."""
        deadline = time.monotonic() + seconds
        while select.select([self._in], [], [], max(deadline - time.monotonic(), 0))[0]:
            self._events.append(self._read(deadline + self.timeout_s))
            if time.monotonic() >= deadline:
                break

    # --- one page -----------------------------------------------------------------------------

    def open(self, path: Path) -> PageReport:
        """Load ``path`` from disk with the network blocked and report what went wrong."""
        url = path.resolve().as_uri()
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Network", "Runtime", "Log", "DOM", "CSS"):
            self.call(f"{domain}.enable", session)
        self.call("Network.setBlockedURLs", session, urls=BLOCKED)
        self.call(
            "Emulation.setDeviceMetricsOverride",
            session,
            width=WIDTH,
            height=HEIGHT,
            deviceScaleFactor=1,
            mobile=False,
        )
        self._events = []
        self.call("Page.navigate", session, url=url)
        self._wait_for("Page.loadEventFired", session)
        self._drain(0.3)
        result = self.call("Runtime.evaluate", session, expression=PROBE, returnByValue=True)
        report = PageReport(url=url, probe=json.loads(result["result"]["value"]))
        self._collect(report, session)
        if report.probe.get("cjk"):
            report.cjk_fonts = self._fonts_of_marked(session)
        self.call("Target.closeTarget", targetId=target)
        return report

    def _collect(self, report: PageReport, session: str) -> None:
        urls: dict[str, str] = {}
        for event in self._events:
            if event.get("sessionId") != session:
                continue
            method, params = event.get("method"), event.get("params", {})
            if method == "Network.requestWillBeSent":
                urls[params["requestId"]] = params["request"]["url"]
            elif method == "Network.loadingFailed":
                where = urls.get(params["requestId"], "?")
                why = params.get("blockedReason") or params.get("errorText")
                report.failed.append(f"{where[:120]} ({why})")
            elif method == "Runtime.exceptionThrown":
                details = params["exceptionDetails"]
                text = details.get("exception", {}).get("description") or details.get("text")
                report.errors.append(f"exception: {str(text)[:200]}")
            elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
                args = " ".join(str(a.get("value", a.get("description"))) for a in params["args"])
                report.errors.append(f"console.error: {args[:200]}")
            elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
                entry = params["entry"]
                report.errors.append(f"{entry['source']}: {entry['text'][:200]}")

    def _fonts_of_marked(self, session: str) -> list[str]:
        root = self.call("DOM.getDocument", session, depth=0)["root"]["nodeId"]
        node = self.call("DOM.querySelector", session, nodeId=root, selector="[data-np-cjk]")
        fonts = self.call("CSS.getPlatformFontsForNode", session, nodeId=node["nodeId"])["fonts"]
        return [f["familyName"] for f in fonts if f.get("glyphCount")]

    def close(self) -> None:
        with contextlib.suppress(OSError, RuntimeError, TimeoutError):
            self.call("Browser.close")
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        for fd in (self._in, self._out):
            with contextlib.suppress(OSError):
                os.close(fd)
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
