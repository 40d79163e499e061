"""Measure a policy the way the ADS paper does: k samples per problem, graded, mean@k / pass@k / maj@k.

* ``evaluate_policy(model, tokenizer, sets, cfg)``: an already loaded policy (validation during training), no
  files written; returns per set ``{"mean_at_k", "pass_at_k", "maj_at_k", "n", "k", "ci_low", "ci_high"}``.
* ``evaluate_model(path, sets, cfg, out=...)``: a model folder (``ads eval``): loads it with the configured
  backend and writes ``completions.parquet``, ``summary.json`` and ``table.md``, resuming a killed run.

``problems`` reads eval sets, ``backends`` (``hf``, ``vllm_backend``) generate, ``runner`` grades with
``ads_core.grading`` and keeps the files, ``metrics`` computes the numbers, ``report`` draws the table,
``policies`` finds the model a run, checkpoint or hub id names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ads_core.evaluation.runner import EvalResult


def evaluate_policy(
    model: Any,
    tokenizer: Any,
    sets: Mapping[str, str],
    cfg: Any,
    *,
    limit: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> dict[str, dict[str, Any]]:
    """Evaluate a loaded causal LM on SETS ({name: packaged name or file}); ``progress(n)`` gets problems done.

    Uses the transformers backend whatever ``cfg.backend`` says (the model is in memory); ``limit`` overrides
    ``cfg.limit``. The model's train/eval mode is restored afterwards."""
    from ads_core.evaluation.hf import TransformersBackend
    from ads_core.evaluation.problems import load_problems
    from ads_core.evaluation.runner import evaluate

    backend = TransformersBackend(model, tokenizer)
    problems = load_problems(sets, cfg.template, limit if limit is not None else cfg.limit)
    result = evaluate(backend, problems, cfg, progress=progress, order=lambda p: len(backend.prompt_ids(p)))
    return result.per_set


def evaluate_model(
    model: str,
    sets: Mapping[str, str],
    cfg: Any,
    *,
    out: str | None = None,
    policy: str | None = None,
    progress: Callable[[int], None] | None = None,
    on_problems: Callable[[int], None] | None = None,
) -> EvalResult:
    """Evaluate the model at MODEL (a folder, or a hub id in the local cache) with ``cfg.backend``.

    ``on_problems(total)`` is called once the sets are read (before the model loads), for a progress bar."""
    from ads_core.evaluation import backends
    from ads_core.evaluation.problems import load_problems
    from ads_core.evaluation.runner import evaluate
    from ads_core.models.fingerprint import model_fingerprint

    problems = load_problems(sets, cfg.template, cfg.limit)
    if on_problems is not None:
        on_problems(sum(len(p) for p in problems.values()))
    identity = {"model": model, "fingerprint": model_fingerprint(model)}
    from ads_core.train.resume.identity import trained_facts

    trained = trained_facts(model)  # a run's policy: its sampler, trainer, base model, seed and step
    if trained:
        identity["trained"] = trained
    backend = backends.make_backend(cfg.backend, model, cfg)
    order = getattr(backend, "prompt_ids", None)
    return evaluate(
        backend,
        problems,
        cfg,
        out=out,
        policy=policy or model,
        identity=identity,
        progress=progress,
        order=(lambda p: len(order(p))) if order else None,
    )
