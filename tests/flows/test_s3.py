"""`ads-build` with its artifacts on S3 (moto's standalone server on 127.0.0.1).

One build serves all checks (S3 round trips cost ~0.3 s each here): the first writes fail as a flaky store
would, the format stage is retried with backoff, and the build ends with the same artifact as a local build,
exactly the expected objects (nothing partial or temporary, no record of Prefect's), and no credentials anywhere."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

BUCKET = "ads-test"
# Object writes (put/pipe) that raise a connection reset: the flow's write preflight (check_writable) absorbs
# #1 and #2 with its own retries and succeeds with #3; then the format stage fails 3 times (#4, #5, #7).
FAIL_WRITES = (1, 2, 4, 5, 7)


@pytest.fixture(scope="module")
def h(helpers: Any) -> Any:
    return helpers


@pytest.fixture(scope="module")
def s3(moto_s3: Any, prefect_api: Any) -> Any:
    """A bucket (endpoint only: credentials come from the env)."""
    return moto_s3.with_bucket(BUCKET)


def s3_objects(prefix: str) -> dict[str, bytes]:
    from ads_core import storage

    fs, _ = storage.get_fs(f"s3://{BUCKET}/")
    return {path: fs.cat_file(path) for path in fs.find(f"{BUCKET}/{prefix}")}


@pytest.fixture(scope="module")
def flaky_s3_build(h: Any, s3: Any, sample_source: Path, tiny_model: str) -> dict[str, Any]:
    import s3fs

    calls = itertools.count(1)
    failed: list[int] = []

    def flaky(original: Any) -> Any:
        async def write(self: Any, *args: Any, **kwargs: Any) -> Any:
            n = next(calls)
            if n in FAIL_WRITES:
                failed.append(n)
                raise ConnectionResetError(f"injected S3 write failure #{n}")
            return await original(self, *args, **kwargs)

        return write

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(s3fs.S3FileSystem, "_put_file", flaky(s3fs.S3FileSystem._put_file))
        mp.setattr(s3fs.S3FileSystem, "_pipe_file", flaky(s3fs.S3FileSystem._pipe_file))
        state, result = h.run_build(sample_source, f"s3://{BUCKET}/builds/gsm8k60")
    assert state.is_completed(), state.message
    result["flow_run_id"] = state.state_details.flow_run_id
    result["failed_writes"] = failed
    return result


def test_flaky_s3_build_retries_and_matches_the_local_build(
    h: Any, flaky_s3_build: dict[str, Any], clean_build: dict[str, Any]
):
    assert flaky_s3_build["failed_writes"] == list(FAIL_WRITES)
    runs = {r.name: r for r in h.task_runs(flaky_s3_build["flow_run_id"])}
    assert runs["format"].run_count == 4 and runs["format"].state.is_completed()  # 3 transient failures, 3 retries
    assert flaky_s3_build["final_uri"] == f"s3://{BUCKET}/builds/gsm8k60/final/train.parquet"
    assert set(flaky_s3_build["stages"].values()) == {"Completed"}
    h.assert_same_rows(h.read_final(flaky_s3_build["final_uri"]), h.read_final(clean_build["final_uri"]))


def test_s3_holds_exactly_the_artifacts(flaky_s3_build: dict[str, Any], clean_build: dict[str, Any]):
    local = Path(clean_build["out"])
    expected = {p.relative_to(local).as_posix() for p in local.rglob("*") if p.is_file()}
    expected = {p for p in expected if not p.startswith("clusters/previous/")}  # from later in-place refreshes
    expected = {p for p in expected if not p.startswith(".lock/")}  # a local OUT's lock; an s3:// OUT's: its bucket's
    got = {k.removeprefix(f"{BUCKET}/builds/gsm8k60/") for k in s3_objects("")}
    assert got == expected  # the same layout; no temporary or partial objects, nothing beside OUT


def test_credentials_never_reach_storage_logs_artifacts_or_the_server(
    h: Any, s3: Any, prefect_api: Any, flaky_s3_build: dict[str, Any]
):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId
    from prefect.logging.handlers import APILogWorker

    secrets = [s3.key_id, s3.secret]
    for path, body in s3_objects("").items():  # manifests, parquet, plot
        assert not any(secret.encode() in body for secret in secrets), path
    flow_run_id = flaky_s3_build["flow_run_id"]
    APILogWorker.drain_all(timeout=10)
    with get_client(sync_client=True) as client:
        logs = client.read_logs(log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id])))
        run = client.read_flow_run(flow_run_id)
        blocks = client.read_block_documents(include_secrets=True)
    texts = [log.message for log in logs] + [json.dumps(run.parameters)]
    texts += [json.dumps(a.data) for a in h.artifacts_of(flow_run_id)]
    texts += [json.dumps(t.task_inputs, default=str) for t in h.task_runs(flow_run_id)]
    texts += [json.dumps(b.data, default=str) for b in blocks]
    assert any("injected S3 write failure" in log.message for log in logs), [log.message for log in logs]
    assert not any(secret in text for text in texts for secret in secrets)
    for db in sorted(Path(prefect_api.home).glob("prefect.db*")):  # the server's SQLite DB (+ WAL)
        assert not any(secret.encode() in db.read_bytes() for secret in secrets), db
