"""Helpers shared by the benchmarks: machine description, results file, medians."""

from __future__ import annotations

import datetime
import json
import os
import platform
import statistics
from pathlib import Path

EVAL = Path(__file__).resolve().parent
ROOT = EVAL.parent
RESULTS = EVAL / "results"
WORK = EVAL / "work"  # git-ignored: anything derived from ../shared/data goes here
SHARED = Path(os.environ.get("DPR_XRISK_SHARED_DATA", ROOT.parent / "shared" / "data"))
WIKI = SHARED / "wikipedia-100k" / "psgs.tsv"


def machine() -> dict:
    import torch

    mem = 0
    try:
        with open("/proc/meminfo") as f:
            mem = int(f.readline().split()[1]) // 1024 ** 2  # KiB -> GiB
    except OSError:
        pass
    return {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "cpus": os.cpu_count(), "mem_gib": mem, "python": platform.python_version(),
            "torch": torch.__version__, "platform": platform.platform()}


def save(name: str, record: dict) -> Path:
    """Append ``record`` (with the machine description) to eval/results/<name>.json."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    runs = json.loads(path.read_text()) if path.exists() else []
    runs.append({"machine": machine(), **record})
    path.write_text(json.dumps(runs, indent=2) + "\n")
    print(f"appended to {path}")
    return path


def median(xs):
    return statistics.median(xs)


def write_if_changed(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` unless it already holds exactly that (a file a running
    benchmark reads is never rewritten, and its mtime stays)."""
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def passage_subset(lines: list[str], keep_ids: set[str], out: Path) -> int:
    """Write the header line and the rows of a passages TSV (``lines``, header first, each with its
    newline) whose id is in ``keep_ids`` to ``out``, in corpus order; return the number of rows."""
    keep = [lines[0]] + [x for x in lines[1:] if x.split("\t", 1)[0] in keep_ids]
    write_if_changed(out, "".join(keep))
    return len(keep) - 1
