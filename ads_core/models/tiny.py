"""The tiny default model, built locally and deterministically: a small Qwen2-architecture causal LM from a seed,
warmed up for 100 seeded steps on the bundled sample (so its difficulties mean something), with a byte-level BPE
tokenizer trained on the bundled sample, saved with `save_pretrained`; and the built-in names (`default`, `tiny`,
`bench`, and `smollm2`, a real pretrained model converted by ads_core.models.smollm2) that resolve to a folder in
the ADS cache dir.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ads_core.common import defaults
from ads_core.models.fingerprint import directory_fingerprint

log = logging.getLogger("ads.models")

# The Qwen2 pre-tokenizer regex. transformers 5.x always rebuilds Qwen2Tokenizer for `qwen2` model
# dirs from vocab + merges with this exact pipeline, so a tokenizer trained with a different
# pre-tokenizer would encode differently after a reload.
QWEN_PRETOKENIZE_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>"]
CHATML_TEMPLATE = (
    "{% for m in messages %}{{'<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{'<|im_start|>assistant\n'}}{% endif %}"
)


@dataclass(frozen=True)
class TinyModelSpec:
    """Shape of a locally built Qwen2-style model. `tiny` is for tests and the demo; `bench` is ~40M params."""

    hidden_size: int = 128
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    intermediate_size: int = 512
    tokenizer_vocab: int = 2048
    pad_vocab_to: int = 2048
    max_position_embeddings: int = 4096
    seed: int = 0
    # A short deterministic warm-up on the bundled sample, so difficulties and embeddings carry signal
    # (a random-init model gives every row an NLL near ln(vocab)). 0 keeps the random init.
    train_steps: int = 100
    train_batch: int = 8
    train_lr: float = 3e-3


TINY_PRESETS: dict[str, TinyModelSpec] = {
    "tiny": TinyModelSpec(),
    "bench": TinyModelSpec(
        hidden_size=512,
        num_hidden_layers=8,
        num_attention_heads=8,
        num_key_value_heads=2,
        intermediate_size=2048,
        tokenizer_vocab=8192,
        pad_vocab_to=32_000,
        train_steps=0,
    ),
}
SMOLLM2 = "smollm2"  # SmolLM2-135M-Instruct from the `smollm2` extra (ads_core.models.smollm2), converted once
BUILTIN_MODELS = (*TINY_PRESETS, SMOLLM2)  # every name `--model` takes besides `default`
DEFAULT_MODEL = "default"  # the alias `--model default` resolves to the cached tiny model
TINY_VERSION = "v2"
# `progress(description, total, unit)` -> a context yielding advance(n) (ads_core.common.progress.ProgressFactory)
Progress = Callable[..., AbstractContextManager[Callable[[int], None] | None]]


def _no_progress(*_: Any, **__: Any) -> AbstractContextManager[None]:
    return nullcontext()


def _training_lines(extra_lines: int = 20_000) -> list[str]:
    """Text to train the tokenizer on: the bundled sample plus deterministic synthetic arithmetic."""
    lines: list[str] = []
    with open(defaults.sample_path(), encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            lines.extend([row["question"], row["answer"]])
    ops = ["+", "-", "*", "/", "=", "^", "\\frac{", "}{", "}", "\\boxed{", "\\sqrt{", "(", ")", "$"]
    for i in range(extra_lines):
        a, b = (i * 7919) % 1000, (i * 104729) % 97
        op = ops[i % len(ops)]
        lines.append(f"Question:\nWhat is {a} {op} {b}?\n\nAnswer:\n{a} {op} {b} = \\boxed{{{a + b}}}")
    return lines


def build_tokenizer(vocab_size: int) -> Any:
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN_PRETOKENIZE_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(_training_lines(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|pad|>", bos_token=None, unk_token=None
    )
    fast.chat_template = CHATML_TEMPLATE
    return fast


def make_tiny_model(
    directory: str | os.PathLike[str],
    preset: str = "tiny",
    spec: TinyModelSpec | None = None,
    progress: Progress | None = None,
) -> Path:
    """Build a Qwen2-style causal LM and its tokenizer from a seed and `save_pretrained` them.

    Written to a temp dir and renamed, so a crash or a concurrent builder never leaves half a model.
    `progress` shows the two phases (the tokenizer, then the warm-up steps), which take minutes on a busy CPU.
    """
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    spec = spec or TINY_PRESETS[preset]
    progress = progress or _no_progress
    target = Path(directory)
    tmp = target.parent / f".{target.name}.{uuid.uuid4().hex[:8]}.tmp"
    tmp.mkdir(parents=True)
    try:
        log.info("building the %s model: tokenizer (%d tokens)", preset, spec.tokenizer_vocab)
        with progress(f"building the {preset} model: tokenizer", None, unit="steps"):
            tokenizer = build_tokenizer(spec.tokenizer_vocab)
        vocab = max(len(tokenizer), spec.pad_vocab_to)
        config = Qwen2Config(
            vocab_size=vocab,
            hidden_size=spec.hidden_size,
            num_hidden_layers=spec.num_hidden_layers,
            num_attention_heads=spec.num_attention_heads,
            num_key_value_heads=spec.num_key_value_heads,
            intermediate_size=spec.intermediate_size,
            max_position_embeddings=spec.max_position_embeddings,
            tie_word_embeddings=True,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
            bos_token_id=None,
        )
        torch.manual_seed(spec.seed)
        model = Qwen2ForCausalLM(config)
        if spec.train_steps:
            with progress(f"building the {preset} model: training", spec.train_steps, unit="steps") as advance:
                warm_up(model, tokenizer, spec, advance=advance)
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / "ads_tiny_model.json").write_text(json.dumps({"version": TINY_VERSION, **asdict(spec)}, indent=2))
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _sample_texts() -> list[str]:
    with open(defaults.sample_path(), encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh]
    return [f"Question:\n{r['question']}\n\nAnswer:\n{r['answer']}" for r in rows]


def warm_up(
    model: Any,
    tokenizer: Any,
    spec: TinyModelSpec,
    max_tokens: int = 256,
    advance: Callable[[int], None] | None = None,
) -> None:
    """Train 100 seeded AdamW steps on the bundled sample (~10 s on 2 idle CPU cores, minutes on a busy one;
    loss 7.6 -> ~4). `advance(1)` after every step."""
    import torch

    ids = [tokenizer(t, add_special_tokens=False)["input_ids"][:max_tokens] for t in _sample_texts()]
    gen = torch.Generator().manual_seed(spec.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=spec.train_lr, weight_decay=0.0)
    model.train()
    for _ in range(spec.train_steps):
        pick = torch.randint(len(ids), (spec.train_batch,), generator=gen).tolist()
        width = max(len(ids[i]) for i in pick)
        batch = torch.full((len(pick), width), tokenizer.pad_token_id, dtype=torch.long)
        labels = torch.full((len(pick), width), -100, dtype=torch.long)
        mask = torch.zeros((len(pick), width), dtype=torch.long)
        for row, i in enumerate(pick):
            batch[row, : len(ids[i])] = torch.tensor(ids[i])
            labels[row, : len(ids[i])] = batch[row, : len(ids[i])]
            mask[row, : len(ids[i])] = 1
        loss = model(input_ids=batch, attention_mask=mask, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if advance:
            advance(1)
    model.eval()
    log.info("warm-up: %d steps, final loss %.3f", spec.train_steps, float(loss.detach()))


def cached_model_dir(preset: str = "tiny") -> Path:
    """Where the locally built model of PRESET lives (it may not be built yet); `smollm2`'s folder is named by the
    hash of its GGUF file (MissingExtraError without the `smollm2` extra)."""
    if preset == SMOLLM2:
        from ads_core.models.smollm2 import converted_dir

        return converted_dir()
    return defaults.cache_dir() / "models" / f"{preset}-qwen2-{TINY_VERSION}"


def absent_key(preset: str) -> str:
    """What stands for a built-in model not built yet in a stage key (never built there)."""
    if preset == SMOLLM2:
        return f"absent:{cached_model_dir(preset).name}"
    return f"absent:{preset}-{TINY_VERSION}"


def is_built(path: Path) -> bool:
    return (path / "ads_tiny_model.json").exists() or (path / "ads_converted_model.json").exists()


def default_model_dir(preset: str = "tiny", progress: Progress | None = None) -> Path:
    """The cached built-in model, built (or, for `smollm2`, converted) on first use."""
    if preset == SMOLLM2:
        from ads_core.models.smollm2 import model_dir

        return model_dir(progress)
    path = cached_model_dir(preset)
    if is_built(path):
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one builder per cache dir: a second one would replace the folder under a
        if not is_built(path):  # process already loading it; the others wait here and find it built
            log.info("building the default %s model at %s", preset, path)
            make_tiny_model(path, preset, progress=progress)
    return path


def preset_of(model: str | None) -> str | None:
    """The built-in model a name stands for (`default` is `tiny`), or None for a real model folder or hub id."""
    if model in (None, "", DEFAULT_MODEL):
        return "tiny"
    return model if model in BUILTIN_MODELS else None


def resolve_model(model: str | None, progress: Progress | None = None) -> str:
    """Map None / 'default' / 'tiny' / 'bench' / 'smollm2' to the local cached model (built or converted on first
    use, with `progress`); anything else passes through."""
    preset = preset_of(model)
    if preset is not None:
        return str(default_model_dir(preset, progress))
    return str(model)


def model_fingerprint(model: str | None) -> str:
    """Identity of the policy model: content of a local directory, or a hub id's cached revision."""
    resolved = resolve_model(model)
    path = Path(resolved).expanduser()
    if path.is_dir():
        return directory_fingerprint(path)
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(resolved, "config.json")
        if isinstance(cached, str):
            return f"hub:{resolved}@{Path(cached).parent.name}"
    except Exception:  # noqa: BLE001 - no hub cache: key on the name alone
        pass
    return f"hub:{resolved}"
