"""The scorer interface: tokenised rows in, embeddings and difficulties out; backends registered by name.

A backend takes a `ScoreConfig` and scores `TokenizedRow`s built by `tokenize_row` (our own
tokenisation, so every backend scores exactly the same tokens). Backends: `transformers`
(`ads_core.stages.score.transformers_scorer`, CPU/GPU) and `vllm` (`ads_core.stages.score.vllm`, GPU extra,
imported only when chosen),
or any class given by path (`ScoreConfig(backend="my_pkg.mod:MyScorer")`), constructed as
`cls.load(cfg) -> (scorer, tokenizer)`.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ads_core.common.registry import Registry
from ads_core.config.build import ScoreConfig

QUESTION_PREFIX = "Question:\n"
ANSWER_PREFIX = "\n\nAnswer:\n"

SCORERS = Registry("scoring backend")
SCORERS.register("transformers", "ads_core.stages.score.transformers_scorer:TransformersScorer")
SCORERS.register("vllm", "ads_core.stages.score.vllm:VLLMScorer")
# Backends `auto` may pick: only those validated in this repo (vLLM has not run on a GPU here yet).
AUTO_BACKENDS = ("transformers",)


@dataclass
class TokenizedRow:
    input_ids: list[int]
    prompt_len: int  # tokens before the first scored (solution) token
    pool_len: int  # tokens the embedding pools over, from position 0
    truncated: bool
    nll_target: str  # "solution" or "answer" (rows without a reference solution)


@dataclass
class ScoreBatchResult:
    embeddings: np.ndarray  # float32 [n, hidden]
    difficulty: np.ndarray  # float64 [n]
    n_tokens: np.ndarray  # int32 [n]
    n_target_tokens: np.ndarray  # int32 [n]
    stats: dict[str, float] = field(default_factory=dict)


def tokenize_row(tokenizer: Any, question: str, solution: str | None, answer: str, cfg: ScoreConfig) -> TokenizedRow:
    """Token ids for one row: prompt and target tokenised apart, so the boundary is exact.

    If the row is longer than max_length, the target keeps at least a quarter of the budget
    (the question is cut from the left), so every row keeps scored tokens: never a silent inf.
    """
    target, nll_target = (solution, "solution") if solution and solution.strip() else (answer, "answer")
    prompt_ids = tokenizer(QUESTION_PREFIX + question + ANSWER_PREFIX, add_special_tokens=False)["input_ids"]
    target_ids = tokenizer(target, add_special_tokens=False)["input_ids"]
    if not target_ids:
        eos = tokenizer.eos_token_id
        target_ids = [eos if eos is not None else 0]
    limit = cfg.max_length
    truncated = len(prompt_ids) + len(target_ids) > limit
    if truncated:
        keep_target = min(len(target_ids), max(limit - len(prompt_ids), limit // 4))
        keep_prompt = limit - keep_target
        prompt_ids = prompt_ids[len(prompt_ids) - keep_prompt :] if keep_prompt else []
        target_ids = target_ids[:keep_target]
    if not prompt_ids:  # the first target token needs a position to be predicted from
        prompt_ids, target_ids = target_ids[:1], target_ids[1:] or target_ids[:1]
    ids = prompt_ids + target_ids
    pool_len = len(prompt_ids) if cfg.text_mode == "question_only" else len(ids)
    return TokenizedRow(ids, len(prompt_ids), pool_len, truncated, nll_target)


def plan_batches(lengths: Sequence[int], token_budget: int, max_padding: float | None = None) -> list[np.ndarray]:
    """Group row indices into batches of similar length whose padded size fits the budget.

    With `max_padding`, a batch also closes when adding the next (longest so far) row would make more than
    that share of the batch's padded size padding. On CPU, throughput per padded token is about the same
    for any batch of >= ~100-token rows, so padding is pure loss (29% of the work at 128 real rows with a
    16k budget); on GPU it keeps big batches wherever lengths are dense.
    """
    order = np.argsort(np.asarray(lengths), kind="stable")
    batches: list[np.ndarray] = []
    current: list[int] = []
    longest = real = 0
    for idx in order:
        n = int(lengths[idx])
        if current:
            size = max(longest, n) * (len(current) + 1)
            if size > token_budget or (max_padding is not None and size - real - n > max_padding * size):
                batches.append(np.asarray(current))
                current, longest, real = [], 0, 0
        current.append(int(idx))
        longest = max(longest, n)
        real += n
    if current:
        batches.append(np.asarray(current))
    return batches


def plan_packs(lengths: Sequence[int], token_budget: int, pack_len: int) -> list[list[np.ndarray]]:
    """Batches of packs for padding-free scoring: each pack is rows laid end to end in one sequence of at most
    `pack_len` tokens (best-fit decreasing: a row goes to the fullest pack it fits in), and a batch holds packs
    whose padded size fits the budget. A row longer than `pack_len` gets a pack of its own.
    Returns, per batch, the row indices of each pack.
    """
    order = np.argsort(-np.asarray(lengths), kind="stable")
    packs: list[list[int]] = []
    free: list[tuple[int, int]] = []  # (room left, pack index), sorted
    for idx in order:
        n = int(lengths[idx])
        at = bisect.bisect_left(free, (n, -1))
        if at < len(free):
            room, p = free.pop(at)
            packs[p].append(int(idx))
            bisect.insort(free, (room - n, p))
        else:
            packs.append([int(idx)])
            bisect.insort(free, (pack_len - n, len(packs) - 1))
    sizes = [sum(int(lengths[i]) for i in pack) for pack in packs]
    by_size = sorted(range(len(packs)), key=lambda p: -sizes[p])  # packs of a batch fill alike: short pad tails
    packs, sizes = [packs[p] for p in by_size], [sizes[p] for p in by_size]
    batches: list[list[np.ndarray]] = []
    current: list[np.ndarray] = []
    width = 0
    for pack, size in zip(packs, sizes, strict=True):
        if current and max(width, size) * (len(current) + 1) > token_budget:
            batches.append(current)
            current, width = [], 0
        current.append(np.asarray(pack))
        width = max(width, size)
    if current:
        batches.append(current)
    return batches


RUN_ORDER_SEED = 0


def run_order(batches: Sequence[Any]) -> list[Any]:
    """BATCHES in the order they are run: a seeded shuffle. The plans group rows by length (little padding); run in
    that order the first batches are the shortest rows (or, packed, the fullest packs), whose cost per token is
    not the rest's (attention grows with length), so the early rate misled the ETA. Shuffled, each stretch of the
    run is a fair sample of the whole (each row's result does not depend on when its batch runs)."""
    picks = np.random.default_rng(RUN_ORDER_SEED).permutation(len(batches))
    return [batches[int(i)] for i in picks]


class ScorerBackend(Protocol):
    """Scores tokenized rows; returns results in the order given."""

    name: str

    @classmethod
    def load(cls, cfg: ScoreConfig) -> tuple[ScorerBackend, Any]:
        """Load the model for `cfg`; returns (scorer, tokenizer)."""
        ...

    def score(self, rows: list[TokenizedRow], progress: Callable[[int], None] | None = None) -> ScoreBatchResult:
        """Score ROWS; ``progress(n)`` after each batch with the tokens it scored (the work, whatever the rows'
        lengths: an ETA from tokens per second holds, one from rows per second does not)."""
        ...


def make_backend(cfg: ScoreConfig) -> tuple[ScorerBackend, Any]:
    """The configured backend, loaded: (scorer, tokenizer). `auto` picks only validated backends."""
    name = AUTO_BACKENDS[0] if cfg.backend == "auto" else cfg.backend
    return SCORERS.get(name).load(cfg)
