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
| sub | What is 47 - 3 - 8 - 1? (a two-digit start, one-digit steps; never below 0) |
| digitsum | What is the sum of the digits of 3817? |
| lastdigit | What is the last digit of 3 + 8 + 1? (the sum modulo 10, step by step) |
| bigproduct | What is 37 * 48 * 12? (two-digit operands: out of the tiny policy's reach) |

The demo's default task is the first three; the study (docs/study.md) adds ``range`` (learnable, harder than max
and min) and ``product`` (products of up to five numbers: beyond the tiny policy's reach within a run, the share
of a real RL set that the policy never solves).

Answers are whole numbers, rewarded only as ``\\boxed{N}`` (the project's math reward). The reference solution is
the bare ``\\boxed{N}`` (``solutions="answer"``, the demo and the first study) or a worked solution, one step per
operand and then the box (``solutions="worked"``, Experiment 2: ``3+8=11 11+1=12 \\boxed{12}``), so that the
NLL of the reference solution is an NLL over reasoning, as on a real math set. Everything comes from
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

from ads_lab.config.demo import DemoTaskConfig

FAMILIES = ("max", "min", "sum", "range", "product", "sub", "digitsum", "lastdigit", "bigproduct")
PRODUCT_LOW = 2  # product operands are 2..9: a 0 or 1 would make the answer a pattern, not arithmetic
LEVELS = (1, 2, 3, 4)


@dataclass(frozen=True)
class Problem:
    family: str
    level: int
    question: str
    answer: int
    steps: str = ""  # the worked steps before the box ("" for the bare-answer task)

    @property
    def solution(self) -> str:
        boxed = f"\\boxed{{{self.answer}}}"
        return f"{self.steps} {boxed}" if self.steps else boxed


def make_problem(rng: random.Random, family: str, level: int, worked: bool = False) -> Problem:
    """One problem of FAMILY at LEVEL (see the module's table); WORKED adds its worked steps."""
    if family == "sub":
        xs = [rng.randint(9 * level + 1, 9 * level + 40)] + [rng.randint(0, 9) for _ in range(level)]
    elif family == "bigproduct":
        xs = [rng.randint(11, 99) for _ in range(level + 1)]
    elif family == "digitsum":
        xs = [rng.randint(1, 9)] + [rng.randint(0, 9) for _ in range(level)]
    elif family == "min" and worked:  # two-digit operands: one-digit ones make the answer 0 or 1 at high levels
        xs = [rng.randint(10, 99) for _ in range(level + 1)]
    else:
        low = PRODUCT_LOW if family == "product" else 0
        xs = [rng.randint(low, 9) for _ in range(level + 1)]
    listed = ", ".join(map(str, xs))
    if family == "max":
        question, answer = f"What is the largest of {listed}?", max(xs)
    elif family == "min":
        question, answer = f"What is the smallest of {listed}?", min(xs)
    elif family == "sum":
        question, answer = "What is " + " + ".join(map(str, xs)) + "?", sum(xs)
    elif family == "range":
        question, answer = f"What is the largest minus the smallest of {listed}?", max(xs) - min(xs)
    elif family in ("product", "bigproduct"):
        question, answer = "What is " + " * ".join(map(str, xs)) + "?", math.prod(xs)
    elif family == "sub":
        question, answer = "What is " + " - ".join(map(str, xs)) + "?", xs[0] - sum(xs[1:])
    elif family == "lastdigit":
        question, answer = "What is the last digit of " + " + ".join(map(str, xs)) + "?", sum(xs) % 10
    elif family == "digitsum":
        question, answer = f"What is the sum of the digits of {''.join(map(str, xs))}?", sum(xs)
    else:
        raise ValueError(f"unknown family {family!r}; expected one of {FAMILIES}")
    return Problem(family, level, question, answer, worked_steps(family, xs) if worked else "")


def worked_steps(family: str, xs: list[int]) -> str:
    """One step per operand after the first, each on the running value: ``3+8=11 11+1=12`` (sum), ``max(3,8)=8
    max(8,1)=8`` (max), ``max(3,8,1)=8 min(3,8,1)=1 8-1=7`` (range)."""
    if family == "range":
        listed = ",".join(map(str, xs))
        hi, lo = max(xs), min(xs)
        return f"max({listed})={hi} min({listed})={lo} {hi}-{lo}={hi - lo}"
    step = {
        "sum": lambda a, b: (f"{a}+{b}", a + b),
        "digitsum": lambda a, b: (f"{a}+{b}", a + b),
        "lastdigit": lambda a, b: (f"{a}+{b}->", (a + b) % 10),
        "sub": lambda a, b: (f"{a}-{b}", a - b),
        "product": lambda a, b: (f"{a}*{b}", a * b),
        "bigproduct": lambda a, b: (f"{a}*{b}", a * b),
        "max": lambda a, b: (f"max({a},{b})", max(a, b)),
        "min": lambda a, b: (f"min({a},{b})", min(a, b)),
    }[family]
    value, out = xs[0], []
    for x in xs[1:]:
        text, value = step(value, x)
        out.append(f"{text}{value}" if text.endswith("->") else f"{text}={value}")
    return " ".join(out)


def draw_problems(
    rng: random.Random, families: tuple[str, ...], per_cell: int, taken: set[str], worked: bool = False
) -> list[Problem]:
    """PER_CELL problems for every (family, level), none whose question is in TAKEN (which grows)."""
    out = []
    for family in families:
        for level in LEVELS:
            cell, tries = 0, 0
            while cell < per_cell:
                p = make_problem(rng, family, level, worked)
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
    families, worked = tuple(spec.families), spec.solutions == "worked"
    test = draw_problems(rng, families, spec.test_per_cell, taken, worked)
    train = draw_problems(rng, families, spec.train_per_cell, taken, worked)
    cells = spec.warmup_per_cell * len(families) * len(LEVELS)
    warmup = [make_problem(rng, rng.choice(families), rng.choice(LEVELS), worked) for _ in range(cells)]
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
