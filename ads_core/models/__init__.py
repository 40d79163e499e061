"""Model loading, hardware-derived device/dtype, and the tiny default model built locally.

`--model` is anything `from_pretrained` accepts: a local directory or a hub id (resolved from the
local cache; set HF_HUB_OFFLINE=1 to be sure nothing is fetched). The default model is a small
Qwen2-architecture causal LM built deterministically from a seed (and warmed up for 100 seeded steps
on the bundled sample, so its difficulties mean something), with a byte-level BPE tokenizer trained
on the bundled sample, saved with `save_pretrained` and loaded back through the real
`from_pretrained` path, so the demo and tests need no download.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import shutil
import sys
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ads_core.common import defaults

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
DEFAULT_MODEL = "default"  # the alias `--model default` resolves to the cached tiny model
TINY_VERSION = "v2"
# `progress(description, total, unit)` -> a context yielding advance(n) (ads_core.stages.base.ProgressFactory)
Progress = Callable[..., AbstractContextManager[Callable[[int], None] | None]]


def _no_progress(*_: Any, **__: Any) -> AbstractContextManager[None]:
    return nullcontext()


# Device nodes some GPU stack needs (NVIDIA, NVIDIA Jetson, WSL2's GPU bridge, AMD ROCm). On Linux without any of
# them torch cannot see a GPU, so `auto` is "cpu" without importing torch (~3 CPU-s per process): a build whose
# rows all come from the score cache never loads it.
GPU_DEVICE_NODES = ("/dev/nvidiactl", "/dev/nvidia0", "/dev/nvhost-ctrl", "/dev/dxg", "/dev/kfd")


def pick_device(device: str = "auto", nodes: tuple[str, ...] = GPU_DEVICE_NODES) -> str:
    if device != "auto":
        return device
    if sys.platform.startswith("linux") and not any(os.path.exists(node) for node in nodes):
        return "cpu"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


# CPU flags (as /proc/cpuinfo spells them) of a native bf16 matmul: Intel AMX, or AVX512-BF16 (Intel Cooper
# Lake and later, AMD Zen 4 and later). `torch.backends.cpu.get_cpu_capability()` says only "AVX512" on both.
BF16_CPU_FLAGS = ("amx_bf16", "avx512_bf16")
DTYPES = ("float32", "bfloat16", "float16")


@functools.lru_cache(maxsize=1)
def cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> frozenset[str]:
    """The CPU feature flags of the first processor in /proc/cpuinfo; empty where there is none (macOS)."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key.strip() in ("flags", "Features"):
                    return frozenset(value.split())
    except OSError:
        pass
    return frozenset()


def cpu_has_native_bf16(flags: frozenset[str] | None = None) -> bool:
    """True where bf16 matmul runs in hardware (AMX-BF16 or AVX512-BF16); AVX2-only CPUs emulate it ~8-10x slower.
    Native is not faster: `auto` decides by measuring (`ads_core.models.dtype`)."""
    return any(f in (cpu_flags() if flags is None else flags) for f in BF16_CPU_FLAGS)


def pick_dtype(device: str, dtype: str = "auto", flags: frozenset[str] | None = None, model: str | None = None) -> Any:
    """The torch dtype the scorer runs in: an explicit name wins; `auto` is bf16 on GPU, and on CPU bf16 only where
    it is faster on this machine for MODEL's shape (AMX, or measured: `ads_core.models.dtype`), else fp32.

    The row score cache keys on this value, so it must be the dtype the model really runs in.
    """
    import torch

    return getattr(torch, dtype_choice(device, dtype, flags, model))


def dtype_choice(
    device: str, dtype: str = "auto", flags: frozenset[str] | None = None, model: str | None = None
) -> str:
    """`pick_dtype`'s choice as a plain name ("bfloat16"), without importing torch (a measured CPU choice is read
    from the per-machine cache; only its first measurement imports torch)."""
    if dtype != "auto":
        if dtype not in DTYPES:
            raise ValueError(f"score.dtype: unknown dtype {dtype!r}; expected auto or one of {', '.join(DTYPES)}")
        return dtype
    if device.startswith("cuda"):
        return "bfloat16"
    if device != "cpu":
        return "float32"
    from ads_core.models.dtype import cpu_auto_dtype

    preset = preset_of(model) if model is not None else None
    return cpu_auto_dtype(cpu_flags() if flags is None else flags, str(cached_model_dir(preset)) if preset else model)


def dtype_name(device: str, dtype: str = "auto", model: str | None = None) -> str:
    """The resolved dtype as a plain name ("bfloat16"), for manifests and cache keys."""
    return dtype_choice(pick_device(device), dtype, model=model)


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
    """Where the locally built model of PRESET lives (it may not be built yet)."""
    return defaults.cache_dir() / "models" / f"{preset}-qwen2-{TINY_VERSION}"


def is_built(path: Path) -> bool:
    return (path / "ads_tiny_model.json").exists()


def default_model_dir(preset: str = "tiny", progress: Progress | None = None) -> Path:
    """The cached default model, built on first use."""
    path = cached_model_dir(preset)
    if not is_built(path):
        log.info("building the default %s model at %s", preset, path)
        make_tiny_model(path, preset, progress=progress)
    return path


def preset_of(model: str | None) -> str | None:
    """The local preset a model name stands for (`default` is `tiny`), or None for a real model."""
    if model in (None, "", DEFAULT_MODEL):
        return "tiny"
    return model if model in TINY_PRESETS else None


def resolve_model(model: str | None, progress: Progress | None = None) -> str:
    """Map None / 'default' / 'tiny' / 'bench' to the local cached model (built on first use, with `progress`);
    anything else passes through."""
    preset = preset_of(model)
    if preset is not None:
        return str(default_model_dir(preset, progress))
    return str(model)


@dataclass
class LoadedModel:
    model: Any
    tokenizer: Any
    device: str
    dtype: Any
    name: str


def load_causal_lm(
    model: str | None, device: str = "auto", dtype: str = "auto", trust_remote_code: bool = False
) -> LoadedModel:
    """Load tokenizer and causal LM through the normal `from_pretrained` path."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    name = resolve_model(model)
    dev = pick_device(device)
    torch_dtype = pick_dtype(dev, dtype, model=name)
    try:
        tokenizer = AutoTokenizer.from_pretrained(name, trust_remote_code=trust_remote_code)
        lm = AutoModelForCausalLM.from_pretrained(name, dtype=torch_dtype, trust_remote_code=trust_remote_code)
    except OSError as exc:
        raise ModelLoadError(
            f"cannot load model {name!r}: {exc}. Pass a local model directory, or a hub id that is in the "
            "local Hugging Face cache (no downloads at run time)."
        ) from exc
    lm.to(dev).eval()
    return LoadedModel(lm, tokenizer, dev, torch_dtype, name)


class ModelLoadError(Exception):
    """The model could not be loaded; the CLI turns it into an `error:` line."""
