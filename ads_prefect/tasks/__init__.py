"""Prefect tasks: the one thin wrapper of every `ads_core` stage (`stage_task`, which reuses a stage whose manifest
records its key; `retries`, the test-only `faults`), the UI artifacts (`publish`, `artifact_keys`), the ads-train
hand-off (`handoff`) and the training tasks (`train`).

Tasks take input artifact URIs and return their output URI; DataFrames never pass between tasks, and Prefect
persists no task result: a build's record of what is done is the manifests in OUT.
"""
