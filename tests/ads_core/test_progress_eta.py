"""Times and progress you can trust (issue 53): an ETA measured from throughput converges on the time really left
(a fake clock drives the scorer's batches), and the heartbeat names the work in progress, never finished work."""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import pytest

from ads_core.common import progress
from ads_core.stages.score.scorer import plan_batches, run_order

ROWS = 500


def estimates(batches: list[np.ndarray], lengths: np.ndarray, unit: str) -> list[tuple[float, float, float, float]]:
    """(share of the run's time gone, ETA, seconds really left, whole run) after each batch, counting UNIT (rows or
    tokens) on a fake clock where a batch costs its padded tokens (1 ms each) plus 50 ms: the scorer in small."""
    cost = [1e-3 * len(b) * int(lengths[b].max()) + 0.05 for b in batches]
    whole, now = sum(cost), [0.0]
    total = int(lengths.sum()) if unit == "tokens" else len(lengths)
    lines = progress.ChunkLines("score", total, unit, clock=lambda: now[0])
    out = []
    for i, batch in enumerate(batches):
        now[0] += cost[i]
        lines.advance(int(lengths[batch].sum()) if unit == "tokens" else len(batch))
        eta = lines.eta_seconds(now[0])
        if eta is not None and lines.done < total:
            out.append((now[0] / whole, eta, whole - now[0], whole))
    return out


@pytest.fixture(scope="module")
def lengths() -> np.ndarray:
    """Row lengths like MATH-500's under a small tokenizer: 40 to 2048 tokens, most short."""
    return np.clip(np.random.default_rng(7).lognormal(5.3, 1.2, ROWS), 40, 2048).astype(np.int64)


def test_the_scorers_eta_converges_on_the_time_really_left(lengths: np.ndarray):
    """Regression: "27/500 rows, eta 2:47" finished at 13:14 (MATH-500 with SmolLM2). The scorer counted rows and
    ran its batches shortest first; it now reports tokens and runs its batches in a seeded shuffle."""
    seen = estimates(run_order(plan_batches(lengths, 16384, 0.1)), lengths, "tokens")
    gone, eta, left, whole = seen[0]
    assert abs(eta - left) < 0.1 * whole  # the very first estimate is already within a tenth of the run
    assert max(abs(eta - left) / whole for gone, eta, left, whole in seen if gone >= 0.25) < 0.03
    early = [abs(eta - left) for gone, eta, left, _ in seen if gone < 0.5]
    late = [abs(eta - left) for gone, eta, left, _ in seen if gone >= 0.5]
    assert max(late) < max(early)  # and it gets better as the run goes


def test_rows_in_length_order_make_the_early_eta_a_fraction_of_the_truth(lengths: np.ndarray):
    """The bug's shape, for comparison: rows per second over the shortest rows first."""
    gone, eta, left, _ = estimates(plan_batches(lengths, 16384, 0.1), lengths, "rows")[0]
    assert eta < left / 4, (gone, eta, left)


def test_a_score_shard_counts_its_work_in_tokens(tmp_path):
    """score_shard opens its bar over the tokens to score and the scorer's reports add up to them."""
    import pyarrow as pa

    from ads_core import storage
    from ads_core.config.build import ScoreConfig
    from ads_core.stages.score import stage as score
    from ads_core.stages.score.scorer import ScoreBatchResult

    class Tokenizer:
        eos_token_id = 0

        def __call__(self, text: str, add_special_tokens: bool = False) -> dict[str, list[int]]:
            return {"input_ids": [1] * len(text.split())}

    class Backend:
        name = "stub"

        def score(self, rows, progress=None):  # what every scorer does: tokens per batch
            for batch in run_order(plan_batches([len(r.input_ids) for r in rows], 64)):
                progress(sum(len(rows[int(i)].input_ids) for i in batch))
            n = len(rows)
            lengths = np.array([len(r.input_ids) for r in rows], dtype=np.int32)
            return ScoreBatchResult(np.zeros((n, 2), np.float32), np.ones(n), lengths, lengths - 1)

    questions = [" ".join(["word"] * (3 + i)) for i in range(12)]
    info = [{"question": q, "solution": "so " * (i + 1), "answer": str(i)} for i, q in enumerate(questions)]
    formatted = str(tmp_path / "formatted.parquet")
    storage.write_parquet(formatted, pa.table({"sample_id": list(range(12)), "extra_info": info}))
    shown: list[tuple[str, int | None, str]] = []
    done: list[int] = []

    @contextmanager
    def factory(description: str, total: int | None, unit: str = "rows"):
        shown.append((description, total, unit))
        yield done.append

    cfg = ScoreConfig(cache=False, difficulty="nll_mean")
    score.score_shard(formatted, str(tmp_path / "s" / "scores.parquet"), 0, cfg, factory, (Backend(), Tokenizer()))
    ((description, total, unit),) = shown
    assert (description, unit) == ("score: 12 rows", "tokens") and total == sum(done) > 12


