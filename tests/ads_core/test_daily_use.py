"""Daily use (issue 45): runs named for what they are, a refused resume that leads with what the user changed
and arrives before anything is loaded, the model card naming the sampler, and the small ones."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from ads_core.train.errors import RunStateError
from ads_core.train.plan import default_name
from ads_core.train.resume import identity
from ads_core.train.trl.final import model_card, sampler_line


def test_default_run_names_say_the_sampler_and_a_trainer_that_is_not_the_fallback():
    fallback, gpu = SimpleNamespace(name="trl", priority=0), SimpleNamespace(name="verl", priority=10)
    assert default_name("gsm8k", "uniform", fallback) == "gsm8k-uniform"
    assert default_name("gsm8k", "ads", fallback) == "gsm8k-ads"  # the name ADS runs always had
    assert default_name("gsm8k", "dots", gpu) == "gsm8k-dots-verl"
    assert default_name(None, "ads", fallback) == "dataset-ads"


RUN = {"model": "m", "trl.learning_rate": 1e-5, "trl.seed": 42, "sampler.kind": "uniform"}


def test_a_changed_sampler_kind_is_named_first_then_at_most_five_and_where_the_rest_are(tmp_path: Path):
    run_dir = tmp_path / "gsm8k-ads"
    run_dir.mkdir()
    (tmp_path / "gsm8k-ads-2").mkdir()  # taken: the new run's name is the next free one
    knobs = {f"sampler.ads.knob{i:02d}": 0.3 for i in range(20)}
    recorded = {**RUN, "sampler.uniform.batch_size": 8}
    now = {**RUN, "sampler.kind": "ads", "trl.learning_rate": 1e-4, **knobs}
    doc = {"run_id": "r", "trajectory": recorded}
    with pytest.raises(RunStateError) as info:
        identity.check_resume(str(run_dir), doc, now, [], 3)
    text = str(info.value)
    assert text.startswith(
        f"{run_dir} was trained with other options: sampler.kind: run uniform, now ads; trl.learning_rate: run "
        "1e-05, now 0.0001; sampler.ads.knob00: run null, now 0.3; sampler.ads.knob01: run null, now 0.3; "
        "sampler.ads.knob02: run null, now 0.3; and 18 more (all listed in "
    ), text
    assert "start a new run instead with name gsm8k-ads-3" in text and len(text) < 600
    listing = Path(text.split("all listed in ")[1].split(")")[0])
    assert len(listing.read_text().splitlines()) == 23  # kind, rate, 20 knobs, uniform.batch_size
    assert "\n" not in text


def test_the_check_before_loading_needs_no_weights_or_data(tmp_path: Path):
    identity.start_run(tmp_path, {**RUN, "model_weights": "sha256:a", "artifact": "sha256:b"})
    sampler = SimpleNamespace(kind="ads", ads=SimpleNamespace(model_dump=lambda mode: {"alpha": 0.3}))
    trl = SimpleNamespace(model_dump=lambda mode: {"learning_rate": 1e-5, "seed": 42})
    plan = SimpleNamespace(
        run_dir=str(tmp_path),
        model="m",
        trainer="trl",
        sampler=sampler,
        config=SimpleNamespace(trl=trl, allow_change=[]),
        train_uri=str(tmp_path / "no-such.parquet"),  # never read: the check would fail on it
    )
    with pytest.raises(RunStateError, match=r"other options: sampler\.kind: run uniform, now ads; sampler\.ads"):
        identity.check_before_loading(plan)
    plan.sampler = SimpleNamespace(kind="uniform", uniform=None)
    identity.check_before_loading(plan)  # same options: no refusal (weights and data are checked on loading)


def test_the_model_card_names_the_sampler_that_trained_it_and_an_absolute_base_model(tmp_path: Path):
    facts = {"base_model": identity.absolute_or_id(str(tmp_path)), "experiment": "x", "artifact": "a.parquet"}
    card = model_card({**facts, "sampler": "uniform", "step": 4, "prompts_per_step": 8, "trainer": "trl", "seed": 1})
    assert f"base_model: {tmp_path}\n" in card
    assert "- Sampler: `uniform` (GRPO's default: a fresh shuffle of all rows every epoch)\n" in card
    assert "- Trainer: trl; seed: 1\n" in card and "or a baseline" not in card
    assert sampler_line("dynamic") == " (DAPO-style dynamic sampling (verl's `algorithm.filter_groups`))"
    assert identity.absolute_or_id("HuggingFaceTB/SmolLM2-135M") == "HuggingFaceTB/SmolLM2-135M"


def test_ads_eval_and_ads_compare_outputs_are_ignored_by_git():
    ignored = (Path(__file__).parents[2] / ".gitignore").read_text().splitlines()
    assert {"ads-eval/", "ads-compare/", "ads-runs/", "ads-out/"} <= set(ignored)


def test_a_training_step_line_has_reward_learning_rate_seconds_per_step_and_eta():
    from ads_core.common.progress import StepLines

    lines = StepLines(20, "ads-seed0")
    first = {"step": 11, "reward_mean": 0.25, "learning_rate": 1e-6, "seconds": 4.0}  # resumed at step 10
    assert lines.line(first, now=100.0) == "ads-seed0: step 11/20  reward 0.250  lr 1.00e-06  4.0 s/step  eta 0:36"
    assert lines.line({"step": 13, "reward_mean": 0.5}, now=110.0) == "ads-seed0: step 13/20  reward 0.500  " + (
        "4.7 s/step  eta 0:33"
    )


def test_lines_go_to_stdout_only_when_it_is_not_a_terminal(monkeypatch, capsys):
    from ads_core.common import progress

    monkeypatch.delenv(progress.ENV, raising=False)
    progress.say("not shown")
    monkeypatch.setattr("sys.stdout.isatty", lambda: False)
    assert progress.enable_when_logged() is True
    chunks = progress.ChunkLines("format rows", 300)
    chunks.advance(100)  # the first chunk is shown, the next within CHUNK_SECONDS is not, the last always
    chunks.advance(100)
    chunks.advance(100)
    out = capsys.readouterr().out.splitlines()
    assert out == ["format rows: 100/300 rows, eta ?", "format rows: 300/300 rows, eta 0:00"]
    lines = progress.ChunkLines("score", 100)
    lines.started, lines.first, lines.done = 0.0, (50.0, 10), 40  # 30 rows in 30 s since the first chunk
    assert lines.text(80.0) == "score: 40/100 rows, eta 1:00"  # the 50 s before it (a model load) not counted


def test_a_dry_run_shows_the_batch_every_sampler_kind_draws_per_step():
    from ads_core.train.options import TrainSamplerConfig
    from ads_core.train.trl.plan import step_batches

    dumped = TrainSamplerConfig(kind="uniform").model_dump(mode="json")
    assert dumped["uniform"]["batch_size"] == 128  # the section's default, which TRL never uses
    shown = step_batches(dumped, 8)
    assert shown["uniform"]["batch_size"] == 8 and shown["dots"]["batch_size"] == 8 and shown["kind"] == "uniform"


def test_a_tied_output_embedding_is_not_reported_missing_but_a_really_missing_tensor_is(tiny_model_dir: Path):
    from transformers import AutoModelForCausalLM

    from ads_core.train.trl.trainer import tied_missing_keys

    model = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir))
    assert model.config.tie_word_embeddings  # the tiny policy ties them, as SmolLM2 does
    embed = next(n for n, p in model.named_parameters() if p is model.get_input_embeddings().weight)
    assert tied_missing_keys(model, ["lm_head.weight"]) == {"lm_head.weight"}
    assert tied_missing_keys(model, ["lm_head.weight", embed]) == set()  # the shared tensor itself is missing
    assert tied_missing_keys(model, ["model.norm.weight"]) == set()
    model.config.tie_word_embeddings = False
    assert tied_missing_keys(model, ["lm_head.weight"]) == set()


def test_an_evaluated_policy_says_what_trained_it(tmp_path: Path):
    run = tmp_path / "gsm8k-uniform"
    (run / "final").mkdir(parents=True)
    facts = {"sampler": "uniform", "trainer": "trl", "base_model": "/m", "seed": 3, "step": 8, "experiment": "e"}
    (run / "final" / "ads_run.json").write_text(json.dumps({**facts, "checkpoint": "c", "prompts_per_step": 8}))
    assert identity.trained_facts(str(run / "final")) == facts
    about = {"sampler": "dots", "trainer": "trl", "model": "org/m", "seed": 5}
    identity.start_run(run, {"model": "org/m"}, facts=about)
    (run / "checkpoints" / "checkpoint-4").mkdir(parents=True)
    assert identity.trained_facts(str(run / "checkpoints" / "checkpoint-4")) == {
        "sampler": "dots",
        "trainer": "trl",
        "base_model": "org/m",
        "seed": 5,
        "step": 4,
        "experiment": "gsm8k-uniform",
    }
    assert identity.trained_facts(str(tmp_path)) == {}


def test_a_machine_without_a_gpu_device_counts_none_without_asking_torch(monkeypatch):
    from ads_core.train import choice

    cuda = SimpleNamespace(is_available=lambda: True, device_count=lambda: 3)
    monkeypatch.setitem(__import__("sys").modules, "torch", SimpleNamespace(cuda=cuda))  # a torch that sees 3
    monkeypatch.setattr(choice, "gpu_devices_present", lambda: False)
    assert choice.cuda_gpu_count() == 0  # answered from /dev: no torch import (seconds) before a refusal
    monkeypatch.setattr(choice, "gpu_devices_present", lambda: True)
    assert choice.cuda_gpu_count() == 3


def test_an_upgrade_that_adds_an_option_does_not_refuse_a_resume_at_its_default(tmp_path: Path):
    """Regression: a run started before ads gained trl.rollout_replay was refused on resume until the user named
    the new option with --allow-change."""
    from ads_core.train.options import load_train_config

    cfg = load_train_config({"trainer": "trl", "sampler": {"kind": "uniform"}})
    plan = SimpleNamespace(run_dir=str(tmp_path), model="m", trainer="trl", sampler=cfg.sampler, config=cfg)
    now = identity.trajectory(plan, None, load_free=True)
    older = {k: v for k, v in now.items() if k != "trl.rollout_replay"}  # what the older ads recorded
    identity.start_run(tmp_path, older)
    identity.check_before_loading(plan)  # the new option at its default: the same trajectory
    plan.config = load_train_config(
        {"trainer": "trl", "sampler": {"kind": "uniform"}, "trl": {"rollout_replay": {"buffer_size": 3}}}
    )
    with pytest.raises(RunStateError, match=r"trl\.rollout_replay: run null"):
        identity.check_before_loading(plan)  # set to anything else, it still refuses


def test_one_speller_spells_a_field_for_every_command():
    """Regression (issue 52): `ads train` and `ads build` spelled fields with two functions; now one."""
    from ads_cli.options import spell_field
    from ads_cli.train_cmd import spell_flag
    from ads_core.config.build import BuildConfig

    build = spell_field(BuildConfig)
    assert build("num_clusters") == "--clusters" and build("cluster.num_clusters") == "--clusters"
    assert build("nope") == "--set nope"
    assert spell_flag("dry_run") == "--dry-run" and spell_flag("boundary_eps").startswith("-s boundary_eps (or --set ")
    assert spell_flag("gradient_accumulation_steps") == "--set trl.gradient_accumulation_steps"
