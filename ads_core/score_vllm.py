"""vLLM scoring backend (GPU extra, imported lazily; never needed on CPU).

vLLM cannot return hidden states and log-probs from one engine call, so this backend runs two
engines over the same token ids: a pooling runner for the mean-pooled embedding (normalisation
off, so it matches the transformers path) and a generate runner with `prompt_logprobs=0` for the
per-token NLL of the target span. Token ids come from our own tokenisation, so both backends score
exactly the same tokens. Not exercised in CPU CI, and never picked by `auto` until it has been
validated on a GPU here: choose it by name (`--scoring-backend vllm`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ads_core.config import ScoreConfig
from ads_core.models import resolve_model
from ads_core.scorer import ScoreBatchResult, TokenizedRow


class VLLMScorer:
    name = "vllm"

    @classmethod
    def load(cls, cfg: ScoreConfig) -> tuple[VLLMScorer, Any]:
        scorer = cls(resolve_model(cfg.model), cfg)
        return scorer, scorer.tokenizer

    def __init__(self, model: str, cfg: ScoreConfig) -> None:
        try:
            from transformers import AutoTokenizer
            from vllm import LLM
        except ImportError as exc:  # pragma: no cover - GPU extra only
            raise RuntimeError("the vllm backend needs the GPU extra: pip install 'ads-pipeline[gpu]'") from exc
        self.cfg = cfg
        self.tokenizer = AutoTokenizer.from_pretrained(model, trust_remote_code=cfg.trust_remote_code)
        common: dict[str, Any] = {"model": model, "dtype": "bfloat16" if cfg.dtype == "auto" else cfg.dtype,
                                  "max_model_len": cfg.max_length, "trust_remote_code": cfg.trust_remote_code,
                                  "gpu_memory_utilization": 0.4, "enforce_eager": False}
        self._embedder = LLM(runner="pooling", override_pooler_config={"pooling_type": "MEAN", "normalize": False},
                             **common)
        self._scorer = LLM(**common)

    def score(self, rows: list[TokenizedRow], progress: Callable[[int], None] | None = None) -> ScoreBatchResult:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        pool_prompts = [TokensPrompt(prompt_token_ids=r.input_ids[: r.pool_len]) for r in rows]
        pooled = self._embedder.embed(pool_prompts, use_tqdm=False)
        embeddings = np.asarray([np.asarray(o.outputs.embedding, dtype=np.float32) for o in pooled])
        params = SamplingParams(max_tokens=1, prompt_logprobs=0, temperature=0.0)
        outs = self._scorer.generate([TokensPrompt(prompt_token_ids=r.input_ids) for r in rows], params,
                                     use_tqdm=False)
        difficulty = np.zeros(len(rows), dtype=np.float64)
        counts = np.zeros(len(rows), dtype=np.int32)
        for i, (row, out) in enumerate(zip(rows, outs, strict=True)):
            lps = out.prompt_logprobs  # position 0 is None; entry t holds logprob of token t
            vals = [lps[t][row.input_ids[t]].logprob for t in range(row.prompt_len, len(row.input_ids))]
            difficulty[i] = -float(np.mean(vals))
            counts[i] = len(vals)
            if progress:
                progress(1)
        lengths = np.array([len(r.input_ids) for r in rows], dtype=np.int32)
        return ScoreBatchResult(embeddings, difficulty, lengths, counts, {"real_tokens": int(lengths.sum())})
