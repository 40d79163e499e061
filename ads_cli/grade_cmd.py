"""`ads grade`: regrade a file of saved completions with the project's one grader. Registered by ``ads_cli.main``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ads_cli.common import console, fail, progress_bar
from ads_cli.options import common_parameters, config_parameters, resolve_config, with_signature
from ads_core.config.eval import GraderConfig


def register(app: typer.Typer) -> None:
    """Add the ``grade`` command to an ``ads`` Typer app."""
    app.command("grade")(grade_cmd)


def grade_cmd(
    file: Annotated[Path, typer.Argument(help="A .parquet or .jsonl file of saved completions.", show_default=False)],
    completion_col: Annotated[
        str, typer.Option("--completion-col", help="Column holding each completion (text or chat messages).")
    ] = "completion",
    answer_col: Annotated[
        str, typer.Option("--answer-col", help="Column holding the ground truth (a string or a list of answers).")
    ] = "answer",
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", "-o", help="Where to write the graded rows (.parquet or .jsonl; default FILE.graded.parquet)."
        ),
    ] = None,
    **options: Any,
) -> None:
    """Grade saved completions: each row's last complete \\boxed{} answer against its ground truth.

    Writes the rows in the same order, with `correct`, `extracted` and `reason` added. The file is streamed
    (memory stays near one batch of rows); answers may be strings, numbers or lists of accepted answers, mixed
    in one JSONL file. The output is checked before any row is graded.

    Reasons: correct, wrong, no_answer, timeout, too_complex, error (e.g. no ground truth).

    Training rewards and `ads eval` use the same grader (docs/evaluation.md, "Grading").
    """
    from ads_core.common.errors import InputError
    from ads_core.grading import configure, settings
    from ads_core.grading.api import start_verifier
    from ads_core.grading.files import check_out, grade_file, plan_file

    config_file, assignments = options.pop("config_file", None), options.pop("assignments", None)
    cfg = resolve_config(GraderConfig, options, config_file, assignments)
    before = settings()
    configure(cfg)  # verifier processes and cache size; the limit is passed on explicitly
    try:
        target = check_out(file, out)  # before reading or grading anything
        plan = plan_file(file, completion_col, answer_col)
        with console.status("starting the verifier processes"):
            start_verifier()  # its start-up is not any row's time
        with progress_bar("grade", total=plan.rows, unit="rows") as advance:
            result = grade_file(
                file, completion_col, answer_col, target, timeout_s=cfg.timeout_s, progress=advance, plan=plan
            )
    except InputError as exc:
        raise fail(exc.render(lambda name: "--" + name.replace("_", "-"))) from None
    finally:
        configure(before)
    share = result.correct / result.rows if result.rows else 0.0
    reasons = ", ".join(f"{name} {count}" for name, count in sorted(result.reasons.items()))
    console.print(
        f"graded {result.rows} rows: {result.correct} correct ({share:.1%}); {reasons or 'no rows'}; slowest row "
        f"{result.slowest_s:.2f} s (limit {cfg.timeout_s:g} s)",
        highlight=False,
    )
    if result.first_error:  # no ground truth, or one that is not a string, a number or a list of them
        errors = result.reasons.get("error", 0)
        rows = f"{errors} row{'s' if errors != 1 else ''}"
        console.print(f"note: {rows} with reason error, the first: {result.first_error}", highlight=False)
    console.print(f"wrote {result.out}", highlight=False)


with_signature(
    grade_cmd,
    config_parameters(GraderConfig, ("",)) + common_parameters(GraderConfig, "--set workers=4"),
)
