"""Evaluation settings: how answers are graded (`ads grade`, `ads eval`, the training rewards)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import Field, ValidationInfo, field_validator, model_validator

from ads_core.config.base import FrozenSection, Section, tuning
from ads_core.config.build import TemplateName


class GraderConfig(FrozenSection):
    """The grader's limits (see docs/evaluation.md#grading)."""

    timeout_s: float = Field(
        1.0, gt=0, le=600, description="Hard time limit per completion for math-verify; past it the answer is wrong."
    )
    workers: int = tuning(
        default=0, ge=0, le=256, description="Verifier processes (0: one per CPU core); up to 32 more in bursts."
    )
    cache_size: int = tuning(default=65_536, ge=0, description="(answer, ground truth) verdicts kept in memory.")


EvalBackend = Literal["auto", "transformers", "vllm"]
PAPER_SETS = ["math500", "aime24", "amc23"]  # the default of `sets` (the packaged sets before AIME 2025)
GPU_MAX_TOKENS = 14_336  # the ADS reference's validation response length
CPU_MAX_TOKENS = 512  # long generations on a CPU take minutes per batch
PAPER_K = 16  # the paper's mean@16
CPU_K = 2  # samples per problem when validating on a CPU


def default_k(device: str, k: int | None = None) -> int:
    """The one default-k rule of validation: K when given, else 2 on a CPU (a quick look) and the paper's 16
    elsewhere (`ads eval` itself defaults to 16, greedy to 1: `EvalConfig`)."""
    if k is not None:
        return int(k)
    return CPU_K if device == "cpu" else PAPER_K


class EvalConfig(Section):
    """`ads eval` and validation during training: k samples per problem, graded, mean@k (see docs/evaluation.md)."""

    greedy: bool = Field(False, description="Greedy decoding, one deterministic sample per problem (k 1).")
    k: int = Field(
        PAPER_K,
        ge=1,
        le=1024,
        description="Samples per problem (the paper's mean@16).",
        json_schema_extra={"flag": "-k"},
    )
    temperature: float = Field(0.6, gt=0, le=10, description="Sampling temperature.")
    top_p: float = Field(0.95, gt=0, le=1, description="Nucleus sampling: the smallest token set with this mass.")
    max_tokens: int | None = Field(
        None,
        ge=1,
        description=f"Tokens generated per completion at most, cut to the model's context (default: "
        f"{GPU_MAX_TOKENS} on a GPU, the paper's validation length; {CPU_MAX_TOKENS} on a CPU, a quick look).",
    )
    seed: int = Field(0, ge=0, description="Sampling seed; each (problem, sample) draws from its own seeded stream.")
    backend: EvalBackend = Field(
        "auto", description="Generation backend: auto is vllm with CUDA and vllm installed, else transformers."
    )
    batch_size: int = Field(64, ge=1, description="Completions generated together (problems per chunk: this / k).")
    limit: int | None = Field(None, ge=1, description="Only the first N problems of each set (a quick look).")
    sets: list[str] = tuning(
        default_factory=lambda: list(PAPER_SETS),
        description="Eval sets: named sets (math500, aime24, aime25, amc23, minerva, gpqa_diamond, mmlu_pro), paper "
        "(all of the paper's table there is), NAME=PATH, or files (a formatted .parquet or raw data).",
    )
    template: str | None = Field(
        None,
        description="Prompt template: ads_think, boxed, plain, a file holding one, or a text with {question}. "
        "Default: a training run's own (RUN_DIR/template.json), else ads_think. Raw and formatted files alike "
        "get it.",
        json_schema_extra={"flag": "--template"},
    )
    data_dir: str | None = Field(
        None,
        description="Eval data folder for sets kept outside the package (minerva/, gpqa_diamond/, mmlu_pro/; "
        "default $ADS_EVAL_DATA_DIR).",
    )
    device: str = Field("auto", description="transformers backend device: auto, cpu, cuda, cuda:N.")
    dtype: str = tuning(default="auto", description="transformers backend dtype: auto, float32, bfloat16, float16.")
    grader: GraderConfig = Field(default_factory=GraderConfig)

    @model_validator(mode="before")
    @classmethod
    def _greedy_default_k(cls, data: Any) -> Any:
        """Greedy decoding gives one sample per problem: k defaults to 1 then."""
        if isinstance(data, dict) and data.get("greedy") and data.get("k") is None:
            data = {**data, "k": 1}
        return data

    @field_validator("template")
    @classmethod
    def _a_template(cls, value: str | None) -> str | None:
        if (
            value is None
            or value in get_args(TemplateName)
            or "{question}" in value
            or Path(value).expanduser().is_file()
        ):
            return value
        raise ValueError(
            f"{value!r} is neither {', '.join(get_args(TemplateName))}, a file, nor a text with {{question}}"
        )

    @field_validator("k")
    @classmethod
    def _greedy_is_one_sample(cls, k: int, info: ValidationInfo) -> int:
        if info.data.get("greedy") and k != 1:
            raise ValueError("greedy decoding gives one sample per problem; use k 1 or drop greedy")
        return k

    def for_device(self, device: str) -> EvalConfig:
        """This config with ``max_tokens`` resolved for DEVICE (cpu, cuda, ...) when it was left unset."""
        if self.max_tokens is not None:
            return self
        return self.model_copy(update={"max_tokens": CPU_MAX_TOKENS if device == "cpu" else GPU_MAX_TOKENS})
