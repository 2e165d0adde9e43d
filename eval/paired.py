"""Paired comparison of two systems on the same test questions: per-question differences in top-k
hits and reciprocal rank, averaged over the seeds both systems have, with a 95 % bootstrap
interval over questions.

    python -m eval paired --runs eval/work/full/runs shipped shipped-h3 [more systems...] [--seed 1]
    python -m eval paired --keep --runs eval/work/full/runs     # keep the ranks of every finished run

Each system after the first is compared with the first. A system's run for seed s is
<runs>/<system>-s<s>/run.json (``zero-shot`` has one run, used for every seed). Where a run folder
under eval/work is gone (a new checkout has no eval/work), the run's per-question ranks kept in
eval/results/per-question/ (``keep``; the protocols write them when a run finishes: ranks only,
no text or passage id) stand in for it. A kept file records its question count and a fingerprint
of the run's settings.json; a rerun overwrites it, and a run folder that exists always wins.
The per-question numbers are the DPR answer flags (``has_answer``) the search stored, so top-k
here equals `dpr-xrisk evaluate`'s top-k; RR@10 is by answer here (first answer-bearing rank),
not by the question's own paragraph as the SQuAD protocol's MRR@10.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

import numpy as np

from eval.harness import RESULTS, WORK

RUNS = WORK / "full" / "runs"  # the SQuAD protocol's runs (--runs for any other)
KS = (1, 5, 20)
KEPT = RESULTS / "per-question"  # first_hit of finished runs, by their path under eval/work
NONE = 10 ** 6  # first_hit of a question with no answer-bearing passage in the run


def kept_path(run_json: Path) -> Path | None:
    """eval/results/per-question/<the run folder's path under eval/work>.json; None for a run
    outside eval/work."""
    try:
        rel = run_json.resolve().parent.relative_to(WORK.resolve())
    except ValueError:
        return None
    return KEPT / rel.parent / f"{rel.name}.json"  # (not with_suffix: run names hold dots, e.g. dpm-z0.5-s0)


def keep(run_json: Path) -> Path:
    """Write the run's per-question first-hit ranks to ``kept_path`` (a few KB; committed with the
    results so that paired comparisons outlive eval/work)."""
    out = kept_path(run_json)
    if out is None:
        raise ValueError(f"{run_json} is not under {WORK}: nothing to keep it by")
    first = first_hit(run_json)
    settings = run_json.with_name("settings.json")  # the benchmark's stamp of the run's protocol, where it has one
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"run": run_json.parent.name, "questions": len(first),
                               "settings_sha256": hashlib.sha256(settings.read_bytes()).hexdigest()[:16]
                               if settings.exists() else None,
                               "what": f"0-based rank of the first answer-bearing passage per question (qid order); "
                                       f"{NONE} = none in the run", "first_hit": first.tolist()}) + "\n")
    return out


def finished(d: Path) -> bool:
    """A run folder of a finished run whose ranks are still here (its JSON or its cache)."""
    return (d / "bench.json").exists() and ((d / "run.json").exists() or cache_path(d / "run.json").exists())


def available(run_json: Path) -> bool:
    """first_hit can read this run: its JSON, its cache or its kept ranks."""
    kept = kept_path(run_json)
    return run_json.exists() or cache_path(run_json).exists() or (kept is not None and kept.exists())


def cache_path(run_json: Path) -> Path:
    """first_hit's cache of one run file: first_hit.npy beside run.json (the name finished runs
    already have), <stem>.first_hit.npy beside any other run file of the folder (hybrid-rrf.json,
    ...), so two runs in one folder never read each other's ranks."""
    return run_json.with_name("first_hit.npy" if run_json.name == "run.json" else f"{run_json.stem}.first_hit.npy")


def first_hit(path: Path) -> np.ndarray:
    """0-based rank of the first answer-bearing passage per question (qid order); 10**6 if none.
    Cached next to the run as first_hit.npy (a run JSON of 3,244 questions x 100 passages is
    ~300 MB; the cache is used only while it is newer than the run, or alone where the run was not
    kept, as for runs made on a lent GPU whose run JSONs stayed there)."""
    cache = cache_path(path)
    if cache.exists() and (not path.exists() or cache.stat().st_mtime >= path.stat().st_mtime):
        return np.load(cache)
    kept = kept_path(path)
    if not path.exists() and kept is not None and kept.exists():
        rec = json.loads(kept.read_text(encoding="utf-8"))
        first = np.asarray(rec["first_hit"])
        if len(first) != rec["questions"]:
            raise SystemExit(f"{kept}: {len(first)} ranks for {rec['questions']} questions")
        return first
    run = json.loads(path.read_text(encoding="utf-8"))
    out = []
    for qid in sorted(run, key=int):
        hits = [i for i, c in enumerate(run[qid]["contexts"]) if c["has_answer"]]
        out.append(hits[0] if hits else NONE)
    np.save(cache, np.asarray(out))
    return np.asarray(out)


