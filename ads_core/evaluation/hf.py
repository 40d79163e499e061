"""The transformers backend: batched ``generate`` on CPU or GPU with left padding and the KV cache.

A batch holds up to ``cfg.batch_size`` sequences: each problem's prompt repeated k times, problems in the order
given (the runner sorts them by prompt length, so a batch pads little). Sampling (temperature, top-p) happens in
``SeededSampler``, a logits processor that draws each row's token by inverse CDF from that row's own seeded
uniform (``backends.uniforms``) and hands ``generate`` a one-hot score, so ``generate`` runs greedy over it: a
row's sample does not depend on the other rows in its batch. ``cfg.greedy`` decodes greedily (k = 1).

The prompt is the eval row's chat messages rendered with the policy's chat template and
``add_generation_prompt=True``, as TRL renders training prompts; a tokenizer without a chat template gets the
messages' contents joined by blank lines.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from ads_core.common import progress
from ads_core.evaluation.backends import Problem, Sample, problem_key, row_seeds, uniforms

NUCLEUS_CANDIDATES = 1024


class SeededSampler:
    """Temperature and top-p sampling with one seeded uniform per row and step (see the module docstring)."""

    def __init__(self, seeds: np.ndarray, prompt_width: int, temperature: float, top_p: float) -> None:
        self.seeds = seeds
        self.prompt_width = prompt_width
        self.temperature = temperature
        self.top_p = top_p

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        step = int(input_ids.shape[1]) - self.prompt_width
        u = torch.from_numpy(uniforms(self.seeds, step)).to(scores.device, torch.float64)
        probs = torch.softmax(scores.float() / self.temperature, dim=-1)
        if self.top_p < 1.0:
            # the nucleus from the top NUCLEUS_CANDIDATES tokens when they hold top_p of the mass (nearly always):
            # the same tokens as a sort of the whole vocabulary (150k for Qwen), at a fraction of its cost
            top, order = probs.topk(min(NUCLEUS_CANDIDATES, probs.shape[-1]), dim=-1)
            if top.shape[-1] < probs.shape[-1] and bool((top.double().sum(dim=-1) < self.top_p).any()):
                top, order = probs.sort(dim=-1, descending=True)
            top = top.double()  # sums in float64: the nucleus edge does not move with rounding
            keep = (top.cumsum(dim=-1) - top) < self.top_p  # the smallest prefix reaching top_p, at least one
            probs = top * keep
        else:
            probs, order = probs.double(), None
        cdf = probs.cumsum(dim=-1)
        target = (u * cdf[:, -1]).unsqueeze(-1)
        pick = (cdf <= target).sum(dim=-1, keepdim=True).clamp_(max=probs.shape[-1] - 1)
        # never a token of probability 0 (rounding at the top of the cdf): step back to the last kept one
        pick = torch.where(probs.gather(-1, pick) > 0, pick, (probs > 0).sum(-1, keepdim=True) - 1)
        token = order.gather(-1, pick) if order is not None else pick
        out = torch.full_like(scores, float("-inf"))
        return out.scatter_(-1, token, 0.0)


def render(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    """Token ids of the prompt, rendered the way TRL renders training prompts."""
    if getattr(tokenizer, "chat_template", None):
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=True)
        return list(ids["input_ids"])
    text = "\n\n".join(str(m.get("content", "")) for m in messages)
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def eos_ids(model: Any, tokenizer: Any) -> list[int]:
    found: list[int] = []
    for value in (getattr(model.generation_config, "eos_token_id", None), tokenizer.eos_token_id):
        for token in value if isinstance(value, list | tuple) else [value]:
            if token is not None and int(token) not in found:
                found.append(int(token))
    return found


class TokenCount:
    """A logits processor that changes nothing and says how far the batch's generation is: the heartbeat names it
    (``312 of at most 512 tokens``), so a long batch is not minutes of silence."""

    def __init__(self, prompt_width: int, most: int) -> None:
        self.prompt_width, self.most = prompt_width, most

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        progress.detail(f"{int(input_ids.shape[1]) - self.prompt_width + 1} of at most {self.most} tokens")
        return scores


class TransformersBackend:
    """Batched transformers generation from an already loaded model and tokenizer."""

    name = "transformers"

    def __init__(self, model: Any, tokenizer: Any) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self._rendered: dict[tuple[str, int], list[int]] = {}

    @property
    def device(self) -> str:
        """Where the model is (cpu, cuda): ``EvalConfig.for_device`` sizes max_tokens by it."""
        return str(next(self.model.parameters()).device.type)

    @classmethod
    def from_pretrained(cls, path: str, cfg: Any) -> TransformersBackend:
        from ads_core.models import load_causal_lm

        loaded = load_causal_lm(path, device=cfg.device, dtype=cfg.dtype)
        return cls(loaded.model, loaded.tokenizer)

    def prompt_ids(self, problem: Problem) -> list[int]:
        key = (problem.set, problem.problem_id)
        if key not in self._rendered:
            self._rendered[key] = render(self.tokenizer, problem.messages)
        return self._rendered[key]

    def generate(self, problems: Sequence[Problem], cfg: Any) -> list[list[Sample]]:
        rows = [(i, s) for i in range(len(problems)) for s in range(cfg.k)]
        out: list[list[Sample]] = [[] for _ in problems]
        for start in range(0, len(rows), cfg.batch_size):
            batch = rows[start : start + cfg.batch_size]
            for (i, _), sample in zip(batch, self._generate_rows(problems, batch, cfg), strict=True):
                out[i].append(sample)
        return out

    def _generate_rows(self, problems: Sequence[Problem], rows: list[tuple[int, int]], cfg: Any) -> list[Sample]:
        import torch
        from transformers import GenerationConfig, LogitsProcessorList

        tok, model = self.tokenizer, self.model
        owners = [i for i, _ in rows]
        unique = list(dict.fromkeys(owners))  # rows are problem-major: each problem's rows are contiguous
        repeats = {owners.count(i) for i in unique}
        prompts = [self.prompt_ids(problems[i]) for i in unique]
        width = max(len(p) for p in prompts)
        pad = tok.pad_token_id if tok.pad_token_id is not None else eos_ids(model, tok)[0]
        uids = torch.full((len(unique), width), pad, dtype=torch.long)
        umask = torch.zeros((len(unique), width), dtype=torch.long)
        for r, p in enumerate(prompts):
            uids[r, width - len(p) :] = torch.tensor(p, dtype=torch.long)
            umask[r, width - len(p) :] = 1
        counts = torch.tensor([owners.count(i) for i in unique])
        ids, mask = uids.repeat_interleave(counts, dim=0), umask.repeat_interleave(counts, dim=0)
        device = next(model.parameters()).device
        max_new = max_new_tokens(model, width, cfg.max_tokens)
        eos = eos_ids(model, tok)
        gen = GenerationConfig(
            do_sample=False, num_beams=1, max_new_tokens=max_new, pad_token_id=pad, eos_token_id=eos, use_cache=True
        )
        processors = LogitsProcessorList([TokenCount(width, max_new)])
        if not cfg.greedy:
            keys = [problem_key(problems[i]) for i, _ in rows]
            seeds = row_seeds(cfg.seed, keys, [s for _, s in rows])
            processors.append(SeededSampler(seeds, width, cfg.temperature, cfg.top_p))
        was_training = model.training
        model.eval()
        started = time.perf_counter()
        try:
            with torch.inference_mode(), decode_attention(model):
                shared = len(repeats) == 1 and repeats != {1} and min(len(p) for p in prompts) > 1
                cache = prefill(model, prompts, width, repeats.pop()) if shared else None
                result = model.generate(
                    input_ids=ids.to(device),
                    attention_mask=mask.to(device),
                    past_key_values=cache,
                    generation_config=gen,
                    logits_processor=processors,
                )
        finally:
            model.train(was_training)
        seconds = (time.perf_counter() - started) / len(rows)
        completions = result[:, width:].cpu().tolist()
        samples = []
        for completion in completions:
            n = next((j + 1 for j, t in enumerate(completion) if t in eos), len(completion))
            text = tok.decode(completion[:n], skip_special_tokens=True)
            samples.append(Sample(text=text, tokens=n, seconds=seconds))
        return samples


def prefill(model: Any, prompts: Sequence[list[int]], width: int, repeats: int) -> Any:
    """The KV cache of each prompt but its last token, computed once and repeated for the prompt's k rows.

    Each prompt is encoded alone, at its own length (no padding work), and its keys and values are left-padded
    with zeros to the batch's ``width - 1`` (those positions are masked out) before the rows are stacked.
    ``generate`` then feeds only the last prompt token: a prompt is encoded once per problem, not k times."""
    import torch
    from transformers import DynamicCache

    device = next(model.parameters()).device
    layers: list[tuple[list[Any], list[Any]]] = []
    for prompt in prompts:
        own = DynamicCache(config=model.config)
        model(input_ids=torch.tensor([prompt[:-1]], device=device), past_key_values=own, use_cache=True)
        for i, layer in enumerate(own.layers):
            if i == len(layers):
                layers.append(([], []))
            for side, states in zip(layers[i], (layer.keys, layer.values), strict=True):
                pad = width - 1 - states.shape[-2]
                side.append(torch.nn.functional.pad(states, (0, 0, pad, 0)) if pad else states)
    cache = DynamicCache(config=model.config)
    for i, (keys, values) in enumerate(layers):
        cache.update(torch.cat(keys), torch.cat(values), i)
    cache.batch_repeat_interleave(repeats)
    return cache


GQA_ATTENTION = "ads_gqa_sdpa"


def gqa_decode_attention(
    module: Any, query: Any, key: Any, value: Any, attention_mask: Any, scaling: float | None = None, **kw: Any
) -> tuple[Any, None]:
    """transformers' sdpa attention, except that a decoding step (one query token) with grouped KV heads runs
    without copying the KV cache once per query head (``repeat_kv``, most of a CPU decoding step at long
    contexts): each KV head's query heads are stacked as its queries. Same result, in float rounding."""
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    groups = int(getattr(module, "num_key_value_groups", 1))
    if groups == 1 or query.shape[2] != 1 or kw.get("dropout", 0.0):
        return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling, **kw)
    batch, heads, _, dim = query.shape
    q = query.reshape(batch, heads // groups, groups, dim)  # head h = kv head h // groups, as repeat_kv orders them
    out = torch.nn.functional.scaled_dot_product_attention(q, key, value, attn_mask=attention_mask, scale=scaling)
    return out.reshape(batch, heads, 1, dim).transpose(1, 2).contiguous(), None


@contextmanager
def decode_attention(model: Any) -> Iterator[None]:
    """Use ``gqa_decode_attention`` while generating with an sdpa model on a CPU; the model's own setting after."""
    config = model.config
    if getattr(config, "_attn_implementation", None) != "sdpa" or next(model.parameters()).device.type != "cpu":
        yield
        return
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(GQA_ATTENTION, gqa_decode_attention)
    AttentionMaskInterface.register(GQA_ATTENTION, sdpa_mask)
    config._attn_implementation = GQA_ATTENTION
    try:
        yield
    finally:
        config._attn_implementation = "sdpa"


def max_new_tokens(model: Any, prompt_width: int, wanted: int) -> int:
    """``wanted``, cut to what the model's context leaves after the prompt (at least 1)."""
    limit = getattr(model.config, "max_position_embeddings", None)
    if not limit:
        return wanted
    return max(1, min(wanted, int(limit) - prompt_width))
