"""Docs that are true: every `ads ...` command line in README.md and docs/*.md (in fenced code blocks and in inline
code) names a command that exists, and every `--flag` it uses is a flag of that command. Cheap (no command runs),
and it catches the usual rot: a renamed command or option that the docs still show."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import typer.main

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
INLINE = re.compile(r"(?<!`)`((?:\.venv/bin/)?ads [^`]+)`(?!`)")
# a part of a shell line that runs ads (after optional VAR=value words), followed by a command or an option
ADS = re.compile(r"^\s*(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*(?:\./)?(?:\.venv/bin/)?ads(\s+[-a-z].*)?$")


def command_lines(text: str) -> list[tuple[int, str]]:
    """(line number, command) for each `ads` invocation: fenced blocks (continuations joined, comments and
    prompts stripped, `&&` / `|` / `;` chains split) and inline code spans that start with `ads `."""
    found: list[tuple[int, str]] = []
    for block in FENCE.finditer(text):
        first = text.count("\n", 0, block.start(1)) + 1
        lines = block.group(1).split("\n")
        i = 0
        while i < len(lines):
            number, line = first + i, lines[i]
            while line.rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                line = line.rstrip()[:-1] + " " + lines[i]
            i += 1
            line = re.sub(r"^\s*\$\s+", "", line)
            for part in re.split(r"\s*(?:&&|\|\||;|\|)\s*", strip_comment(line)):
                match = ADS.match(part)
                if match:
                    found.append((number, "ads" + (match.group(1) or "")))
    for match in INLINE.finditer(text):
        found.append((text.count("\n", 0, match.start()) + 1, re.sub(r"^\.venv/bin/", "", match.group(1))))
    return found


def strip_comment(line: str) -> str:
    """The line without a trailing `# comment` (a `#` that starts a word outside quotes)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


def flags_of(cmd: Any) -> set[str]:
    return {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)} | {"--help"}


def check(root: Any, command: str) -> str | None:
    """Why COMMAND (a line that starts with `ads`) is not a real invocation, or None."""
    try:
        words = shlex.split(command)[1:]
    except ValueError:
        words = command.split()[1:]
    cmd: Any = root
    path = ["ads"]
    allowed = flags_of(root)
    for word in words:
        if word in ("...", "…") or re.fullmatch(r"[\[<].*|.*[\]>]", word):
            continue  # a placeholder: [OPTIONS], <dir>, ...
        if word.startswith("-") and word not in ("-", "--"):
            flag = word.split("=", 1)[0]
            if flag not in allowed:
                return f"`{' '.join(path)}` has no option {flag}"
        elif hasattr(cmd, "list_commands"):  # a group (typer's own click, so no isinstance against click's)
            sub = cmd.get_command(cmd.context_class(cmd), word)
            if sub is None:
                return f"`{' '.join(path)}` has no command {word!r}"
            cmd, path = sub, [*path, word]
            allowed = flags_of(sub) | (flags_of(root) if len(path) == 2 else set())
    return None


@pytest.fixture(scope="module")
def root() -> Any:
    from ads_cli.main import app

    return typer.main.get_command(app)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_ads_command_in_the_docs_exists_with_its_flags(root: Any, doc: Path):
    lines = command_lines(doc.read_text())
    problems = [f"{doc.name}:{n}: {why}  ({c})" for n, c in lines if (why := check(root, c))]
    assert not problems, "commands in the docs that the CLI does not have:\n" + "\n".join(problems)


def test_the_checker_catches_rot(root: Any):
    text = (
        "```bash\nads build --no-such-flag  # comment\n.venv/bin/ads nosuchcommand x\n```\nsee `ads train --steps 3`\n"
    )
    lines = command_lines(text)
    assert [n for n, _ in lines] == [2, 3, 5]
    assert "no option --no-such-flag" in check(root, lines[0][1])
    assert "no command 'nosuchcommand'" in check(root, lines[1][1])
    assert check(root, lines[2][1]) is None


def test_the_readme_names_the_build_stages_in_the_order_the_code_runs_them():
    """Regression (issue 52): the README's chain omitted `merge`. The chain is ads_core.config.stage_order's."""
    from ads_core.config.stage_order import STAGE_NAMES

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert "**" + " → ".join(STAGE_NAMES) + "**" in readme
