"""DOTS+RR under TRL on CPU: the `dots` sampler with reference rollouts by the policy being trained and rollout
replay, on the shared tiny artifact (parity reward, see conftest). One 4-step run, and the same run stopped after
its step-2 checkpoint and resumed (what a kill -9 between steps leaves): same batches, rewards, replayed groups
and final weights."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

pytest.importorskip("trl")

from ads_core.train.options import TrainConfig  # noqa: E402
from ads_core.train.run import train  # noqa: E402


@pytest.fixture(scope="module")
def predictor_dir(final_artifact: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A predictor over random embeddings of the artifact's rows (one quick fit: only the plumbing is tested)."""
    from ads_core.sampler.dots import artifact, predictor

    ids = [str(s) for s in pq.read_table(final_artifact, columns=["sample_id"]).column("sample_id").to_pylist()]
    rng = np.random.default_rng(0)
    z = rng.normal(size=(len(ids), 16)).astype(np.float32)
    model = predictor.fit(z, {"a": rng.random(len(ids))}, predictor.FitSettings(hidden=8, layers=1, epochs=1))
    folder = tmp_path_factory.mktemp("dots") / "predictor"
    artifact.save(str(folder), model, z, ids, {})
    return str(folder)


def _config(run_dir: Path, steps: int, predictor: str, trl_helpers) -> TrainConfig:
    sizes = trl_helpers.sizes
    return TrainConfig(
        trainer="trl",
        steps=steps,
        run_dir=str(run_dir),
        sampler={"kind": "dots", "dots": {"predictor": predictor, "reference_size": 8, "mu": 2}},
        trl={**sizes["trl"], "replay": True, "save_steps": 1, "rollout_replay": {"buffer_size": 16}},
        eval_sets=sizes["eval_sets"],
    )


def test_dots_with_replay_logs_rounds_replays_from_step_3_and_resumes_exactly(
    final_artifact: Path, predictor_dir: str, trl_helpers, tmp_path: Path
):
    whole = train(str(final_artifact), _config(tmp_path / "a", 4, predictor_dir, trl_helpers), score=trl_helpers.score)
    steps = whole.steps
    assert [len(s["rows"]) for s in steps] == [4, 4, 4, 4]  # delta * B = 4 fresh prompts of the step's 8
    assert [s["replayed_groups"] for s in steps[:2]] == [0, 0]  # the first round (mu = 2 steps) is all fresh
    assert all(s["replayed_groups"] > 0 for s in steps[2:]), [s["buffer_groups"] for s in steps]
    assert all(st >= 1 for s in steps[2:] for st in s["replayed_staleness"])
    rounds = [s["metrics"]["dots/round"] for s in steps]
    assert rounds == [1.0, 1.0, 2.0, 2.0] and all(s["metrics"]["dots/reference_rollouts"] == 8 for s in steps)
    assert [s["metrics"]["dots/new_round"] for s in steps] == [1.0, 0.0, 1.0, 0.0]
    assert all(-1.0 <= s["metrics"].get("dots/rho", 0.0) <= 1.0 for s in steps)
    assert sum(s["reference_rollout_seconds"] for s in steps) > 0
    for s in steps:
        assert s["step_seconds"] >= s["fresh_rollout_seconds"] > 0 and s["update_seconds"] >= 0
        assert 0.0 <= s["metrics"]["dots/effective_share"] <= 1.0

    run_dir = tmp_path / "b"
    first = train(str(final_artifact), _config(run_dir, 2, predictor_dir, trl_helpers), score=trl_helpers.score)
    assert [s["step"] for s in first.steps] == [1, 2]
    resumed = train(str(final_artifact), _config(run_dir, 4, predictor_dir, trl_helpers), score=trl_helpers.score)
    assert resumed.resumed_from == 2
    for a, b in zip(resumed.steps, steps, strict=True):
        assert (a["rows"], a["success"], a["replayed_rows"]) == (b["rows"], b["success"], b["replayed_rows"])
        assert a["metrics"].get("dots/rho") == b["metrics"].get("dots/rho")
    weights = [Path(r.last_checkpoint) / "model.safetensors" for r in (whole, resumed)]
    assert weights[0].read_bytes() == weights[1].read_bytes()  # identical final weights
