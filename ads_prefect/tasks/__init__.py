"""Prefect tasks: one thin, cached wrapper per `ads_core` stage (see `tasks.base` for the cache design).

Tasks take input artifact URIs and return their output URI (plus a digest of what they wrote);
DataFrames never pass between tasks, and nothing but small JSON records is persisted by Prefect.
"""
