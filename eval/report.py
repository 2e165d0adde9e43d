"""docs/results.md and its figures, generated from the stored JSON in eval/results/ (never edited
by hand): one section per protocol, each opening with the current table and the one command that
reproduces it, the history folded below it or linked to git.

This module owns presentation only: it reads records, it never runs anything.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from eval import harness, paired
from eval.harness import RESULTS, ROOT, WORK

PAGE = ROOT / "docs" / "results.md"
FIGURES = RESULTS / "figures"
# the last commit that had the retired scripts and pages (read them with `git show <commit>:<path>`)
RETIRED_AT = "3ee76c0"
DENSE = ["top1", "top5", "top20", "top100", "mrr@10"]


def _load(name: str):
    p = RESULTS / name
    return json.loads(p.read_text(encoding="utf-8")) if p.exists() else None


def _latest(records):
    if records is None:
        return None
    return records[-1] if isinstance(records, list) else records


def _f(x, d: int = 4) -> str:
    return "—" if x is None else f"{x:.{d}f}"


def _ci(c: dict, name: str) -> str:
    return f"{100 * c[name]['diff']:+.1f} [{100 * c[name]['ci95'][0]:+.1f}, {100 * c[name]['ci95'][1]:+.1f}]"


def _mean(rs: list[dict], get) -> float | None:
    vals = [get(r) for r in rs]
    return None if any(v is None for v in vals) else float(np.mean(vals))


# ---- SQuAD -------------------------------------------------------------------------------------
def _squad_rows(runs: dict, systems: list[str]) -> list[str]:
    rows = []
    for s in systems:
        by = runs.get(s)
        if not by:
            continue
        rs = [by[k] for k in sorted(by, key=int)]
        seeds = "—" if list(by) == ["-1"] else ",".join(sorted(by, key=int))
        m = [_f(_mean(rs, lambda r: r["metrics"]["dense"][k])) for k in DENSE]
        rrf = _f(_mean(rs, lambda r: r["metrics"].get("hybrid-rrf", {}).get("top20")))
        hub = _f(100 * _mean(rs, lambda r: r["hub_rate"]), 2) + " %"
        steps = _mean(rs, lambda r: r.get("steps"))
        loop = _mean(rs, lambda r: r.get("undisturbed_loop_s"))
        rows.append(f"| {s} | {seeds} | " + " | ".join(m) + f" | {rrf} | {hub} | "
                    f"{'—' if steps is None else f'{steps:.0f}'} | {'—' if loop is None else f'{loop:.0f}'} |")
    return rows


SQUAD_HEAD = ["| system | seeds | top-1 | top-5 | top-20 | top-100 | MRR@10 | hybrid RRF top-20 | hub rate | steps | "
              "train loop s |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]


def squad_section() -> list[str]:
    exp = harness.load_experiment("squad")
    stored = _load(exp.raw["results"]) or {"runs": {}}
    runs = stored["runs"]
    current = [s for s in exp.current() if s in runs]
    lines = ["## SQuAD full length", "",
             f"Protocol `{exp.protocol}` ({exp.title}); the systems and every setting they train with: "
             "[eval/experiments/squad.toml](../eval/experiments/squad.toml).", "",
             "```", "python -m eval run squad                       # every current system, seeds 0 1; finished runs are reused",
             "python -m eval run squad --systems shipped-shared --seeds 2", "```", "",
             "Dense retrieval, mean over the seeds; 3,244 held-out questions x 102,067 passages; MRR@10 by the "
             "question's own paragraph; hub rate = test top-1 is a training positive; train loop s = the training "
             "loop's wall time less what other jobs on the machine added (bf16 on 2 CPU cores; the machine of each "
             "run is in the JSON).", "", *SQUAD_HEAD]
    if "bm25" in stored:
        b = stored["bm25"]
        lines.append("| BM25 | — | " + " | ".join(_f(b[k]) for k in DENSE) + " | — | — | — | — |")
    lines += _squad_rows(runs, current)
    # paired differences against the recipe, from the kept per-question ranks
    comps = []
    base_runs = WORK / "full" / "runs"
    ref = exp.raw["reference"]
    for other in current:
        if other == ref or not paired.runs_of(other, base_runs) or not paired.runs_of(ref, base_runs):
            continue
        try:
            comps.append(paired.compare(ref, other, 2000, base_runs))
        except SystemExit:
            continue
    if comps:
        lines += ["", f"Paired differences against `{ref}` in points (other − {ref}, mean over the common seeds, "
                  "95 % bootstrap interval over questions; RR@10 by answer), from the per-question ranks kept in "
                  "`eval/results/per-question/full/`:", "",
                  "| system | seeds | Δ top-1 | Δ top-5 | Δ top-20 | Δ RR@10 |", "|---|---|---|---|---|---|"]
        for c in comps:
            seeds = "—" if c["seeds"] == [-1] else ",".join(map(str, c["seeds"]))
            lines.append(f"| {c['other']} | {seeds} | " + " | ".join(_ci(c, n) for n in ("top1", "top5", "top20", "rr@10")) + " |")
    png = FIGURES / "squad.png"
    if current and bar_chart(png, runs, [s for s in current if s in exp.raw.get("figure_systems", [])]):
        lines += ["", f"![dense top-k of the main systems](../{png.relative_to(ROOT)})"]
    lines += ["", "<details><summary>Each seed, dense and hybrid runs</summary>", "",
              "| system | seed | run | top-1 | top-5 | top-20 | top-100 | MRR@10 |", "|---|---|---|---:|---:|---:|---:|---:|"]
    for s in current:
        for seed in sorted(runs[s], key=int):
            for run, m in runs[s][seed]["metrics"].items():
                lines.append(f"| {s} | {'—' if seed == '-1' else seed} | {run} | " + " | ".join(_f(m[k]) for k in DENSE) + " |")
    lines += ["", "</details>", "", *findings(exp)]
    retired = [s for s in exp.systems if exp.systems[s].get("retired") and s in runs]
    lines += ["<details><summary>History: retired systems (the recipe before its fast refresh and 256-word-piece "
              "passages), GPU runs, earlier write-ups</summary>", "",
              "Retired systems keep their stored records; what they trained: "
              f"`git show {RETIRED_AT}:eval/bench_full.py`. The session-by-session write-up: "
              f"`git show {RETIRED_AT}:eval/RESULTS-full.md`; the hybrid fusion weights: "
              f"`git show {RETIRED_AT}:eval/RESULTS-fusion.md`.", "", *SQUAD_HEAD, *_squad_rows(runs, retired)]
    gpu = _load("bench_full-gpu.json")
    if gpu:
        lines += ["", "On a lent H200 (`python -m eval run squad --set device=cuda --set carried_bm25=true`, "
                  "bf16):", "", *SQUAD_HEAD, *_squad_rows(gpu["runs"], list(gpu["runs"]))]
    lengths = _load("stats_lengths.json")
    if lengths:
        lines += ["", f"How much of each training positive a training length shows (`python -m eval lengths`; "
                  f"{lengths['questions']:,} training questions, median positive {lengths['median_length']:.0f} "
                  "word pieces):", "", "| max length | positives longer | answers ending past the cut-off |",
                  "|---:|---:|---:|"]
        lines += [f"| {r['max_length']} | {100 * r['positives_longer']:.1f} % | {100 * r['answer_cut_off']:.1f} % |"
                  for r in lengths["rows"]]
    lines += ["", "</details>", ""]
    return lines


def _save_png(fig, path: Path) -> None:
    """Write a figure only when its bytes changed (a regenerated page leaves git clean)."""
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.stem + ".partial.png")
    fig.savefig(tmp, dpi=110, metadata={"Software": None})
    plt.close(fig)
    if path.exists() and path.read_bytes() == tmp.read_bytes():
        tmp.unlink()
    else:
        os.replace(tmp, path)


def bar_chart(path: Path, runs: dict, systems: list[str]) -> bool:
    """Dense top-1/5/20 means per system with ±std whiskers (PNG, written only when it changed)."""
    if not systems:
        return False
    try:
        import matplotlib
    except ImportError:  # (a lent GPU machine without it: the committed figure stays as it is)
        return path.exists()

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = np.arange(len(systems))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(systems) + 1.5), 4.5))
    for i, (k, colour) in enumerate((("top1", "#9ecae1"), ("top5", "#4292c6"), ("top20", "#08519c"))):
        vals = [[r["metrics"]["dense"][k] for r in runs[s].values()] for s in systems]
        bars = ax.bar(x + (i - 1) * 0.27, [np.mean(v) for v in vals], 0.27, yerr=[np.std(v) for v in vals], capsize=3,
                      label=k.replace("top", "top-"), color=colour)
        for b, v in zip(bars, vals):
            ax.text(b.get_x() + b.get_width() / 2, np.mean(v) + 0.004, f"{np.mean(v):.3f}", ha="center", fontsize=6)
    ax.set_ylim(0.3, 1.0)
    ax.set_xticks(x)
    ax.set_xticklabels(systems, fontsize=7, rotation=20, ha="right")
    ax.set_ylabel("DPR top-k answer accuracy")
    ax.set_title("SQuAD full length (full-1): dense retrieval, mean over seeds", fontsize=9)
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    _save_png(fig, path)
    return True


# ---- NQ ------------------------------------------------------------------------------------------
def curve_chart(path: Path, runs: dict, title: str) -> bool:
    """Each trained system's training loss per step (cross-entropy units, a 9-step moving mean,
    mean over seeds) and the recipe's training recall@1 at each refresh (PNG)."""
    systems = {s: [r["curve"] for r in by.values() if r.get("curve")] for s, by in runs.items()}
    systems = {s: cs for s, cs in systems.items() if cs}
    if not systems:
        return False
    try:
        import matplotlib
    except ImportError:
        return path.exists()

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10.5, 4.0))
    for i, (s, cs) in enumerate(systems.items()):
        colour = plt.get_cmap("tab10")(i % 10)  # one colour per system in both panels
        n = min(len(c["loss"]) for c in cs)
        loss = np.mean([c["loss"][:n] for c in cs], axis=0)
        smooth = np.convolve(loss, np.ones(9) / 9, mode="valid")
        ax.plot(np.arange(len(smooth)) + 5, np.maximum(smooth, 1e-4), label=f"{s} ({_seeds(len(cs))})", lw=1.2,
                color=colour)
        ref = [c for c in cs if c.get("train_recall1")]
        if ref:
            m = min(len(c["train_recall1"]) for c in ref)
            bx.plot(ref[0]["refresh_step"][:m], np.mean([c["train_recall1"][:m] for c in ref], axis=0), marker="o",
                    label=f"{s} ({_seeds(len(ref))})", lw=1.2, color=colour)
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("training loss, cross-entropy units")
    ax.set_title("loss per step (9-step mean; DPM loss / τ, MNRL's in-batch CE)", fontsize=8)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    bx.set_xlabel("step of the refresh")
    bx.set_ylabel("training recall@1 against the corpus")
    bx.set_title("the recipe's pools: training questions whose positive ranks first", fontsize=8)
    if bx.get_legend_handles_labels()[0]:  # empty while only systems without refreshes (MNRL) have run
        bx.legend(fontsize=7)
    bx.grid(alpha=0.3)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    _save_png(fig, path)
    return True


