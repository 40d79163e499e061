"""The task and the policy of `bench/grpo_curriculum.py`: synthetic arithmetic a tiny model learns on a CPU.

Families (the semantic groups) and levels (the latent difficulty: L + 1 one-digit operands, L = 1..4):

| family | question |
|---|---|
| max | What is the largest of 3, 8, 1? |
| min | What is the smallest of 3, 8, 1? |
| sum | What is 3 + 8 + 1? |

Answers are whole numbers, rewarded only as ``\\boxed{N}`` (the project's math reward). Everything comes from
seeds: the train set (what the artifact is built from and GRPO trains on), a held-out test set and the warm-up
set are drawn from the same families and levels, with no question in two of them.

The policy is a small Qwen2-architecture model built by ``ads_core.models.make_tiny_model`` (the default model's
tokenizer and architecture, 0.75M parameters, no built-in warm-up), then a short supervised warm-up, so rewards
are not all zero. The warm-up writes a reply as ``\\boxed{N}`` 30 % of the time and as ``N`` or ``The answer is
N.`` otherwise: a base policy that knows some answers but mostly not in the rewarded form, as small models
start RL. Without that, the tiny policy's GRPO gains did not reach held-out problems at all (it memorised its
training prompts; see docs/training.md), so there was nothing for a curriculum to speed up. A quarter of the
warm-up examples use the build's scoring text (``Question: ... Answer: \\boxed{N}``), so the difficulty the
score stage measures (the NLL of the reference solution) is the policy's.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import shutil
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

FAMILIES = ("max", "min", "sum")
LEVELS = (1, 2, 3, 4)
POLICY_MARKER = "grpo_bench_policy.json"


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
    xs = [rng.randint(0, 9) for _ in range(level + 1)]
    listed = ", ".join(map(str, xs))
    if family == "max":
        return Problem(family, level, f"What is the largest of {listed}?", max(xs))
    if family == "min":
        return Problem(family, level, f"What is the smallest of {listed}?", min(xs))
    if family == "sum":
        return Problem(family, level, "What is " + " + ".join(map(str, xs)) + "?", sum(xs))
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


@dataclass(frozen=True)
class TaskSpec:
    seed: int = 0
    families: tuple[str, ...] = FAMILIES
    train_per_cell: int = 60  # 3 families x 4 levels x 60 = 720 training rows
    test_per_cell: int = 25  # 300 held-out problems
    warmup_per_cell: int = 300


@dataclass
class Task:
    train: list[Problem]
    test: list[Problem]
    warmup: list[Problem]


def make_task(spec: TaskSpec) -> Task:
    """The three sets, no question in two of them; the held-out test set is drawn first, so it does not depend
    on the others' sizes. Level 1 has 100 distinct questions per family, so test + train must stay below that;
    the warm-up draws with repetition from what is left."""
    rng = random.Random(spec.seed)
    taken: set[str] = set()
    test = draw_problems(rng, spec.families, spec.test_per_cell, taken)
    train = draw_problems(rng, spec.families, spec.train_per_cell, taken)
    cells = spec.warmup_per_cell * len(spec.families) * len(LEVELS)
    warmup = [make_problem(rng, rng.choice(spec.families), rng.choice(LEVELS)) for _ in range(cells)]
    warmup = [p for p in warmup if p.question not in taken]
    return Task(train=train, test=test, warmup=warmup)


def write_source(problems: list[Problem], path: Path) -> Path:
    """The train set as the JSONL the build's format stage reads (question, solution, answer)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for p in problems:
            row = {"question": p.question, "solution": p.solution, "answer": str(p.answer)}
            f.write(json.dumps({**row, "family": p.family, "level": p.level}) + "\n")
    os.replace(tmp, path)
    return path


