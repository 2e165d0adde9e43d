"""The README's demo table is what ``bash cli/demo.sh`` prints (issue "zero silent wrong numbers").

The demo's retrieval runs are rebuilt here the way cli/demo.sh builds them (BM25, zero-shot MiniLM,
their hybrid, on data/sample) and scored by its metrics step, ``evaluate --qrels``; each printed
row must be the README's, digit for digit. The ``dense-dpm`` row needs the demo's 10 training steps
(minutes on a busy 2-core CPU), so it is checked on the demo's own outputs, ``runs/demo/``, when a
demo has been run in this checkout (only read, never written).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import ROOT, SAMPLE, cli

DEMO_RUNS = ("bm25.json", "dense.json", "hybrid.json", "dense-dpm.json")


def readme_table() -> dict[str, str]:
    """The demo table of README.md: {run file name: its row}, the header under ``"run"``."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:2] == ["run", "n"])
    rows = {}
    for line in lines[start:]:
        if line.startswith("```"):
            break
        rows[line.split()[0]] = line.rstrip()
    return rows


def printed_table(output: str) -> dict[str, str]:
    """The rows ``evaluate`` printed, keyed like :func:`readme_table` (its "wrote" lines dropped)."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:2] == ["run", "n"])
    return {line.split()[0]: line.rstrip() for line in lines[start:] if line.strip() and not line.startswith("wrote ")}


def evaluate(runs: list[Path], out: Path) -> dict[str, str]:
    """The demo's metrics step (cli/demo.sh's `evaluate`) on ``runs``."""
    args = [a for r in runs for a in ("--run", r)]
    return printed_table(cli("evaluate", *args, "--qrels", SAMPLE / "test.qrels.tsv", "--out", out))


def test_readme_table_has_the_demo_runs():
    assert list(readme_table()) == ["run", *DEMO_RUNS]


@pytest.mark.slow  # MiniLM encodes the sample's 335 passages (~20 s on a busy 2-core CPU)
def test_demo_retrieval_rows_are_the_readme_rows(tmp_path):
    S, R, q = SAMPLE, tmp_path, SAMPLE / "test.qa.tsv"
    # cli/demo.sh's commands, into tmp_path
    cli("bm25", "index", "--corpus", S / "passages.tsv", "--out", R / "demo-bm25")
    cli("bm25", "search", "--index", R / "demo-bm25", "--queries", q, "--k", 100, "--out-json", R / "bm25.json")
    cli("encode", "--model", "minilm", "--corpus", S / "passages.tsv", "--out", R / "emb")
    cli("index", "--embeddings", R / "emb", "--out", R / "demo-minilm")
    cli("search", "--index", R / "demo-minilm", "--queries", q, "--k", 100, "--out-json", R / "dense.json")
    cli("search", "--index", R / "demo-minilm", "--queries", q, "--k", 100, "--bm25-index", R / "demo-bm25",
        "--out-json", R / "hybrid.json")
    runs = ["bm25.json", "dense.json", "hybrid.json"]
    printed = evaluate([R / r for r in runs], R / "eval.json")
    expected = readme_table()  # compared field by field: the column width follows the longest run name
    assert printed["run"].split() == expected["run"].split()
    for r in runs:
        assert printed[r].split() == expected[r].split(), f"README.md's {r} row is not what the demo prints"


def test_demo_outputs_print_the_readme_table(tmp_path):
    """The whole table, on the runs the last ``bash cli/demo.sh`` of this checkout wrote."""
    demo = ROOT / "runs" / "demo"
    if not all((demo / r).is_file() for r in DEMO_RUNS):
        pytest.skip(f"no demo outputs in {demo} (run `bash cli/demo.sh`); the retrieval rows are checked above")
    assert evaluate([demo / r for r in DEMO_RUNS], tmp_path / "eval.json") == readme_table()