def _seeds(n: int) -> str:
    """A legend's count of the seeds a curve averages."""
    return f"{n} seed{'' if n == 1 else 's'}"


def _one_cpu(runs: list[dict]) -> bool:
    """Whether the runs that recorded their CPU kind (eval/nq.py, since 2026-12-07) share one: a
    mean of seconds measured on two kinds means nothing. Runs without a record do not count."""
    return len({json.dumps(r["cpu"], sort_keys=True) for r in runs if r.get("cpu")}) <= 1


def nq_section() -> list[str]:
    exp = harness.load_experiment("nq")
    lines = ["## Natural Questions", "",
             f"Protocol `{exp.protocol}` ({exp.title}); systems and settings: "
             "[eval/experiments/nq.toml](../eval/experiments/nq.toml).", "",
             "```", f"python -m eval run nq                       # the grid: 20k distractors, {', '.join(exp.default())}",
             f"python -m eval run nq --systems bm25 zero-shot st-mnrl {exp.raw['recipe']} --set distractors=100000 "
             "--set guard=false   # the final rows", "```", ""]
    files = sorted(RESULTS.glob("nq-*.json"))
    if not files:
        return lines + ["Pending: no stored results yet (the first run, 20k distractors, seeds 0-2, is under way).", ""]
    for f in files:
        res = json.loads(f.read_text(encoding="utf-8"))
        st = res["data"]["stats"]
        lines += [f"### {f.stem.removeprefix('nq-')} distractors", "",
                  f"{st['train_questions']:,} training questions, {st['test_questions']:,} dev questions, "
                  f"{st['corpus_passages']:,} passages; {res['machine']['date'][:10]}, {res['machine'].get('cpu_model', '')}.", "",
                  "Train s = the training command's wall seconds (mean over seeds; on a shared machine they include "
                  "what other jobs took, so compare them only within one table; \"mixed\" where the seeds' recorded "
                  "CPU kinds differ; \"—\" where a seed's training resumed from a checkpoint, whose seconds are partial); "
                  "× ST = that over st-mnrl's, on one CPU kind.", "",
                  "| system | seeds | top-1 | top-5 | top-20 | top-100 | MRR@10 | hybrid RRF top-20 | hub rate | train s | × ST |",
                  "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        st_runs = list(res["runs"].get("st-mnrl", {}).values())
        st_s = _mean(st_runs, lambda r: r.get("train_wall_s")) if st_runs and _one_cpu(st_runs) else None
        for s, by in res["runs"].items():
            rs = list(by.values())
            seeds = "—" if list(by) == ["-1"] else ",".join(by)
            one = _one_cpu(rs)
            train_s = _mean(rs, lambda r: r.get("train_wall_s")) if one else None
            ratio = f"{train_s / st_s:.1f}" if train_s is not None and st_s and _one_cpu(rs + st_runs) else "—"
            cell = "mixed" if not one else "—" if train_s is None else f"{train_s:.0f}"
            lines.append(f"| {s} | {seeds} | " + " | ".join(_f(_mean(rs, lambda r: r["metrics"][k])) for k in DENSE)
                         + f" | {_f(_mean(rs, lambda r: r.get('hybrid-rrf', {}).get('top20')))} | "
                         f"{_f(100 * _mean(rs, lambda r: r['hub_rate']), 2)} % | "
                         f"{cell} | {ratio} |")
        if res.get("paired"):
            lines += ["", "Paired differences in points (95 % bootstrap interval over questions; RR@10 by answer):", "",
                      "| other − base | seeds | Δ top-1 | Δ top-5 | Δ top-20 | Δ RR@10 |", "|---|---|---|---|---|---|"]
            lines += [f"| {c['other']} − {c['base']} | {','.join(map(str, c['seeds']))} | "
                      + " | ".join(_ci(c, n) for n in ("top1", "top5", "top20", "rr@10")) + " |" for c in res["paired"]]
        png = FIGURES / f"{f.stem}-train.png"
        if curve_chart(png, res["runs"], f"Natural Questions, {f.stem.removeprefix('nq-')} distractors: training"):
            lines += ["", f"![training loss and training recall@1 per system](../{png.relative_to(ROOT)})"]
        lines.append("")
    return lines + findings(exp)


def findings(exp) -> list[str]:
    """What the numbers mean, kept beside the systems in the experiment file."""
    if not exp.raw.get("findings"):
        return []
    return ["### What the runs say", ""] + [f"- {f}" for f in exp.raw["findings"]] + [""]


# ---- speed -----------------------------------------------------------------------------------------
def encode_section() -> list[str]:
    rec = _latest(_load("bench_encode.json"))
    lines = ["## Encoding throughput", "", "Protocol `encode-1` ([eval/experiments/encode.toml](../eval/experiments/encode.toml)):",
             "", "```", "python -m eval run encode", "```", ""]
    if not rec:
        return lines + ["Pending.", ""]
    m = rec["machine"]
    lines += [f"{m['date'][:10]}, {m.get('cpu_model') or m.get('platform', '?')}, {rec['threads']} threads, MiniLM at 256 word pieces, "
              f"batch {rec['args']['batch_size']}, {rec['args']['reps']} interleaved repetitions:", "",
              "| precision | passages | ours psg/s | ST psg/s | ours / ST (medians) | paired | CPU-time ratio | max abs diff |",
              "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for prec, s in rec["summary"].items():
        lines.append(f"| {prec} | {s['passages']} | {s['ours_psg_s']:.1f} | {s['st_psg_s']:.1f} | {s['ratio_of_medians']:.3f} | "
                     f"{s['median_of_paired_ratios']:.3f} | {s.get('cpu_time_ratio', float('nan')):.3f} | {s['max_abs_diff']:.1e} |")
    return lines + [""]


def _cpu(m: dict) -> str:
    """A machine's CPU model and its bfloat16 kind (AMX, AVX-512-BF16 or neither)."""
    from dpr_xrisk.runtime.device import bf16_kind

    return f"{m.get('cpu_model', '?')}, {bf16_kind(set(m.get('cpu_flags') or ())) or 'no native bf16'}"


def _train_rows(train: list[dict]) -> list[str]:
    return ["| precision | batch | ours q/s | ST MNRL q/s | ours / ST | ours cached | ST cached MNRL | cached ratio |",
            "|---|---:|---:|---:|---:|---:|---:|---:|"] + \
        [f"| {t['precision']} | {t['batch']} | {t['ours_q_per_s']} | {t['st_mnrl_q_per_s']} | {t['ours_vs_st_mnrl']} | "
         f"{t['ours_cached_q_per_s']} | {t['st_cached_mnrl_q_per_s']} | {t['ours_cached_vs_st_cached_mnrl']} |" for t in train]


def train_section() -> list[str]:
    lines = ["## Training throughput", "",
             "Protocol `train-step-1` ([eval/experiments/train-speed.toml](../eval/experiments/train-speed.toml)):", "",
             "```", "python -m eval run train-speed", "```", ""]
    recs = _load("train_speed.json") or []
    rec = next((r for r in reversed(recs) if r.get("train")), None)
    if rec:
        lines += [f"{rec['machine']['date'][:10]}, {_cpu(rec['machine'])}, one optimiser step on a "
                  "synthetic batch (questions 32 / passages 128 word pieces):", "", *_train_rows(rec["train"]), ""]
    else:
        lines += ["Ours against sentence-transformers: not yet run under this protocol.", ""]
    steps = [r for r in recs if r.get("recipe_step")]
    auto = steps[-1] if steps else None
    if auto:
        a = auto["recipe_step"]
        # records before the step took the recipe's dropout ran at MiniLM's own 0.1
        lines += [f"Precision `auto` against fp32 on a recipe-shaped step ({auto['machine']['date'][:10]}, "
                  f"{_cpu(auto['machine'])}; batch {a['batch']}, passages {a['passage_length']} word pieces, "
                  f"{a['hard_negatives']} hard negative, dropout {a.get('dropout', 0.1)}; auto resolved to {a['resolved']['auto']}; "
                  f"steps interleaved in one process): median step {a['median_step_s']['auto']:.1f} s against "
                  f"{a['median_step_s']['fp32']:.1f} s, **{a['speedup']:.2f}x** (CPU time {a['cpu_speedup']:.2f}x).", ""]
        early = [r for r in steps[:-1] if "dropout" not in r["recipe_step"]]
        if early:
            lines += ["Earlier records timed that step at MiniLM's dropout 0.1, which the recipe turns off (bf16 dropout "
                      "masks were 19 % of the bf16 step): " + "; ".join(
                          f"{r['machine']['date'][:10]}, {_cpu(r['machine'])}: {r['recipe_step']['speedup']:.2f}x" for r in early)
                      + ".", ""]
    old = _load("bench_train_throughput.json")
    first = next((r for r in old or [] if "summary" in r), None)
    if first:
        lines += ["<details><summary>The earlier protocol: a whole `train` iteration on SQuAD batches, collate "
                  "included (eval/bench_train_throughput.py)</summary>", "",
                  f"{first['machine']['date'][:10]}; command and write-up: `git show {RETIRED_AT}:eval/RESULTS-train.md`.", "",
                  "| config | q/s (wall) | median s/step | ours / ST (medians) | ours / ST (paired) | q/s (CPU time) |",
                  "|---|---:|---:|---:|---:|---:|"]
        lines += [f"| {k} | {v['questions_per_s']:.2f} | {v['median_step_s']:.2f} | {v['ratio_of_medians']:.3f} | "
                  f"{v['median_paired_ratio']:.3f} | {v['cpu_questions_per_s']:.2f} |" for k, v in first["summary"].items()]
        lines += ["", "</details>", ""]
    return lines


def gpu_section() -> list[str]:
    rec = _latest(_load("bench_gpu.json"))
    lines = ["## On a GPU", "", "Protocol `gpu-1` ([eval/experiments/gpu.toml](../eval/experiments/gpu.toml); "
             "`bash eval/gpu_check.sh bench` prepares a lent machine and runs it):", "",
             "```", "python -m eval run gpu", "```", ""]
    if not rec:
        return lines + ["Pending.", ""]
    lines += [f"{rec['device']}, {rec['machine']['date'][:10]}:", "",
              "| precision | passages | batch | max length | ours psg/s | ST psg/s | ours / ST |", "|---|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {e['precision']} | {e['passages']:,} | {e['batch']} | {e['max_length']} | {e['ours_psg_per_s']} | "
              f"{e['st_psg_per_s']} | {e['ratio']} |" for e in rec["encode"]]
    return lines + ["", "One training step, questions/s:", "", *_train_rows(rec["train"]), ""]


def fuzz_section() -> list[str]:
    rec = _latest(_load("bench_fuzz.json"))
    lines = ["## Fuzzed readers", "", "Protocol `fuzz-1` ([eval/experiments/fuzz.toml](../eval/experiments/fuzz.toml)):",
             "", "```", "python -m eval run fuzz", "```", ""]
    if not rec:
        return lines + ["Pending.", ""]
    tried = sum(s["passing"] + s["failing"] for s in rec["tests"].values())
    fails = sum(s["failing"] for s in rec["tests"].values())
    lines += [f"{rec['machine']['date'][:10]}: {tried:,} cases, {fails} failing, {rec['seconds']:.0f} s (pytest exit "
              f"code {rec['returncode']}).", "", "| test | cases passed | invalid (filtered) | failing |", "|---|---:|---:|---:|"]
    lines += [f"| {n} | {s['passing']:,} | {s['invalid']:,} | {s['failing']} |" for n, s in rec["tests"].items()]
    return lines + [""]


# retired benchmarks: (what, the page that held their results, its raw JSON under eval/results/)
RETIRED = [
    ("zero-shot baseline: BM25 / MiniLM / hybrids, SQuAD + 100k distractors (bench_squad_zeroshot.py)", "RESULTS.md",
     "bench_squad_zeroshot.json"),
    ("encode batch size per path, int8 and ONNX inference (bench_batch.py, bench_quantize.py)", "RESULTS.md",
     "bench_quantize.json"),
    ("encode memory and the heap bound (bench_encode_rss.py, bench_heap.py)", "RESULTS.md", "bench_encode_rss.json"),
    ("FAISS index types and scale (bench_search.py, bench_scale.py)", "SCALE.md", "bench_scale.json"),
    ("datasets input, TSV vs Arrow (bench_datasets.py)", "RESULTS.md", "bench_datasets.json"),
    ("the recipe's refresh cost (bench_refresh_cost.py)", "RESULTS.md", "bench_refresh_cost-avx2.json"),
    ("short training quality: losses (bench_train_squad.py)", "RESULTS-train-quality.md", "bench_train_squad.json"),
    ("the refresh at 32-64 steps (bench_refresh.py, all tags)", "RESULTS-refresh.md", "bench_refresh.json"),
    ("the refresh on the fast path and on AMX", "RESULTS-refresh-fast4.md", "bench_refresh-fast4.json"),
    ("FCCO batch sizes (bench_fcco_batch.py)", "RESULTS-fcco.md", "bench_fcco_batch.json"),
    ("why training lost to zero-shot, one factor at a time (bench_diagnosis.py)", "RESULTS-diagnosis.md",
     "bench_diagnosis.json"),
    ("hybrid fusion weights on bench_full's runs (bench_fusion.py)", "RESULTS-fusion.md", "bench_fusion.json"),
]


RETIRED_PAGES = ["RESULTS.md", "RESULTS-full.md", "RESULTS-full-gpu.md", "RESULTS-gpu.md", "RESULTS-train.md",
                 "RESULTS-train-quality.md", "RESULTS-diagnosis.md", "RESULTS-fusion.md", "RESULTS-fusion-p256.md",
                 "RESULTS-fcco.md", "RESULTS-fcco-q128e8.md", "RESULTS-refresh.md", "RESULTS-refresh-amx.md",
                 "RESULTS-refresh-fast.md", "RESULTS-refresh-fast2.md", "RESULTS-refresh-fast3.md",
                 "RESULTS-refresh-fast3int8.md", "RESULTS-refresh-fast4.md", "RESULTS-refresh-fast4-128.md", "SCALE.md"]
RETIRED_SCRIPTS = ["bench_batch.py", "bench_datasets.py", "bench_diagnosis.py", "bench_encode_rss.py",
                   "bench_fcco_batch.py", "bench_fusion.py", "bench_heap.py", "bench_quantize.py", "bench_refresh.py",
                   "bench_refresh_cost.py", "bench_scale.py", "bench_search.py", "bench_squad_zeroshot.py",
                   "bench_train_squad.py", "bench_train_throughput.py", "_st_onnx_worker.py", "st_onnx_venv.sh"]


def retired_section() -> list[str]:
    lines = ["## Retired benchmarks", "",
             "Superseded by the protocols above (their numbers measured code or recipes that have since changed). "
             f"The scripts and pages are in git at {RETIRED_AT}: read one with `git show {RETIRED_AT}:eval/<page>` "
             f"(every script and page of that commit's `eval/`: `git show {RETIRED_AT}:eval/`); their raw JSON "
             "stays in `eval/results/`.", "", "| benchmark | page | raw JSON |", "|---|---|---|"]
    lines += [f"| {what} | `git show {RETIRED_AT}:eval/{page}` | `eval/results/{js}` |" for what, page, js in RETIRED]
    return lines + ["", "Every file retired from `eval/` at that commit:", "",
                    "- pages: " + ", ".join(f"`{p}`" for p in RETIRED_PAGES) + ", and their figures (`*.png`)",
                    "- scripts: " + ", ".join(f"`{p}`" for p in RETIRED_SCRIPTS),
                    "- what the harness took over: `_common.py` (harness.py), `nq_data.py` (nq.py), "
                    "`stats_lengths.py` (squad.py), `bench_full.py` (squad.py + experiments/squad.toml), `bench_nq.py` "
                    "(nq.py + experiments/nq.toml), `bench_encode.py`, `bench_gpu.py`, `bench_fuzz.py` (speed.py)", ""]


SECTIONS = {"squad": squad_section, "nq": nq_section, "encode": encode_section, "train-speed": train_section,
            "gpu": gpu_section, "fuzz": fuzz_section}


def render() -> str:
    lines = ["# Results", "",
             "Generated by `python -m eval report` from the stored JSON in `eval/results/` (do not edit by hand; "
             "`python -m eval run <experiment>` regenerates it after each run). One section per benchmark protocol: "
             "the current table and the one command that reproduces it first, the history folded below it or in git. "
             "How the harness works: `eval/__init__.py`; the experiments: `eval/experiments/*.toml`.", "",
             "Contents: " + ", ".join(f"[{t}](#{a})" for t, a in (
                 ("SQuAD full length", "squad-full-length"), ("Natural Questions", "natural-questions"),
                 ("Encoding throughput", "encoding-throughput"), ("Training throughput", "training-throughput"),
                 ("On a GPU", "on-a-gpu"), ("Fuzzed readers", "fuzzed-readers"), ("Retired benchmarks", "retired-benchmarks"))), ""]
    for fn in SECTIONS.values():
        lines += fn()
    lines += retired_section()
    return "\n".join(lines).rstrip("\n") + "\n"


def write() -> str:
    text = render()
    harness.write_if_changed(PAGE, text)
    print(f"wrote {PAGE}", flush=True)
    return text


def section(name: str, text: str | None = None) -> str:
    """One experiment's section of the page."""
    if name not in SECTIONS:
        raise SystemExit(f"error: no section for {name!r}; valid: {', '.join(SECTIONS)}")
    return "\n".join(SECTIONS[name]())
