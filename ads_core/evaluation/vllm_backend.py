"""The vLLM backend (CUDA GPUs): one request per problem with ``SamplingParams(n=k)``, imported only when chosen.

Each request carries its own seed (``cfg.seed`` mixed with the problem's key), so a problem's k samples do not
depend on the other requests, and a resumed evaluation draws them again the same. Prompts are rendered with the
policy's chat template (``hf.render``) and passed as token ids.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from ads_core.evaluation.backends import Problem, Sample, mix, problem_key
from ads_core.evaluation.hf import render


class VLLMBackend:
    name = "vllm"
    device = "cuda"

    def __init__(self, llm: Any) -> None:
        self.llm = llm
        self.tokenizer = llm.get_tokenizer()

    @classmethod
    def from_pretrained(cls, path: str, cfg: Any) -> VLLMBackend:
        from vllm import LLM

        return cls(LLM(model=path, seed=cfg.seed, dtype="auto"))

    def _context(self) -> int | None:
        """The engine's max_model_len: max_tokens is cut to what it leaves after the prompt, as transformers'."""
        config = getattr(getattr(self.llm, "llm_engine", None), "model_config", None)
        value = getattr(config, "max_model_len", None)
        return int(value) if value else None

    def generate(self, problems: Sequence[Problem], cfg: Any) -> list[list[Sample]]:
        from vllm import SamplingParams

        ids = [render(self.tokenizer, p.messages) for p in problems]
        context = self._context()
        params = [
            SamplingParams(
                n=cfg.k,
                temperature=0.0 if cfg.greedy else cfg.temperature,
                top_p=1.0 if cfg.greedy else cfg.top_p,
                max_tokens=max(1, min(cfg.max_tokens, context - len(x))) if context else cfg.max_tokens,
                seed=mix(cfg.seed, problem_key(p)) & ((1 << 63) - 1),
            )
            for p, x in zip(problems, ids, strict=True)
        ]
        prompts = [{"prompt_token_ids": x} for x in ids]
        started = time.perf_counter()
        results = self.llm.generate(prompts, params, use_tqdm=False)
        seconds = (time.perf_counter() - started) / max(1, len(problems) * cfg.k)
        return [
            [Sample(text=o.text, tokens=len(o.token_ids), seconds=seconds) for o in sorted(r.outputs, key=_index)]
            for r in results
        ]


def _index(output: Any) -> int:
    return int(getattr(output, "index", 0))
