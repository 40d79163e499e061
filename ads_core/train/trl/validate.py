"""Validation during training (TRL): the policy measured on the eval sets as it trains, with ``ads eval``'s code.

Every ``validation.steps`` optimizer steps (``--eval-steps``), after the last step, and (``validation.before_train``)
once before the first, the live policy is evaluated with ``ads_core.evaluation.api.evaluate_policy``: ``validation.k``
samples per problem (``--eval-k``) of the first ``validation.limit`` problems (``--eval-limit``) of each set, at
``ads eval``'s temperature, top-p and seed, as long as the training's completions (``trl.max_completion_length``).
The defaults are sized for where it runs: on a CPU 8 problems and k = 2, on a GPU every problem and the paper's
k = 16. Each evaluation appends one record per set to ``RUN_DIR/eval.jsonl`` (``ads_core.evaluation.evallog``)
before the step's checkpoint is written, with the prompts rolled out so far (from ``steps.jsonl``, dynamic
sampling's extra batches included).

Resume-safe: when a run resumes from checkpoint N, the records after step N are dropped (those steps are trained,
and evaluated, again), as ``steps.jsonl`` is cut back; the step-0 evaluation is not repeated. The evaluation
samples from its own seeded streams and leaves torch's RNG as it found it, so validating does not change what a
run trains on.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ads_core.evaluation.evallog import EVAL_FILE, append_evals, eval_records, keep_evals_up_to, read_evals

log = logging.getLogger("ads.train")

CPU_LIMIT = 8  # problems per set when validating on a CPU (every problem on a GPU)
OnStep = Callable[[dict[str, Any], Any], None]


@dataclass(frozen=True)
class ValidationSettings:
    sets: dict[str, str]  # name -> eval set (a .parquet or a packaged name)
    every: int  # evaluate every N steps (0: only after the last)
    total_steps: int
    k: int
    limit: int | None  # problems per set; None: all
    max_tokens: int
    before_train: bool

    def due(self, step: int) -> bool:
        return step >= self.total_steps or (self.every > 0 and step % self.every == 0)


def validation_settings(cfg: Any, sets: Mapping[str, str], device: str, max_tokens: int) -> ValidationSettings | None:
    """What a run with TrainConfig CFG (its ``validation`` section) validates on DEVICE (cpu or cuda); None
    without eval sets."""
    from ads_core.config.eval import default_k

    if not sets:
        return None
    v, on_cpu = cfg.validation, device == "cpu"
    k = default_k(device, v.k)
    limit = v.limit if v.limit is not None else (CPU_LIMIT if on_cpu else 0)
    return ValidationSettings(
        sets=dict(sets),
        every=int(v.steps),
        total_steps=int(cfg.steps),
        k=int(k),
        limit=int(limit) or None,
        max_tokens=int(max_tokens),
        before_train=bool(v.before_train),
    )


class Validator:
    """Evaluates the policy at the due steps and appends the records to RUN_DIR/eval.jsonl."""

    def __init__(self, settings: ValidationSettings, run_dir: str, eval_cfg: Any = None) -> None:
        from ads_core.config.eval import EvalConfig

        self.settings = settings
        self.path = Path(run_dir) / EVAL_FILE
        base = eval_cfg if eval_cfg is not None else EvalConfig()
        self.eval_cfg = base.model_copy(update={"k": settings.k, "max_tokens": settings.max_tokens, "limit": None})
        self.prompts = 0  # prompts rolled out by training so far

    def resume(self, step: int, steps: Sequence[Mapping[str, Any]]) -> None:
        """Continue a run from checkpoint STEP (0: from the start) whose steps.jsonl holds STEPS."""
        kept = keep_evals_up_to(self.path, step)
        self.prompts = sum(int(s.get("rollout_prompts", 0)) for s in steps if s["step"] <= step)
        if kept:
            log.info("%s: kept %d validation records up to step %d", self.path, kept, step)

    def evaluate(self, model: Any, tokenizer: Any, step: int) -> list[dict[str, Any]]:
        """Evaluate now as step STEP; the records are on disk when this returns."""
        import torch

        from ads_core.evaluation.api import evaluate_policy

        started = time.perf_counter()
        devices = [torch.cuda.current_device()] if torch.cuda.is_available() else []
        with torch.random.fork_rng(devices=devices):  # training's RNG stays where it was
            per_set = evaluate_policy(model, tokenizer, self.settings.sets, self.eval_cfg, limit=self.settings.limit)
        records = eval_records(step, per_set, self.prompts)
        append_evals(self.path, records)
        log.info(
            "validation at step %d (%.1f s): %s",
            step,
            time.perf_counter() - started,
            ", ".join(f"{r['set']} mean@{r['k']} {r['mean_at_k']:.3f}" for r in records),
        )
        return records

    def before_train(self, model: Any, tokenizer: Any) -> None:
        """The step-0 evaluation of the initial policy, unless off or already recorded (a resumed run)."""
        if not self.settings.before_train:
            return
        done = {r["set"] for r in read_evals(self.path) if r["step"] == 0}
        if not set(self.settings.sets) <= done:
            self.evaluate(model, tokenizer, 0)

    def on_step(self, record: dict[str, Any], trainer: Any) -> None:
        """After each optimizer step: count its rollouts; evaluate when due. The step's record (already in
        steps.jsonl) gets ``eval`` = {set: mean@k} for whoever watches the steps next (the progress bar)."""
        self.prompts += int(record.get("rollout_prompts", 0))
        if self.settings.due(int(record["step"])):
            records = self.evaluate(trainer.model, trainer.processing_class, int(record["step"]))
            record["eval"] = {r["set"]: r["mean_at_k"] for r in records}

    def chain(self, on_step: OnStep | None) -> OnStep:
        """An on_step callback that validates first, then calls ON_STEP."""

        def both(record: dict[str, Any], trainer: Any) -> None:
            self.on_step(record, trainer)
            if on_step is not None:
                on_step(record, trainer)

        return both


def start_validation(plan: Any, device: str, resumed_step: int, steps: Sequence[Mapping[str, Any]]) -> Validator | None:
    """The validator of a TRL run (None without eval sets, and in every process but the first: only it logs
    steps), with eval.jsonl cut back to RESUMED_STEP (0: a fresh start) and the rollouts of STEPS counted."""
    import os

    settings = validation_settings(plan.config, plan.eval_uris, device, plan.config.trl.max_completion_length)
    if settings is None or int(os.environ.get("RANK", "0")) != 0:
        return None
    validator = Validator(settings, plan.run_dir)
    validator.resume(resumed_step, steps)
    return validator
