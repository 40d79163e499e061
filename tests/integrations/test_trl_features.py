"""TRL as its users run it, on CPU with the tiny policy (8 prompts x 2 completions of 8 tokens per step):

* a finished run leaves `RUN_DIR/final/` (loads with `from_pretrained`, no optimizer state, a model card naming
  the base model, the artifact and the sampler) and `RUN_DIR/training.png`; `steps.jsonl` has each step's rate;
* a LoRA run with a cosine schedule, warm-up, TensorBoard and the completions log: the adapter is checkpointed
  with the sampler state, the TensorBoard events hold the reward and the sampler's per-cluster metrics, and a run
  to 2 steps resumed to 3 has the uninterrupted run's learning rate, batches and rewards at every step; its
  `final/` is the merged policy;
* the default math reward on the tiny policy is 0 everywhere: the run warns once, at the end of the 5-step window;
* vLLM on a machine without CUDA stops in one line; the dry run shows its settings.
The score is the parity of the completion's 'e's (`trl_helpers.score`), so the LoRA runs have a gradient."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("trl")
pytest.importorskip("peft")

from ads_core.train.options import TrainConfig  # noqa: E402
from ads_core.train.run import train  # noqa: E402
from ads_core.train.trl.hooks import StepNotices  # noqa: E402

LORA = {"lora_rank": 8, "lr_scheduler": "cosine", "warmup_steps": 1, "schedule_steps": 3}
TRACKED = {"report_to": "tensorboard", "log_completions": True}


def _config(trl_helpers, run_dir: Path, steps: int, **trl: object) -> TrainConfig:
    sizes = trl_helpers.sizes
    return TrainConfig(trainer="trl", steps=steps, run_dir=str(run_dir), eval_sets=[], trl={**sizes["trl"], **trl})


@pytest.fixture(scope="module")
def lora_run(final_artifact: Path, trl_helpers, tmp_path_factory: pytest.TempPathFactory):
    """An uninterrupted 3-step LoRA run: cosine schedule over 3 steps after 1 warm-up step, TensorBoard, completions."""
    cfg = _config(trl_helpers, tmp_path_factory.mktemp("lora") / "run", 3, **LORA, **TRACKED)
    return cfg, train(str(final_artifact), cfg, score=trl_helpers.score)


def test_a_finished_run_leaves_a_final_model_and_the_plot(trl_run, policy_model: str, final_artifact: Path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    cfg, result = trl_run
    run_dir = Path(result.run_dir)
    final = run_dir / "final"
    assert (
        not list(final.glob("optimizer*"))
        and not list(final.glob("*.pt"))
        and not (final / "adapter_config.json").exists()
    )
    model = AutoModelForCausalLM.from_pretrained(final)
    assert AutoTokenizer.from_pretrained(final).pad_token is not None
    trained = AutoModelForCausalLM.from_pretrained(result.last_checkpoint)  # checkpoint-4: the same weights
    for (name, a), (_, b) in zip(model.state_dict().items(), trained.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
    card = (final / "README.md").read_text()
    assert policy_model in card and str(final_artifact) in card and "`ads`" in card
    assert json.loads((final / "ads_run.json").read_text())["step"] == 4
    assert (run_dir / "training.png").read_bytes()[:4] == b"\x89PNG"
    assert [s["learning_rate"] for s in result.steps] == [cfg.trl.learning_rate] * 4  # constant by default
    assert json.loads((run_dir / "schedule.json").read_text())["schedule_steps"] == 4  # the first command's steps


def test_a_lora_run_checkpoints_the_adapter_and_reports_to_tensorboard(lora_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    cfg, result = lora_run
    run_dir = Path(result.run_dir)
    checkpoint = Path(result.last_checkpoint)
    assert checkpoint.name == "checkpoint-3" and (checkpoint / "adapter_model.safetensors").is_file()
    assert (checkpoint / "ads_sampler.json").is_file() and not (checkpoint / "model.safetensors").exists()
    rates = [s["learning_rate"] for s in result.steps]
    assert rates == pytest.approx([0.0, 1e-5, 5e-6])  # warm-up from 0, then cosine over 3 steps
    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    clusters = {c for s in result.steps for c in s["clusters"]}
    assert {"train/reward", "train/learning_rate", "train/ads/window_frac_mean"} <= tags
    assert {f"train/ads/window_frac/{c}" for c in clusters} <= tags and {f"train/ads/r/{c}" for c in clusters} <= tags
    logged = [e.value for e in events.Scalars("train/reward")]
    assert logged == pytest.approx([s["reward_mean"] for s in result.steps], abs=1e-6)
    lines = [json.loads(x) for x in (run_dir / "completions.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines] == [1] * 8 + [2] * 8 + [3] * 8  # one completion per prompt and step
    assert all(set(x["rewards"]) == {"correctness"} and isinstance(x["completion"], str) for x in lines)


def test_lora_resumes_exactly_with_the_same_schedule_and_exports_the_merged_policy(
    lora_run, final_artifact: Path, trl_helpers, tmp_path: Path, policy_model: str
):
    import torch
    from transformers import AutoModelForCausalLM

    cfg, whole = lora_run
    run_dir = tmp_path / "run"
    first = train(str(final_artifact), _config(trl_helpers, run_dir, 2, **LORA, **TRACKED), score=trl_helpers.score)
    assert (run_dir / "final" / "ads_run.json").is_file()  # a final model after the first command, too
    with open(run_dir / "completions.jsonl", "a") as f:  # what a run killed in step 3 had logged
        f.write(json.dumps({"step": 3, "prompt": "killed", "completion": "", "rewards": {}}) + "\n")
    second = train(str(final_artifact), _config(trl_helpers, run_dir, 3, **LORA, **TRACKED), score=trl_helpers.score)
    assert first.resumed_from is None and second.resumed_from == 2
    for resumed, uninterrupted in zip(second.steps, whole.steps, strict=True):
        assert resumed["learning_rate"] == uninterrupted["learning_rate"]
        assert resumed["sample_ids"] == uninterrupted["sample_ids"] and resumed["success"] == uninterrupted["success"]
    logged = [json.loads(x) for x in (run_dir / "completions.jsonl").read_text().splitlines()]
    assert [x["step"] for x in logged] == [1] * 8 + [2] * 8 + [3] * 8 and "killed" not in str(logged)
    final = run_dir / "final"
    assert (
        not (final / "adapter_config.json").exists() and json.loads((final / "ads_run.json").read_text())["step"] == 3
    )
    merged = AutoModelForCausalLM.from_pretrained(final).state_dict()
    base = AutoModelForCausalLM.from_pretrained(policy_model).state_dict()
    assert merged.keys() == base.keys()  # a plain model of the base's shape, the adapter folded in
    assert any(not torch.equal(merged[k], base[k]) for k in base)  # and trained


def test_no_signal_warns_once_naming_the_cause(final_artifact: Path, trl_helpers, tmp_path: Path):
    """The quick start's situation: the tiny policy never answers correctly, so no group has a gradient."""
    seen: list[dict] = []
    cfg = _config(trl_helpers, tmp_path / "run", 6)
    train(str(final_artifact), cfg, on_step=lambda record, trainer: seen.append(dict(record)))  # the math reward
    assert all(s["informative_groups"] == 0 and s["reward_mean"] == 0 for s in seen)
    warned = [(s["step"], w) for s in seen for w in s.get("warnings", [])]
    assert len(warned) == 1 and warned[0][0] == 5  # once, at the end of the first 5-step window
    assert "no learning signal in steps 1-5" in warned[0][1] and "no completion was correct" in warned[0][1]
    assert "max_completion_length" in seen[4]["warning_options"]


