"""The predictor artifact: a folder with the adapter's weights, every training row's frozen embedding, a summary
of how it was made and measured, and ``manifest.json`` (written last; ``ads_core.storage.manifest``), like every
other artifact. The sampler trusts it only once the manifest and every file it lists check out.

Files: ``predictor.safetensors`` (tensors only, never a pickle), ``embeddings.parquet`` (``row``, ``sample_id``,
``embedding``, aligned with the training artifact's rows), ``predictor.json`` (the adapter's shape, the embedding
model, the source policies and the held-out rho, with the raw-embedding baseline's).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ads_core import storage
from ads_core.storage import manifest as manifests

STAGE = "dots-predictor"
VERSION = "1"
WEIGHTS = "predictor.safetensors"
EMBEDDINGS = "embeddings.parquet"
SUMMARY = "predictor.json"


class PredictorArtifactError(ValueError):
    """A predictor folder that cannot be used; one line naming the folder."""


@dataclass
class PredictorArtifact:
    model: Any  # DifficultyPredictor
    embeddings: np.ndarray  # (rows, dim) float32, in the training artifact's row order
    sample_ids: list[str]
    summary: dict[str, Any]


def write_embeddings(path: str, embeddings: np.ndarray, sample_ids: list[str]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    emb = np.asarray(embeddings, dtype=np.float32)
    flat = pa.array(emb.reshape(-1))
    column = pa.FixedSizeListArray.from_arrays(flat, emb.shape[1])
    table = pa.table({"row": np.arange(len(emb), dtype=np.int64), "sample_id": sample_ids, "embedding": column})
    with storage.atomic_local_file(path) as tmp:
        pq.write_table(table, tmp)


def read_embeddings(path: str) -> tuple[np.ndarray, list[str]]:
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    column = table.column("embedding").combine_chunks()
    dim = column.type.list_size
    emb = column.flatten().to_numpy(zero_copy_only=False).astype(np.float32).reshape(-1, dim)
    return emb, [str(s) for s in table.column("sample_id").to_pylist()]


def save(folder: str, model: Any, embeddings: np.ndarray, sample_ids: list[str], summary: dict[str, Any]) -> str:
    """Write the artifact into FOLDER; the manifest last, so a killed write leaves nothing trusted."""
    from safetensors.torch import save_file

    Path(folder).mkdir(parents=True, exist_ok=True)
    weights = str(Path(folder) / WEIGHTS)
    state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    with storage.atomic_local_file(weights) as tmp:
        save_file(state, str(tmp))
    emb_path = str(Path(folder) / EMBEDDINGS)
    write_embeddings(emb_path, embeddings, sample_ids)
    doc = {**summary, "model": model.spec(), "rows": len(embeddings)}
    summary_path = str(Path(folder) / SUMMARY)
    storage.write_json(summary_path, doc)
    entry = manifests.Manifest(
        stage=STAGE,
        inputs={k: v for k, v in summary.get("inputs", {}).items()},
        outputs={
            "weights": manifests.output_entry(weights),
            "embeddings": manifests.output_entry(emb_path, len(embeddings)),
            "summary": manifests.output_entry(summary_path),
        },
        config=summary.get("settings", {}),
        code_version=manifests.version_of(STAGE, VERSION),
        counts={"rows": len(embeddings)},
    )
    return manifests.write(str(folder), entry)


def load(folder: str) -> PredictorArtifact:
    """The checked artifact in FOLDER (PredictorArtifactError, one line, when it is missing or damaged)."""
    from safetensors.torch import load_file

    from ads_core.sampler.dots.predictor import DifficultyPredictor

    found, why = manifests.why_not_intact(str(folder).rstrip("/"))
    if found is None:
        raise PredictorArtifactError(f"{folder}: not a usable DOTS predictor ({why}); make one with `ads dots-train`")
    summary = json.loads((Path(folder) / SUMMARY).read_text(encoding="utf-8"))
    spec = summary["model"]
    model = DifficultyPredictor(int(spec["dim"]), int(spec["hidden"]), int(spec["layers"]), float(spec["dropout"]))
    model.load_state_dict(load_file(str(Path(folder) / WEIGHTS)))
    model.eval()
    embeddings, ids = read_embeddings(str(Path(folder) / EMBEDDINGS))
    return PredictorArtifact(model, embeddings, ids, summary)
