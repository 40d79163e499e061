"""The two entry points: an in-memory policy (validation during training) and a model folder (`ads eval`)."""

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
    from ads_core.evaluation.runner import evaluate
    from ads_core.evaluation.sets.problems import load_problems

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
    from ads_core.evaluation.runner import evaluate
    from ads_core.evaluation.sets.problems import load_problems
    from ads_core.models.fingerprint import model_fingerprint

    problems = load_problems(sets, cfg.template, cfg.limit)
    if on_problems is not None:
        on_problems(sum(len(p) for p in problems.values()))
    identity = {"model": model, "fingerprint": model_fingerprint(model)}
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
