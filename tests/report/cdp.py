"""A minimal Chrome DevTools Protocol session for the browser test (headless Debian chromium + websockets).

Why CDP rather than ``--dump-dom``: the test must *see* network requests, console errors, uncaught exceptions
and CSP violations as events, run script in the page after load (is ``window.__pwned`` set?), drive the filter,
and take a screenshot and a PDF; only the protocol gives all of that from one launch.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
from websockets.sync.client import ClientConnection, connect

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",
]


def chromium_path() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    """One chromium process with a fresh profile, and a CDP connection to its first page."""

    def __init__(self, profile: Path, *, timeout: float = 60.0) -> None:
        exe = chromium_path()
        if exe is None:
            raise RuntimeError("chromium not installed")
        self.timeout = timeout
        self.proc = subprocess.Popen([exe, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + timeout
        while not port_file.exists() or not port_file.read_text().strip():
            if self.proc.poll() is not None:
                raise RuntimeError(f"chromium exited with {self.proc.returncode} before DevTools started")
            if time.monotonic() > deadline:
                self.close()
                raise RuntimeError("chromium DevTools did not start in time")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        pages = []
        while not pages:
            pages = [t for t in httpx.get(f"http://127.0.0.1:{port}/json/list", timeout=10).json()
                     if t["type"] == "page"]
            if time.monotonic() > deadline:
                self.close()
                raise RuntimeError("no page target in chromium")
        self._stack = contextlib.ExitStack()
        self.ws: ClientConnection = self._stack.enter_context(
            connect(pages[0]["webSocketDebuggerUrl"], max_size=None, open_timeout=timeout))
        self._id = 0
        self.events: list[dict[str, Any]] = []

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        """Send a command and wait for its reply; events that arrive meanwhile are kept in ``self.events``."""
        self._id += 1
        my_id = self._id
        self.ws.send(json.dumps({"id": my_id, "method": method, "params": params}))
        deadline = time.monotonic() + self.timeout
        while True:
            msg = json.loads(self.ws.recv(timeout=max(0.1, deadline - time.monotonic())))
            if msg.get("id") == my_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)

    def wait_for(self, event: str, timeout: float | None = None) -> dict[str, Any]:
        deadline = time.monotonic() + (timeout or self.timeout)
        for e in self.events:
            if e["method"] == event:
                return e
        while True:
            msg = json.loads(self.ws.recv(timeout=max(0.1, deadline - time.monotonic())))
            if "method" in msg:
                self.events.append(msg)
                if msg["method"] == event:
                    return msg

    def drain(self, seconds: float) -> None:
        """Collect events for a while (late console messages, lazy requests)."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            try:
                msg = json.loads(self.ws.recv(timeout=left))
            except TimeoutError:
                return
            if "method" in msg:
                self.events.append(msg)

    def evaluate(self, expression: str) -> Any:
        res = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in res:
            raise RuntimeError(f"page script failed: {res['exceptionDetails'].get('text')}")
        return res["result"].get("value")

    def close(self) -> None:
        try:
            if getattr(self, "_stack", None) is not None:
                self._stack.close()
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
