"""The final-artifact contract: what `OUT/final/train.parquet` holds, shared by the writer and the trainer.

The sort stage writes this layout (the column names are in `ads_core.common.contract`); `ads train` and the
`ads-train` flow check it with `validate_artifact` before a trainer sees the file.

    info = validate_artifact("ads-out/final/train.parquet")   # ArtifactError names every problem
    print(info.rows, info.clusters, info.dataset)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from ads_core import storage
from ads_core.common.contract import EXTRA_INFO_FIELDS, FINAL_DIR, REQUIRED_COLUMNS
from ads_core.common.errors import OptionError
from ads_core.sampler.kinds import build_sampler
from ads_core.storage import manifest as mf
from ads_core.storage.manifest import MANIFEST_NAME
from ads_core.train.options import TrainSamplerConfig
from ads_core.train.rows_check import RowError, check_rows


class ArtifactError(OptionError, ValueError):
    """The training artifact can't be trained on (missing columns, bad values): fix the data."""


@dataclass
class ArtifactInfo:
    """What training needs to know about a checked artifact: sizes, its manifest and its OUT root."""

    uri: str
    rows: int
    clusters: int
    cluster_size_min: int
    cluster_size_median: float
    cluster_size_max: int
    manifest: dict[str, Any] | None
    out_root: str | None  # OUT when the artifact is OUT/final/train.parquet

    @property
    def policy_model(self) -> str | None:
        return ((self.manifest or {}).get("extra") or {}).get("policy_model")

    @property
    def dataset(self) -> str | None:
        return ((self.manifest or {}).get("extra") or {}).get("dataset")


def parent(uri: str) -> str:
    """The folder of a path or URI (``.`` for a bare file name)."""
    return uri.rstrip("/").rsplit("/", 1)[0] if "/" in uri.rstrip("/") else "."


def out_root_of(uri: str) -> str | None:
    """OUT when ``uri`` is ``OUT/final/<file>``, else None."""
    folder = parent(uri)
    return parent(folder) if folder.rstrip("/").endswith("/" + FINAL_DIR) else None


def read_manifest(artifact_uri: str) -> dict[str, Any] | None:
    """The ``manifest.json`` next to the artifact (OUT/final/manifest.json) once it checks out, None when there is none.

    Training takes the policy model and the dataset name from it, so it is trusted only when its digest matches its
    content and its counts add up; otherwise ArtifactError names the file (`validate_artifact` also checks that it
    describes the artifact's very bytes).
    """
    uri = storage.join(parent(artifact_uri), MANIFEST_NAME)
    if not storage.exists(uri):
        return None
    try:
        data = storage.read_json(uri)
        found = mf.problems(mf.Manifest.from_dict(data))
    except (OSError, ValueError, TypeError) as exc:
        data, found = {}, [f"unreadable ({type(exc).__name__}: {exc})"]
    if found:
        raise _untrusted(uri, "; ".join(found))
    return data


def _untrusted(manifest_uri: str, why: str) -> ArtifactError:
    return ArtifactError(
        f"{manifest_uri}: not trusted ({why}); training reads the policy model from it, so rebuild with `ads build` "
        "(a build recomputes a stage whose manifest was changed)"
    )


def _check_against_manifest(uri: str, manifest: dict[str, Any] | None, rows: int) -> None:
    """The manifest describes this artifact's bytes and rows (a manifest of another build beside it is refused).

    Compared by content, not path, so an OUT copied elsewhere (another bucket, a synced folder) keeps its manifest."""
    if manifest is None:
        return
    name = uri.rstrip("/").rsplit("/", 1)[-1]
    listed = [e for e in manifest["outputs"].values() if str(e.get("uri", "")).rsplit("/", 1)[-1] == name]
    manifest_uri = storage.join(parent(uri), MANIFEST_NAME)
    if not listed:
        raise _untrusted(manifest_uri, f"it lists no {name}")
    entry = listed[0]
    if entry.get("rows") is not None and entry["rows"] != rows:
        raise _untrusted(manifest_uri, f"it lists {entry['rows']} rows, {uri} has {rows}")
    if entry.get("sha256") and storage.content_hash(uri) != entry["sha256"]:
        raise _untrusted(manifest_uri, f"{uri} does not match the hash it lists")


def _struct_fields(typ: pa.DataType) -> set[str]:
    return {typ.field(i).name for i in range(typ.num_fields)} if pa.types.is_struct(typ) else set()


def check_schema(schema: pa.Schema, uri: str) -> None:
    """Raise ArtifactError naming every column that is missing or has the wrong shape."""
    problems = []
    names = set(schema.names)
    for col, what in REQUIRED_COLUMNS.items():
        if col not in names:
            problems.append(f"missing column {col!r} ({what})")
    if "prompt" in names:
        typ = schema.field("prompt").type
        is_list = pa.types.is_list(typ) or pa.types.is_large_list(typ)
        if not (is_list and {"role", "content"} <= _struct_fields(typ.value_type)):
            problems.append(f"column 'prompt' must be a list of {{role, content}} messages, got {typ}")
    if "reward_model" in names and "ground_truth" not in _struct_fields(schema.field("reward_model").type):
        problems.append("column 'reward_model' must be a struct with a 'ground_truth' field")
    if "extra_info" in names:
        fields = _struct_fields(schema.field("extra_info").type)
        missing = [f for f in EXTRA_INFO_FIELDS if f not in fields]
        if missing:
            problems.append(
                f"extra_info lacks {missing}: the row identity reaches verl's batch only through "
                f"extra_info (rebuild with `ads build`)"
            )
    for col in ("sample_id", "cluster_id"):
        if col in names and not pa.types.is_integer(schema.field(col).type):
            problems.append(f"column {col!r} must be an integer, got {schema.field(col).type}")
    if "rank_in_cluster" in names:
        typ = schema.field("rank_in_cluster").type
        if not (pa.types.is_integer(typ) or pa.types.is_floating(typ)):
            problems.append(f"column 'rank_in_cluster' must be numeric, got {typ}")
    if problems:
        raise ArtifactError(
            f"{uri} is not an ADS training artifact (verl GRPO schema + sampler columns):\n  - "
            + "\n  - ".join(problems)
        )


