"""The prompt template is part of the measurement: which one an evaluation uses, and which one a run trained with.

``resolve_template(spec)``: a named template (``ads_think``, ``boxed``, ``plain``), a file holding one, or a text
with ``{question}``. ``artifact_template(uri)``: what a training artifact was formatted with (its manifest's
``extra.template``, the build's format manifest, else read back from its first row: the prompt with the question
put back as ``{question}``). A training run records its artifact's template in ``RUN_DIR/template.json``
(``record_run_template``); ``run_template(run_dir)`` reads it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from ads_core import storage
from ads_core.common.errors import InputError
from ads_core.ingest.schema import TEMPLATES

DEFAULT_TEMPLATE = "ads_think"
RUN_TEMPLATE_FILE = "template.json"


@dataclass(frozen=True)
class Template:
    name: str  # a named template's name, a file's path, or "custom"
    text: str
    source: str  # where it came from: "--template", "run", "default"

    def describe(self) -> str:
        return f"{self.name} ({self.source})"


def name_of(text: str) -> str:
    """The name of a named template with this text, else ``custom``."""
    return next((name for name, body in TEMPLATES.items() if body == text), "custom")


def resolve_template(spec: str, source: str = "--template") -> Template:
    """SPEC: a template name, a file holding a template, or the template text itself (with {question})."""
    if spec in TEMPLATES:
        return Template(spec, TEMPLATES[spec], source)
    path = Path(spec).expanduser()
    if "{question}" not in spec and len(spec) < 4096 and path.is_file():
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"template file {spec}: unreadable ({exc})") from None
        if "{question}" not in text:
            raise InputError(f"template file {spec}: has no {{question}} placeholder")
        return Template(str(path), text, source)
    if "{question}" not in spec:
        raise InputError(
            f"template {spec!r}: neither a named template ({', '.join(TEMPLATES)}), a file, "
            "nor a text with {question}"
        )
    return Template(name_of(spec), spec, source)


def artifact_template(uri: str) -> str | None:
    """The template a training artifact was formatted with (see the module), or None when it can't be told."""
    folder = uri.rsplit("/", 1)[0] if "/" in uri else "."
    manifest = storage.join(folder, "manifest.json")
    try:
        extra = storage.read_json(manifest).get("extra") if storage.exists(manifest) else None
        if isinstance(extra, dict) and isinstance(extra.get("template"), str):
            return str(extra["template"])
    except (OSError, ValueError):
        pass
    if folder.endswith("/final"):
        from ads_core.evaluation.sets.catalog import training_template

        found = training_template(folder.rsplit("/", 1)[0])
        if found:
            return found
    return _template_from_rows(uri)


def _template_from_rows(uri: str) -> str | None:
    try:
        import pyarrow.parquet as pq

        fs, path = storage.get_fs(uri)
        with fs.open(path, "rb") as fh:
            table = pq.ParquetFile(fh).read_row_group(0, columns=["prompt", "extra_info"]).slice(0, 1)
        row = table.to_pylist()[0]
        prompt, question = row["prompt"], (row["extra_info"] or {}).get("question")
    except Exception:  # noqa: BLE001 - an artifact without these columns has no template to tell
        return None
    if not question or not prompt or len(prompt) != 1 or question not in prompt[0]["content"]:
        return None
    return str(prompt[0]["content"]).replace(question, "{question}", 1)


def record_run_template(run_dir: str, artifact_uri: str) -> None:
    """Write RUN_DIR/template.json: the template the run's artifact was formatted with (when it can be told)."""
    text = artifact_template(artifact_uri)
    if text is None:
        return
    doc = {"template": text, "name": name_of(text), "artifact": artifact_uri}
    storage.write_json(storage.join(run_dir, RUN_TEMPLATE_FILE), doc)


def run_template(run_dir: str | os.PathLike[str]) -> Template | None:
    """The template a run trained with (RUN_DIR/template.json), or None when it recorded none."""
    path = Path(run_dir) / RUN_TEMPLATE_FILE
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    text = doc.get("template") if isinstance(doc, dict) else None
    if not isinstance(text, str) or "{question}" not in text:
        return None
    return Template(name_of(text), text, "run")


def choose_template(flag: str | None, run_dir: str | None) -> tuple[Template, str | None]:
    """The template to evaluate a policy with, and a one-line warning when it is not the one its run trained with:
    ``--template`` when given, else the run's own, else the default."""
    trained = run_template(run_dir) if run_dir else None
    if flag is None:
        return trained or Template(DEFAULT_TEMPLATE, TEMPLATES[DEFAULT_TEMPLATE], "default"), None
    chosen = resolve_template(flag)
    if trained is not None and trained.text != chosen.text:
        return chosen, (
            f"warning: {run_dir} was trained with the template {trained.name}; evaluating with {chosen.name} "
            "(--template): its numbers are not the run's own"
        )
    return chosen, None
