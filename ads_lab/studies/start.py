"""The regime a run starts in: how often the starting policy solves each training problem in G samples, drawn
as training draws them (training's temperature, top-p 1, the chat prompt), so that the study can state the shares of
problems never solved, always solved and informative at step 0 (docs/study.md), per family and level.

A real RL set for a 1.5B model starts with a large never-solved share and a smaller always-solved one; a task
whose start has neither is not the regime a curriculum is built for.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ads_lab.demo.task import Problem


def solve_counts(
    policy: str | Path,
    problems: Sequence[Problem],
    samples: int,
    max_tokens: int,
    temperature: float = 1.0,
    seed: int = 0,
) -> tuple[list[int], list[int]]:
    """Correct completions, and completions with a ``\\boxed{}`` answer (the rewarded form), out of SAMPLES per
    problem, in PROBLEMS' order, sampled at TEMPERATURE with top-p 1 as training samples (fp32, the caller's thread
    count)."""
    import tempfile

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ads_core.config.eval import EvalConfig
    from ads_core.evaluation.hf import TransformersBackend
    from ads_core.evaluation.runner import evaluate
    from ads_core.evaluation.sets.problems import load_problems
    from ads_lab.demo.task import write_heldout

    model = AutoModelForCausalLM.from_pretrained(str(policy), dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(str(policy))
    cfg = EvalConfig(k=samples, temperature=temperature, top_p=1.0, max_tokens=max_tokens, seed=seed)
    with tempfile.TemporaryDirectory() as tmp:
        path = write_heldout(list(problems), Path(tmp), "start")
        loaded = load_problems({"start": str(path)}, cfg.template, None)
        result = evaluate(TransformersBackend(model, tokenizer), loaded, cfg)
    index = {p.problem_id: i for i, p in enumerate(loaded["start"])}  # the eval set keeps the rows' order
    if len(index) != len(problems):
        raise ValueError(f"{len(problems)} problems written, {len(index)} read back")
    counts, boxed = [0] * len(problems), [0] * len(problems)
    table = result.completions
    columns = (table.column(c).to_pylist() for c in ("problem_id", "correct", "extracted"))
    for pid, correct, extracted in zip(*columns, strict=True):
        counts[index[pid]] += int(bool(correct))
        boxed[index[pid]] += int(extracted is not None)
    return counts, boxed


def start_shares(
    problems: Sequence[Problem], counts: Sequence[int], samples: int, boxed: Sequence[int] | None = None
) -> dict[str, Any]:
    """Shares never solved (0 of G), always solved (G of G) and informative (in between): overall, per family and
    per (family, level)."""

    def shares(pairs: list[tuple[int, int | None]]) -> dict[str, float]:
        cs = [c for c, _ in pairs]
        n = max(1, len(cs))
        never, always = sum(c == 0 for c in cs) / n, sum(c == samples for c in cs) / n
        out = {
            "n": len(cs),
            "never": never,
            "always": always,
            "informative": 1.0 - never - always,
            "mean": sum(cs) / (n * samples),
        }
        if boxed is not None:  # the share of completions in the rewarded form
            out["boxed"] = sum(b or 0 for _, b in pairs) / (n * samples)
        return out

    marks: list[int | None] = list(boxed) if boxed is not None else [None] * len(counts)
    by_family: dict[str, list[tuple[int, int | None]]] = defaultdict(list)
    by_cell: dict[str, list[tuple[int, int | None]]] = defaultdict(list)
    for p, c, b in zip(problems, counts, marks, strict=True):
        by_family[p.family].append((c, b))
        by_cell[f"{p.family}-L{p.level}"].append((c, b))
    return {
        "samples": samples,
        "all": shares(list(zip(counts, marks, strict=True))),
        "family": {k: shares(v) for k, v in sorted(by_family.items())},
        "cell": {k: shares(v) for k, v in sorted(by_cell.items())},
    }


def shares_table(found: dict[str, Any]) -> str:
    """Markdown: never / informative / always solved per family, and overall."""
    g = found["samples"]
    lines = [
        f"| family | problems | never solved (0/{g}) | informative | always solved ({g}/{g}) | mean success |",
        "|---|---|---|---|---|---|",
    ]
    for name, s in [*found["family"].items(), ("all", found["all"])]:
        lines.append(
            f"| {name} | {s['n']} | {s['never']:.2f} | {s['informative']:.2f} | {s['always']:.2f} | {s['mean']:.3f} |"
        )
    return "\n".join(lines)
