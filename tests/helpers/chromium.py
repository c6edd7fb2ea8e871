"""Headless Chromium driven over the Chrome DevTools Protocol, for the web console's tests.

Debian's ``chromium`` package (scripts/install-test-deps) started with
``--remote-debugging-port=0`` writes the port it picked to ``DevToolsActivePort`` in
its profile directory; the first page target's websocket then takes CDP commands
(``Page.navigate``, ``Runtime.evaluate``, ``Page.captureScreenshot``), sent here with
aiohttp's websocket client. Nothing else is needed: no driver binary, no download.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import aiohttp

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1200,900",
)
START_TIMEOUT_S = 60.0


def chromium_path() -> str | None:
    return shutil.which("chromium")


class Chromium:
    """One headless Chromium process with a fresh profile; ``with Chromium(dir) as c``."""

    def __init__(self, profile: Path) -> None:
        self.profile = profile
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0

    def __enter__(self) -> Chromium:
        executable = chromium_path()
        assert executable is not None, "chromium is not installed (scripts/install-test-deps)"
        self.profile.mkdir(parents=True, exist_ok=True)
        command = [executable, *FLAGS, "--remote-debugging-port=0",
                   f"--user-data-dir={self.profile}", "about:blank"]  # fmt: skip
        log = (self.profile / "chromium.log").open("wb")
        self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        active = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + START_TIMEOUT_S
        while not (active.exists() and active.read_text().strip()):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.__exit__()
                raise RuntimeError(f"chromium did not start: see {self.profile / 'chromium.log'}")
            time.sleep(0.05)
        self.port = int(active.read_text().split()[0])
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    async def page(self, session: aiohttp.ClientSession) -> Page:
        """The first page target, over its websocket."""
        async with session.get(f"http://127.0.0.1:{self.port}/json/list") as response:
            targets = await response.json(content_type=None)
        target = next(t for t in targets if t["type"] == "page")
        websocket = await session.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0)
        return Page(websocket)


class Page:
    """CDP commands to one page; events are read and dropped."""

    def __init__(self, websocket: aiohttp.ClientWebSocketResponse) -> None:
        self.websocket = websocket
        self.ids = itertools.count(1)

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        command_id = next(self.ids)
        await self.websocket.send_json({"id": command_id, "method": method, "params": params})
        async for message in self.websocket:
            answer = json.loads(message.data)
            if answer.get("id") == command_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer["result"]
        raise RuntimeError(f"{method}: the DevTools websocket closed")

    async def navigate(self, url: str) -> None:
        await self.send("Page.navigate", url=url)

    async def evaluate(self, expression: str) -> Any:
        """The JSON value of a JavaScript expression in the page."""
        answer = await self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in answer:
            raise RuntimeError(f"{expression}: {answer['exceptionDetails']}")
        return answer["result"].get("value")

    async def wait_for(self, expression: str, timeout: float = 30.0) -> Any:
        """The expression's first truthy value; AssertionError, with the last, if none comes."""
        deadline = time.monotonic() + timeout
        value = None
        while time.monotonic() < deadline:
            try:
                value = await self.evaluate(expression)
            except RuntimeError as error:  # the page is between two documents
                value = str(error)
            else:
                if value:
                    return value
            await asyncio.sleep(0.2)
        raise AssertionError(f"not true within {timeout} s: {expression} (last: {value!r})")

    async def screenshot(self, path: Path) -> Path:
        answer = await self.send("Page.captureScreenshot", format="png")
        path.write_bytes(base64.b64decode(answer["data"]))
        return path
