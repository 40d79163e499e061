"""The eval sets formatted like the training set: the format conversion (`ads_core.ingest.convert`, the same
detection, prompt template and `sample_id` as the training rows) run on each packaged (or given) set, written to
`OUT/eval/<name>.parquet` with `OUT/eval/manifest.json`.

Training planning, `ads eval`, `ads eval-sets`, the demo and the report stage's decontamination check all call
it. It imports the conversion, never a stage, so the stages that use it import down.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path

import pyarrow as pa

from ads_core import storage
from ads_core.config.build import FormatConfig
from ads_core.evaluation.sets.catalog import EvalSet, eval_dir, eval_uri, resolve_sources, training_template
from ads_core.ingest.convert import format_dataset
from ads_core.ingest.schema import TEMPLATES


def write_eval_sets(
    out: str,
    sources: Mapping[str, str] | None = None,
    names: Sequence[str] | None = None,
    data_dir: str | Path | None = None,
    template: str | None = None,
) -> dict[str, EvalSet]:
    """Format each eval set into ``OUT/eval/<name>.parquet`` (verl schema) and write ``OUT/eval/manifest.json``.

    ``template`` defaults to the training set's template (OUT/formatted/manifest.json), else ``ads_think``,
    so validation prompts look like training prompts.
    """
    resolved = resolve_sources(sources, names, data_dir)
    template = template or training_template(out) or TEMPLATES["ads_think"]
    results: dict[str, EvalSet] = {}
    with tempfile.TemporaryDirectory(prefix="ads-eval-") as tmp:
        for name, source in resolved.items():
            work = os.path.join(tmp, name)
            manifest = format_dataset(source, work, FormatConfig(name=name, split="test", template_text=template))
            table = storage.read_parquet(manifest.output_uri("train"))
            # one data_source per set: verl groups its validation metrics by it
            table = table.set_column(
                table.schema.get_field_index("data_source"),
                "data_source",
                pa.array([name] * table.num_rows, pa.string()),
            )
            uri = eval_uri(out, name)
            storage.write_parquet(uri, table)
            counts = manifest.counts
            results[name] = EvalSet(
                name=name,
                source=source,
                uri=uri,
                rows=table.num_rows,
                rejected=counts["rows_rejected"],
                rejects_by_reason=dict(counts["rejects_by_reason"]),
            )
    storage.write_json(
        storage.join(eval_dir(out), "manifest.json"),
        {"template_string": template, "sets": {k: asdict(v) for k, v in results.items()}},
    )
    return results
