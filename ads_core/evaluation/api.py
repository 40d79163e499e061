"""The two entry points: an in-memory policy (validation during training) and a model folder (`ads eval`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import nullcontext
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
    template: Mapping[str, Any] | None = None,
    trained: Mapping[str, Any] | None = None,
) -> EvalResult:
    """Evaluate the model at MODEL (a folder, or a hub id in the local cache) with ``cfg.backend``.

    Everything that does not need the model is checked first: the sets, OUT (a file in the way, another
    evaluation's eval.json, a corrupt completions or part file) and OUT's lock, held until the end. ``template``
    (``{"name", "source"}``) is what summary.json and table.md state beside ``cfg.template``'s text; ``trained``
    (a run's policy: its sampler, trainer, base model, seed and step, as the caller read them) goes into its identity.
    ``on_problems(total)`` is called once the sets are read (before the model loads), for a progress bar."""
    from ads_core.evaluation import backends, outfolder
    from ads_core.evaluation.runner import evaluate, run_record
    from ads_core.evaluation.sets.problems import load_problems
    from ads_core.models.tiny import model_fingerprint

    problems = load_problems(sets, cfg.template, cfg.limit)
    cfg = cfg.for_device(device_of(cfg))
    identity = {"model": model, "fingerprint": model_fingerprint(model)}
    if trained:
        identity["trained"] = dict(trained)
    with outfolder.holding(out) if out else nullcontext():
        if out:
            outfolder.check(out)
            outfolder.check_same(out, run_record(policy or model, identity, cfg))
        if on_problems is not None:
            on_problems(sum(len(p) for p in problems.values()))
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
            template=template,
        )


def device_of(cfg: Any) -> str:
    """Where the backend will generate (cpu or cuda), told before it loads (an unset max_tokens is sized by it)."""
    from ads_core.evaluation import backends

    if backends.choose(cfg.backend) == "vllm":
        return "cuda"
    from ads_core.models import pick_device

    return "cpu" if pick_device(cfg.device) == "cpu" else "cuda"
