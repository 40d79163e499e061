"""The one config tree of the offline build: every option, its default, bounds and help, written once.

`BuildConfig` has a section per stage (`format`, `score`, `cluster`, `report`) plus the run's own
options (`run`). The `ads build` CLI generates its flags from these fields (`ads_cli.options`), the
`ads-build` flow takes the sections as its typed parameters, the deployment only overrides values,
and the in-process `build()` uses the same objects, so a default changes in exactly one place.

A field's `json_schema_extra={"flag": ...}` names its CLI flag when the field name alone would be
unclear (`--clusters` for `cluster.num_clusters`); `{"cli": False}` keeps a tuning knob out of the
flags (it stays settable with `--set section.field=value` and in the flow parameters).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from ads_core.common.names import safe_name
from ads_core.config.base import Section, tuning
from ads_core.config.stage_order import STAGE_NAMES

TemplateName = Literal["ads_think", "boxed", "plain"]
# force_from is a plain choice (a dropdown in the Prefect UI; an optional one shows as a str/None switch):
# "none" recomputes nothing that is reusable, a stage name recomputes that stage and every later one. The choices
# come from the one stage list (`ads_core.config.stage_order`).
ForceFrom = Literal[("none", *STAGE_NAMES)]  # type: ignore[valid-type]
DEFAULT_CLUSTERS = 16


class FormatConfig(Section):
    """How SOURCE is read and turned into verl's GRPO schema."""

    name: str | None = Field(
        None,
        description="Dataset name, used as data_source when rows have none (default: from SOURCE).",
        json_schema_extra={"cli": False},
    )
    question_col: str | None = Field(None, description="Column holding the question (overrides detection).")
    solution_col: str | None = Field(None, description="Column holding the reference solution.")
    answer_col: str | None = Field(None, description="Column holding the final answer.")
    options_col: str | None = Field(None, description="Column holding multiple-choice options.")
    template: TemplateName = Field("ads_think", description="Named prompt template.")
    template_text: str | None = Field(
        None, description="Custom prompt template containing {question}; overrides template."
    )
    split: str = Field("train", description="Split to read for a Hugging Face id (also extra_info.split).")
    max_question_chars: int = tuning(default=16_000, ge=1, description="Longer questions are rejected.")
    max_solution_chars: int = tuning(default=64_000, ge=1, description="Longer solutions are rejected.")
    max_answer_chars: int = tuning(default=1_000, ge=1, description="Longer answers are rejected.")
    batch_rows: int = tuning(default=20_000, ge=1, description="Rows per read batch.")
    csv_max_record_lines: int = tuning(
        default=1_000,
        ge=2,
        description="A CSV record spanning more lines is a runaway quote: its first line is rejected (bad_quote) "
        "and the lines after it are read as rows again.",
    )
    min_kept: float = Field(
        0.5,
        ge=0,
        le=1,
        description="Fail (exit 2) when fewer than this share of the rows "
        "is kept; the rejects and the manifest are still written. 0: never fail.",
    )

    @field_validator("name")
    @classmethod
    def _plain_name(cls, value: str | None) -> str | None:
        return None if value is None else safe_name(value)

    @field_validator("template_text")
    @classmethod
    def _has_placeholder(cls, value: str | None) -> str | None:
        if value is not None and "{question}" not in value:
            raise ValueError("template_text must contain the placeholder {question}")
        return value


