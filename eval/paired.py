"""Paired comparison of two systems of eval/bench_refresh.py / eval/bench_train_squad.py on the
same test questions: per-question differences in top-k hits and reciprocal rank, averaged over
the seeds both systems have, with a 95 % bootstrap interval over questions.

    python eval/paired.py a-dpr-bm25-eqwall c-dpm-refresh-z1 [more systems...]

Each system after the first is compared with the first. A system's run for seed s is
<runs>/<system>-s<s>/run.json (``--runs``, default eval/work/refresh/runs; eval/work/fcco/runs
names its systems minibatch-b32, fcco-b8, ...) (``zero-shot`` has one run, used for every seed).
The per-question numbers are the DPR answer flags (``has_answer``) the search stored, so top-k
here equals `dpr-xrisk evaluate`'s top-k; RR@10 is by answer here (first answer-bearing rank),
not by the question's own paragraph as the benchmarks' MRR@10.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import WORK  # noqa: E402

RUNS = WORK / "refresh" / "runs"  # --runs eval/work/fcco/runs for eval/bench_fcco_batch.py
KS = (1, 5, 20)


def first_hit(path: Path) -> np.ndarray:
    """0-based rank of the first answer-bearing passage per question (qid order); 10**6 if none.
    Cached next to the run as first_hit.npy (a run JSON of 3,244 questions x 100 passages is
    ~300 MB; the cache is used only while it is newer than the run, or alone where the run was not
    kept, as for runs made on a lent GPU whose run JSONs stayed there)."""
    cache = path.with_name("first_hit.npy")
    if cache.exists() and (not path.exists() or cache.stat().st_mtime >= path.stat().st_mtime):
        return np.load(cache)
    run = json.loads(path.read_text(encoding="utf-8"))
    out = []
    for qid in sorted(run, key=int):
        hits = [i for i, c in enumerate(run[qid]["contexts"]) if c["has_answer"]]
        out.append(hits[0] if hits else 10 ** 6)
    np.save(cache, np.asarray(out))
    return np.asarray(out)


def runs_of(system: str, runs: Path) -> dict[int, np.ndarray]:
    if system == "zero-shot":
        return {-1: first_hit(runs / "zero-shot" / "run.json")}
    found = {}
    for d in sorted(runs.glob(f"{system}-s*")):
        seed = d.name.rsplit("-s", 1)[1]
        if seed.isdigit() and ((d / "run.json").exists() or (d / "first_hit.npy").exists()) and (d / "bench.json").exists():
            found[int(seed)] = first_hit(d / "run.json")
    return found


def metrics(rank: np.ndarray) -> dict[str, np.ndarray]:
    m = {f"top{k}": (rank < k).astype(float) for k in KS}
    m["rr@10"] = np.where(rank < 10, 1.0 / (rank + 1), 0.0)
    return m


def compare(base: str, other: str, boot: int, rng: np.random.Generator, runs: Path,
            seeds: list[int] | None = None) -> dict:
    """``other`` − ``base`` per question; ``seeds`` limits the seeds used (default: every finished one)."""
    rb, ro = runs_of(base, runs), runs_of(other, runs)
    if seeds is not None:
        rb = {s: r for s, r in rb.items() if s == -1 or s in seeds}
        ro = {s: r for s, r in ro.items() if s == -1 or s in seeds}
    if -1 in rb and -1 in ro:
        seeds = [-1]
    elif -1 in rb:
        seeds = sorted(ro)
        rb = {s: rb[-1] for s in seeds}
    elif -1 in ro:
        seeds = sorted(rb)
        ro = {s: ro[-1] for s in seeds}
    else:
        seeds = sorted(set(rb) & set(ro))
    if not seeds:
        raise SystemExit(f"no common seed with finished runs for {base} and {other}")
    out = {"base": base, "other": other, "seeds": seeds}
    mb, mo = {s: metrics(rb[s]) for s in seeds}, {s: metrics(ro[s]) for s in seeds}
    for name in mb[seeds[0]]:
        # per question: mean over seeds of (other - base)
        d = np.mean([mo[s][name] - mb[s][name] for s in seeds], axis=0)
        n = len(d)
        means = d[rng.integers(0, n, size=(boot, n))].mean(axis=1)
        lo, hi = np.percentile(means, [2.5, 97.5])
        out[name] = {"diff": float(d.mean()), "ci95": [float(lo), float(hi)],
                     "better": int((d > 0).sum()), "worse": int((d < 0).sum())}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("base")
    ap.add_argument("others", nargs="+")
    ap.add_argument("--bootstrap", type=int, default=10000)
    ap.add_argument("--runs", type=Path, default=RUNS, help="the benchmark's run directory")
    ap.add_argument("--json", type=Path, default=None, help="also write the comparisons as JSON")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    rows = [compare(args.base, o, args.bootstrap, rng, args.runs) for o in args.others]
    names = [f"top{k}" for k in KS] + ["rr@10"]
    print(f"| {'vs ' + args.base} | seeds | " + " | ".join(f"Δ {n} [95 % CI]" for n in names) + " |")
    print("|---|---|" + "---|" * len(names))
    for r in rows:
        seeds = "—" if r["seeds"] == [-1] else ",".join(map(str, r["seeds"]))
        cells = [f"{r[n]['diff']:+.4f} [{r[n]['ci95'][0]:+.4f}, {r[n]['ci95'][1]:+.4f}]" for n in names]
        print(f"| {r['other']} | {seeds} | " + " | ".join(cells) + " |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
