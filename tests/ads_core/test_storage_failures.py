"""A full disk, a denied write, a read-only mount, a dead store or credentials in a URL: one line, exit 2, and
nothing half-published, in every stage and command.

The failures are simulated where the bytes are written (ParquetWriter, `os.replace`, `os.fsync` inside the
storage layer), the way the kernel reports them (OSError with its errno), since a tiny full tmpfs is not
available here. After each failure the artifact the stage had before is still whole and trusted.
"""

from __future__ import annotations

import errno
import logging
import os
import socket
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from ads_cli.main import app
from ads_core.pipeline.build import build
from ads_core.storage import manifest as mf
from ads_core.storage.errors import StorageError

SECRET = "s3cr3t-Never-Echo-Me"
ERRNOS = {
    errno.ENOSPC: "no space left",
    errno.EACCES: "permission denied",
    errno.EROFS: "read-only",
    errno.EDQUOT: "quota",
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def one_error_line(result: Any, *needles: str) -> str:
    """Exit 2, no traceback, exactly one `error:` line holding every needle and never the secret."""
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and SECRET not in result.output
    [line] = [ln for ln in result.stderr.splitlines() if ln.startswith("error:")]
    for needle in needles:
        assert needle in line, (needle, line)
    return line


def disk_full_under(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every atomic publish (the final rename) into FOLDER fails with ENOSPC; elsewhere writes go through."""
    real = os.replace

    def replace(src: Any, dst: Any) -> None:
        if str(dst).startswith(str(folder)):
            raise oserror(errno.ENOSPC, str(dst))
        real(src, dst)

    monkeypatch.setattr(os, "replace", replace)


def oserror(code: int, filename: str | None = None) -> OSError:
    cls = PermissionError if code == errno.EACCES else OSError
    return cls(code, os.strerror(code), filename)


# ---------------------------------------------------------------------------------------------
# `ads format`: every place the bytes go


@pytest.mark.parametrize("code", sorted(ERRNOS))
@pytest.mark.parametrize("where", ["parquet write", "rename", "fsync"])
def test_ads_format_disk_errors_are_one_line(tmp_path, monkeypatch, code, where):
    src = tmp_path / "rows.jsonl"
    src.write_text('{"question": "What is 1+1?", "answer": "2"}\n{"question": "What is 2+2?", "answer": "4"}\n')
    out = tmp_path / "out"
    if where == "parquet write":  # pyarrow's own OSError: errno set, no file name
        monkeypatch.setattr(pq.ParquetWriter, "write_table", lambda *a, **k: (_ for _ in ()).throw(oserror(code)))
    elif where == "rename":
        real = os.replace

        def replace(src_: Any, dst: Any) -> None:
            if str(out) in str(dst):
                raise oserror(code, str(dst))
            real(src_, dst)

        monkeypatch.setattr(os, "replace", replace)
    else:
        monkeypatch.setattr(os, "fsync", lambda fd: (_ for _ in ()).throw(oserror(code)))
    result = CliRunner().invoke(app, ["format", str(src), "--out", str(out)])
    one_error_line(result, str(out), ERRNOS[code])
    published = [p.name for p in (out / "formatted").glob("*")] if (out / "formatted").exists() else []
    assert published == [], published  # no artifact, no manifest, no temp file left behind


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS])
def test_ads_eval_sets_disk_errors_are_one_line(tmp_path, monkeypatch, code):
    """Another command: eval sets are formatted in a scratch folder (the line names it), then copied to OUT/eval."""
    monkeypatch.setattr(pq.ParquetWriter, "write_table", lambda *a, **k: (_ for _ in ()).throw(oserror(code)))
    result = CliRunner().invoke(app, ["eval-sets", "--out", str(tmp_path / "out"), "--names", "aime24"])
    one_error_line(result, "storage error at /", "aime24", ERRNOS[code])
    assert not list((tmp_path / "out").rglob("*.parquet"))


# ---------------------------------------------------------------------------------------------
# every stage of a build


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, tiny_build_config: Any, tiny_sample_lines: list[str]) -> Path:
    root = tmp_path_factory.mktemp("full-disk")
    (root / "src.jsonl").write_text("\n".join(tiny_sample_lines) + "\n")
    build(str(root / "src.jsonl"), str(root / "out"), tiny_build_config)
    return root


STAGE_DIRS = {
    "format": "formatted",
    "score": "scores/shards",
    "merge": "scores/scores",
    "cluster": "clusters",
    "sort": "final",
    "report": "report",
}


@pytest.mark.parametrize("stage", list(STAGE_DIRS))
def test_a_full_disk_in_any_stage_is_one_line_and_keeps_the_previous_artifact(
    built: Path, tiny_build_config: Any, monkeypatch: pytest.MonkeyPatch, stage: str
):
    from ads_prefect.tasks.retries import is_transient

    out = built / "out"
    folder = out / STAGE_DIRS[stage]
    disk_full_under(folder, monkeypatch)
    cfg = tiny_build_config.model_copy(update={"run": tiny_build_config.run.replaced(force_from=stage)})
    with pytest.raises(StorageError) as info:
        build(str(built / "src.jsonl"), str(out), cfg)
    text = str(info.value)
    assert "\n" not in text and "no space left" in text and str(folder) in text
    assert not is_transient(info.value) and not is_transient(oserror(errno.ENOSPC))  # never retried
    monkeypatch.undo()
    stage_dir = out / ("scores" if stage == "merge" else STAGE_DIRS[stage])
    if stage == "score":
        stage_dir = next((out / "scores" / "shards").iterdir())
    assert mf.verify(str(stage_dir)) is not None  # the stage's previous artifact is whole and trusted


# ---------------------------------------------------------------------------------------------
# the score cache only saves time: a cache that cannot be written or read never fails a build


def test_a_full_score_cache_degrades_to_scoring_without_it(
    built: Path, tiny_build_config: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: Any
):
    cache = tmp_path / "score-cache"
    disk_full_under(cache, monkeypatch)
    score = tiny_build_config.score.replaced(cache_uri=str(cache))
    cfg = tiny_build_config.model_copy(update={"score": score})
    with caplog.at_level(logging.WARNING, logger="ads.score"):
        result = build(str(built / "src.jsonl"), str(tmp_path / "out"), cfg)
    scores = result.manifest("scores")
    assert scores.counts["rows"] == 24 and scores.counts["rows_scored"] == 24  # the build finished
    [warning] = [r.getMessage() for r in caplog.records if "score cache" in r.getMessage()]
    assert str(cache) in warning and "no space left" in warning and "scoring without the cache" in warning
    assert "--out" not in warning
    assert not any(cache.rglob("part-*"))


def test_an_unreadable_score_cache_is_a_warning_and_no_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog):
    import fsspec.implementations.local as local
    import pyarrow as pa

    from ads_core.stages.score.cache import ScoreCache

    cache = ScoreCache(str(tmp_path / "score-cache"), "space")
    cache.add(pa.table({"row_key": ["a"], "difficulty": [1.0]}))
    assert cache.lookup(["a"])  # readable: found
    real_ls = local.LocalFileSystem.ls

    def denied(self: Any, path: str, *a: Any, **k: Any) -> Any:
        if str(path).startswith(str(tmp_path / "score-cache")):
            raise oserror(errno.EACCES, str(path))
        return real_ls(self, path, *a, **k)

    monkeypatch.setattr(local.LocalFileSystem, "ls", denied)
    with caplog.at_level(logging.WARNING, logger="ads.score"):
        assert cache.lookup(["a"]) == {}
        assert cache.add(pa.table({"row_key": ["b"], "difficulty": [2.0]})) is None  # not tried again
    [warning] = [r.getMessage() for r in caplog.records]
    assert "cannot read the score cache" in warning and str(tmp_path / "score-cache") in warning
    assert "permission denied" in warning and "--out" not in warning


# ---------------------------------------------------------------------------------------------
# object storage and credentials in URLs


@pytest.fixture
def s3_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAFORMATTEST000001")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("ADS_S3_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")  # nothing listens there
    return monkeypatch


def sample(tmp_path: Path) -> str:
    (tmp_path / "rows.jsonl").write_text('{"question": "What is 1+1?", "answer": "2"}\n')
    return str(tmp_path / "rows.jsonl")


def test_ads_format_to_a_dead_endpoint_is_one_line(tmp_path, s3_env):
    result = CliRunner().invoke(app, ["format", sample(tmp_path), "--out", "s3://ads-dead/run"])
    one_error_line(result, "s3://ads-dead/run", "unreachable", "ADS_S3_ENDPOINT_URL")


def test_ads_format_with_partial_credentials_is_one_line(tmp_path, s3_env):
    s3_env.setenv("AWS_SECRET_ACCESS_KEY", "")
    result = CliRunner().invoke(app, ["format", sample(tmp_path), "--out", "s3://ads-dead/run"])
    one_error_line(result, "credentials", "AWS_SECRET_ACCESS_KEY")


def test_an_endpoint_with_credentials_in_it_is_refused_without_echoing_them(tmp_path, s3_env):
    s3_env.setenv("ADS_S3_ENDPOINT_URL", f"http://minio:{SECRET}@127.0.0.1:9")
    result = CliRunner().invoke(app, ["format", sample(tmp_path), "--out", "s3://ads-dead/run"])
    one_error_line(result, "ADS_S3_ENDPOINT_URL", "credentials", "user:password@")


@pytest.mark.parametrize(
    "args",
    [
        ["format", f"s3://AKIAX:{SECRET}@bucket/rows.jsonl", "--out", "OUT"],
        ["format", f"http://user:{SECRET}@example.invalid/rows.jsonl", "--out", "OUT"],
        ["format", "SRC", "--out", f"s3://AKIAX:{SECRET}@bucket/run"],
        ["build", "SRC", "--out", f"s3://AKIAX:{SECRET}@bucket/run"],
        ["build", f"s3://AKIAX:{SECRET}@bucket/rows.jsonl", "--out", "OUT"],
        ["train", f"s3://AKIAX:{SECRET}@bucket/run/final/train.parquet", "--dry-run"],
    ],
)
def test_credentials_in_a_source_or_out_url_are_refused_and_never_echoed(tmp_path, s3_env, args):
    args = [sample(tmp_path) if a == "SRC" else str(tmp_path / "out") if a == "OUT" else a for a in args]
    line = one_error_line(CliRunner().invoke(app, args), "credentials")
    assert "AKIAX" not in line


def test_storage_errors_never_carry_credentials():
    err = StorageError(f"s3://AKIAX:{SECRET}@bucket/run", "denied", "fix it", f"http://u:{SECRET}@host:9000")
    assert SECRET not in str(err) and "s3://bucket/run" in str(err) and "http://host:9000" in str(err)
    import pickle

    assert str(pickle.loads(pickle.dumps(err))) == str(err)  # shipped between processes intact
