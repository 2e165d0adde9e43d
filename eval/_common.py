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
            "torch": torch.__version__, "platform": platform.platform(), **cpu_kind()}


# the instruction sets that change this toolkit's speeds (bf16 autocast, int8 kernels) by large factors
CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "avx_vnni", "amx_bf16", "amx_int8")


def cpu_kind() -> dict:
    """The CPU's model name and which of CPU_FLAGS it has: machines of one name vary (some are
    AVX2-only), and times measured on two kinds must never be compared."""
    from dpr_xrisk.runtime.device import cpu_info

    model, flags = cpu_info() or ("", frozenset())
    return {"cpu_model": model or platform.processor(), "cpu_flags": [f for f in CPU_FLAGS if f in flags]}


def kind_suffix() -> tuple[str, str]:
    """(heading suffix, file suffix) naming a CPU kind whose int8/bf16 speeds differ by large factors
    from the AVX-512 VNNI + bfloat16 machines most results were measured on: ``("", "")`` on those,
    so their sections keep their names; ``(", CPU with AMX", "-amx")`` where bf16 matrix units make
    its bf16 speeds its own; else a name of what the CPU lacks, e.g. ``(", AVX2-only CPU",
    "-avx2")``."""
    from dpr_xrisk.runtime.device import cpu_has_amx, cpu_has_native_bf16, cpu_has_vnni

    vnni, bf16 = cpu_has_vnni(), cpu_has_native_bf16()
    if vnni and bf16:
        return (", CPU with AMX", "-amx") if cpu_has_amx() else ("", "")
    if vnni:
        return ", AVX-512 VNNI CPU without native bfloat16", "-vnni-nobf16"
    if "avx512f" in cpu_kind()["cpu_flags"]:
        return ", AVX-512 CPU without VNNI", "-avx512-novnni"
    return ", AVX2-only CPU", "-avx2"


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


def fmt(m: dict, n: int, digits: int = 3) -> str:
    """A summary cell: ``mean ± std`` over ``n`` seeds, or the mean alone for a single seed."""
    return f"{m['mean']:.{digits}f} ± {m['std']:.{digits}f}" if n > 1 else f"{m['mean']:.{digits}f}"


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


def finished_run(d: Path, settings: dict, name: str) -> dict | None:
    """The finished record (``bench.json``) of a run folder when it was made with ``settings``."""
    done = d / "bench.json"
    if done.exists():
        rec = json.loads(done.read_text())
        if rec.get("settings") == settings:
            print(f"[{name}] reusing {done}", flush=True)
            return rec
    return None


def open_run(d: Path, settings: dict, name: str) -> dict | None:
    """A benchmark run folder: the finished record (``bench.json``) when its settings equal
    ``settings``; else None, with the folder ready -- kept when ``settings.json`` matches (an
    interrupted run resumes in it), otherwise emptied and stamped with the new settings."""
    import shutil

    rec = finished_run(d, settings, name)
    if rec is not None:
        return rec
    if not ((d / "settings.json").exists() and json.loads((d / "settings.json").read_text()) == settings):
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        (d / "settings.json").write_text(json.dumps(settings))
    return None


def replace_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename, so a reader (or a
    benchmark killed mid-write) never sees half a file."""
    tmp = path.with_name(path.name + ".partial")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_report(path: Path, text: str) -> None:
    """Rewrite a generated report, keeping the hand-written part of the old one: everything from
    its ``## Observations`` heading on."""
    keep = ""
    if path.exists():
        old = path.read_text(encoding="utf-8")
        if "## Observations" in old:
            keep = old[old.index("## Observations"):]
    replace_text(path, text + ("\n" + keep if keep else ""))


def replace_section(path: Path, heading: str, section: str) -> None:
    """Put ``section`` (starting with the ``## heading`` line) into a Markdown file in place of the
    section of that heading, or at its end."""
    text = path.read_text(encoding="utf-8")
    start = text.find(heading + "\n")  # the whole line first: a longer heading that starts alike is another section
    if start < 0:
        start = text.find(heading)  # a heading given by its start (bench_datasets)
    if start >= 0:
        end = text.find("\n## ", start + 1)
        # one blank line before the next section, whatever the section's own ending
        text = text[:start] + section.rstrip("\n") + ("\n\n" + text[end + 1:] if end >= 0 else "\n")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    replace_text(path, text)


def save_figure(fig, path: Path) -> None:
    """Save a matplotlib figure as PNG (atomically, like ``replace_text``) and close it."""
    import matplotlib.pyplot as plt

    tmp = path.with_name(path.stem + ".partial.png")
    fig.savefig(tmp, dpi=130)
    plt.close(fig)
    os.replace(tmp, path)


def bar_chart(path: Path, summary: dict, systems: list[str], metrics: list[tuple[str, str]],
              labels: list[str], title: str) -> None:
    """Grouped bars, one group per system, one bar per ``(metric key, colour)``, each bar the
    mean over seeds with a ±std whisker and its value printed on top."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    x = np.arange(len(systems))
    w = 0.8 / len(metrics)
    small = 7 if len(metrics) < 3 else 6
    fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(systems) + 1.5), 4.8))
    for i, (k, colour) in enumerate(metrics):
        mean = [summary[s][k]["mean"] for s in systems]
        std = [summary[s][k]["std"] for s in systems]
        bars = ax.bar(x + (i - (len(metrics) - 1) / 2) * w, mean, w, yerr=std, capsize=3,
                      label=k.replace("top", "top-"), color=colour)
        for b, v in zip(bars, mean):
            ax.text(b.get_x() + b.get_width() / 2, v + 0.004, f"{v:.3f}", ha="center", va="bottom", fontsize=small)
    first = metrics[0][0]
    lo = min(summary[s][first]["mean"] - summary[s][first]["std"] for s in systems)
    ax.set_ylim(max(0.0, lo - 0.06), 1.02)
    ax.set_xticks(x)
    ax.set_xticklabels(labels, fontsize=7, rotation=20, ha="right")
    ax.set_ylabel("DPR top-k answer accuracy")
    ax.set_title(title, fontsize=9)
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    save_figure(fig, path)
