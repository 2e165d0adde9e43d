"""The Natural Questions protocol (``eval/experiments/nq.toml``, protocol ``nq-1``): the split rule
that builds its inputs from ../shared/data, the input checks, and one run per system and seed.

The split rule (seed 0, numpy default_rng), files under ``eval/work/nq-data`` (never committed):
- the 2,024 questions of ``nq-open-train/train.json`` are split **by gold passage**: the distinct
  passage ids, sorted, are shuffled by default_rng(0); the first 20 % (rounded down) are dev
  passages, and every question whose positive is a dev passage is a dev question. No dev
  question's passage is a training positive.
- the search corpus holds every NQ gold passage (training positives included), the 2,067 SQuAD
  v1.1 dev paragraphs (ids ``squad{i}`` in file order) and ``distractors`` passages of
  ``wikipedia-100k`` (a default_rng(0) sample of its rows, kept in file order; 100000 = all).
Written: ``train.json`` (DPR biencoder, no negatives), ``dev.qa.tsv`` (DPR QA; ids are line
numbers), ``corpus-<N>k.tsv``, and ``split-<N>k.json`` with the counts and the SHA-256 of every
file, checked on every rebuild: the same rule gives the same files.

Run settings are those eval/bench_nq.py recorded (same keys and values for zero-shot, st-mnrl and
recommended), so its run folders are reused; systems added since record what sets them apart
(``spec``). The training of a toolkit system is its whole resolved config (``dpr-xrisk train
--config``), never ``--recipe``: a later recipe or default cannot change an nq-1 system.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from eval import harness, paired
from eval.harness import EVAL, RESULTS, SHARED, WORK, cli, replace_text

METRICS = ["top1", "top5", "top20", "top100", "mrr@10"]
DEV_SHARE, SEED = 0.2, 0
DATA = WORK / "nq-data"
ST_MNRL = EVAL / "_st_mnrl.py"


class DataError(SystemExit):
    """A one-line refusal of the inputs (exit 2)."""

    def __init__(self, msg: str):
        super().__init__(2)
        self.msg = msg


# ---- the split rule -----------------------------------------------------------------------------
def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _clean(s: str) -> str:
    return " ".join(s.replace("\t", " ").split())


def _tsv(path: Path) -> list[list[str]]:
    """DPR passage rows, split on tabs only (texts hold quotes, which csv would read as quoting)."""
    rows = [line.rstrip("\n").split("\t") for line in open(path, encoding="utf-8")]
    bad = [i + 1 for i, r in enumerate(rows) if len(r) != 3]
    if bad:
        raise DataError(f"{path}: line {bad[0]} does not have 3 tab-separated fields")
    return rows


def split(records: list[dict]) -> tuple[list[dict], list[dict]]:
    """(train, dev) records, split by the positive passage id (the rule in the module doc)."""
    for i, r in enumerate(records):
        if len(r.get("positive_ctxs") or []) != 1 or not r["positive_ctxs"][0].get("passage_id"):
            raise DataError(f"record {i}: expected exactly one positive with a passage_id")
    pids = sorted({r["positive_ctxs"][0]["passage_id"] for r in records})
    order = np.random.default_rng(SEED).permutation(len(pids))
    dev_ids = {pids[i] for i in order[: int(len(pids) * DEV_SHARE)]}
    train = [r for r in records if r["positive_ctxs"][0]["passage_id"] not in dev_ids]
    dev = [r for r in records if r["positive_ctxs"][0]["passage_id"] in dev_ids]
    return train, dev


def corpus_name(distractors: int) -> str:
    return f"corpus-{distractors // 1000}k.tsv" if distractors >= 1000 else f"corpus-{distractors}.tsv"


def build(shared: Path, out: Path, distractors: int) -> dict:
    """Write the split's files for ``distractors`` Wikipedia passages; check them against the
    recorded split when there is one."""
    nq = shared / "nq-open-train"
    records = json.loads((nq / "train.json").read_text(encoding="utf-8"))
    if len(records) != 2024:
        raise DataError(f"{nq / 'train.json'}: {len(records)} records, expected 2,024")
    train, dev = split(records)
    out.mkdir(parents=True, exist_ok=True)
    (out / "train.json").write_text(json.dumps([
        {"question": r["question"], "answers": r["answers"], "positive_ctxs": r["positive_ctxs"],
         "negative_ctxs": [], "hard_negative_ctxs": []} for r in train]), encoding="utf-8")
    with open(out / "dev.qa.tsv", "w", encoding="utf-8", newline="") as f:
        for r in dev:
            f.write(f"{_clean(r['question'])}\t{json.dumps(r['answers'], ensure_ascii=False)}\n")
    squad = json.loads((shared / "squad-v1.1-dev" / "dev-v1.1.json").read_text(encoding="utf-8"))
    paragraphs = [(a["title"].replace("_", " "), p["context"]) for a in squad["data"] for p in a["paragraphs"]]
    wiki = _tsv(shared / "wikipedia-100k" / "psgs.tsv")
    header, wiki = wiki[0], wiki[1:]
    if header != ["id", "text", "title"] or len(wiki) != 100_000:
        raise DataError(f"wikipedia-100k/psgs.tsv: header {header}, {len(wiki)} rows")
    keep = np.sort(np.random.default_rng(SEED).choice(len(wiki), size=min(distractors, len(wiki)), replace=False))
    corpus = out / corpus_name(distractors)
    n = 0
    with open(corpus, "w", encoding="utf-8", newline="") as f:
        f.write("id\ttext\ttitle\n")
        for row in _tsv(nq / "psgs.tsv"):
            if row[0] != "id":
                f.write(f"{row[0]}\t{_clean(row[1])}\t{_clean(row[2])}\n")
                n += 1
        for i, (title, text) in enumerate(paragraphs):
            f.write(f"squad{i}\t{_clean(text)}\t{_clean(title)}\n")
        for i in keep:
            pid, text, title = wiki[i]
            f.write(f"{pid}\t{_clean(text)}\t{_clean(title)}\n")
    info = {"rule": "by gold passage, default_rng(0), 20 % dev", "train_questions": len(train),
            "dev_questions": len(dev), "nq_passages": n, "squad_paragraphs": len(paragraphs),
            "wiki_distractors": int(len(keep)), "corpus_passages": n + len(paragraphs) + int(len(keep)),
            "sha256": {p.name: _sha(p) for p in (out / "train.json", out / "dev.qa.tsv", corpus)}}
    record = out / f"split-{corpus.stem.removeprefix('corpus-')}.json"
    if record.exists() and json.loads(record.read_text())["sha256"] != info["sha256"]:
        raise DataError(f"{record}: the rebuilt files differ from the recorded ones")
    record.write_text(json.dumps(info, indent=2) + "\n")
    return info


def inputs(params: dict) -> dict[str, Path]:
    """The three inputs: given (``--set train=... test=... corpus=...``) or the split rule's files,
    built when missing."""
    given = {k: params[k] for k in ("train", "test", "corpus")}
    if all(given.values()):
        return {k: Path(v) for k, v in given.items()}
    if any(given.values()):
        raise DataError("give all three of train, test and corpus, or none (the split rule's files)")
    files = {"train": DATA / "train.json", "test": DATA / "dev.qa.tsv", "corpus": DATA / corpus_name(params["distractors"])}
    if not all(p.exists() for p in files.values()):
        print(f"[data] building {DATA} from {SHARED} (the split rule)", flush=True)
        build(SHARED, DATA, params["distractors"])
    return files


# ---- the input checks --------------------------------------------------------------------------
def _norm(q: str) -> str:
    return " ".join(q.lower().split())


def load_train(path: Path, limit: int) -> tuple[list[dict], dict]:
    """The training records with a positive (a ``limit`` subset, default_rng(0), in file order)."""
    from dpr_xrisk.io.biencoder import read_biencoder

    records = read_biencoder(path)
    total = len(records)
    keep = [{"question": r["question"], "answers": r["answers"], "positive_ctxs": r["positive_ctxs"]}
            for r in records if r["positive_ctxs"]]  # what every system reads; the negatives are freed
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
    """(number of passages, the training positives' ids found in the corpus); a corpus holding none
    of them (ids of another numbering) is refused."""
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
    """Check the inputs (``args``: train, test, corpus, work, train_questions, refresh_sample,
    batch_size) and write the training file and corpus under ``args.work``; cached per inputs."""
    from dpr_xrisk.io.questions import read_questions
    from dpr_xrisk.retrieval.encode import file_fingerprint

    base = args.work
    base.mkdir(parents=True, exist_ok=True)
    ins = {k: {"path": str(getattr(args, k).resolve()), "fingerprint": file_fingerprint(getattr(args, k))}
           for k in ("train", "test", "corpus")}
    key = hashlib.sha256(json.dumps([ins, args.train_questions, args.refresh_sample, args.batch_size]).encode()).hexdigest()[:16]
    cached = base / f"prepared-{key}.json"
    if cached.exists():  # the checks below already passed on these very inputs
        data = json.loads(cached.read_text(encoding="utf-8"))
        data["train_positives"] = set(data["train_positives"])
        print(f"[data] reusing {cached}", flush=True)
        return data
    train, stats = load_train(args.train, args.train_questions)
    test = read_questions(args.test)
    unanswered = sum(1 for q in test if not q.answers)
    if unanswered:
        raise DataError(f"{args.test}: {unanswered} of {len(test)} test questions have no answers; DPR accuracy needs them")
    if not all(q.qid.isdigit() for q in test):
        raise DataError(f"{args.test}: question ids must be numbers (DPR QA files number them by line)")
    train_q = {_norm(r["question"]) for r in train}
    positives = {c["passage_id"] for r in train for c in r["positive_ctxs"]}
    n, found = check_corpus(args.corpus, positives)
    overlap = sum(1 for q in test if _norm(q.text) in train_q)
    stats.update(test_questions=len(test), corpus_passages=n, train_positives=len(positives),
                 train_positives_in_corpus=len(found), test_questions_also_in_train=overlap)
    if len(found) < len(positives):  # the trainer refuses positives outside its corpus: dropped here, counted
        for r in train:
            r["positive_ctxs"] = [c for c in r["positive_ctxs"] if c["passage_id"] in found]
        before = len(train)
        train = [r for r in train if r["positive_ctxs"]]
        stats.update(dropped_positive_not_in_corpus=before - len(train), train_questions=len(train))
    if len(train) < args.batch_size:
        raise DataError(f"{args.train}: {len(train)} usable training questions, fewer than the batch size {args.batch_size}")
    train_json = base / f"train-{key}.json"
    replace_text(train_json, json.dumps(train))
    if args.refresh_sample <= 0:
        train_corpus = args.corpus.resolve()
        stats["train_corpus_passages"] = n
    else:
        train_corpus = base / f"train-corpus-{key}.tsv"
        stats["train_corpus_passages"] = write_train_corpus(args.corpus, found, args.refresh_sample, n, train_corpus)
    data = {"inputs": ins, "stats": stats, "train": str(train_json), "train_corpus": str(train_corpus),
            "test": str(args.test.resolve()), "corpus": str(args.corpus.resolve()), "train_positives": sorted(found)}
    replace_text(cached, json.dumps(data))  # last: its existence says everything above is complete
    data["train_positives"] = found
    return data


# ---- runs ----------------------------------------------------------------------------------------
def run_name(system: str, seed: int, kind: str) -> str:
    return system if kind in ("zero-shot", "bm25") else f"{system}-s{seed}"


def config_sha(values: dict) -> str:
    """A fingerprint of a resolved training config (the check behind a system's ``code`` label)."""
    return hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()[:16]


def bf16_of(exp, params: dict, system: str) -> bool:
    """Whether ``system`` trains and encodes in bf16: the protocol's ``bf16``, unless the system pins
    its own (``bf16 = false``: the fp32 twin that pairs a bf16 run against full precision)."""
    v = exp.systems[system].get("bf16", params["bf16"])
    if not isinstance(v, bool):
        raise SystemExit(f"error: {exp.name}: system {system!r}: bf16 must be true or false, not {v!r}")
    return v


def guard_of(params: dict) -> bool:
    """The protocol's ``guard``: false turns every toolkit system's int8 refresh guard off. The guard
    only measures (either value trains the same model bit for bit: harness.MEASURING), but it
    encodes the whole corpus in fp32 once, about 21 % of the 20k loop and more at 100k."""
    v = params.get("guard", True)
    if not isinstance(v, bool):
        raise SystemExit(f"error: --set guard={v!r}: must be true or false")
    return v


def settings_of(exp, params: dict, data: dict, system: str, seed: int) -> dict:
    """What a run's numbers depend on, as nq-1 records it: retrieval alone depends on the test
    questions and the corpus; a trained system adds its training data, seed, epochs, the code
    that trains it and, for systems added since, what sets them apart (``spec``)."""
    spec, kind = exp.systems[system], exp.systems[system]["kind"]
    fp = {k: v["fingerprint"] for k, v in data["inputs"].items()}
    s = {"system": system, "protocol": exp.protocol, "test": fp["test"], "corpus": fp["corpus"], "bf16": bf16_of(exp, params, system)}
    if kind == "bm25":
        del s["bf16"]
    if kind in ("train", "st-mnrl"):
        import dpr_xrisk

        s.update(train=fp["train"], train_questions=data["stats"]["train_questions"], seed=seed,
                 refresh_sample=params["refresh_sample"], corpus_size=data["stats"]["corpus_passages"],
                 version=getattr(dpr_xrisk, "__version__", "?"))
    if kind == "train":
        cfg = harness.train_config(exp, system)
        if spec.get("config_sha") and spec["config_sha"] != config_sha(cfg):
            raise SystemExit(f"error: {exp.name}: system {system!r}: its training config is not the one its code label "
                             f"{spec['code']!r} stands for (config_sha {config_sha(cfg)}, stated {spec['config_sha']}): "
                             "a changed system needs a new name or protocol")
        s.update(epochs=cfg["epochs"], code=spec["code"])
        if spec.get("train"):
            s["spec"] = dict(sorted(spec["train"].items()))
        if not guard_of(params) and cfg["refresh_guard"]:
            s["refresh_guard"] = False  # recorded only when the protocol turned it off: stored runs keep their settings
    if kind == "st-mnrl":
        st = spec["st"]
        s.update(epochs=st["epochs"], code=hashlib.sha256(ST_MNRL.read_bytes()).hexdigest()[:16], max_length=st["max_length"])
        if (st["batch_size"], st["lr"]) != (32, 2e-5):  # nq-1's st-mnrl: the recipe's 32 and 2e-5
            s["spec"] = {"batch_size": st["batch_size"], "lr": st["lr"]}
    return s


def train_file(exp, params: dict, data: dict, system: str, seed: int) -> dict:
    """The ``dpr-xrisk train --config`` values of one run: the system's whole training config plus
    the protocol's plumbing. N of the in-batch q is the whole corpus, not the refresh sample."""
    cfg = {**harness.train_config(exp, system), "train": [data["train"]], "corpus": data["train_corpus"],
           "corpus_size": data["stats"]["corpus_passages"], "seed": seed, "threads": params["threads"],
           "save_every": params["save_every"]}
    cfg["precision"] = "bf16" if bf16_of(exp, params, system) else "fp32"  # pinned: the toolkit's default is "auto"
    if not guard_of(params):
        cfg["refresh_guard"] = False
    return cfg


def train(exp, params: dict, data: dict, system: str, seed: int, d: Path, log: Path) -> Path:
    spec = exp.systems[system]
    if spec["kind"] == "st-mnrl":
        st, model = spec["st"], d / "model"
        if not (model / "modules.json").exists():
            cmd = [sys.executable, str(ST_MNRL), "--train", data["train"], "--out", str(model),
                   "--batch-size", str(st["batch_size"]), "--epochs", str(st["epochs"]), "--lr", str(st["lr"]),
                   "--seed", str(seed), "--threads", str(params["threads"]), "--max-length", str(st["max_length"])] + \
                (["--bf16"] if bf16_of(exp, params, system) else [])
            print(f"  $ {' '.join(cmd)}", flush=True)
            t0 = time.perf_counter()
            with open(log, "a") as f:
                subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, check=True, env=harness.env())
            harness.record_train_wall(d, t0, resumed=False)  # it has no checkpoints: a killed fine-tune starts again
        return model
    if not (d / "dpr_xrisk.json").exists():
        harness.train_in(d, train_file(exp, params, data, system, seed), log)
    return d


def scores(d: Path, run: Path, out: Path, expected: int, log: Path) -> dict:
    """`dpr-xrisk evaluate` (DPR answer match) of one run, with MRR@10 by first answer-bearing rank."""
    cli(["evaluate", "--run", run, "--k", 1, "--k", 5, "--k", 20, "--k", 100, "--out", out], log)
    m = json.loads(out.read_text())["results"][0]
    first = paired.first_hit(run)
    if m["num_questions"] != expected or len(first) != expected:
        raise RuntimeError(f"{d.name}: evaluated {m['num_questions']} questions ({len(first)} in the run), expected {expected}")
    rec = {k: float(m["metrics"][k]) for k in METRICS[:4]}
    rec["mrr@10"] = float(np.where(first < 10, 1.0 / (first + 1), 0.0).mean())
    return rec


def one_run(exp, params: dict, data: dict, work: Path, system: str, seed: int) -> dict:
    kind = exp.systems[system]["kind"]
    name = run_name(system, seed, kind)
    d = work / "runs" / name
    settings = settings_of(exp, params, data, system, seed)
    finished = harness.open_run(d, settings, name)
    if finished is not None:
        return finished
    log, rec = d / "bench.log", {"settings": settings}
    guard = kind == "train" and train_file(exp, params, data, system, seed)["refresh_guard"]  # what it trains with
    print(f"[{name}] {exp.systems[system]['what']}" + ("; int8 refresh guard on" if guard else ""), flush=True)
    run = d / "run.json"
    if kind == "bm25":
        idx = work / f"bm25-{data['inputs']['corpus']['fingerprint']}"
        if not (idx / "meta.json").exists():
            cli(["bm25", "index", "--corpus", data["corpus"], "--out", idx, "--overwrite"], log)
        cli(["bm25", "search", "--index", idx, "--queries", data["test"], "--k", 100, "--out-json", run], log)
    else:
        model = "minilm" if kind == "zero-shot" else train(exp, params, data, system, seed, d, log)
        if kind != "zero-shot":
            rec.update(harness.train_wall(d))
            rec["cpu"] = harness.cpu_kind()  # the seeds of one system may run on machines of two kinds
        emb, idx = d / "emb", d / "index"
        rec["encode_s"] = cli(["encode", "--model", model, "--corpus", data["corpus"], "--out", emb, "--threads",
                               params["threads"], "--batch-size", 64, "--bf16" if bf16_of(exp, params, system) else "--fp32"], log)
        cli(["index", "--embeddings", emb, "--out", idx, "--threads", params["threads"], "--overwrite"], log)
        cli(["search", "--index", idx, "--queries", data["test"], "--k", 100, "--out-json", run, "--fp32"], log)  # pinned
    rec["metrics"] = scores(d, run, d / "eval.json", data["stats"]["test_questions"], log)
    harness.finish_run(d, rec)  # first: a kill below leaves a finished run
    for p in list(d.glob("*.safetensors")) + [d / "emb", d / "index", d / "checkpoints", d / "best", d / "model"]:
        shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
    print(f"[{name}] " + " ".join(f"{k} {v:.4f}" for k, v in rec["metrics"].items()), flush=True)
    return rec


def curve(d: Path) -> dict | None:
    """A trained run's training curve from its folder: the loss of each step in cross-entropy
    units (a DPM loss / its resolved τ, the importance-weighted cross-entropy; other losses and the
    MNRL script's in-batch cross-entropy as logged) and, for the recipe, its training recall@1 at
    each refresh.
    Only a step's last attempt counts (a resumed run repeats steps after its checkpoint)."""
    if (d / "train_log.jsonl").exists():  # dpr-xrisk train: the report's reader and its checks
        from dpr_xrisk.report.load import load_training

        t = load_training(d)
        scale = 1.0 / t.config["tau"] if t.config["loss"] == "dpm" else 1.0
        loss = {r["step"]: r["loss"] * scale for r in t.steps}
        refreshes = [r for r in t.refreshes if "train_recall@1" in r]
    elif (d / "bench.log").exists():  # eval/_st_mnrl.py prints one JSON line a step
        rows = [json.loads(x) for x in (d / "bench.log").read_text(encoding="utf-8").splitlines()
                if x.startswith('{"step"')]
        loss, refreshes = {r["step"]: r["loss"] for r in rows}, []
    else:
        return None
    if not loss:
        return None
    out = {"step": sorted(loss), "loss": [round(loss[k], 6) for k in sorted(loss)]}
    if refreshes:
        out.update(refresh_step=[r["step"] for r in refreshes],
                   train_recall1=[round(r["train_recall@1"], 6) for r in refreshes])
    return out


def derived(data: dict, work: Path, name: str, rec: dict, bm25: bool) -> dict:
    """What is recomputed from a finished run's kept run.json each time (never written into its
    record): the hub rate, rank-1 wins/losses vs zero-shot, the training curve and the RRF hybrid
    with BM25."""
    d = work / "runs" / name
    run, zs = d / "run.json", work / "runs" / "zero-shot" / "run.json"
    out = dict(rec)
    js = json.loads(run.read_text(encoding="utf-8"))
    top1_train = np.array([js[q]["contexts"][0]["docid"] in data["train_positives"] for q in sorted(js, key=int)])
    out["hub_rate"] = float(top1_train.mean())
    if name not in ("zero-shot", "bm25") and (c := curve(d)) is not None:
        out["curve"] = c
    if name not in ("zero-shot", "bm25") and paired.available(zs):
        zf, first = paired.first_hit(zs), paired.first_hit(run)
        lost, won = (zf == 0) & (first > 0), (zf > 0) & (first == 0)
        out.update(won_top1=int(won.sum()), lost_top1=int(lost.sum()), lost_with_train_top1=int((lost & top1_train).sum()))
    sparse = work / "runs" / "bm25" / "run.json"
    if bm25 and name != "bm25" and sparse.exists():
        hyb = d / "hybrid-rrf.json"
        if not hyb.exists():
            cli(["fuse", "--dense", run, "--sparse", sparse, "--queries", data["test"], "--corpus", data["corpus"],
                 "--fusion", "rrf", "--k", 100, "--out-json", hyb], d / "derived.log")
        out["hybrid-rrf"] = scores(d, hyb, d / "eval-hybrid-rrf.json", data["stats"]["test_questions"], d / "derived.log")
    return out


def pairs_of(exp, done: list[str]) -> list[tuple[str, str]]:
    """The paired comparisons (base, other) of the finished systems ``done``: every trained system
    against zero-shot, every one against st-mnrl (the issue's goal reads recipe − MNRL), the recipe
    against the other MNRL references (st-mnrl-e4: MNRL at the recipe's training seconds), and the
    toolkit's other systems against the recipe (the experiment's ``recipe``: the system that
    trains as ``train --recipe recommended`` does) or the system their ``pair_with`` names, in the
    experiment's order."""
    trained = [s for s in done if exp.systems[s]["kind"] in ("train", "st-mnrl")]
    ours = [s for s in trained if exp.systems[s]["kind"] == "train"]
    pairs = [("zero-shot", s) for s in trained] if "zero-shot" in done else []
    if "st-mnrl" in done:
        pairs += [("st-mnrl", s) for s in trained if s != "st-mnrl"]
    recipe = exp.raw["recipe"]
    if recipe in done:  # the recipe against every other MNRL reference (the equal-wall-time one)
        pairs += [(s, recipe) for s in trained if exp.systems[s]["kind"] == "st-mnrl" and s != "st-mnrl"]
    for s in ours:  # a system whose one changed factor is measured against another (``pair_with``)
        base = exp.systems[s].get("pair_with", recipe)  # checked by harness.check_references
        if base in done and base != s:
            pairs.append((base, s))
    return pairs


def results_path(params: dict) -> Path:
    return RESULTS / f"nq-{corpus_name(params['distractors']).removeprefix('corpus-').removesuffix('.tsv')}.json"


def run(exp, params: dict, systems: list[str], seeds: list[int], work: Path | None, command: str) -> Path:
    from argparse import Namespace

    from dpr_xrisk.errors import InputError

    batch = {s: exp.systems[s]["st"]["batch_size"] if exp.systems[s]["kind"] == "st-mnrl" else
             harness.train_config(exp, s)["batch_size"] for s in systems if exp.systems[s]["kind"] in ("train", "st-mnrl")}
    tag = corpus_name(params["distractors"]).removeprefix("corpus-").removesuffix(".tsv")
    work = work or WORK / (f"nq-tiny" if params["tiny"] else f"nq{tag}")
    try:
        ins = inputs(params)
        data = prepare(Namespace(**ins, work=work, train_questions=params["train_questions"],
                                 refresh_sample=params["refresh_sample"], batch_size=max(batch.values(), default=2)))
    except DataError as e:
        print(f"error: {e.msg}", file=sys.stderr)
        raise
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    env = harness.machine()
    order = sorted(systems, key=lambda s: ("bm25", "zero-shot").index(exp.systems[s]["kind"])
                   if exp.systems[s]["kind"] in ("bm25", "zero-shot") else 2)
    recs: dict = {}
    for seed in seeds:
        for system in order:
            kind = exp.systems[system]["kind"]
            if kind in ("zero-shot", "bm25") and seed != seeds[0]:
                continue
            rec = one_run(exp, params, data, work, system, seed)
            recs.setdefault(system, {})[-1 if kind in ("zero-shot", "bm25") else seed] = rec
    bm25 = (work / "runs" / "bm25" / "bench.json").exists()
    recs = {s: {k: derived(data, work, run_name(s, k, exp.systems[s]["kind"]), r, bm25)
                for k, r in by.items()} for s, by in recs.items()}
    if not params["tiny"]:  # per-question ranks, committed: the paired intervals outlive eval/work
        for s, by in recs.items():
            for k in by:
                run_json = work / "runs" / run_name(s, k, exp.systems[s]["kind"]) / "run.json"
                if paired.kept_path(run_json) is not None and paired.available(run_json):
                    paired.keep(run_json)
    res = results_path(params) if not params["tiny"] and not any(params[k] for k in ("train", "test", "corpus")) \
        else work / "results.json"
    # the records of earlier invocations on the same data stay (another system, another seed)
    stored = harness.load_results(res)
    if stored.get("protocol") == exp.protocol and stored.get("data", {}).get("inputs") == data["inputs"]:
        for s, by in stored["runs"].items():
            for k, r in by.items():
                recs.setdefault(s, {}).setdefault(int(k), r)
    order = [s for s in exp.systems if s in recs] + [s for s in recs if s not in exp.systems]
    recs = {s: dict(sorted(recs[s].items())) for s in order}  # the experiment's order, then any stored others
    done = [s for s in exp.systems if s in recs and paired.runs_of(s, work / "runs")]
    pairs = pairs_of(exp, done)
    # only the seeds with a record (a run folder of another seed may hold a run of other settings)
    comparisons = [paired.compare(a, b, params["bootstrap"], work / "runs", seeds=[k for k in recs[b] if k >= 0])
                   for a, b in pairs]
    out = {"experiment": exp.name, "protocol": exp.protocol, "command": command, "machine": env,
           "params": {k: v for k, v in params.items()}, "data": {k: v for k, v in data.items() if k != "train_positives"},
           "runs": recs, "paired": comparisons}
    replace_text(res, json.dumps(out, indent=2, default=str) + "\n")
    return res