class ScoreConfig(Section):
    """The fused scorer: one forward pass gives the embedding and the difficulty (NLL) of every row."""

    model: str | None = Field(
        "default",
        description="Policy model: a local dir, a hub id (local cache only), or a built-in: `default` (= `tiny`, built "
        "locally), `bench`, `smollm2` (SmolLM2-135M-Instruct; the `smollm2` extra).",
    )
    difficulty: Literal["nll_mean", "nll_sum", "nll_answer"] = Field(
        "nll_sum",
        description="The difficulty measure: nll_sum (default), the NLL of the reference solution summed over its "
        "tokens; nll_mean, its token mean (the ADS seed's measure, which ran against MATH's level with SmolLM2: "
        "Spearman -0.135, nll_sum +0.520); nll_answer, the token-mean NLL of the final answer given the question "
        "alone (a second, short pass). The report compares it with the source's own labels (docs/benchmarks.md, "
        "difficulty validity).",
    )
    text_mode: Literal["question_plus_solution", "question_only"] = Field(
        "question_plus_solution", description="Embed question+solution, or the question only."
    )
    max_length: int = Field(2048, ge=8, description="Max tokens per row; longer rows are truncated and flagged.")
    token_budget: int = Field(16_384, ge=8, description="Padded tokens per forward batch.")
    max_padding: float | None = tuning(
        default=0.1, ge=0, lt=1, description="A batch closes before its padding would exceed this share; null: off."
    )
    logits_chunk_elems: int = tuning(default=1 << 25, ge=1, description="LM-head chunk (positions x vocab).")
    backend: str = Field(
        "auto",
        description="Scorer backend: auto, transformers, vllm, or a class path pkg.module:Class.",
        json_schema_extra={"flag": "--scoring-backend"},
    )
    device: str = Field("auto", description="auto, cpu, cuda or cuda:N.")
    dtype: str = Field(
        "auto",
        description="auto (bf16 on GPU; on CPU bf16 with AMX, else bf16 only where a timed matmul at the model's "
        "shape is > 10% faster than fp32, measured once per machine), float32, bfloat16 or float16. The resolved "
        "dtype is in the scores manifest.",
    )
    packing: Literal["auto", "on", "off"] = Field(
        "auto",
        description="Pack rows into one sequence per batch (position ids restart per row) instead of "
        "padding them. auto: on only where attention is varlen flash-attention (GPU); the CPU SDPA path masks "
        "packed rows correctly but pays a dense mask over the pack, so it keeps padded batches.",
    )
    trust_remote_code: bool = tuning(default=False, description="Allow the model's own code.")
    num_shards: int = Field(
        1,
        ge=1,
        le=100_000,
        description="Score shards (units of resume and parallelism).",
        json_schema_extra={"flag": "--shards"},
    )
    cache: bool = Field(
        True,
        description="Reuse the stored score of every row whose text, model and scoring "
        "options are unchanged (a refresh scores only new or edited rows).",
        json_schema_extra={"flag": "--score-cache/--no-score-cache"},
    )
    cache_uri: str | None = Field(
        None,
        description="Row score cache: a local path, s3:// or memory:// URI "
        "(default: score-cache in the ADS cache dir, $ADS_CACHE_DIR or ~/.cache/ads-pipeline; shared by every "
        "dataset and OUT).",
    )


class ClusterConfig(Section):
    """L2 -> PCA -> k-means++ (best of n_init) -> Lloyd."""

    num_clusters: int = Field(
        DEFAULT_CLUSTERS,
        ge=1,
        description="K-Means clusters. K is clamped to "
        "rows // min_cluster_rows (8) on small sets; keep clusters at least as large as "
        "the sampler's mini_cluster_size.",
        json_schema_extra={"flag": "--clusters"},
    )
    pca_dim: int | None = Field(128, ge=0, description="PCA dimensions before K-Means (0 = off).")
    normalize: bool = tuning(default=True, description="L2-normalise embeddings first.")
    backend: str = Field(
        "auto",
        description="K-Means backend: auto, faiss, sklearn, cuml, or a class path pkg.module:Class.",
        json_schema_extra={"flag": "--kmeans-backend"},
    )
    seed: int = Field(42, description="K-Means seed.")
    max_iter: int = tuning(default=100, ge=1, description="Lloyd iterations at most.")
    tol: float = tuning(default=1e-4, gt=0, description="Relative centre shift that stops Lloyd.")
    init_sample: int = tuning(default=8_192, ge=1, description="Rows the seedings are refined on.")
    min_cluster_rows: int = tuning(default=8, ge=1, description="K is clamped to rows // this.")
    silhouette_sample: int = tuning(default=5_000, ge=0, description="Rows for the silhouette estimate.")
    n_init: int = tuning(default=16, ge=1, description="k-means++ seedings tried.")
    pca_sample: int | None = tuning(default=65_536, ge=0, description="Rows for the PCA covariance; 0 = all.")
    previous: str | None = Field(
        None,
        description="A previous build (its OUT, or OUT/clusters) whose cluster ids "
        "this build keeps; default: the build already in this OUT, if any.",
    )
    refit: bool = Field(
        False,
        description="With a previous build: refit K-Means from scratch (ids are then "
        "matched to the previous ones) instead of starting from the previous centroids.",
    )
    refit_new_share: float = tuning(
        default=0.3,
        ge=0,
        le=1,
        description="Refit instead of warm-starting when more than this share of rows is new since the previous build.",
    )
    refit_inertia_change: float = tuning(
        default=0.2,
        ge=0,
        description="Refit when the rows' mean squared "
        "distance to the previous centroids changed by more than this "
        "(relative to the previous build's).",
    )

    @field_validator("pca_dim", "pca_sample")
    @classmethod
    def _zero_is_off(cls, value: int | None) -> int | None:
        return value or None