def _check_ids(uri: str, cols: pa.Table) -> None:
    """Row ids unique and mirrored in extra_info; the sampler maps rollouts to rows by them."""
    for col in ("sample_id", "cluster_id", "rank_in_cluster"):
        nulls = cols.column(col).null_count
        if nulls:
            raise ArtifactError(f"{uri}: column {col!r} has {nulls} null values")
    sid = cols.column("sample_id").to_numpy()
    uniq, counts = np.unique(sid, return_counts=True)
    if (counts > 1).any():
        raise ArtifactError(
            f"{uri}: sample_id is not unique ({int((counts > 1).sum())} repeated ids, e.g. "
            f"{int(uniq[counts > 1][0])}); the sampler maps rollouts to rows by it"
        )
    info = cols.column("extra_info").combine_chunks()
    if not np.array_equal(info.field("sample_id").to_numpy(zero_copy_only=False), sid):
        raise ArtifactError(f"{uri}: extra_info.sample_id differs from sample_id")
    inner_cid = info.field("cluster_id").to_numpy(zero_copy_only=False)
    cid = cols.column("cluster_id").to_numpy()
    if not np.array_equal(inner_cid.astype(np.int64), cid.astype(np.int64)):
        raise ArtifactError(f"{uri}: extra_info.cluster_id differs from cluster_id")


def validate_artifact(uri: str, sampler_cfg: TrainSamplerConfig | None = None) -> ArtifactInfo:
    """Check the schema, the sampler columns and the row ids; build the sampler once as the final check."""
    import pyarrow.parquet as pq

    if not uri.endswith(".parquet"):
        raise ArtifactError(f"{uri}: verl reads the training set from a .parquet file (OUT/final/train.parquet)")
    if not storage.exists(uri):
        raise ArtifactError(f"{uri}: no such file (build one with `ads build --out OUT`)")
    fs, path = storage.get_fs(uri)
    if fs.isdir(path):
        raise ArtifactError(
            f"{uri}: is a folder, not a Parquet file (a Spark-style folder of parts?); pass one .parquet file, "
            "for example OUT/final/train.parquet from `ads build`"
        )
    try:
        with fs.open(path, "rb") as f:
            pf = pq.ParquetFile(f)
            check_schema(pf.schema_arrow, uri)
            wanted = ["sample_id", "cluster_id", "rank_in_cluster", "extra_info", "prompt", "reward_model"]
            cols = pf.read(columns=wanted + [c for c in ("cluster_size",) if c in pf.schema_arrow.names])
    except (pa.ArrowInvalid, OSError) as exc:
        raise ArtifactError(f"{uri}: not a readable Parquet file ({' '.join(str(exc).split())})") from None
    if cols.num_rows == 0:
        raise ArtifactError(f"{uri}: the artifact has no rows")
    _check_ids(uri, cols)
    try:
        check_rows(cols)
    except RowError as exc:
        raise ArtifactError(f"{uri}: {exc}") from None
    cid = cols.column("cluster_id").to_numpy()
    cfg = sampler_cfg or TrainSamplerConfig()
    try:  # the run's sampler, made as the trainer will make it, must accept the two columns
        build_sampler(cfg.kind, cid, cols.column("rank_in_cluster").to_numpy(), cfg, cfg.ads.batch_size)
    except ValueError as exc:
        raise ArtifactError(f"{uri}: the {cfg.kind} sampler rejects the cluster columns: {exc}") from None
    sizes = np.unique(cid, return_counts=True)[1]
    manifest = read_manifest(uri)
    _check_against_manifest(uri, manifest, cols.num_rows)
    return ArtifactInfo(
        uri=uri,
        rows=cols.num_rows,
        clusters=len(sizes),
        cluster_size_min=int(sizes.min()),
        cluster_size_median=float(np.median(sizes)),
        cluster_size_max=int(sizes.max()),
        manifest=manifest,
        out_root=out_root_of(uri),
    )


def dataset_of(uri: str, manifest: dict[str, Any] | None = None) -> str:
    """The dataset an artifact was built from: its manifest's, else OUT's name, else its folder's name.

    ``ads-out/gsm8k/final/train.parquet`` without a manifest gives ``gsm8k``; ``/data/mine.parquet`` ``data``.
    """
    extra = (manifest or {}).get("extra") or {}
    if extra.get("dataset"):
        return str(extra["dataset"])
    folder = out_root_of(uri) or parent(uri)
    name = folder.rstrip("/").rsplit("/", 1)[-1]
    return name if name not in ("", ".", "..") and not name.endswith(":") else "dataset"