# -- the policy --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PolicySpec:
    hidden_size: int = 128
    num_hidden_layers: int = 2
    warmup_steps: int = 300
    warmup_batch: int = 32
    warmup_lr: float = 2e-3
    scoring_share: float = 0.25  # share of warm-up examples in the build's scoring format
    boxed_share: float = 0.3  # share of warm-up chat replies written as \\boxed{N}; the rest "N" or "The answer is N."
    seed: int = 0

    def key(self, task: TaskSpec) -> str:
        blob = json.dumps({"policy": asdict(self), "task": asdict(task)}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def chat_prompt(tokenizer: Any, question: str) -> str:
    """The prompt exactly as TRL renders the artifact's ``prompt`` (one user message, the plain template)."""
    messages = [{"role": "user", "content": question}]
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def build_policy(directory: Path, spec: PolicySpec, task_spec: TaskSpec, warmup: list[Problem]) -> Path:
    """The warmed-up policy in DIRECTORY (saved with ``save_pretrained``); reused when built with the same specs."""
    marker = directory / POLICY_MARKER
    key = spec.key(task_spec)
    if marker.is_file() and json.loads(marker.read_text()).get("key") == key:
        return directory
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ads_core.models import TinyModelSpec, make_tiny_model

    tmp = directory.parent / f".{directory.name}.{uuid.uuid4().hex[:8]}.tmp"
    arch = TinyModelSpec(
        hidden_size=spec.hidden_size,
        num_hidden_layers=spec.num_hidden_layers,
        intermediate_size=4 * spec.hidden_size,
        max_position_embeddings=256,
        seed=spec.seed,
        train_steps=0,
    )
    try:
        make_tiny_model(tmp, spec=arch)
        tokenizer = AutoTokenizer.from_pretrained(tmp)
        model = AutoModelForCausalLM.from_pretrained(tmp)
        loss = warm_up(model, tokenizer, warmup, spec)
        model.save_pretrained(tmp)
        (tmp / POLICY_MARKER).write_text(json.dumps({"key": key, "spec": asdict(spec), "final_loss": loss}))
        if directory.exists():
            shutil.rmtree(directory)
        os.replace(tmp, directory)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return directory


def warm_up(model: Any, tokenizer: Any, problems: list[Problem], spec: PolicySpec) -> float:
    """Supervised steps on the replies only (both formats, see the module doc); returns the last loss."""
    import torch

    rng = random.Random(spec.seed)

    def example(prompt: str, reply: str) -> tuple[list[int], list[int]]:
        head = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        tail = tokenizer(reply, add_special_tokens=False)["input_ids"]
        return head + tail, [-100] * len(head) + tail

    def reply(p: Problem) -> str:
        if rng.random() < spec.boxed_share:
            return p.solution
        return str(p.answer) if rng.random() < 0.5 else f"The answer is {p.answer}."

    chats = [example(chat_prompt(tokenizer, p.question), reply(p) + tokenizer.eos_token) for p in problems]
    scoring = [example(f"Question:\n{p.question}\n\nAnswer:\n", p.solution) for p in problems]
    torch.manual_seed(spec.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=spec.warmup_lr, weight_decay=0.0)
    ramp, total = max(1, spec.warmup_steps // 5), spec.warmup_steps

    def schedule(step: int) -> float:  # linear ramp over the first fifth, then cosine to a tenth
        return min(1.0, (step + 1) / ramp) * (0.55 + 0.45 * math.cos(math.pi * min(step, total) / total))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule)
    model.train()
    loss = torch.tensor(float("nan"))
    for _ in range(spec.warmup_steps):
        batch = [
            (scoring if rng.random() < spec.scoring_share else chats)[rng.randrange(len(problems))]
            for _ in range(spec.warmup_batch)
        ]
        width = max(len(ids) for ids, _ in batch)
        ids = torch.full((len(batch), width), tokenizer.pad_token_id)
        labels = torch.full((len(batch), width), -100)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for i, (x, y) in enumerate(batch):
            ids[i, : len(x)], labels[i, : len(y)], mask[i, : len(x)] = torch.tensor(x), torch.tensor(y), 1
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
    model.eval()
    return float(loss.detach())