class ReportConfig(Section):
    """The build report: plots and example problems in OUT/report/."""

    decontaminate: bool = Field(
        True,
        description="Check the final set against the packaged eval sets (MATH-500, "
        "AIME24, AMC23: exact and 13-gram matches); hits go to OUT/report/decontamination.json "
        "and the summary. Drop them with `ads eval-sets --drop` or `ads train --decontaminate "
        "drop`.",
        json_schema_extra={"flag": "--decontaminate/--no-decontaminate"},
    )

    examples_per_cluster: int = tuning(default=3, ge=1, le=3, description="Example problems per cluster.")
    max_example_clusters: int = tuning(default=32, ge=1, description="Clusters shown with examples.")
    map_sample: int = tuning(
        default=3000, ge=10, description="Rows in the 2-D embedding map (a seeded sample; t-SNE time grows with it)."
    )
    map_perplexity: float = tuning(default=30.0, gt=1, description="t-SNE perplexity (capped at (rows-1)/3).")
    map_iterations: int = tuning(default=500, ge=250, description="t-SNE optimisation steps.")
    map_seed: int = tuning(default=42, description="Seed of the map's sample, PCA and t-SNE.")
    terms_per_cluster: int = tuning(default=8, ge=1, le=30, description="Top c-TF-IDF terms kept per cluster.")
    terms_min_rows: int = tuning(default=2, ge=1, description="A term counts only if this many questions use it.")
    terms_min_lift: float = tuning(
        default=2.0,
        ge=0,
        description="A term names a cluster only if the share of the cluster's questions using it is at least this "
        "many times its share over the whole set (words common to most clusters name none); 0: off.",
    )
    representatives: int = tuning(
        default=2, ge=0, le=5, description="Problems nearest each cluster's centroid shown in the report and the UI."
    )
    terms_grid_clusters: int = tuning(
        default=64, ge=1, description="Clusters drawn in cluster_terms.png (the largest)."
    )


REMOVED_RESULT_STORAGE = (
    "result_storage is no longer an option: OUT's manifests are the build's one cache and Prefect keeps no records; "
    "remove it"
)


class RunConfig(Section):
    """How the build runs (not part of any artifact's identity)."""

    force_from: ForceFrom = Field(
        "none",
        description="Recompute this stage and every later one; none: reuse every stage whose inputs are unchanged.",
    )
    dask: str | None = Field(
        None,
        description="Score shards on Dask: local, local-cuda (one worker per GPU) "
        "or a scheduler address such as tcp://10.0.0.5:8786. Default: in-process.",
    )
    dask_workers: int | None = Field(
        None, ge=1, description="Workers of a local Dask cluster (default: min(shards, CPUs); local-cuda: one per GPU)."
    )
    trigger_training: Literal["on_change", "always", "never"] = tuning(
        default="never",
        description="Start train_deployment with the final artifact when the build finishes: "
        "on_change (only when the final artifact's content is new; an unchanged refresh starts nothing), "
        "always (once per build run), or never.",
    )
    train_deployment: str = tuning(default="ads-train/myds", description="The ads-train deployment to start.")
    train_retries: int = tuning(
        default=2,
        ge=0,
        le=20,
        description="With on_change: how many times a later build starts a new training run for the same final "
        "artifact after its last one Failed or Crashed (0: never retry). A run still Scheduled, Pending or Running "
        "is left alone; a Completed one is never repeated.",
    )

    @model_validator(mode="before")
    @classmethod
    def _no_result_storage(cls, value: Any) -> Any:
        """`result_storage` placed Prefect's cache records, a second cache beside OUT's manifests: refused."""
        if isinstance(value, dict) and "result_storage" in value:
            raise PydanticCustomError("removed", REMOVED_RESULT_STORAGE)
        return value

    @field_validator("force_from", mode="before")
    @classmethod
    def _none_is_none(cls, value: Any) -> Any:
        """null (the old optional parameter) and an empty choice mean none."""
        return "none" if value is None or value == "" else value

    @field_validator("trigger_training", mode="before")
    @classmethod
    def _bool_policy(cls, value: Any) -> Any:
        """`true`/`false` (the old boolean parameter) mean on_change/never."""
        if isinstance(value, bool):
            return "on_change" if value else "never"
        return value


class BuildConfig(Section):
    """Everything one build needs besides SOURCE and OUT."""

    format: FormatConfig = Field(
        default_factory=FormatConfig, description="How SOURCE is read and converted (column overrides, template)."
    )
    score: ScoreConfig = Field(
        default_factory=ScoreConfig, description="The policy model and the fused embedding + NLL scorer."
    )
    cluster: ClusterConfig = Field(default_factory=ClusterConfig, description="PCA and K-Means.")
    report: ReportConfig = Field(default_factory=ReportConfig, description="The build report.")
    run: RunConfig = Field(default_factory=RunConfig, description="force_from, Dask and the ads-train hand-off.")
