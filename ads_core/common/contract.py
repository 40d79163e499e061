"""The final artifact's contract, shared by its writer (the sort stage) and its readers (training, evals).

`OUT/final/train.parquet` is verl's GRPO schema plus the sampler columns; `extra_info` carries the row's
identity into the trainers' batches. Both sides import the names from here, so they cannot drift apart.
"""

from __future__ import annotations

import pyarrow as pa

FINAL_PATH = "final/train.parquet"  # under OUT; the sort stage's manifest sits beside it
FINAL_DIR = FINAL_PATH.split("/")[0]

# columns the sort stage appends after the verl schema, in this order (then `truncated`)
SAMPLER_COLUMNS = ("sample_id", "cluster_id", "rank_in_cluster", "cluster_size", "difficulty")
# fields the sort stage sets inside `extra_info`, the only struct that reaches verl's batches whole
EXTRA_INFO_WRITTEN = ("sample_id", "cluster_id", "rank_in_cluster", "difficulty", "index")
# of those, what training needs to map a rollout back to its row
EXTRA_INFO_FIELDS = ("sample_id", "index", "cluster_id")

# top-level column -> what it must be (checked on the parquet schema, before a trainer sees the file)
REQUIRED_COLUMNS: dict[str, str] = {
    "data_source": "string",
    "prompt": "list of {role, content} messages",
    "reward_model": "struct with ground_truth",
    "extra_info": "struct with sample_id (and index, cluster_id)",
    "sample_id": "int64 row id",
    "cluster_id": "integer cluster label",
    "rank_in_cluster": "easy-to-hard rank inside the cluster",
}

# the rejects table (OUT/formatted/rejects.parquet; the rows decontamination drops), written by the format stage
# and by `ads_core.evaluation.sets.decontam`
REJECTS_SCHEMA = pa.schema(
    [
        ("source_file", pa.string()),
        ("source_row", pa.int64()),
        ("reason", pa.string()),
        ("message", pa.string()),
        ("raw", pa.string()),
    ]
)
