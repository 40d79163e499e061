"""Does a difficulty measure follow difficulty? Each measure against the source's own level and the policy's pass rate.

    .venv/bin/python bench/difficulty_validity.py [SOURCE] [--model smollm2] [--pass-rows 50] [-k 4]
        [--max-tokens 384] [--clusters 7 16] [--json FILE] [--pass-only] [--smoke]

SOURCE (default: ../shared/data/math500/test.jsonl, else the packaged MATH-500) is formatted by the format stage
(its `level` and `subject` kept in `source_meta`). Measures, all from the policy MODEL (default the built-in
`smollm2`, the `smollm2` extra):
- nll_mean: the score stage's token-mean NLL of the reference solution (the seed's difficulty; row-cached, so a
  build of the same rows with the same model makes it free);
- nll_sum: the same NLL summed over the solution's tokens;
- nll_answer: the token-mean NLL of the final answer given the question alone (one short pass);
- pass_rate: the share of k sampled rollouts graded correct (ads_core.stages.score.pass_rate; `ads eval`'s
  generation and grading, resumable, kept under the ADS cache dir), on `--pass-rows` rows stratified by level
  (the same number from each level, lowest sample_ids first).
Printed: Spearman ρ (with n) of every measure against `level` on all rows, and against `level` and `pass_rate`
on the pass-rate rows; NMI between K-Means clusters of the score stage's embeddings (L2-normalised, seed 0) and
`subject` for each K, with random labels of the same sizes as the floor. `--smoke` (the suite): the tiny model,
20 synthetic rows, 4 pass-rate rows with k 1 and 8 tokens, seconds.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import polars as pl  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "math500" / "test.jsonl"


def smoke_rows(path: Path, n: int = 20) -> str:
    """N synthetic MATH-like rows with a level and a subject."""
    with open(path, "w") as fh:
        for i in range(n):
            a, b = i + 2, 3 * i + 1
            fh.write(
                json.dumps(
                    {
                        "problem": f"What is {a} times {b}?",
                        "solution": f"We multiply {a} by {b} to get \\boxed{{{a * b}}}.",
                        "answer": str(a * b),
                        "level": f"Level {1 + i % 5}",
                        "subject": ["Algebra", "Geometry"][i % 2],
                    }
                )
                + "\n"
            )
    return str(path)


def stratified(frame: pl.DataFrame, per_level_total: int) -> list[int]:
    """sample_ids: the same number from each level (lowest sample_ids first), PER_LEVEL_TOTAL in all."""
    levels = frame.drop_nulls("level")["level"].unique().sort().to_list()
    each = max(1, per_level_total // max(1, len(levels)))
    picks = frame.drop_nulls("level").sort(["level", "sample_id"]).group_by("level", maintain_order=True).head(each)
    return picks["sample_id"].to_list()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("source", nargs="?", default=None)
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--pass-rows", type=int, default=50)
    parser.add_argument("-k", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=384)
    parser.add_argument("--clusters", type=int, nargs="+", default=[7, 16])
    parser.add_argument("--json", default=None, help="Also write the numbers to this JSON file.")
    parser.add_argument("--pass-only", action="store_true", help="Only the pass rates (cached for a later run).")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()

    from sklearn.cluster import KMeans
    from sklearn.metrics import normalized_mutual_info_score

    from ads_core import models, storage
    from ads_core.common import defaults
    from ads_core.config.build import ScoreConfig
    from ads_core.config.eval import EvalConfig
    from ads_core.ingest.convert import format_dataset
    from ads_core.models.tiny import model_fingerprint
    from ads_core.stages.report.topics import source_labels
    from ads_core.stages.report.validity import numeric_labels, spearman
    from ads_core.stages.score.pass_rate import pass_rates
    from ads_core.stages.score.scorer import make_backend, tokenize_row
    from ads_core.stages.score.stage import _inputs_table, embeddings_matrix, score_shard

    tmp = Path(tempfile.mkdtemp(prefix="ads-validity-"))
    if args.smoke:
        args.model, args.pass_rows, args.k, args.max_tokens, args.clusters = "tiny", 4, 1, 8, [2]
        source = smoke_rows(tmp / "rows.jsonl")
    else:
        source = args.source or (str(SHARED) if SHARED.is_file() else "math500")
        if source == "math500":
            from ads_core.evals import sets as ev

            source = ev.resolve_sources(names=["math500"])["math500"]
    t0 = time.perf_counter()
    manifest = format_dataset(source, str(tmp / "out"))
    formatted = manifest.output_uri("train")
    meta = pl.from_arrow(storage.read_parquet(formatted, columns=["sample_id", "extra_info"]))
    frame = meta.select("sample_id", pl.col("extra_info").struct.field("source_meta").alias("source_meta"))
    labels = numeric_labels(frame)
    frame = frame.with_columns(level=pl.Series(labels.get("level", np.full(frame.height, np.nan))))
    print(f"rows: {frame.height} from {source}; model {args.model}; labels: {sorted(labels)}", flush=True)

    # the policy's pass rate on a level-stratified subset, generated and graded like `ads eval`
    pick = stratified(frame, args.pass_rows) if args.pass_rows > 0 else []  # 0: no pass rates
    subset_uri = str(tmp / "subset.parquet")
    full = storage.read_parquet(formatted)
    storage.write_parquet(subset_uri, full.filter(pc.is_in(full.column("sample_id"), value_set=pa.array(pick))))
    model_dir = models.resolve_model(args.model)
    key = model_fingerprint(model_dir).split(":")[-1][:12]
    eval_out = tmp / "eval" if args.smoke else defaults.cache_dir() / "difficulty-validity" / f"{key}-k{args.k}"
    ecfg = EvalConfig(k=args.k, max_tokens=args.max_tokens, batch_size=max(args.k, 16), device="cpu")
    t2 = time.perf_counter()
    rates = pass_rates(model_dir, subset_uri, str(eval_out), ecfg) if pick else {}
    pass_seconds = time.perf_counter() - t2
    ids = frame["sample_id"].to_list()
    pass_rate = np.array([rates.get(i, np.nan) for i in ids], dtype=np.float64)
    on_subset = ~np.isnan(pass_rate)
    mean_rate = float(np.nanmean(pass_rate)) if pick else float("nan")
    print(
        f"pass rate: {int(on_subset.sum())} rows x k={args.k}, max {args.max_tokens} tokens, {pass_seconds:.0f} s; "
        f"mean {mean_rate:.3f}, rows with any correct: {int((pass_rate > 0).sum())}",
        flush=True,
    )
    if args.pass_only:
        return

    cfg = ScoreConfig(model=args.model)
    loaded = make_backend(cfg)
    score_uri = str(tmp / "out" / "scores" / "scores.parquet")
    score_shard(formatted, score_uri, 0, cfg, scorer=loaded)
    scores = storage.read_parquet(score_uri)
    backend, tokenizer = loaded
    inputs = _inputs_table(formatted).to_pylist()
    t1 = time.perf_counter()
    answers = backend.score([tokenize_row(tokenizer, r["question"], None, r["answer"], cfg) for r in inputs])
    answer_seconds = time.perf_counter() - t1
    nll_mean = scores.column("difficulty").to_numpy()
    measures = {
        "nll_mean": nll_mean,
        "nll_sum": nll_mean * scores.column("n_target_tokens").to_numpy(),
        "nll_answer": answers.difficulty,
    }
    print(f"scored (nll_mean/nll_sum + nll_answer pass {answer_seconds:.0f} s)", flush=True)

    level = frame["level"].to_numpy()
    table = []
    for name, values in {**measures, "pass_rate": pass_rate}.items():
        table.append(
            {
                "measure": name,
                "level_all": spearman(values, level) if name != "pass_rate" else None,
                "level_subset": spearman(values[on_subset], level[on_subset]),
                "pass_rate_subset": spearman(values[on_subset], pass_rate[on_subset]) if name != "pass_rate" else None,
            }
        )
    print("\n| measure | ρ vs level (all rows) | ρ vs level (pass-rate rows) | ρ vs pass rate (pass-rate rows) |")
    print("|---|---|---|---|")
    cell = lambda s: "—" if s is None else ("n/a" if s["rho"] is None else f"{s['rho']:+.3f} (n={s['n']})")  # noqa: E731
    for row in table:
        cells = [cell(row[c]) for c in ("level_all", "level_subset", "pass_rate_subset")]
        print(f"| {row['measure']} | " + " | ".join(cells) + " |")

    nmi = {}
    found = source_labels(frame)
    embeddings = embeddings_matrix(scores).astype(np.float64)
    embeddings /= np.linalg.norm(embeddings, axis=1, keepdims=True).clip(1e-12)
    if found is not None:
        column, subject = found
        mask = subject.is_not_null().to_numpy()
        rng = np.random.default_rng(0)
        for k in args.clusters:
            clusters = KMeans(n_clusters=k, n_init=4, random_state=0).fit_predict(embeddings)
            floor = normalized_mutual_info_score(subject.to_numpy()[mask], rng.permutation(clusters[mask]))
            nmi[k] = (normalized_mutual_info_score(subject.to_numpy()[mask], clusters[mask]), floor)
            print(f"NMI(clusters K={k}, {column}): {nmi[k][0]:.3f} (shuffled clusters: {nmi[k][1]:.3f})")
    print(f"difficulty validity: {frame.height} rows in {time.perf_counter() - t0:.0f} s")
    if args.json:
        Path(args.json).write_text(
            json.dumps({"model": args.model, "k": args.k, "table": table, "nmi": nmi}, indent=2, default=str)
        )
    if args.smoke:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
