"""The flow keys the format stage on the bytes it read, so an artifact made from a source as it was after an append
is never reused for the source without those rows.

The attack (a nightly refresh reading a file another job still appends to): rows are appended after the build
hashed the source and before the format stage read it; then the file is cut back. The build computed its key from
the cut-back bytes, but its manifest records the key of the bytes it read (with the appended rows), so the rebuild,
whose key is that of the cut-back bytes, must not reuse it: it recomputes the stage and ends with exactly the
cut-back rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import polars as pl

from ads_core.ingest.convert import format_dataset
from ads_prefect.runtime.progress import set_progress_factory


def sample_ids(uri: str) -> list[int]:
    return sorted(pl.read_parquet(uri, columns=["sample_id"])["sample_id"].to_list())


def test_a_source_appended_during_a_build_then_cut_back_is_rebuilt_to_the_cut_back_rows(
    helpers: Any, prefect_api: Any, tiny_model: str, sample_source: Path, tmp_path: Path
):
    lines = sample_source.read_text().splitlines()
    source, out = tmp_path / "appended.jsonl", tmp_path / "out"
    source.write_text("\n".join(lines[:24]) + "\n")
    cut_back = source.read_bytes()

    @contextmanager
    def another_job_appends(description: str, _: int | None, unit: str = "rows") -> Iterator[None]:
        if description == "format":  # the flow has hashed the source; the stage is about to read it
            with source.open("a") as fh:
                fh.write("\n".join(lines[24:36]) + "\n")
        yield None

    set_progress_factory(another_job_appends)
    try:
        state, first = helpers.run_build(source, out, dataset="appended")
    finally:
        set_progress_factory(None)
    assert state.is_completed(), state.message
    assert first is not None and first["refresh"]["rows"] == 36  # the build used the rows it read

    source.write_bytes(cut_back)
    state, second = helpers.run_build(source, out, dataset="appended")
    assert state.is_completed(), state.message
    assert second is not None
    assert second["stages"]["format"] != "Cached", second["stages"]  # the manifest describes the bytes read, not these
    reference = format_dataset(str(source), str(tmp_path / "reference")).output_uri("train")
    assert sample_ids(second["final_uri"]) == sample_ids(reference)  # exactly the cut-back rows
