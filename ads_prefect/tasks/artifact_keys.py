"""Prefect artifact keys: one spelling for every artifact the flows publish."""

from __future__ import annotations

from functools import partial


def artifact_key(*parts: str) -> str:
    """`ads-<part>-<part>...` (a build's: dataset, what); Prefect artifact keys allow lowercase letters, digits and
    dashes only."""
    slug = "".join(c if c.isascii() and c.isalnum() else "-" for c in "-".join(("ads", *parts)).lower())
    while "--" in slug:
        slug = slug.replace("--", "-")
    return slug.strip("-")


train_artifact_key = partial(artifact_key, "train")  # ads-train-<experiment>-<what>: the training run's artifacts
