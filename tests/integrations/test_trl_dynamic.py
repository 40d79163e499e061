"""DAPO-style dynamic sampling in TRL's loop (kind ``dynamic``): groups whose rewards all agree are dropped and more
generation batches are rolled out in the same step; what each step trained on and what it rolled out is logged.

One real 2-step run with the tiny policy (8 prompts x 2 completions of 8 tokens; the parity reward of
``trl_helpers.score``, so about half the groups are informative), plus the pieces it is made of, tested alone:
the merge of picked groups from several generation batches, and the feed's state with extra draws.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from ads_core.config.sampler import DynamicSamplingConfig
from ads_core.sampler.dynamic import DynamicSamplingSampler, informative
from ads_core.train.trl.dynamic import merge_groups

pytest.importorskip("trl")

from ads_core.sampler.checkpoint import read_checkpoint  # noqa: E402
from ads_core.train.options import TrainConfig  # noqa: E402
from ads_core.train.run import train  # noqa: E402
from ads_core.train.trl.feed import FeedbackSampler  # noqa: E402


def test_a_dynamic_step_trains_on_informative_groups_and_counts_its_rollouts(
    final_artifact: Path, trl_helpers, tmp_path: Path
):
    sampler = {"kind": "dynamic", "dynamic": {"max_draws": 4}}
    cfg = TrainConfig(trainer="trl", steps=2, run_dir=str(tmp_path), sampler=sampler, **trl_helpers.sizes)
    result = train(str(final_artifact), cfg, score=trl_helpers.score)
    steps = result.steps
    assert [s["step"] for s in steps] == [1, 2]
    for s in steps:
        assert s["completions"] == 16  # the step keeps its shape: 8 groups x 2 completions
        assert 1 <= s["rollout_batches"] <= 4 and s["rollout_prompts"] == 8 * s["rollout_batches"]
        assert s["informative_groups"] <= s["rollout_prompts"]
        if s["informative_groups"] >= 8:  # enough were found: every trained group has a gradient
            assert all(0.0 < v < 1.0 for v in s["success"]), s
        else:  # max_draws ran out: the informative ones are all in, topped up with dropped ones
            assert s["rollout_batches"] == 4 and sum(0.0 < v < 1.0 for v in s["success"]) == s["informative_groups"]
    assert sum(s["rollout_batches"] for s in steps) > 2  # about half the groups agree: it did draw again
    saved = read_checkpoint(result.last_checkpoint, 2)[0]
    rolled = sum(s["rollout_batches"] for s in steps)
    assert saved.kind == "dynamic" and saved.trainer["updates"] == 2 and saved.trainer["extra_draws"] == rolled - 2
    assert saved.sampler["draws"] == rolled  # the sampler saw every generation batch
    assert saved.sampler["informative"] == sum(s["informative_groups"] for s in steps)
    assert steps[-1]["metrics"]["dynamic/draws"] == rolled


def _output(prompt_width: int, completion_width: int, groups: int, g: int, offset: int) -> dict:
    """A fake TRL generation-batch dict: row i's tensors hold offset + i, padding is -1 / 0."""
    n = groups * g
    rows = torch.arange(n)[:, None] + offset
    return {
        "prompt_ids": rows.repeat(1, prompt_width),
        "prompt_mask": torch.ones(n, prompt_width, dtype=torch.long),
        "completion_ids": rows.repeat(1, completion_width),
        "completion_mask": torch.ones(n, completion_width, dtype=torch.long),
        "advantages": (torch.arange(n) + offset).float(),
        "num_items_in_batch": torch.tensor(n * completion_width),
    }


def test_merging_picked_groups_pads_prompts_left_and_completions_right():
    g, pad = 2, -1
    a, b = _output(3, 2, 2, g, 0), _output(5, 4, 2, g, 100)
    merged = merge_groups([a, b], [(0, 1), (1, 0)], g, pad)
    assert merged["advantages"].tolist() == [2.0, 3.0, 100.0, 101.0]
    assert merged["prompt_ids"].tolist()[0] == [pad, pad, 2, 2, 2]  # left-padded to the widest prompt
    assert merged["prompt_mask"].tolist()[0] == [0, 0, 1, 1, 1]
    assert merged["completion_ids"].tolist()[1] == [3, 3, pad, pad]  # right-padded to the widest completion
    assert merged["completion_ids"].tolist()[2] == [100] * 4
    assert int(merged["num_items_in_batch"]) == 2 * 2 + 2 * 4  # real completion tokens of the picked rows only
    with pytest.raises(RuntimeError, match="pixel_values"):
        merge_groups([{**a, "pixel_values": torch.zeros(4, 1)}], [(0, 0)], g, pad)


def test_the_feed_state_with_extra_draws_resumes_exactly():
    """Draw, feed back, draw extra within a step, checkpoint; the restored feed continues exactly."""
    cid, rank = np.repeat(np.arange(3), 10), np.tile(np.arange(10), 3)
    cfg = DynamicSamplingConfig(batch_size=4, seed=3, max_draws=3)

    def feed() -> FeedbackSampler:
        return FeedbackSampler(DynamicSamplingSampler(cid, rank, cfg), "dynamic", 2, 1, 30, 10)

    def step(f: FeedbackSampler, rng: np.random.Generator, first: list[int]) -> list[list[int]]:
        seen, correct = [first], rng.integers(0, 2, 8)
        fb = f.feedback(np.repeat(first, 2), correct, correct)
        while informative(fb.group_success).sum() < 4 and len(seen) < 3:
            draw = f.draw_extra()
            seen.append(draw.rows)
            correct = rng.integers(0, 2, 8)
            fb = f.feedback_extra(draw, np.repeat(draw.rows, 2), correct, correct)
        return seen

    def take(iterator, n: int = 8) -> list[int]:
        return [next(iterator) for _ in range(n)][::2]  # each row comes num_generations = 2 times

    a = feed()
    it = iter(a)
    first = take(it)
    prefetched = take(it)  # as accelerate does: the next batch is drawn before this step's rewards exist
    step(a, np.random.default_rng(0), first)
    state = json.loads(json.dumps(a.state_dict()))  # the checkpoint after step 1
    assert state["extra_draws"] == a.extra_draws > 0 and state["updates"] == 1
    assert [d["rows"] for d in state["pending"]] == [prefetched]
    b = feed()
    b.load_state_dict(state, DynamicSamplingSampler(cid, rank, cfg))
    ib = iter(b)
    assert take(ib) == prefetched  # the pending batch comes back first
    assert take(ib) == take(it)  # then both draw the same next batch
    assert step(a, np.random.default_rng(1), prefetched) == step(b, np.random.default_rng(1), prefetched)
    assert a.state_dict() == b.state_dict()
    old = {k: v for k, v in state.items() if k != "extra_draws"} | {"version": 1}  # a version-1 state still loads
    c = feed()
    c.load_state_dict(old, DynamicSamplingSampler(cid, rank, cfg))
    assert c.extra_draws == 0 and c.updates == 1