def test_the_run_order_is_a_seeded_shuffle_of_every_batch():
    batches = [np.asarray([i]) for i in range(40)]
    once, again = run_order(batches), run_order(batches)
    assert [int(b[0]) for b in once] == [int(b[0]) for b in again] != list(range(40))
    assert sorted(int(b[0]) for b in once) == list(range(40))


def test_a_bar_that_finished_is_no_longer_the_work_in_progress(capsys: pytest.CaptureFixture):
    """Regression: "format: still working (1:25 elapsed)" after format had finished (the heartbeat kept naming the
    last bar's job); and a bar drawn into a file (stderr here is not a terminal) left a line of bar characters."""
    from ads_cli.common import BAR_LINE, progress_bar

    progress.phase("build: starting the ads-build flow", announce=False)
    with progress_bar("format rows", 3) as advance:
        assert progress.current() == "format rows"
        advance(3)
    assert progress.current() == "build: starting the ads-build flow"
    with progress.working_on("model: loading the policy"):
        progress.detail("12 of at most 512 tokens")
        assert progress.current() == "model: loading the policy (12 of at most 512 tokens)"
    assert progress.current() == "build: starting the ads-build flow"
    assert not BAR_LINE.search(capsys.readouterr().err)


def test_eval_names_the_batch_in_progress_and_how_far_its_tokens_are():
    """Regression: `ads eval` on 2 AMC problems was 291 s of "generating: still working", nothing per batch."""
    import torch

    from ads_core.config.eval import EvalConfig
    from ads_core.evaluation.backends import Problem, Sample
    from ads_core.evaluation.hf import TokenCount
    from ads_core.evaluation.runner import evaluate

    seen: list[str] = []

    class Backend:
        def generate(self, problems: list[Problem], cfg: EvalConfig) -> list[list[Sample]]:
            seen.append(progress.current())
            return [[Sample(text="\\boxed{7}", tokens=3, seconds=0.0)] * cfg.k for _ in problems]

    batch = [Problem("amc23", i, [{"role": "user", "content": f"q{i}"}], "7") for i in range(5)]
    cfg = EvalConfig(k=2, batch_size=4, max_tokens=8)  # 2 problems a batch
    result = evaluate(Backend(), {"amc23": batch}, cfg, policy="p")
    assert result.per_set["amc23"]["mean_at_k"] == 1.0
    assert seen == [
        "eval p: generating amc23 problems 1-2 of 5, 4 completions (batch 1 of 3)",
        "eval p: generating amc23 problems 3-4 of 5, 4 completions (batch 2 of 3)",
        "eval p: generating amc23 problems 5-5 of 5, 2 completions (batch 3 of 3)",
    ]
    count = TokenCount(prompt_width=6, most=8)  # the transformers backend's: each decoding step says how far
    scores = torch.zeros(2, 11)
    assert count(torch.zeros(2, 8, dtype=torch.long), scores) is scores  # it changes nothing
    assert progress.current() == (
        "eval p: generating amc23 problems 5-5 of 5, 2 completions (batch 3 of 3) (3 of at most 8 tokens)"
    )
