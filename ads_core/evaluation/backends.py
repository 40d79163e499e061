"""Generation backends behind one interface: ``generate(problems, cfg) -> k samples per problem``.

``transformers`` (``ads_core.evaluation.hf``) runs on CPU or GPU from an in-memory model (validation during
training) or a folder; ``vllm`` (``ads_core.evaluation.vllm_backend``) runs from a folder on CUDA GPUs and is
imported only when chosen. ``auto`` picks vLLM where CUDA and vllm are both present, transformers otherwise.

Sampling is seeded per (problem, sample): a sample's random stream depends on ``cfg.seed``, the problem's key
and the sample's index only, never on which other rows share its batch, so a resumed evaluation draws the same
samples (``uniforms``).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ads_core.common.registry import Registry

BACKENDS = Registry("eval backend")
BACKENDS.register("transformers", "ads_core.evaluation.hf:TransformersBackend")
BACKENDS.register("vllm", "ads_core.evaluation.vllm_backend:VLLMBackend")

_MASK64 = (1 << 64) - 1


@dataclass(frozen=True)
class Problem:
    """One eval problem: its set, a stable id (the row's ``sample_id``), chat messages and the ground truth."""

    set: str
    problem_id: int
    messages: list[dict[str, str]]
    ground_truth: str


@dataclass
class Sample:
    """One completion: its text, the tokens generated, and the wall time of its generate call per completion."""

    text: str
    tokens: int
    seconds: float


class Backend(Protocol):
    name: str
    device: str  # cpu or cuda: an unset EvalConfig.max_tokens is sized by it

    def generate(self, problems: Sequence[Problem], cfg: Any) -> list[list[Sample]]:
        """``cfg.k`` samples for every problem, in sample order (``cfg`` is an ``EvalConfig``)."""
        ...


def problem_key(problem: Problem) -> int:
    """A 63-bit key of the problem for seeding (its set and id)."""
    return mix(hash_text(problem.set), problem.problem_id & _MASK64) & ((1 << 63) - 1)


def hash_text(text: str) -> int:
    value = 0xCBF29CE484222325
    for byte in text.encode("utf-8"):
        value = ((value ^ byte) * 0x100000001B3) & _MASK64
    return value


def mix(*values: int) -> int:
    """splitmix64 over the values, one after the other: a well-spread 64-bit hash."""
    state = 0x9E3779B97F4A7C15
    for value in values:
        state = _splitmix((state ^ (value & _MASK64)) & _MASK64)
    return state


def _splitmix(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def row_seeds(seed: int, keys: Sequence[int], samples: Sequence[int]) -> np.ndarray:
    """One uint64 stream seed per row, from (cfg.seed, problem key, sample index)."""
    return np.array([mix(seed, key, sample) for key, sample in zip(keys, samples, strict=True)], dtype=np.uint64)


def uniforms(stream_seeds: np.ndarray, step: int) -> np.ndarray:
    """Uniform numbers in [0, 1), one per row, for decoding step STEP (vectorised splitmix64)."""
    with np.errstate(over="ignore"):
        x = stream_seeds ^ np.uint64((step * 0xD1B54A32D192ED03) & _MASK64)
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        x = x ^ (x >> np.uint64(31))
    return (x >> np.uint64(11)).astype(np.float64) / float(1 << 53)


def vllm_usable() -> bool:
    """True where vLLM can run: the package is installed and torch sees a CUDA GPU."""
    if importlib.util.find_spec("vllm") is None:
        return False
    from ads_core.models import pick_device

    return pick_device("auto") == "cuda"


def choose(name: str, usable: Callable[[], bool] = vllm_usable) -> str:
    """The backend ``auto`` stands for, or NAME itself; vLLM when asked but unusable is an error."""
    if name == "auto":
        return "vllm" if usable() else "transformers"
    if name == "vllm" and not usable():
        raise ValueError("backend vllm needs the vllm package and a CUDA GPU; use backend transformers")
    return name


def make_backend(name: str, model: str, cfg: Any) -> Backend:
    """A backend that loads MODEL (a folder or cached hub id) itself."""
    cls = BACKENDS.get(choose(name))
    return cls.from_pretrained(model, cfg)  # type: ignore[no-any-return]
