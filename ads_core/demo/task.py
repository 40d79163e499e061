"""The demo's synthetic arithmetic task, which the tiny policy learns on a CPU (`ads demo`,
`bench/grpo_curriculum.py`).

Families (the semantic groups: the build's clusters should find them) and levels (the latent difficulty: L + 1
one-digit operands, L = 1..4):

| family | question |
|---|---|
| max | What is the largest of 3, 8, 1? |
| min | What is the smallest of 3, 8, 1? |
| sum | What is 3 + 8 + 1? |
| range | What is the largest minus the smallest of 3, 8, 1? |
| product | What is 3 * 8 * 2? (operands 2..9) |

The demo's default task is the first three; the study (docs/study.md) adds ``range`` (learnable, harder than max
and min) and ``product`` (products of up to five numbers: beyond the tiny policy's reach within a run, the share
of a real RL set that the policy never solves).

Answers are whole numbers, rewarded only as ``\\boxed{N}`` (the project's math reward). Everything comes from
seeds: the train set (what the artifact is built from and GRPO trains on), a held-out test set and the warm-up
set are drawn from the same families and levels, with no question in two of them.
"""

from __future__ import annotations

import json
import math
import os
import random
from dataclasses import dataclass
from pathlib import Path

from ads_core.config.demo import DemoTaskConfig

FAMILIES = ("max", "min", "sum", "range", "product")
PRODUCT_LOW = 2  # product operands are 2..9: a 0 or 1 would make the answer a pattern, not arithmetic
LEVELS = (1, 2, 3, 4)


@dataclass(frozen=True)
class Problem:
    family: str
    level: int
    question: str
    answer: int

    @property
    def solution(self) -> str:
        return f"\\boxed{{{self.answer}}}"


def make_problem(rng: random.Random, family: str, level: int) -> Problem:
    """One problem of FAMILY at LEVEL (see the module's table)."""
    low = PRODUCT_LOW if family == "product" else 0
    xs = [rng.randint(low, 9) for _ in range(level + 1)]
    listed = ", ".join(map(str, xs))
    if family == "max":
        return Problem(family, level, f"What is the largest of {listed}?", max(xs))
    if family == "min":
        return Problem(family, level, f"What is the smallest of {listed}?", min(xs))
    if family == "sum":
        return Problem(family, level, "What is " + " + ".join(map(str, xs)) + "?", sum(xs))
    if family == "range":
        return Problem(family, level, f"What is the largest minus the smallest of {listed}?", max(xs) - min(xs))
    if family == "product":
        return Problem(family, level, "What is " + " * ".join(map(str, xs)) + "?", math.prod(xs))
    raise ValueError(f"unknown family {family!r}; expected one of {FAMILIES}")


def draw_problems(rng: random.Random, families: tuple[str, ...], per_cell: int, taken: set[str]) -> list[Problem]:
    """PER_CELL problems for every (family, level), none whose question is in TAKEN (which grows)."""
    out = []
    for family in families:
        for level in LEVELS:
            cell, tries = 0, 0
            while cell < per_cell:
                p = make_problem(rng, family, level)
                tries += 1
                if p.question in taken:
                    if tries > 100 * per_cell:
                        raise ValueError(f"{family} level {level}: fewer than {per_cell} distinct new problems")
                    continue
                taken.add(p.question)
                out.append(p)
                cell += 1
    rng.shuffle(out)
    return out


@dataclass
class Task:
    train: list[Problem]
    test: list[Problem]
    warmup: list[Problem]


def make_task(spec: DemoTaskConfig) -> Task:
    """The three sets, no question in two of them; the held-out test set is drawn first, so it does not depend
    on the others' sizes. The warm-up draws with repetition from what is left."""
    rng = random.Random(spec.seed)
    taken: set[str] = set()
    families = tuple(spec.families)
    test = draw_problems(rng, families, spec.test_per_cell, taken)
    train = draw_problems(rng, families, spec.train_per_cell, taken)
    cells = spec.warmup_per_cell * len(families) * len(LEVELS)
    warmup = [make_problem(rng, rng.choice(families), rng.choice(LEVELS)) for _ in range(cells)]
    warmup = [p for p in warmup if p.question not in taken]
    return Task(train=train, test=test, warmup=warmup)


def write_source(problems: list[Problem], path: Path) -> Path:
    """Problems as the JSONL the build's format stage reads (question, solution, answer; family and level kept)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for p in problems:
            row = {"question": p.question, "solution": p.solution, "answer": str(p.answer)}
            f.write(json.dumps({**row, "family": p.family, "level": p.level}) + "\n")
    os.replace(tmp, path)
    return path


def write_heldout(problems: list[Problem], folder: Path, name: str) -> Path:
    """The held-out problems as an eval set NAME under FOLDER (``ads eval-sets``' format stage, the training set's
    plain template); returns its Parquet file."""
    from ads_core.evaluation.sets.writer import write_eval_sets
    from ads_core.ingest.schema import TEMPLATES

    source = write_source(problems, folder / "task" / f"{name}.jsonl")
    written = write_eval_sets(str(folder / name), sources={name: str(source)}, names=[], template=TEMPLATES["plain"])
    return Path(written[name].uri)
