"""verl's validation metrics as `RUN_DIR/eval.jsonl` records, so `ads compare` reads verl and TRL runs alike.

verl's file logger writes one line per step, ``{"step": N, "data": {...}}``; a step that validated has, per data
source (our eval sets are written with ``data_source`` = the set's name) and with k = ``val_kwargs.n``:

* ``val-core/<set>/acc/mean@k``: each problem's share of correct samples, averaged (the paper's mean@k);
* ``val-core/<set>/acc/best@k/mean``: verl's bootstrap estimate of pass@k (the best of k samples, resampled);
* ``val-core/<set>/acc/maj@k/mean``: majority voting, only when the reward returns a ``pred`` (ours does not).

``acc`` is the reward's 0/1 correctness (``ads_core.train.reward.compute_score``); a reward without it is read from
``reward``, as verl does. verl reports no interval over problems, so ``ci_low``/``ci_high`` stay empty; ``n`` is the
set's size when known (``eval_limit`` rows at most). Step 0 is the validation before training
(``trainer.val_before_train``). Every verl step rolls out one sampler batch, so ``prompts_rolled_out`` is the step
times the prompts per step.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ads_core.common.jsonl import read_records
from ads_core.evaluation.evallog import append_evals, eval_records

_CORE = re.compile(r"^val-core/(?P<set>.+)/(?P<var>[^/]+)/mean@(?P<k>\d+)$")


def val_records(
    lines: Iterable[Mapping[str, Any]], prompts_per_step: int, sizes: Mapping[str, int] | None = None
) -> list[dict[str, Any]]:
    """eval.jsonl records of every validating step among verl's metric LINES (``{"step", "data"}`` objects)."""
    out: list[dict[str, Any]] = []
    for line in lines:
        data, step = line.get("data"), line.get("step")
        if not isinstance(data, Mapping) or not isinstance(step, int) or isinstance(step, bool):
            continue
        found: dict[str, tuple[str, int]] = {}  # set -> (variable, k)
        for key in data:
            m = _CORE.match(str(key))
            if m and (m["set"] not in found or m["var"] == "acc"):  # acc wins over reward
                found[m["set"]] = (m["var"], int(m["k"]))
        per_set = {}
        for name, (var, k) in found.items():
            base = f"val-core/{name}/{var}"
            per_set[name] = {
                "mean_at_k": data.get(f"{base}/mean@{k}"),
                "pass_at_k": data.get(f"{base}/best@{k}/mean") if k > 1 else data.get(f"{base}/mean@{k}"),
                "maj_at_k": data.get(f"{base}/maj@{k}/mean"),
                "k": k,
                "n": int((sizes or {}).get(name, 0)),
            }
        out += eval_records(step, per_set, step * prompts_per_step)
    return out


def read_metric_lines(path: str | Path) -> list[dict[str, Any]]:
    """verl's metrics JSONL; a torn or foreign line is skipped."""
    return read_records(path, lambda record: True)


def copy_validation(plan: Any) -> int:
    """Copy a verl run's validation metrics (``plan.part.metrics_file``) into RUN_DIR/eval.jsonl; called before
    verl starts (verl truncates its metrics file when a run resumes) and after it ends."""
    from ads_core.evaluation.evallog import EVAL_FILE

    sizes = set_sizes(plan.eval_uris, plan.config.validation.limit)
    return copy_val_metrics(plan.part.metrics_file, Path(plan.run_dir) / EVAL_FILE, plan.prompts_per_step, sizes)


def copy_val_metrics(
    metrics_file: str | Path, eval_file: str | Path, prompts_per_step: int, sizes: Mapping[str, int] | None = None
) -> int:
    """Append the validation records of verl's metrics file to eval.jsonl (a step and set already there is
    replaced: verl rewrites its metrics file when a run resumes); returns the records copied."""
    records = val_records(read_metric_lines(metrics_file), prompts_per_step, sizes)
    append_evals(eval_file, records)
    return len(records)


def validation_overrides(cfg: Any) -> list[str]:
    """verl's validation for TrainConfig CFG's ``validation`` section: val_kwargs.n = k (the paper's 16 unless
    set: verl runs on GPUs), ``ads eval``'s temperature and top-p, test_freq = validation.steps (0: the last step
    only) and val_before_train."""
    from ads_core.config.eval import EvalConfig, default_k

    v, sampling = cfg.validation, EvalConfig()
    every = int(v.steps) if v.steps > 0 else int(cfg.steps)  # verl validates on test_freq steps and the last
    return [
        f"actor_rollout_ref.rollout.val_kwargs.n={default_k('cuda', v.k)}",
        f"actor_rollout_ref.rollout.val_kwargs.temperature={sampling.temperature}",
        f"actor_rollout_ref.rollout.val_kwargs.top_p={sampling.top_p}",
        "actor_rollout_ref.rollout.val_kwargs.do_sample=true",
        f"trainer.test_freq={every}",
        f"trainer.val_before_train={'true' if v.before_train else 'false'}",
    ]


def first_rows(path: str, limit: int | None, folder: Path, materialize: bool) -> str:
    """PATH itself, or (``validation.limit``) a copy of its first LIMIT rows in FOLDER, as ``ads eval --limit``
    takes them; a dry run only names the copy."""
    if not limit:
        return path
    import pyarrow.parquet as pq

    out = folder / f"first{int(limit)}" / Path(path).name
    if materialize:
        out.parent.mkdir(parents=True, exist_ok=True)
        table = pq.read_table(path)
        tmp = out.with_name(out.name + ".tmp")
        pq.write_table(table.slice(0, int(limit)), tmp)
        tmp.replace(out)
    return str(out)


def set_sizes(eval_uris: Mapping[str, str], limit: int | None) -> dict[str, int]:
    """Problems per validation set (its rows, at most LIMIT), for the records' ``n``; 0 where unreadable."""
    from ads_core import storage

    sizes = {}
    for name, uri in eval_uris.items():
        try:
            rows = storage.parquet_num_rows(uri)
        except (OSError, ValueError):
            rows = 0
        sizes[name] = min(rows, int(limit)) if limit else rows
    return sizes
