"""Prefect tasks: the one thin, cached wrapper of every `ads_core` stage (`stage_task`; `output` for the cache
design, `retries`, the test-only `faults`), the UI artifacts (`publish`, `keys`), the ads-train hand-off (`handoff`)
and the training tasks (`train`).

Tasks take input artifact URIs and return their output URI (plus a digest of what they wrote);
DataFrames never pass between tasks, and nothing but small JSON records is persisted by Prefect.
"""