def seed_of(name: str, system: str) -> int | None:
    """The seed of run name ``<system>-s<digits>``; None for any other name, including a longer
    system's that shares the prefix (the glob ``shipped-s*`` also matches shipped-softmax-s0)."""
    base, _, seed = name.rpartition("-s")
    return int(seed) if base == system and seed.isdigit() else None


def runs_of(system: str, runs: Path) -> dict[int, np.ndarray]:
    if system == "zero-shot":
        return {-1: first_hit(runs / "zero-shot" / "run.json")}
    found = {}
    for d in sorted(runs.glob(f"{system}-s*")):
        seed = seed_of(d.name, system)
        if seed is not None and finished(d):
            found[seed] = first_hit(d / "run.json")
    # seeds whose run folder is gone entirely (a folder that is there, finished or not, is the
    # newer run: its kept ranks are not used)
    kept = kept_path(runs / "x" / "run.json")  # the runs' folder under eval/results/per-question
    for f in sorted(kept.parent.glob(f"{system}-s*.json")) if kept is not None and kept.parent.is_dir() else []:
        name = f.name.removesuffix(".json")
        seed = seed_of(name, system)
        if seed is not None and seed not in found and not (runs / name).exists():
            found[seed] = first_hit(runs / name / "run.json")
    return found


def metrics(rank: np.ndarray) -> dict[str, np.ndarray]:
    m = {f"top{k}": (rank < k).astype(float) for k in KS}
    m["rr@10"] = np.where(rank < 10, 1.0 / (rank + 1), 0.0)
    return m


def pair_rng(base: str, other: str) -> np.random.Generator:
    """The bootstrap's random stream of one comparison, seeded by the two system names alone: an
    interval never depends on which other comparisons ran before it, or in which order."""
    return np.random.default_rng(int.from_bytes(hashlib.sha256(f"{base}\t{other}".encode()).digest()[:8], "little"))


def compare(base: str, other: str, boot: int, runs: Path, seeds: list[int] | None = None) -> dict:
    """``other`` − ``base`` per question; ``seeds`` limits the seeds used (default: every finished
    one). The resampling is ``pair_rng(base, other)``'s."""
    rng = pair_rng(base, other)
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
    sizes = {len(r) for r in [*(rb[s] for s in seeds), *(ro[s] for s in seeds)]}
    if len(sizes) != 1:
        raise SystemExit(f"{base} and {other}: runs of different question counts {sorted(sizes)}: not the same test set")
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


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m eval paired", description=__doc__.split("\n\n")[0])
    ap.add_argument("base", nargs="?")
    ap.add_argument("others", nargs="*")
    ap.add_argument("--keep", action="store_true",
                    help="write the per-question ranks of every finished run under --runs to eval/results/per-question/")
    ap.add_argument("--bootstrap", type=int, default=10000)
    ap.add_argument("--runs", type=Path, default=RUNS, help="the benchmark's run directory")
    ap.add_argument("--json", type=Path, default=None, help="also write the comparisons as JSON")
    ap.add_argument("--seed", type=int, action="append", default=None, dest="seeds",
                    help="only this seed (repeatable; default: every seed both systems have finished)")
    args = ap.parse_args(argv)
    if args.keep:
        if not args.runs.is_dir():
            ap.error(f"--runs {args.runs}: no such folder")
        for d in sorted(args.runs.iterdir()):
            if finished(d):
                print(keep(d / "run.json"))
        return
    if not args.base or not args.others:
        ap.error("give a base system and at least one other (or --keep)")
    rows = [compare(args.base, o, args.bootstrap, args.runs, args.seeds) for o in args.others]
    names = [f"top{k}" for k in KS] + ["rr@10"]
    print(f"| {'vs ' + args.base} | seeds | " + " | ".join(f"Δ {n} [95 % CI]" for n in names) + " |")
    print("|---|---|" + "---|" * len(names))
    for r in rows:
        seeds = "—" if r["seeds"] == [-1] else ",".join(map(str, r["seeds"]))
        cells = [f"{r[n]['diff']:+.4f} [{r[n]['ci95'][0]:+.4f}, {r[n]['ci95'][1]:+.4f}]" for n in names]
        print(f"| {r['other']} | {seeds} | " + " | ".join(cells) + " |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")

