"""Debian's chromium, headless, driven over the DevTools protocol with `websockets` (in the lock):
enough of a browser client for the evidence inspector's tests and screenshots. Nothing is downloaded.

    with Chromium.start() as browser:
        page = browser.open("http://127.0.0.1:8000/")
        page.wait_for("document.body?.dataset.ready === 'true'")
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")


def find_chromium() -> str | None:
    """The path of a system chromium, or None."""
    return next((path for path in map(shutil.which, CHROMIUM_NAMES) if path), None)


class BrowserError(RuntimeError):
    """The browser failed, or the page did not reach the state a test waited for."""


class Page:
    """One tab, over its DevTools websocket."""

    def __init__(self, socket) -> None:
        self.socket = socket
        self.ids = itertools.count(1)
        self.console: list[str] = []

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one DevTools command and return its result (events that arrive meanwhile are kept as console lines)."""
        number = next(self.ids)
        self.socket.send(json.dumps({"id": number, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv(timeout=120))
            if message.get("id") == number:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error']}")
                return message["result"]
            if message.get("method") == "Runtime.consoleAPICalled":
                self.console.append(" ".join(str(arg.get("value", arg.get("description", "")))
                                             for arg in message["params"]["args"]))
            elif message.get("method") == "Runtime.exceptionThrown":
                self.console.append("exception: " + json.dumps(message["params"]["exceptionDetails"])[:500])

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (awaited if it is a promise)."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression[:80]!r} threw: {json.dumps(result['exceptionDetails'])[:600]}")
        return result["result"].get("value")

    def wait_for(self, condition: str, timeout: float = 60.0) -> Any:
        """Poll a JavaScript expression until it is truthy; its value."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.evaluate(condition)
            if value:
                return value
            time.sleep(0.1)
        raise BrowserError(f"timed out after {timeout:g} s waiting for {condition!r}; console: {self.console[-5:]}")

    def navigate(self, url: str) -> None:
        self.call("Page.navigate", url=url)

    def type_text(self, selector: str, text: str) -> None:
        """Focus the field `selector`, select what it holds and type `text` over it, as a user would (the
        field fires `input`, and `change` when the focus leaves it)."""
        self.evaluate(f"(f => {{ f.focus(); f.select(); }})(document.querySelector({json.dumps(selector)}))")
        self.call("Input.insertText", text=text)

    def focus(self, selector: str) -> None:
        """Move the focus to `selector`, as a user's click there would (the field left fires `change`)."""
        self.evaluate(f"document.querySelector({json.dumps(selector)}).focus()")

    def set_files(self, selector: str, paths: list[Path]) -> None:
        """Choose `paths` in the file input `selector`, as a user would."""
        root = self.call("DOM.getDocument")["root"]["nodeId"]
        node = self.call("DOM.querySelector", nodeId=root, selector=selector)["nodeId"]
        self.call("DOM.setFileInputFiles", nodeId=node, files=[str(path) for path in paths])

    def resize(self, width: int, height: int, mobile: bool = False) -> None:
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                  mobile=mobile)

    def screenshot(self, path: Path, full_page: bool = True) -> Path:
        """A PNG of the page (the whole page's height when `full_page`)."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            width, height = self.evaluate("[document.documentElement.scrollWidth, "
                                          "document.documentElement.scrollHeight]")
            params.update(captureBeyondViewport=True, clip={"x": 0, "y": 0, "width": width, "height": height,
                                                             "scale": 1})
        path.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", **params)["data"]))
        return path


class Chromium:
    """A headless chromium process with a fresh profile, reached on a DevTools port of the loopback address."""

    def __init__(self, process: subprocess.Popen, port: int, profile: str) -> None:
        self.process, self.port, self.profile = process, port, profile

    @classmethod
    @contextmanager
    def start(cls, executable: str | None = None) -> Iterator[Chromium]:
        executable = executable or find_chromium()
        if executable is None:
            raise BrowserError("no chromium found; install Debian's with `apt-get install -y chromium`")
        profile = tempfile.mkdtemp(prefix="memorag-chromium-")
        flags = ["--headless=new", "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1",
                 f"--user-data-dir={profile}", "--no-first-run", "--no-default-browser-check", "--disable-gpu",
                 "--disable-extensions", "--disable-background-networking", "--disable-sync",
                 "--disable-component-update", "--hide-scrollbars", "--mute-audio"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            flags.append("--no-sandbox")  # chromium refuses to run as root with its sandbox
        process = subprocess.Popen([executable, *flags, "about:blank"], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        try:
            yield cls(process, cls._port(profile, process), profile)
        finally:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
            shutil.rmtree(profile, ignore_errors=True)

    @staticmethod
    def _port(profile: str, process: subprocess.Popen, timeout: float = 30.0) -> int:
        marker = Path(profile) / "DevToolsActivePort"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise BrowserError(f"chromium exited at start (status {process.returncode})")
            if marker.is_file() and marker.read_text().strip():
                return int(marker.read_text().split()[0])
            time.sleep(0.05)
        raise BrowserError(f"chromium did not open its DevTools port within {timeout:g} s")

    @contextmanager
    def open(self, url: str) -> Iterator[Page]:
        """A new tab showing `url`, closed after."""
        from websockets.sync.client import connect

        target = httpx.put(f"http://127.0.0.1:{self.port}/json/new?about:blank", timeout=30).json()
        with connect(target["webSocketDebuggerUrl"], max_size=64 * 2**20, open_timeout=30) as socket:
            page = Page(socket)
            page.call("Page.enable")
            page.call("Runtime.enable")
            page.navigate(url)
            yield page
        httpx.get(f"http://127.0.0.1:{self.port}/json/close/{target['id']}", timeout=30)
