"""What a finished TRL run leaves besides its checkpoints: ``RUN_DIR/final/`` (the trained policy) and
``RUN_DIR/training.png`` (the plot the `ads-train` flow shows).

``final/`` is made from the run's last checkpoint (the last step is always checkpointed): the policy's weights
(a LoRA run's adapter merged into its base), its tokenizer, a model card (``README.md``: the base model, the
artifact, the sampler, the steps) and ``ads_run.json`` (the same facts as data), saved with ``save_pretrained``
and no optimizer state, so ``AutoModelForCausalLM.from_pretrained(RUN_DIR/final)`` loads it. It is written into
a temporary folder beside it and renamed into place, so ``final/`` is always a whole model: an older one stays
until the new one is complete. A run resumed past its end (nothing to train) writes it when it is missing.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from ads_core import storage
from ads_core.storage import fencing

FINAL_DIR = "final"
PLOT_FILE = "training.png"
RUN_FILE = "ads_run.json"
ADAPTER_CONFIG = "adapter_config.json"


def final_step(run_dir: str | os.PathLike[str]) -> int | None:
    """The step RUN_DIR/final was exported at, or None when there is none."""
    try:
        return int(json.loads((Path(run_dir) / FINAL_DIR / RUN_FILE).read_text(encoding="utf-8"))["step"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def load_checkpoint_policy(checkpoint: str | os.PathLike[str], base_model: str) -> Any:
    """The policy in CHECKPOINT: a full model, or a LoRA adapter over BASE_MODEL merged into it."""
    from transformers import AutoModelForCausalLM

    checkpoint = Path(checkpoint)
    if not (checkpoint / ADAPTER_CONFIG).is_file():
        return AutoModelForCausalLM.from_pretrained(str(checkpoint), dtype="auto")
    from peft import PeftModel

    base = AutoModelForCausalLM.from_pretrained(base_model, dtype="auto")
    return PeftModel.from_pretrained(base, str(checkpoint)).merge_and_unload()


def sampler_line(kind: str) -> str:
    """`` (what the sampler does)``: the first sentence of its knobs' docstring (``ads``: "ADS: clusters drawn by
    smoothed success, ..."); empty for a kind without knobs or a docstring."""
    from ads_core.common.registry import UnknownBackendError
    from ads_core.sampler.kinds import kind_spec

    try:
        options = kind_spec(kind).options
    except UnknownBackendError:
        return ""
    doc = (getattr(options, "__doc__", None) or "") if options is not None else ""
    first = " ".join(doc.strip().split("\n\n")[0].split()).replace("``", "`").split(". ")[0].rstrip(".")
    if len(first) > 120 and ": " in first:  # a long sentence: its lead, before the colon
        first = first.split(": ")[0]
    return f" ({first})" if first else ""


def model_card(facts: dict[str, Any]) -> str:
    lora = f", LoRA rank {facts['lora_rank']} merged into the weights" if facts.get("lora_rank") else ""
    return (
        f"---\nbase_model: {facts['base_model']}\nlibrary_name: transformers\ntags:\n- grpo\n- trl\n- ads\n---\n\n"
        f"# {facts['experiment']}\n\n"
        f"GRPO policy trained with TRL from **{facts['base_model']}** for {facts['step']} steps{lora}.\n\n"
        f"- Base model: `{facts['base_model']}`\n"
        f"- Training artifact: `{facts['artifact']}`\n"
        f"- Sampler: `{facts['sampler']}`{sampler_line(facts['sampler'])}\n"
        f"- Trainer: {facts.get('trainer', 'trl')}; seed: {facts.get('seed', '?')}\n"
        f"- Steps: {facts['step']}; prompts per step: {facts['prompts_per_step']}\n\n"
        "Load it with `AutoModelForCausalLM.from_pretrained` and `AutoTokenizer.from_pretrained` on this folder; "
        "it holds no optimizer state (the run's checkpoints do).\n"
    )


def export_final(run_dir: str, checkpoint: str | os.PathLike[str], step: int, facts: dict[str, Any]) -> Path:
    """Write RUN_DIR/final from CHECKPOINT (saved at STEP) atomically; FACTS: base_model, artifact, sampler,
    experiment, prompts_per_step, lora_rank."""
    from transformers import AutoTokenizer

    root = Path(run_dir)
    target, tmp, old = root / FINAL_DIR, root / f".{FINAL_DIR}.tmp-{os.getpid()}", root / f".{FINAL_DIR}.old"
    for leftover in (*root.glob(f".{FINAL_DIR}.tmp-*"), old):  # what a killed export left
        shutil.rmtree(leftover, ignore_errors=True)
    facts = {**facts, "step": int(step), "checkpoint": str(checkpoint)}
    try:
        policy = load_checkpoint_policy(checkpoint, str(facts["base_model"]))
        policy.save_pretrained(str(tmp))
        AutoTokenizer.from_pretrained(str(checkpoint)).save_pretrained(str(tmp))
        (tmp / "README.md").write_text(model_card(facts), encoding="utf-8")
        (tmp / RUN_FILE).write_text(json.dumps(facts, indent=2) + "\n", encoding="utf-8")
        fencing.check_publish(str(target))  # a run that lost its lock on the run folder exports nothing
        if target.exists():
            os.replace(target, old)
        os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)
    return target


def write_plot(run_dir: str, records: list[dict[str, Any]], title: str) -> str | None:
    """RUN_DIR/training.png (atomically) from the run's steps, with its validation (eval.jsonl) when there is one;
    None when there are no steps."""
    if not records:
        return None
    from ads_core.evaluation.evallog import EVAL_FILE, read_evals
    from ads_core.train.step_plot import plot_steps

    uri = str(Path(run_dir) / PLOT_FILE)
    storage.write_bytes(uri, plot_steps(records, title=title, evals=read_evals(Path(run_dir) / EVAL_FILE)))
    return uri


def finish(plan: Any, part: Any, checkpoints: list[tuple[int, Path]]) -> list[str]:
    """The end of a run, on the main process: RUN_DIR/training.png from the steps, RUN_DIR/final from the last
    checkpoint unless it holds that step already; returns the lines to report."""
    from ads_core.train.resume import identity
    from ads_core.train.trl.settings import is_rank_zero
    from ads_core.train.trl.steps import read_steps

    if not is_rank_zero():
        return []
    notes = []
    plot = write_plot(plan.run_dir, read_steps(part.steps_file), f"{plan.experiment}: {plan.sampler.kind} sampler")
    if plot:
        notes.append(f"training plot: {plot}")
    if checkpoints and final_step(plan.run_dir) != checkpoints[-1][0]:
        step, folder = checkpoints[-1]
        facts = {
            **identity.about(plan),  # sampler, trainer, seed; the model as a hub id or an absolute path
            "base_model": identity.absolute_or_id(plan.model),
            "artifact": identity.absolute_or_id(plan.artifact_uri),  # a local path as an absolute one
            "experiment": plan.experiment,
            "prompts_per_step": part.prompts_per_step,
            "lora_rank": plan.config.trl.lora_rank,
        }
        target = export_final(plan.run_dir, folder, step, facts)
        notes.append(f"final model (step {step}{', LoRA merged' if facts['lora_rank'] else ''}): {target}")
    return notes
