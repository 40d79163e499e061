"""A build into S3 through a faulty network: moto's server behind a small proxy on 127.0.0.1 that, at a seeded
rate, resets connections (before and after the request reached the store), answers 500/503 or delays the reply.
The build completes and its final artifact equals a clean local build's, with exactly the same objects (nothing
temporary or partial). No request meets more than two faults in a row, so the client's bounded in-place retries
(ADS_S3_MAX_ATTEMPTS=3) absorb every fault; a stage-level retry is tested in test_s3.py."""

from __future__ import annotations

import collections
import http.client
import random
import socket
import struct
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

BUCKET = "ads-faults"
SEED = 13
RATES = {"reset-before": 0.04, "reset-after": 0.04, "500": 0.04, "503": 0.04, "delay": 0.06}
MAX_IN_A_ROW = 2  # faults one request (method + path) can meet consecutively; below the client's 3 attempts
MAX_REQUESTS = 5000  # a runaway retry loop fails the test instead of running on
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "expect", "proxy-connection", "upgrade"}


class FaultProxy:
    """Threaded HTTP proxy in front of one loopback upstream; fault decisions are seeded per (method, path, n-th
    time seen), so they do not depend on how the build's threads interleave."""

    def __init__(self, upstream: str, seed: int = SEED) -> None:
        parts = urlsplit(upstream)
        assert parts.hostname == "127.0.0.1", "the proxy only talks to loopback"
        self.upstream = (parts.hostname, int(parts.port or 80))
        self.seed = seed
        self.lock = threading.Lock()
        self.seen: collections.Counter[str] = collections.Counter()
        self.in_a_row: collections.Counter[str] = collections.Counter()
        self.faults: collections.Counter[str] = collections.Counter()
        self.requests = 0
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, name="s3-fault-proxy", daemon=True)

    def __enter__(self) -> FaultProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)

    def decide(self, method: str, path: str) -> str | None:
        key = f"{method} {path}"
        with self.lock:
            self.requests += 1
            if self.requests > MAX_REQUESTS:
                return "503"  # over budget: fail loudly rather than run on
            n = self.seen[key]
            self.seen[key] += 1
            draw = random.Random(f"{self.seed}:{key}:{n}").random()
            fault, edge = None, 0.0
            for name, rate in RATES.items():
                edge += rate
                if draw < edge:
                    fault = name
                    break
            if fault is not None and self.in_a_row[key] >= MAX_IN_A_ROW:
                fault = None
            self.in_a_row[key] = self.in_a_row[key] + 1 if fault else 0
            if fault:
                self.faults[fault] += 1
            return fault

    def forward(self, method: str, path: str, headers: Any, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        conn = http.client.HTTPConnection(*self.upstream, timeout=60)
        try:
            conn.request(
                method,
                path,
                body=body or None,
                headers={k: v for k, v in headers.items() if k.lower() not in HOP_BY_HOP},
            )
            resp = conn.getresponse()
            return resp.status, resp.getheaders(), resp.read()
        finally:
            conn.close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def reset(self) -> None:
                """Abort the connection with a TCP RST, as a flaky network or load balancer does."""
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.close_connection = True
                self.connection.close()

            def handle_any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                assert "chunked" not in (self.headers.get("Transfer-Encoding") or ""), "chunked uploads unsupported"
                body = self.rfile.read(length) if length else b""
                fault = proxy.decide(self.command, self.path)
                if fault == "reset-before":
                    return self.reset()
                if fault in ("500", "503"):
                    code = "InternalError" if fault == "500" else "ServiceUnavailable"
                    payload = f"<Error><Code>{code}</Code><Message>injected</Message></Error>".encode()
                    self.send_response(int(fault))
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(payload)
                    return None
                if fault == "delay":
                    time.sleep(random.Random(f"{proxy.seed}:{self.path}").uniform(0.1, 0.8))
                status, headers, data = proxy.forward(self.command, self.path, self.headers, body)
                if fault == "reset-after":  # the store applied the request; the reply is lost
                    return self.reset()
                self.send_response(status)
                for name, value in headers:
                    if name.lower() not in HOP_BY_HOP and name.lower() != "content-length":
                        self.send_header(name, value)
                original = dict((k.lower(), v) for k, v in headers).get("content-length")
                self.send_header("Content-Length", original if self.command == "HEAD" and original else str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                return None

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = handle_any

        return Handler


@pytest.fixture(scope="module")
def faulty_build(
    helpers: Any, moto_s3: Any, prefect_api: Any, sample_source: Path, tiny_model: str
) -> Iterator[dict[str, Any]]:
    import boto3

    boto3.client("s3", endpoint_url=moto_s3.endpoint, region_name="us-east-1").create_bucket(Bucket=BUCKET)
    started = time.monotonic()
    with FaultProxy(moto_s3.endpoint) as proxy, pytest.MonkeyPatch.context() as mp:
        mp.setenv("ADS_S3_ENDPOINT_URL", proxy.endpoint)
        mp.setenv("ADS_S3_MAX_ATTEMPTS", "3")
        state, result = helpers.run_build(sample_source, f"s3://{BUCKET}/builds/gsm8k60")
    assert state.is_completed(), state.message
    result.update(
        flow_run_id=state.state_details.flow_run_id,
        requests=proxy.requests,
        faults=dict(proxy.faults),
        seconds=time.monotonic() - started,
    )
    print(f"\nS3 fault proxy: {proxy.requests} requests, faults {dict(proxy.faults)}, build {result['seconds']:.1f} s")
    yield result


def test_build_through_faults_matches_a_clean_build(
    helpers: Any, faulty_build: dict[str, Any], clean_build: dict[str, Any]
):
    assert set(faulty_build["faults"]) == set(RATES), faulty_build["faults"]  # every kind was injected
    assert faulty_build["requests"] < MAX_REQUESTS
    assert faulty_build["final_uri"] == f"s3://{BUCKET}/builds/gsm8k60/final/train.parquet"
    assert set(faulty_build["stages"].values()) == {"Completed"}
    final, clean = (helpers.read_final(b["final_uri"]) for b in (faulty_build, clean_build))
    helpers.assert_same_rows(final, clean)


def test_faults_leave_exactly_the_clean_builds_objects(faulty_build: dict[str, Any], clean_build: dict[str, Any]):
    from ads_core import storage

    local = Path(clean_build["out"])
    expected = {p.relative_to(local).as_posix() for p in local.rglob("*") if p.is_file()}
    expected = {p for p in expected if not p.startswith("clusters/previous/")}  # from later in-place refreshes
    expected = {p for p in expected if not p.startswith(".lock/")}  # a local OUT's lock; an s3:// OUT's: its bucket's
    fs, _ = storage.get_fs(f"s3://{BUCKET}/")  # straight to moto, past the proxy
    prefix = f"{BUCKET}/builds/gsm8k60/"
    got = {path.removeprefix(prefix) for path in fs.find(prefix)}
    assert got == expected
    for name in ("formatted/train.parquet", "final/train.parquet"):  # same rows in the intermediate artifacts too
        remote = storage.read_parquet(f"s3://{prefix}{name}").drop_columns(["extra_info"])
        assert remote.equals(storage.read_parquet(str(local / name)).drop_columns(["extra_info"])), name
