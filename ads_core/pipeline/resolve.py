"""Where a build reads and writes, decided once for the CLI, the flow and the in-process `build()`.

- SOURCE: the given dataset, else the bundled sample; an existing local path is made absolute, so the rows'
  `extra_info.source_file` and the stage keys never depend on the caller's working directory.
- the dataset name: the given one, else `format.name`, else derived from SOURCE; always one plain path segment.
- OUT: the given root, else `$ADS_OUT_DIR/<dataset>`, else `./ads-out/<dataset>`; local roots made absolute.

A SOURCE or OUT with credentials in it (`s3://KEY:SECRET@bucket/...`) is refused here, before anything logs it
(StorageError, which never repeats them).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ads_core.common import defaults
from ads_core.common.names import safe_name
from ads_core.storage.errors import refuse_credentials

OUT_ENV = "ADS_OUT_DIR"  # output root of runs without `out` (deployments): $ADS_OUT_DIR/<dataset>


def resolve_source(source: str | None) -> str:
    source = source or defaults.sample_path()
    refuse_credentials(source, "SOURCE")
    if "://" not in source and os.path.exists(source):
        return os.path.abspath(source)
    return source


def default_out(dataset: str) -> str:
    """$ADS_OUT_DIR/<dataset>, else ./ads-out/<dataset> (not yet made absolute)."""
    return os.path.join(os.environ.get(OUT_ENV) or defaults.DEFAULT_OUT, dataset)


def resolve_out(out: str | None, dataset: str) -> str:
    """`out`, or the default root for DATASET; local paths made absolute, no trailing slash."""
    out = out or default_out(dataset)
    refuse_credentials(out, "OUT")
    if "://" not in out:
        out = os.path.abspath(os.path.expanduser(out))
    return out.rstrip("/") or "/"


def resolve_name(source: str, dataset: str | None = None, configured: str | None = None) -> str:
    """The dataset name: given, configured (`format.name`) or derived from SOURCE; one plain path segment."""
    from ads_core.ingest.sources import dataset_name

    return safe_name(dataset or configured or dataset_name(source))


@dataclass(frozen=True)
class Target:
    """A build's resolved inputs and outputs."""

    source: str
    dataset: str
    out: str


def resolve(
    source: str | None, out: str | None = None, dataset: str | None = None, configured: str | None = None
) -> Target:
    """Source, dataset name and OUT of one build, as the CLI, the flow and `build()` all resolve them."""
    resolved = resolve_source(source)
    name = resolve_name(resolved, dataset, configured)
    return Target(source=resolved, dataset=name, out=resolve_out(out, name))
