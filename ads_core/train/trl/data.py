"""The artifact's rows as TRL's training dataset, and the columns the sampler is built from.

TRL renders each ``prompt`` (the artifact's chat messages) with the policy's chat template and passes every other
column to the reward functions, one entry per completion. So ``row`` (the position in the training file) keys
the feedback to the sampler, ``sample_id`` names the prompt in the log, ``ground_truth`` is what the math
reward checks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from ads_core import storage

COLUMNS = ["prompt", "reward_model", "sample_id", "cluster_id", "rank_in_cluster"]


@dataclass
class TrainRows:
    dataset: Any  # datasets.Dataset: prompt, ground_truth, row, sample_id
    sample_ids: np.ndarray  # (n,) int64, by row
    cluster_ids: np.ndarray  # (n,) int64, by row
    rank_in_cluster: np.ndarray  # (n,), by row

    @property
    def n_rows(self) -> int:
        return len(self.sample_ids)


def load_rows(uri: str) -> TrainRows:
    """Read the training file (local or any fsspec URI) once; rows keep the file's order."""
    import datasets

    table = storage.read_parquet(uri, columns=COLUMNS)
    truth = table.column("reward_model").combine_chunks().field("ground_truth")
    n = table.num_rows
    frame = pa.table(
        {
            "prompt": table.column("prompt"),
            "ground_truth": truth.cast(pa.string()),
            "row": pa.array(np.arange(n, dtype=np.int64)),
            "sample_id": table.column("sample_id").cast(pa.int64()),
        }
    )
    return TrainRows(
        dataset=datasets.Dataset(frame),
        sample_ids=table.column("sample_id").to_numpy().astype(np.int64),
        cluster_ids=table.column("cluster_id").to_numpy().astype(np.int64),
        rank_in_cluster=table.column("rank_in_cluster").to_numpy(),
    )
