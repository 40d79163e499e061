"""What the TRL integration relies on, pinned: the hooks and signatures `ADSGRPOTrainer` overrides, the
`GRPOConfig` fields it sets, and `RepeatSampler`'s order, which `FeedbackSampler` reproduces. A TRL release that
moves one of them fails here, not in a training run. Plus the feed's saved state: refused as a whole, naming the
field, leaving the live sampler as it was."""

from __future__ import annotations

import dataclasses
import inspect
import itertools
import json

import numpy as np
import pytest

trl = pytest.importorskip("trl")

from transformers import Trainer  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402
from trl.trainer.utils import RepeatSampler  # noqa: E402

from ads_core.sampler.kinds import build_sampler  # noqa: E402
from ads_core.sampler.state import SamplerStateError  # noqa: E402
from ads_core.train.options import TrainConfig  # noqa: E402
from ads_core.train.trainers import sampler_config  # noqa: E402
from ads_core.train.trl import SUPPORTED_TRL  # noqa: E402
from ads_core.train.trl.feed import FeedbackSampler  # noqa: E402


def params(func) -> list[str]:
    return list(inspect.signature(func).parameters)


def test_the_supported_trl_is_installed():
    from packaging.specifiers import SpecifierSet

    assert trl.__version__ in SpecifierSet(SUPPORTED_TRL)


def test_the_hooks_we_override_keep_their_signatures():
    assert params(GRPOTrainer._get_train_sampler) == ["self", "dataset"]
    assert params(GRPOTrainer._calculate_rewards) == ["self", "inputs", "prompts", "completions", "completion_ids_list"]
    assert params(GRPOTrainer.log) == ["self", "logs", "start_time"]
    assert params(GRPOTrainer._save_checkpoint) == ["self", "model", "trial"]
    assert params(Trainer.get_batch_samples) == ["self", "epoch_iterator", "num_batches", "device"]
    assert params(Trainer._load_rng_state) == ["self", "checkpoint"]
    assert params(Trainer._load_optimizer_and_scheduler) == ["self", "checkpoint"]  # an allowed learning-rate change
    assert params(Trainer._load_from_checkpoint) == ["self", "resume_from_checkpoint", "model"]  # the one-line misfit
    assert params(Trainer._issue_warnings_after_load) == ["self", "load_result"]  # tied keys re-tied, not warned
    assert "self._issue_warnings_after_load(load_result)" in inspect.getsource(Trainer._load_from_checkpoint)
    assert "save_total_limit" in inspect.getsource(Trainer._save_checkpoint)  # None: HF rotates nothing, we do
    source = inspect.getsource(GRPOTrainer._calculate_rewards)
    assert "gather(rewards_per_func)" in source  # the rewards we read are already gathered over processes
    assert "self._calculate_rewards(inputs" in inspect.getsource(GRPOTrainer._generate_and_score_completions)
    assert "self._logs = " in inspect.getsource(GRPOTrainer.__init__)  # the per-step buffer hooks.py reads


def test_the_methods_dots_and_rollout_replay_call_keep_their_signatures():
    """Reference rollouts (ads_core/train/trl/reference.py) and rollout replay (ads_core/train/trl/replay)."""
    assert params(GRPOTrainer._tokenize_prompts) == ["self", "prompts"]
    assert params(GRPOTrainer._generate_single_turn)[:5] == [
        "self", "prompt_ids", "images", "multimodal_fields", "num_generations",
    ]  # fmt: skip
    assert params(GRPOTrainer._get_per_token_logps_and_entropies)[:7] == [
        "self", "model", "input_ids", "attention_mask", "logits_to_keep", "batch_size", "compute_entropy",
    ]  # fmt: skip
    assert params(GRPOTrainer._compute_loss) == ["self", "model", "inputs"]
    source = inspect.getsource(GRPOTrainer.__init__)
    assert "self._metrics = " in source and "self._tokenizer = " in source


def test_the_grpo_config_fields_we_set_exist():
    fields = {f.name for f in dataclasses.fields(GRPOConfig)}
    used = {
        "num_generations", "num_iterations", "max_completion_length", "temperature", "beta", "reward_weights",
        "steps_per_generation", "shuffle_dataset", "ignore_data_skip", "remove_unused_columns", "use_cpu",
        "save_total_limit", "log_completions", "lr_scheduler_type", "disable_tqdm",
    }  # fmt: skip
    assert used <= fields, used - fields


def test_the_feed_yields_in_repeat_sampler_order():
    """Same chunk of rows: TRL's RepeatSampler (no shuffle) and FeedbackSampler yield the same indices."""
    b, g, r = 4, 3, 2
    repeat = list(itertools.islice(RepeatSampler(list(range(40)), g, b, r, shuffle=False), b * g * r))

    class Fixed:
        batch_size = b

        def next_batch(self):
            return np.arange(b)

    feed = FeedbackSampler(Fixed(), "fixed", g, r, n_rows=40, steps=1)  # type: ignore[arg-type]
    assert list(itertools.islice(iter(feed), b * g * r)) == repeat


def feed_and_state():
    cid = np.repeat(np.arange(4), 10)
    rank = np.tile(np.arange(10), 4)
    cfg = sampler_config(TrainConfig(), "trl")

    def make():
        return build_sampler("ads", cid, rank, cfg, 8)

    feed = FeedbackSampler(make(), "ads", 2, 1, n_rows=40, steps=4)
    stream = iter(feed)
    for _ in range(17):  # batch 1 and the first index of batch 2: two draws, as with accelerate's prefetch
        next(stream)
    first = [r for r in feed.pending[0].rows for _ in range(2)]  # batch 1's completions, as TRL groups them
    feed.feedback(first, np.linspace(0, 1, 16), np.zeros(16))
    return feed, make, json.loads(json.dumps(feed.state_dict()))


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (("pending", 0, "rows", 0), 40, "state['pending'][0]['rows'][0]"),
        (("prompts_per_step",), 16, "state['prompts_per_step']"),
        (("kind",), "uniform", "state['kind']"),
        (("sampler", "steps"), -1, "state['steps']"),
        (("draws",), 1, "state['pending']"),
    ],
)
def test_a_bad_saved_state_is_refused_whole(path, value, field):
    feed, make, state = feed_and_state()
    before = json.dumps(feed.state_dict())
    target = state
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(SamplerStateError) as info:
        feed.load_state_dict(state, make())
    assert str(info.value).startswith(field)
    assert json.dumps(feed.state_dict()) == before  # nothing changed


def test_a_restored_feed_yields_the_pending_batch_then_draws_on():
    feed, make, state = feed_and_state()
    fresh = FeedbackSampler(make(), "ads", 2, 1, n_rows=40, steps=4)
    fresh.load_state_dict(state, make())
    next_original = feed._draw().rows  # what the uninterrupted feed draws after the pending batch
    resumed = iter(fresh)
    assert [next(resumed) for _ in range(16)][::2] == state["pending"][0]["rows"]
    assert [next(resumed) for _ in range(16)][::2] == next_original
