"""`ads compare --publish`: the ads-compare flow writes the comparison and publishes its tables and plot as one
markdown artifact of its run (runs written by the test; the session's Prefect server)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from typer.testing import CliRunner


def write_run(folder: Path, curve: dict[int, float]) -> str:
    folder.mkdir(parents=True)
    (folder / "steps.jsonl").write_text("".join(json.dumps({"step": s, "rollout_prompts": 8}) + "\n" for s in (1, 2)))
    records = [
        {"step": s, "set": "math500", "mean_at_k": a, "pass_at_k": a, "maj_at_k": a, "k": 2, "n": 8}
        | {"ci_low": 0.0, "ci_high": 1.0, "prompts_rolled_out": 8 * s}
        for s, a in curve.items()
    ]
    (folder / "eval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(folder)


def test_publish_runs_the_flow_and_the_comparison_is_an_artifact_of_its_run(prefect_api: Any, tmp_path: Path):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    from ads_cli.main import app

    base = write_run(tmp_path / "uniform", {0: 0.25, 2: 0.5})
    other = write_run(tmp_path / "ads", {0: 0.25, 1: 0.5, 2: 0.75})
    out = tmp_path / "cmp"
    result = CliRunner().invoke(app, ["compare", base, other, "--out", str(out), "--publish"])
    assert result.exit_code == 0, result.output
    assert "published:" in result.output and (out / "compare.png").is_file()
    with get_client(sync_client=True) as client:
        (artifact,) = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["ads-compare-uniform-vs-ads"])), limit=1
        )
    assert artifact.type == "markdown" and artifact.flow_run_id is not None
    with get_client(sync_client=True) as client:
        name = client.read_flow_run(artifact.flow_run_id).name
    assert re.fullmatch(r"compare-uniform-vs-ads-\d{8}T\d{6}Z", name), name  # named like build-, train-, demo-
    assert "| ads | 0.750 | 1/1 | 1 | 0.50 | 0.50 |" in artifact.data and "data:image/png;base64," in artifact.data
