"""``ads dots-train``: label the training set with a few source policies, train the predictor, measure it on a
held-out policy (beside raw embeddings), and write the predictor artifact.

The source policies must not be the policy DOTS will train (the predictor has to generalise across policies): on
a CPU, the tiny policy at several training stages (checkpoints of an earlier run), the warm-up policy, the base
policy. One policy is held out and only measured on.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ads_core.sampler.dots import artifact, predictor
from ads_core.train.dots import labels


@dataclass(frozen=True)
class DotsTrainSettings:
    num_generations: int = 4
    temperature: float = 1.0
    max_completion_length: int = 16
    rollout_seed: int = 0
    fit: predictor.FitSettings = field(default_factory=predictor.FitSettings)
    eval_reference_size: int = 64
    eval_seeds: int = 5


@dataclass
class DotsTrainResult:
    out: str
    rho: float
    rho_raw: float
    reference_size: int
    held_out: str
    sources: list[str]
    label_means: dict[str, float]
    embeddings_reused: bool
    seconds: float


def read_rows(artifact_uri: str) -> tuple[list[str], list[Any], list[str], list[str]]:
    """(sample ids, prompts as chat messages, ground truths, problem texts) of a training artifact."""
    import pyarrow.parquet as pq

    table = pq.read_table(artifact_uri, columns=["sample_id", "prompt", "reward_model"])
    prompts = table.column("prompt").to_pylist()
    truths = [str(r["ground_truth"]) for r in table.column("reward_model").to_pylist()]
    texts = [str(p[-1]["content"]) if isinstance(p, list) and p else str(p) for p in prompts]
    return [str(s) for s in table.column("sample_id").to_pylist()], prompts, truths, texts


def train_predictor(
    artifact_uri: str,
    sources: list[str],
    held_out: str,
    embed_model: str,
    out: str,
    settings: DotsTrainSettings,
    log: Callable[[str], None] = print,
) -> DotsTrainResult:
    """Labels from SOURCES (and HELD_OUT, measured only), embeddings from EMBED_MODEL, the fitted predictor in OUT."""
    started = time.perf_counter()
    ids, prompts, truths, texts = read_rows(artifact_uri)
    cache = Path(out) / "cache"
    rows_key = labels.cache_key(ids, truths)
    reused = labels.build_embeddings(artifact_uri, embed_model, ids)
    if reused is not None:
        log(f"embeddings: reusing the build's ({len(ids)} rows, {embed_model})")
        emb = reused
    else:
        key = labels.cache_key("embed", labels.folder_digest(embed_model), rows_key)
        log(f"embeddings: {embed_model} over {len(ids)} problems")
        emb = labels.cached_array(cache / f"embed-{key}.npy", lambda: labels.embed_texts(embed_model, texts))
    by_policy: dict[str, np.ndarray] = {}
    for policy in [*sources, held_out]:
        key = labels.cache_key("labels", labels.folder_digest(policy), rows_key, asdict(settings)["num_generations"])
        key = labels.cache_key(key, settings.temperature, settings.max_completion_length, settings.rollout_seed)
        log(f"labels: {policy} ({len(ids)} problems x {settings.num_generations} rollouts)")
        by_policy[policy] = labels.cached_array(
            cache / f"labels-{key}.npy",
            lambda p=policy: labels.rollout_success(
                p,
                prompts,
                truths,
                settings.num_generations,
                settings.temperature,
                settings.max_completion_length,
                settings.rollout_seed,
            ),
        )
    train_labels = {p: by_policy[p] for p in sources}
    model = predictor.fit(emb, train_labels, settings.fit)
    found = predictor.evaluate(model, emb, by_policy[held_out], settings.eval_reference_size, settings.eval_seeds)
    means = {p: float(v.mean()) for p, v in by_policy.items()}
    summary = {
        "artifact": artifact_uri,
        "embed_model": embed_model,
        "sources": sources,
        "held_out": held_out,
        "label_means": means,
        "evaluation": found,
        "settings": {k: v for k, v in asdict(settings).items()},
        "inputs": {"artifact": {"uri": artifact_uri, "sha256": rows_key}},
    }
    artifact.save(out, model, emb, ids, summary)
    return DotsTrainResult(
        out=out,
        rho=found["rho"],
        rho_raw=found["rho_raw"],
        reference_size=int(found["reference_size"]),
        held_out=held_out,
        sources=sources,
        label_means=means,
        embeddings_reused=reused is not None,
        seconds=time.perf_counter() - started,
    )
