"""The demo's policy: the default tiny model's architecture built locally (no download), then a short supervised
warm-up on the task's warm-up set, so that GRPO's rewards are not all zero.

The warm-up writes a reply as ``\\boxed{N}`` ``boxed_share`` of the time and as ``N`` or ``The answer is N.``
otherwise: a base policy that knows some answers but mostly not in the rewarded form, as small models start RL.
Without that, the tiny policy's GRPO gains did not reach held-out problems at all (it memorised its training
prompts; see docs/training.md), so there was nothing for a curriculum to speed up. A share of the warm-up
examples (``scoring_share``) use the build's scoring text (``Question: ... Answer: \\boxed{N}``), so the
difficulty the score stage measures (the NLL of the reference solution) is the policy's.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import shutil
import uuid
from pathlib import Path
from typing import Any

from ads_core.common import progress
from ads_lab.config.demo import DemoPolicyConfig, DemoTaskConfig
from ads_lab.demo.task import Problem

POLICY_MARKER = "ads_demo_policy.json"


def policy_key(spec: DemoPolicyConfig, task: DemoTaskConfig) -> str:
    """What the warmed-up policy depends on: its settings and the task's (the warm-up set comes from it)."""
    blob = json.dumps({"policy": spec.model_dump(mode="json"), "task": task.model_dump(mode="json")}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def chat_prompt(tokenizer: Any, question: str) -> str:
    """The prompt exactly as TRL renders the artifact's ``prompt`` (one user message, the plain template)."""
    messages = [{"role": "user", "content": question}]
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def build_policy(directory: Path, spec: DemoPolicyConfig, task: DemoTaskConfig, warmup: list[Problem]) -> Path:
    """The warmed-up policy in DIRECTORY (saved with ``save_pretrained``); reused when built with the same settings.
    Written to a temporary folder and renamed, so a killed warm-up leaves nothing that looks finished."""
    marker = directory / POLICY_MARKER
    key = policy_key(spec, task)
    if marker.is_file() and json.loads(marker.read_text()).get("key") == key:
        return directory
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ads_core.models import TinyModelSpec, make_tiny_model

    directory.parent.mkdir(parents=True, exist_ok=True)
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
        (tmp / POLICY_MARKER).write_text(json.dumps({"key": key, "spec": spec.model_dump(mode="json"), "loss": loss}))
        if directory.exists():
            shutil.rmtree(directory)
        os.replace(tmp, directory)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return directory


def warm_up(model: Any, tokenizer: Any, problems: list[Problem], spec: DemoPolicyConfig) -> float:
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
    lines = progress.ChunkLines("demo: warming up the policy (supervised steps)", spec.warmup_steps, "steps")
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
        lines.advance(1)
    model.eval()
    return float(loss.detach())
