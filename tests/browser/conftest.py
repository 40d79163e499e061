"""Fixtures for the tests that drive `ads server` and its UI: the server started as a user would on a fresh
machine (no ADS cache dir, no Prefect setup, a free port), and headless Chromium spoken to over the DevTools
protocol. Every process started here is stopped by its PID (process group) in a finalizer and checked gone."""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
ADS = str(Path(sys.executable).with_name("ads"))
CHROMIUM = Path(os.environ.get("ADS_TEST_CHROMIUM", "/usr/bin/chromium"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def http_json(url: str, body: dict[str, Any] | None = None, timeout: float = 10) -> Any:
    """GET (or POST a JSON body) and decode the JSON answer."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())


def wait_until(check: Any, timeout: float, what: str, proc: subprocess.Popen[Any] | None = None) -> Any:
    """Poll `check()` until it returns something truthy; fail naming WHAT (and the process if it died)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process {proc.pid} exited with {proc.returncode} while waiting for {what}")
        try:
            value = check()
        except OSError:
            value = None
        if value:
            return value
        time.sleep(0.3)
    raise TimeoutError(f"{what} not reached within {timeout} s")


def start_process(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[Any]:
    """Popen in its own session, so SIGTERM to its group reaches its children too."""
    with open(log, "ab") as fh:
        return subprocess.Popen(args, cwd=REPO, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)


def stop_process(proc: subprocess.Popen[Any], timeout: float = 20.0) -> None:
    """SIGTERM the group led by PID, then SIGKILL; assert the process is gone."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if proc.poll() is not None:
            break
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            continue
    try:  # stray children of the group
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    assert proc.poll() is not None, f"process {proc.pid} is still running"


# ---------------------------------------------------------------------------------------------
# `ads server` on a fresh machine


@dataclass
class AdsServer:
    port: int
    cache: Path  # its ADS_CACHE_DIR, absent before the server started
    home: Path  # HOME of the "user": no ~/.prefect
    log: Path
    proc: subprocess.Popen[Any]
    user_prefect_dir_at_start: bool = False  # HOME/.prefect right after it started (later builds may make one)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self, **extra: str) -> dict[str, str]:
        """The environment a user would have: no Prefect settings, this server's ADS cache dir and HOME."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
        env.update(ADS_CACHE_DIR=str(self.cache), HOME=str(self.home), HF_HUB_OFFLINE="1", DO_NOT_TRACK="1")
        env.update(extra)
        return env


@pytest.fixture(scope="session")
def ads_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdsServer]:
    """`ads server --port <free>` with an ADS_CACHE_DIR that does not exist yet and no Prefect profile."""
    root = tmp_path_factory.mktemp("ads-server")
    (root / "home").mkdir()
    port = free_port()
    server = AdsServer(
        port=port, cache=root / "fresh" / "cache", home=root / "home", log=root / "server.log", proc=None
    )  # type: ignore[arg-type]
    assert not server.cache.parent.exists()
    server.proc = start_process([ADS, "server", "--port", str(port)], server.log, server.env())
    try:
        wait_until(  # what a user waits for: the line that says it is ready (said once /health answers)
            lambda: "ads server: ready" in server.log.read_text(errors="replace"),
            180,
            f"'ads server: ready' in {server.log}",
            server.proc,
        )
        assert http_json(f"{server.base}/api/health", timeout=5) is True  # ready means the API answers
        server.user_prefect_dir_at_start = (server.home / ".prefect").exists()
        yield server
    finally:
        stop_process(server.proc)


@pytest.fixture(scope="session")
def model_cache() -> Path:
    """The ADS cache dir holding the tiny default model (built there once if missing, as `ads build` would)."""
    from ads_core.common import defaults
    from ads_core.models import resolve_model

    resolve_model("default")
    return defaults.cache_dir()


# ---------------------------------------------------------------------------------------------
# headless Chromium over the DevTools protocol


class Browser:
    """One headless Chromium page. CDP (not --dump-dom) so a test can ask whether an <img> really decoded
    (naturalWidth), what the page itself fetched, and take a screenshot of the same page."""

    def __init__(self, proc: subprocess.Popen[Any], ws_url: str) -> None:
        from websockets.sync.client import connect  # a Prefect dependency

        self.proc = proc
        self.ws = connect(ws_url, max_size=None, open_timeout=30)
        self._id = 0

    def call(self, method: str, timeout: float = 60, **params: Any) -> dict[str, Any]:
        self._id += 1
        self.ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        deadline = time.monotonic() + timeout
        while True:
            msg = json.loads(self.ws.recv(timeout=max(0.1, deadline - time.monotonic())))
            if msg.get("id") == self._id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def evaluate(self, expression: str) -> Any:
        """A JS expression's value (promises awaited), returned by value."""
        result = self.call("Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"JS error in {expression[:80]!r}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def goto(self, url: str) -> None:
        self.call("Page.navigate", url=url)

    def screenshot(self, path: Path) -> Path:
        path.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"]))
        return path


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    """Headless Chromium (Debian package `chromium`; .ci/run installs it); skip when it is not installed."""
    if not CHROMIUM.is_file():
        pytest.skip(f"{CHROMIUM} not found: install Debian's chromium (apt-get install -y chromium) to run it")
    profile = tmp_path_factory.mktemp("chromium")
    args = [
        str(CHROMIUM),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        f"--user-data-dir={profile / 'data'}",
        "--remote-debugging-port=0",
        "--window-size=1400,1600",
        "about:blank",
    ]
    proc = start_process(args, profile / "chromium.log", dict(os.environ))
    browser = None
    try:
        active = profile / "data" / "DevToolsActivePort"  # Chromium writes its port here once it listens
        port = wait_until(
            lambda: active.is_file() and active.read_text().split("\n")[0].strip(),
            60,
            f"Chromium's DevTools port (log: {profile / 'chromium.log'})",
            proc,
        )
        pages = wait_until(
            lambda: [t for t in http_json(f"http://127.0.0.1:{port}/json/list") if t.get("type") == "page"],
            30,
            "a Chromium page",
            proc,
        )
        browser = Browser(proc, pages[0]["webSocketDebuggerUrl"])
        browser.call("Page.enable")
        yield browser
    finally:
        if browser is not None:
            browser.ws.close()
        stop_process(proc)
        shutil.rmtree(profile / "data", ignore_errors=True)


@pytest.fixture(scope="session")
def web() -> Any:
    """The helpers above, for test modules (with --import-mode=importlib they cannot import conftest)."""
    from types import SimpleNamespace

    return SimpleNamespace(ads=ADS, http_json=http_json, wait_until=wait_until)
