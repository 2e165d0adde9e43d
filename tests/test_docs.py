"""The documents stay true: docs/cli.md is what the app generates, the README stays a short
manual without dated history, the recipe stays a file of values, and every relative link in the
README, the changelog, cli/README.md and docs/*.md points at a file that exists."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
RECIPE = ROOT / "dpr_xrisk" / "recipes" / "recommended.toml"

REGENERATE = "python -m typer dpr_xrisk.cli utils docs --name dpr-xrisk --output docs/cli.md"

_FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)  # fenced code blocks: their text is not links
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")  # [text](target "title")


def _documents() -> list[Path]:
    return [README, ROOT / "CHANGELOG.md", ROOT / "cli" / "README.md", *sorted(DOCS.glob("*.md"))]


def test_cli_docs_are_current(tmp_path):
    out = tmp_path / "cli.md"
    r = subprocess.run([sys.executable, "-m", "typer", "dpr_xrisk.cli", "utils", "docs", "--name", "dpr-xrisk",
                        "--output", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    current = (DOCS / "cli.md").read_text(encoding="utf-8") if (DOCS / "cli.md").exists() else ""
    assert out.read_text(encoding="utf-8") == current, (
        f"docs/cli.md is not what the command line app generates (a command or its help changed); "
        f"regenerate it from the repository root with: {REGENERATE}")


def test_readme_is_a_short_manual_without_dated_history():
    text = README.read_text(encoding="utf-8")
    lines = text.count("\n") + (not text.endswith("\n"))
    assert lines <= 300, f"README.md has {lines} lines (at most 300): move details to docs/, history to CHANGELOG.md"
    dates = re.findall(r"\b20\d\d-\d\d-\d\d\b", text)
    assert not dates, f"README.md holds dates {dates}: dated changes belong in CHANGELOG.md"
    sessions = re.findall(r"\bsessions?\s+\d+", text, re.I)
    assert not sessions, f"README.md names work sessions {sessions}: state what is, history lives in git"


def test_recipe_is_a_file_of_values():
    lines = RECIPE.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 40, (f"{RECIPE.relative_to(ROOT)} has {len(lines)} lines (at most 40): one line of "
                              "reason per value; measurements go to docs/results.md, dated changes to CHANGELOG.md")


@pytest.mark.parametrize("doc", _documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_point_at_files(doc):
    if not doc.exists():
        pytest.skip(f"{doc.relative_to(ROOT)} does not exist")
    text = _INLINE_CODE.sub("", _FENCE.sub("", doc.read_text(encoding="utf-8")))
    broken = []
    for target in _LINK.findall(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("#"):
            continue  # a URL (https:, mailto:) or an anchor in the same page
        path = target.split("#", 1)[0]
        if not (doc.parent / path).exists():
            broken.append(target)
    assert not broken, f"{doc.relative_to(ROOT)} links to missing files: {broken}"
