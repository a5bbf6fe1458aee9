"""Headless Chromium driven over the DevTools protocol, for tests that look at reports.

Why this way: Debian's `chromium` is the browser (no browser download is possible here, and it
is what an instructor or CI machine can install with apt); the DevTools protocol is Chromium's
own remote interface (Puppeteer and Playwright speak it underneath), so there is no driver binary
whose version must match the browser's (Selenium's chromedriver) and no bundled Node runtime or
pinned browser revision (Playwright). `websocket-client`, pure Python, carries the messages.

The browser listens on a port chosen by itself on 127.0.0.1 only (`--remote-debugging-port=0`,
read back from the profile's DevToolsActivePort file); every page gets its own target, attached
in flat mode, so one socket drives everything. Console messages, uncaught exceptions, log entries
(CSP violations, failed loads) and every network request a page makes are recorded per page.
"""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

CHROMIUM_CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    """The browser to use: $TORCHGRADE_CHROMIUM, else the first of the usual names on PATH."""
    explicit = os.environ.get("TORCHGRADE_CHROMIUM")
    if explicit:
        return explicit if shutil.which(explicit) or Path(explicit).is_file() else None
    for name in CHROMIUM_CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


class BrowserError(RuntimeError):
    pass


class Chromium:
    """One headless browser process (use as a context manager)."""

    def __init__(self, binary: str, *, width: int = 1100, height: int = 1400, timeout: float = 30):
        import websocket  # websocket-client

        self.profile = tempfile.mkdtemp(prefix="torchgrade-chromium-")
        self.timeout = timeout
        self.proc = subprocess.Popen(
            [binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--no-default-browser-check", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--disable-extensions",
             "--hide-scrollbars", "--mute-audio", f"--user-data-dir={self.profile}",
             "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
             f"--window-size={width},{height}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        active = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + timeout
        while not (active.is_file() and len(active.read_text().splitlines()) >= 2):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise BrowserError("Chromium did not start (no DevToolsActivePort)")
            time.sleep(0.05)
        port, path = active.read_text().splitlines()[:2]
        self.socket = websocket.create_connection(f"ws://127.0.0.1:{port}{path}",
                                                  timeout=timeout, suppress_origin=True)
        self._next_id = 0
        self.events: list[dict] = []

    # ------------------------------------------------------------------ protocol

    def send(self, method: str, params: dict | None = None, *, session: str | None = None
             ) -> dict:
        """Send a command and wait for its answer (events that arrive meanwhile are kept)."""
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        self.socket.send(json.dumps(message))
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            reply = json.loads(self.socket.recv())
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)
        raise BrowserError(f"{method}: no answer in {self.timeout} s")

    def wait_event(self, method: str, session: str, timeout: float | None = None) -> dict:
        deadline = time.monotonic() + (timeout or self.timeout)
        seen = 0
        while time.monotonic() < deadline:
            for event in self.events[seen:]:
                if event.get("method") == method and event.get("sessionId") == session:
                    self.events.remove(event)
                    return event
            seen = len(self.events)
            self.socket.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                self.events.append(json.loads(self.socket.recv()))
            except Exception:  # noqa: BLE001 - a receive timeout: check the deadline
                pass
            finally:
                self.socket.settimeout(self.timeout)
        raise BrowserError(f"no {method} within the time allowed")

    # ------------------------------------------------------------------ pages

    def open(self, url: str, *, width: int = 1100, height: int = 1400) -> Page:
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target,
                                                      "flatten": True})["sessionId"]
        page = Page(self, target, session)
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable", session=session)
        page.resize(width, height)
        started = time.monotonic()
        self.send("Page.navigate", {"url": url}, session=session)
        self.wait_event("Page.loadEventFired", session)
        page.load_seconds = time.monotonic() - started
        return page

    def close(self) -> None:
        try:
            if getattr(self, "socket", None) is not None:
                self.socket.close()
        finally:
            if self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(10)
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Page:
    """A page (tab) of the browser: evaluate, click, type keys, take screenshots."""

    def __init__(self, browser: Chromium, target: str, session: str):
        self.browser, self.target, self.session = browser, target, session
        self.load_seconds = 0.0

    def send(self, method: str, params: dict | None = None) -> dict:
        return self.browser.send(method, params, session=self.session)

    def _events(self, *methods: str) -> list[dict]:
        return [e for e in self.browser.events
                if e.get("sessionId") == self.session and e.get("method") in methods]

    # what went wrong while loading and running
    def console_errors(self) -> list[str]:
        """Uncaught exceptions, console.error/assert calls and error-level log entries (a CSP
        violation or a failed load lands there)."""
        self.evaluate("0")  # flush: events up to now have arrived
        out = []
        for e in self._events("Runtime.exceptionThrown"):
            details = e["params"]["exceptionDetails"]
            out.append(details.get("exception", {}).get("description") or details.get("text"))
        for e in self._events("Runtime.consoleAPICalled"):
            if e["params"]["type"] in ("error", "assert"):
                out.append(" ".join(str(a.get("value", a.get("description", "")))
                                    for a in e["params"]["args"]))
        for e in self._events("Log.entryAdded"):
            if e["params"]["entry"]["level"] == "error":
                out.append(e["params"]["entry"]["text"])
        return out

    def requests(self) -> list[str]:
        """URL of every request the page made (the page itself included)."""
        return [e["params"]["request"]["url"] for e in self._events("Network.requestWillBeSent")]

    def evaluate(self, expression: str):
        reply = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                               "awaitPromise": True})
        if "exceptionDetails" in reply:
            raise BrowserError(f"{expression!r}: {reply['exceptionDetails']}")
        return reply["result"].get("value")

    def resize(self, width: int, height: int, *, mobile: bool = False) -> None:
        self.send("Emulation.setDeviceMetricsOverride", {
            "width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile})

    def media(self, media: str) -> None:
        """Emulate a CSS media type ("print", "screen", or "" for none)."""
        self.send("Emulation.setEmulatedMedia", {"media": media})

    def center_of(self, selector: str) -> tuple[float, float]:
        rect = self.evaluate(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
            " e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();"
            " return [r.left + r.width / 2, r.top + Math.min(r.height / 2, 12)]; })()")
        return rect[0], rect[1]

    def click(self, selector: str) -> None:
        """A real mouse click (press and release) in the middle of the element's first line."""
        x, y = self.center_of(selector)
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y,
                                                   "button": "left", "clickCount": 1})

    def press(self, key: str) -> None:
        """A real key press on the focused element: "Enter", " " (space) or "Tab"."""
        codes = {"Enter": ("Enter", 13, "\r"), " ": ("Space", 32, " "), "Tab": ("Tab", 9, "")}
        code, vk, text = codes[key]
        down = {"type": "keyDown", "key": key, "code": code, "windowsVirtualKeyCode": vk,
                "nativeVirtualKeyCode": vk}
        if text:
            down["text"] = text
        self.send("Input.dispatchKeyEvent", down)
        self.send("Input.dispatchKeyEvent", {"type": "keyUp", "key": key, "code": code,
                                             "windowsVirtualKeyCode": vk,
                                             "nativeVirtualKeyCode": vk})

    def screenshot(self, path: Path | None = None, *, full_page: bool = False) -> bytes:
        params: dict = {"format": "png"}
        if full_page:
            size = self.evaluate("[document.documentElement.scrollWidth,"
                                 " document.documentElement.scrollHeight]")
            params.update(captureBeyondViewport=True,
                          clip={"x": 0, "y": 0, "width": size[0], "height": size[1], "scale": 1})
        png = base64.b64decode(self.send("Page.captureScreenshot", params)["data"])
        if path is not None:
            Path(path).write_bytes(png)
        return png

    def print_pdf(self) -> bytes:
        return base64.b64decode(self.send("Page.printToPDF", {"printBackground": True})["data"])

    def close(self) -> None:
        self.browser.send("Target.closeTarget", {"targetId": self.target})


def png_pixels(png: bytes):
    """The screenshot as an (H, W, channels) float array in [0, 1] (matplotlib reads PNG)."""
    from matplotlib import image

    return image.imread(io.BytesIO(png), format="png")