def test_the_notices_name_each_cause_and_the_dynamic_rollouts():
    def record(step: int, success: list[float], informative: int = 0, batches: int = 1) -> dict:
        return {"step": step, "success": success, "informative_groups": informative, "rollout_batches": batches}

    cfg = TrainConfig()
    solved = StepNotices(cfg, 8, window=2)
    assert solved(record(1, [1.0, 1.0])) == ([], [])
    assert "every answer was correct" in solved(record(2, [1.0]))[1][0]
    assert solved(record(3, [1.0])) == ([], [])  # once per run
    mixed = StepNotices(cfg, 8, window=2)
    mixed(record(1, [0.0, 1.0]))
    assert "num_generations" in mixed(record(2, [1.0, 0.0]))[1][0]
    signal = StepNotices(cfg, 8, window=2)
    assert signal(record(1, [0.0], 0)) == ([], []) and signal(record(2, [0.5], 1)) == ([], [])
    notes, _ = signal({**record(3, [0.5], 3, batches=3), "rollout_prompts": 24})
    assert notes == [
        "step 3: dynamic sampling rolled out 24 prompts in 3 generation batches (usual 8) for 3 informative groups"
    ]


def test_vllm_without_cuda_stops_in_one_line_and_the_dry_run_shows_it(final_artifact: Path, tmp_path: Path):
    from typer.testing import CliRunner

    from ads_cli.main import app

    args = ["train", str(final_artifact), "--trainer", "trl", "--run-dir", str(tmp_path / "r"), "--no-eval"]
    args += ["--set", "trl.use_vllm=true", "--set", "trl.vllm_gpu_memory_utilization=0.5"]
    refused = CliRunner().invoke(app, args, env={"COLUMNS": "300"})
    lines = refused.output.strip().splitlines()
    assert refused.exit_code == 2 and len(lines) == 1 and "use_vllm" in lines[0] and "CUDA" in lines[0], refused.output
    shown = CliRunner().invoke(app, [*args, "--dry-run"], env={"COLUMNS": "300"})
    assert shown.exit_code == 0, shown.output
    assert "use_vllm: true" in shown.output and "vllm_mode: colocate" in shown.output
    assert "Generation: vLLM (colocate)" in shown.output and "vllm_gpu_memory_utilization 0.5" in shown.output
    assert not (tmp_path / "r").exists()  # nothing written


def test_the_hf_hooks_used_keep_their_shape():
    """What ADSGRPOTrainer.create_scheduler and RunHooks rely on: HF's scheduler hook takes the horizon, the
    optimizer-step callback gets the optimizer, TensorBoard's callback has a logging_dir to point elsewhere; and
    every trl setting passed on is a GRPOConfig field."""
    import inspect

    from transformers import Trainer, TrainerCallback
    from transformers.integrations import TensorBoardCallback

    assert list(inspect.signature(Trainer.create_scheduler).parameters) == ["self", "num_training_steps", "optimizer"]
    assert "on_pre_optimizer_step" in vars(TrainerCallback)
    assert "self.logging_dir = os.path.join(args.output_dir" in inspect.getsource(TensorBoardCallback.on_train_begin)
    from dataclasses import fields

    from trl import GRPOConfig

    from ads_core.train.trl.settings import grpo_kwargs

    assert set(grpo_kwargs(TrainConfig())) <= {f.name for f in fields(GRPOConfig)}  # TRL's own names
