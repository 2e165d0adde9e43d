"""The SQuAD full-length protocol (``eval/experiments/squad.toml``, protocol ``full-1``): data,
one run per system and seed (train with ``dpr-xrisk train --config``, encode, index, search,
evaluate, fuse with BM25), the equal-wall-time sizing of the DPR runs, and the length statistic
of the training positives (``python -m eval lengths``).

What a system is lives in the experiment file; this module owns how the protocol runs it. A run
records its fully resolved settings (``harness.open_run``); a killed run resumes, training from its
last checkpoint.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np

from eval import harness, paired
from eval.harness import RESULTS, SHARED, WIKI, WORK, cli, replace_text, write_if_changed

METRICS = ["top1", "top5", "top20", "top100", "mrr@10"]
NEGATIVES = "dpr-bm25-negatives.jsonl"  # carried_bm25: the DPR recipe's BM25 pools
LENGTHS = (64, 128, 192, 256, 384)


def base_of(params: dict) -> Path:
    """The protocol's work folder: the tiny check and GPU runs never mix with the CPU runs."""
    if params["tiny"]:
        return WORK / "full-tiny"
    return WORK / ("full-gpu" if params["device"] != "cpu" else "full")


def results_path(exp, params: dict) -> Path:
    if params["tiny"]:
        return base_of(params) / exp.raw["results"]
    stem = Path(exp.raw["results"]).stem
    return RESULTS / (f"{stem}-gpu.json" if params["device"] != "cpu" else f"{stem}.json")


# ---- data ----------------------------------------------------------------------------------
def split(base: Path, params: dict) -> dict:
    """The SQuAD split (``convert squad --test-fraction 0.25 --seed 0``), the training articles'
    paragraphs as a corpus, and the test subset (renumbered 0..n-1)."""
    squad, log = base / "squad", base / "prepare.log"
    if not (squad / "test.qrels.tsv").exists():
        cli(["convert", "squad", "--input", SHARED / "squad-v1.1-dev" / "dev-v1.1.json", "--out", squad,
             "--test-fraction", "0.25", "--seed", "0"], log)
    train_all = json.loads((squad / "biencoder-train.json").read_text(encoding="utf-8"))
    pos_ids = {p["passage_id"] for q in train_all for p in q["positive_ctxs"]}
    lines = (squad / "passages.tsv").read_text(encoding="utf-8").splitlines(keepends=True)
    paragraphs = base / "train-paragraphs.tsv"
    assert harness.passage_subset(lines, pos_ids, paragraphs) == len(pos_ids), "a training positive is missing"
    test_ids = {x.split()[2] for x in (squad / "test.qrels.tsv").read_text().splitlines()}
    assert not test_ids & pos_ids, "a test paragraph is in the training corpus"
    qlines = (squad / "test.qa.tsv").read_text(encoding="utf-8").splitlines(keepends=True)
    qrels: dict[str, list[str]] = {}
    for line in (squad / "test.qrels.tsv").read_text(encoding="utf-8").splitlines(keepends=True):
        qrels.setdefault(line.split()[0], []).append(line)
    n = min(params["test_questions"], len(qlines))
    pick = sorted(np.random.default_rng(0).choice(len(qlines), size=n, replace=False).tolist())
    sub = base / f"test{n}"
    sub.mkdir(parents=True, exist_ok=True)
    write_if_changed(sub / "qa.tsv", "".join(qlines[i] for i in pick))
    write_if_changed(sub / "qrels.tsv", "".join(" ".join([str(new), *line.split()[1:]]) + "\n"
                                               for new, old in enumerate(pick) for line in qrels[str(old)]))
    return {"squad": squad, "train_all": train_all, "paragraphs": paragraphs, "qa": str(sub / "qa.tsv"),
            "qrels": str(sub / "qrels.tsv"), "test_questions": n, "test_split_questions": len(qlines)}


def combined_corpus(squad_passages: Path, n_wiki: int, out: Path) -> Path:
    """Every SQuAD paragraph + the first ``n_wiki`` Wikipedia passages, one DPR passages TSV."""
    import itertools
    import os

    if not out.exists():
        tmp = out.with_suffix(".partial")
        with open(tmp, "w", encoding="utf-8") as g:
            with open(squad_passages, encoding="utf-8") as f:
                g.writelines(f)  # with its header
            with open(WIKI, encoding="utf-8") as f:
                next(f)
                g.writelines(itertools.islice(f, n_wiki))
        os.replace(tmp, out)
    return out


def prepare(base: Path, params: dict) -> dict:
    base.mkdir(parents=True, exist_ok=True)
    s = split(base, params)
    log = base / "prepare.log"
    dev_pick = set(np.random.default_rng(1).choice(len(s["train_all"]), size=params["dev_questions"],
                                                   replace=False).tolist())
    train = [q for i, q in enumerate(s["train_all"]) if i not in dev_pick][: params["train_questions"]]
    write_if_changed(base / "train.json", json.dumps(train, indent=1))
    dev = [s["train_all"][i] for i in sorted(dev_pick)]
    write_if_changed(base / "dev.qa.tsv", "".join(f"{q['question']}\t{json.dumps(q['answers'])}\n" for q in dev))
    wiki_lines = WIKI.read_text(encoding="utf-8").splitlines(keepends=True)
    pick = np.random.default_rng(0).choice(len(wiki_lines) - 1, size=min(params["refresh_wiki"], len(wiki_lines) - 1),
                                           replace=False)
    train_corpus = base / f"train-corpus-wiki{params['refresh_wiki']}.tsv"
    write_if_changed(train_corpus, s["paragraphs"].read_text(encoding="utf-8")
                     + "".join(wiki_lines[1 + i] for i in sorted(pick.tolist())))
    bm25_train = base / f"train-corpus-wiki{params['refresh_wiki']}-bm25"
    carried = params["carried_bm25"]
    if not (bm25_train / "meta.json").exists() and not carried:
        cli(["bm25", "index", "--corpus", train_corpus, "--out", bm25_train, "--overwrite"], log)
    eval_corpus = combined_corpus(s["squad"] / "passages.tsv", params["wiki"], base / f"eval-corpus-wiki{params['wiki']}.tsv")
    bm25_run = base / f"bm25-wiki{params['wiki']}-q{s['test_questions']}.json"
    if carried:  # computed on a machine with Java (export_carry)
        bm25_run = bm25_run.with_suffix(".trec")
        for p in (bm25_run, bm25_run.with_suffix(".eval.json"), base / NEGATIVES):
            if not p.exists():
                sys.exit(f"error: carried_bm25: {p} is missing (write it with --set export_carry=DIR on a machine with Java)")
    else:
        bm25_eval = base / f"eval-corpus-wiki{params['wiki']}-bm25"
        if not (bm25_eval / "meta.json").exists():
            cli(["bm25", "index", "--corpus", eval_corpus, "--out", bm25_eval, "--overwrite"], log)
        if not bm25_run.exists():
            cli(["bm25", "search", "--index", bm25_eval, "--queries", s["qa"], "--k", 100, "--out-json", bm25_run], log)
    data = {"train": str(base / "train.json"), "train_questions": len(train),
            "train_split_questions": len(s["train_all"]), "train_corpus": str(train_corpus),
            "dev": str(base / "dev.qa.tsv"), "dev_corpus": str(s["paragraphs"]), "bm25": str(bm25_train),
            "qa": s["qa"], "qrels": s["qrels"], "test_questions": s["test_questions"],
            "eval_corpus": str(eval_corpus), "eval_passages": sum(1 for _ in open(eval_corpus, encoding="utf-8")) - 1,
            "bm25_run": str(bm25_run), "train_positives": {p["passage_id"] for q in train for p in q["positive_ctxs"]}}
    ev = bm25_run.with_suffix(".eval.json")
    if not ev.exists():
        score(data, bm25_run, ev, log)
    return data


def export_carry(base: Path, data: dict, out: Path) -> None:
    """What a machine without Java (a lent GPU) needs, into ``out``: the BM25 test run as TREC with
    its evaluation, and the DPR recipe's initial BM25 pools as a negatives file (the same search,
    depth and question order as ``negatives = "bm25"``)."""
    from dpr_xrisk.io.questions import Question
    from dpr_xrisk.io.trec import write_run
    from dpr_xrisk.retrieval.bm25 import bm25_search

    out.mkdir(parents=True, exist_ok=True)
    run_json = Path(data["bm25_run"])
    run = {q: [(c["docid"], float(c["score"])) for c in v["contexts"]]
           for q, v in json.loads(run_json.read_text(encoding="utf-8")).items()}
    write_run(out / run_json.with_suffix(".trec").name, run, tag="bm25")
    shutil.copy(run_json.with_suffix(".eval.json"), out / run_json.with_suffix(".eval.json").name)
    train = json.loads(Path(data["train"]).read_text(encoding="utf-8"))
    hits = bm25_search(data["bm25"], [Question(str(i), q["question"], tuple(q["answers"])) for i, q in enumerate(train)],
                       k=100, progress=True)
    with open(out / NEGATIVES, "w", encoding="utf-8") as f:
        for i in range(len(train)):
            f.write(json.dumps({"question": i, "negatives": [{"passage_id": d, "score": sc}
                                                             for d, sc in hits.get(str(i), [])]}) + "\n")
    print(f"wrote {out}: {len(run)} BM25 test questions, {len(train)} training questions' BM25 pools", flush=True)


# ---- scoring -------------------------------------------------------------------------------
def score(data: dict, run: Path, ev: Path, log: Path) -> dict:
    """`dpr-xrisk evaluate` of one run against the test qrels: its METRICS."""
    cli(["evaluate", "--run", run, "--qrels", data["qrels"], "--k", 1, "--k", 5, "--k", 20, "--k", 100,
         "--qrels-k", 10, "--out", ev], log)
    m = json.loads(ev.read_text())["results"][0]["metrics"]
    return {k: m[k] for k in METRICS}


def hub_stats(run_json: Path, train_pos: set[str], zs_first: np.ndarray | None) -> dict:
    """Hub rate (test top-1 = a training positive) and, against zero-shot's ranks, the questions won
    and lost at rank 1 (and lost to a training positive)."""
    run = json.loads(run_json.read_text(encoding="utf-8"))
    top1_train = np.array([run[q]["contexts"][0]["docid"] in train_pos for q in sorted(run, key=int)])
    first = paired.first_hit(run_json)
    out = {"hub_rate": float(top1_train.mean())}
    if zs_first is not None:
        lost, won = (zs_first == 0) & (first > 0), (zs_first > 0) & (first == 0)
        out.update(won_top1=int(won.sum()), lost_top1=int(lost.sum()), lost_with_train_top1=int((lost & top1_train).sum()))
    return out


def hybrids(data: dict, d: Path, dense: Path, rec: dict) -> None:
    """The dense run fused with BM25 (RRF, interpolation alpha 0.5), scored into ``rec``."""
    for fusion in ("rrf", "interpolation"):
        out = d / f"hybrid-{fusion}.json"
        if not out.exists():
            cli(["fuse", "--dense", dense, "--sparse", data["bm25_run"], "--queries", data["qa"], "--corpus",
                 data["eval_corpus"], "--fusion", fusion, "--alpha", 0.5, "--k", 100, "--out-json", out], d / "bench.log")
        rec["metrics"][f"hybrid-{fusion}"] = score(data, out, d / f"eval-hybrid-{fusion}.json", d / "bench.log")


def evaluate(base: Path, params: dict, data: dict, d: Path, model, rec: dict) -> None:
    emb, idx, run, log = d / "emb", d / "index", d / "run.json", d / "bench.log"
    dev = params["device"]
    if not (run.exists() and (d / "eval.json").exists()):
        cli(["encode", "--model", model, "--corpus", data["eval_corpus"], "--out", emb, "--threads", params["threads"],
             "--batch-size", 64 if dev == "cpu" else 512, "--bf16" if params["bf16"] else "--fp32", "--device", dev], log)
        cli(["index", "--embeddings", emb, "--out", idx, "--threads", params["threads"], "--overwrite"], log)
        cli(["search", "--index", idx, "--queries", data["qa"], "--k", 100, "--out-json", run,
             "--out-run", d / "run.trec", "--device", dev, "--fp32"], log)  # queries pinned fp32, as measured
    rec["metrics"] = {"dense": score(data, run, d / "eval-dense.json", log)}
    if not params["carried_bm25"]:
        hybrids(data, d, run, rec)
    zs = base / "runs" / "zero-shot" / "run.json"
    rec.update(hub_stats(run, data["train_positives"],
                         paired.first_hit(zs) if paired.available(zs) and model != "minilm" else None))
    if paired.kept_path(run) is not None and not params["tiny"]:  # per-question ranks, committed
        paired.keep(run)
    shutil.rmtree(emb, ignore_errors=True)
    shutil.rmtree(idx, ignore_errors=True)


# ---- runs ------------------------------------------------------------------------------------
def settings_of(exp, params: dict, data: dict, system: str, seed: int, steps: int | None) -> dict:
    """Everything a run's numbers depend on: the protocol, the data's sizes, the evaluation
    precision, and for a trained system its seed, steps and its whole training config."""
    s = {"experiment": exp.name, "system": system, "protocol": exp.protocol, "test_questions": data["test_questions"],
         "eval_passages": data["eval_passages"], "train_questions": data["train_questions"], "tiny": params["tiny"],
         "bf16_encode": params["bf16"]}
    if params["device"] != "cpu":
        s["device"] = params["device"]
    if system != "zero-shot":
        s.update(seed=seed, steps=steps, bf16_train=params["bf16"], train=harness.train_config(exp, system),
                 dev_questions=params["dev_questions"], eval_every=params["eval_every"],
                 refresh_wiki=params["refresh_wiki"], carried_bm25=params["carried_bm25"])
    return s


def undisturbed_loop_s(d: Path) -> float:
    """A finished run's training-loop time less what other jobs added: each step slower than twice
    the median step, and each refresh slower than 1.5 times the median refresh, counts at that
    bound (only the last attempt of a step: a resumed run repeats steps after its checkpoint)."""
    log = [json.loads(x) for x in (d / "train_log.jsonl").read_text().splitlines()]
    end = [r for r in log if r.get("event") == "end"][-1]
    step_s = {r["step"]: r["seconds"] for r in log if "loss" in r and "event" not in r}
    med = float(np.median(list(step_s.values())))
    excess = sum(max(0.0, s - 2 * med) for s in step_s.values())
    if (d / "refresh_log.jsonl").exists():
        ref_s = {r["step"]: r["seconds"] for r in map(json.loads, (d / "refresh_log.jsonl").read_text().splitlines())}
        med_r = float(np.median(list(ref_s.values())))
        excess += sum(max(0.0, s - 1.5 * med_r) for s in ref_s.values())
    return end["seconds"] - excess


def train_file(base: Path, params: dict, data: dict, train: dict, seed: int, steps: int | None) -> dict:
    """The ``dpr-xrisk train --config`` values of one run: the system's whole training config plus
    the protocol's plumbing (data paths, seed, threads, precision, dev cadence, checkpoints)."""
    cfg = dict(train)
    cfg.update(train=[data["train"]], corpus=data["train_corpus"], dev=data["dev"], dev_corpus=data["dev_corpus"],
               seed=seed, threads=params["threads"], save_every=params["save_every"], eval_every=params["eval_every"])
    cfg["precision"] = "bf16" if params["bf16"] else "fp32"  # pinned: the toolkit's default is "auto"
    if params["device"] != "cpu":
        cfg["device"] = params["device"]
    if steps:
        cfg["max_steps"] = steps
    if cfg["negatives"] == "bm25" and params["carried_bm25"]:  # the same pools, mined on a machine with Java
        cfg.update(negatives="negatives-file", negatives_file=str(base / NEGATIVES))
    elif cfg["negatives"] == "bm25":
        cfg["bm25_index"] = data["bm25"]
    return cfg


def one_run(exp, base: Path, params: dict, data: dict, system: str, seed: int, steps: int | None, env: dict) -> dict:
    trained = system != "zero-shot"
    name = f"{system}-s{seed}" if trained else system
    d = base / "runs" / name
    settings = settings_of(exp, params, data, system, seed, steps)
    finished = harness.open_run(d, settings, name)
    if finished is not None:
        return finished
    log, rec = d / "bench.log", {"settings": settings}
    print(f"[{name}] {exp.systems[system]['what']}", flush=True)
    model: str | Path = "minilm"
    if trained:
        model = d
        cfg = train_file(base, params, data, settings["train"], seed, steps)
        if not (d / "dpr_xrisk.json").exists():
            harness.train_in(d, cfg, log, machine=env)
        rec.update(harness.train_wall(d, machine=env))
        end = [json.loads(x) for x in (d / "train_log.jsonl").read_text().splitlines() if '"event": "end"' in x][-1]
        rec.update(train_loop_s=end["seconds"], refresh_seconds=end["refresh_seconds"], steps=end["steps"],
                   undisturbed_loop_s=round(undisturbed_loop_s(d), 1))
        if not (d / "report" / "report.html").exists():
            cli(["report", "--train", f"{system}={d}", "--out", d / "report", "--title", f"{system} seed {seed}"], log)
    else:
        rec["machine"] = env
    evaluate(base, params, data, d, model, rec)
    for p in list(d.glob("*.safetensors")) + [d / "checkpoints", d / "best"]:
        shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
    harness.finish_run(d, rec)
    print(f"[{name}] " + " ".join(f"{k} {v:.4f}" for k, v in rec["metrics"]["dense"].items())
          + f" hub {rec['hub_rate']:.4f}", flush=True)
    return rec


def cpu_kind_of(rec: dict) -> tuple | None:
    """The kind of CPU a run trained on (model, flags, cores), None where unrecorded."""
    m = rec.get("machine") or {}
    kind = (m.get("cpu_model"), tuple(m.get("cpu_flags") or ()), m.get("cpus"))
    return None if None in (kind[0], m.get("cpu_flags"), kind[2]) else kind


def eqwall_steps(exp, system: str, recs: dict, seed: int, dpr_seed: int) -> tuple[int | None, str]:
    """Steps of the equal-wall-time DPR run ``system`` (its ``eqwall = {ref, timer}``): the timer's
    steps x the reference's loop time / the timer's loop time (both undisturbed), from the stored
    reference run of ``seed`` and the timer run of ``dpr_seed``. The timer must train at the
    system's own settings (a step at another length or dropout costs another time). (None, why)
    where they cannot be sized here."""
    ref, timer = exp.systems[system]["eqwall"]["ref"], exp.systems[system]["eqwall"].get("timer")
    if timer is None:
        return None, f"not run: no DPR run at {system}'s settings times its steps; give them with --set eqwall_steps=N"
    if harness.train_config(exp, timer) != harness.train_config(exp, system):
        raise ValueError(f"{exp.name}: {timer}'s settings are not {system}'s; its step time does not size {system}")
    r, a = recs.get(ref, {}).get(seed), recs.get(timer, {}).get(dpr_seed)
    if not (r and a and "undisturbed_loop_s" in r and "undisturbed_loop_s" in a):
        return None, f"waits for {ref} (seed {seed}) and {timer} (seed {dpr_seed})"
    kinds = [cpu_kind_of(x) for x in (r, a)]
    if kinds[0] != kinds[1] or (dpr_seed != seed and None in kinds):
        return None, (f"not run: {ref} seed {seed} and {timer} seed {dpr_seed} ran on other (or unrecorded) "
                      "kinds of CPU; their loop times do not compare")
    r_s, a_s = r["undisturbed_loop_s"], a["undisturbed_loop_s"]
    steps = max(1, round(a["steps"] * r_s / a_s))
    return steps, (f"{steps} steps = {a['steps']} x {r_s:.0f} s / {a_s:.0f} s (loop times of {ref} seed {seed} "
                   f"and {timer} seed {dpr_seed}, less what other jobs added)")


def check(exp, params: dict) -> None:
    """Refusals that need no data."""
    if params["eqwall_steps"] < 0:
        raise SystemExit(f"error: eqwall_steps {params['eqwall_steps']}: give a step count of at least 1 (0 = size it)")


def run(exp, params: dict, systems: list[str], seeds: list[int], work: Path | None, command: str) -> Path:
    check(exp, params)
    for s in systems:
        if exp.systems[s].get("retired"):
            raise SystemExit(f"error: {s} is retired (stored records only; its code: git show "
                             f"{exp.systems[s]['retired']}:eval/bench_full.py)")
        if s != "zero-shot":
            harness.train_config(exp, s)  # every system is complete before anything runs
    env = harness.machine()
    if params["threads"] >= 2:  # the tokenizer's own threads, as a user's `dpr-xrisk train` has them
        harness.EXTRA_ENV["TOKENIZERS_PARALLELISM"] = "true"
    env["env"] = {"TOKENIZERS_PARALLELISM": harness.env()["TOKENIZERS_PARALLELISM"]}
    base = work or base_of(params)
    data = prepare(base, params)
    if params["export_carry"]:
        export_carry(base, data, Path(params["export_carry"]))
        return base
    res = results_path(exp, params) if work is None else base / exp.raw["results"]
    stored = harness.load_results(res)
    recs = {s: {int(k): v for k, v in by.items()} for s, by in stored.get("runs", {}).items()}
    bm25 = json.loads(Path(data["bm25_run"]).with_suffix(".eval.json").read_text())["results"][0]["metrics"]
    todo = ([] if not params["zero_shot"] else ["zero-shot"]) + [s for s in systems if s != "zero-shot"]
    for seed in seeds:
        for system in todo:
            if system == "zero-shot" and seed != seeds[0]:
                continue
            steps = None
            if "eqwall" in exp.systems[system]:
                if params["eqwall_steps"] > 0:
                    steps = params["eqwall_steps"]
                    print(f"[{system}] {steps} steps, as given (eqwall_steps)", flush=True)
                else:
                    dpr_seed = seeds[0] if params["eqwall_dpr_seed"] < 0 else params["eqwall_dpr_seed"]
                    steps, why = eqwall_steps(exp, system, recs, seeds[0], dpr_seed)
                    print(f"[{system}] {why}", flush=True)
                    if steps is None:
                        continue
            rec = one_run(exp, base, params, data, system, seed, steps, env)
            recs.setdefault(system, {})[seed if system != "zero-shot" else -1] = rec
            out = {"experiment": exp.name, "protocol": exp.protocol, "command": command, "machine": env,
                   "data": {k: v for k, v in data.items() if k != "train_positives"},
                   "bm25": {k: bm25[k] for k in METRICS}, "runs": recs}
            replace_text(res, json.dumps(out, indent=2, default=str) + "\n")
    return res


# ---- the length statistic ---------------------------------------------------------------------
def answer_end_token(tok, title: str, text: str, answers) -> tuple[int, int | None]:
    """(word pieces of the passage with [CLS]/[SEP], 1-based position of the word piece where the
    earliest occurrence of any answer ends, or None where no answer string occurs in the text)."""
    joined = f"{title} {text}" if title else text
    enc = tok(joined, return_offsets_mapping=True, truncation=False)
    n = len(enc["input_ids"])
    starts = [(joined.find(a, len(title) + 1 if title else 0), a) for a in answers]
    starts = [(s, a) for s, a in starts if s >= 0]
    if not starts:
        return n, None
    s, a = min(starts)
    e = s + len(a)
    last = max(i for i, (o0, o1) in enumerate(enc["offset_mapping"]) if o1 > o0 and o0 < e)
    return n, last + 1  # positions count [CLS]; a cut-off of L keeps positions 1..L-1 and the final [SEP]


def lengths(train: Path, out: Path, tokenizer=None) -> dict:
    """How much of each training positive a training length lets the model see: the share of
    positives longer than L word pieces (title joined, MiniLM's tokenizer) and the share of
    training questions whose answer ends past the L-th, for each L in LENGTHS."""
    if not train.exists():
        sys.exit(f"{train} is missing: run `python -m eval run squad` first (it prepares the split)")
    from dpr_xrisk.io.biencoder import read_biencoder

    tok = tokenizer
    if tok is None:
        from transformers import AutoTokenizer

        from dpr_xrisk.retrieval.encoder import resolve_model_path
        tok = AutoTokenizer.from_pretrained(resolve_model_path("minilm"))
    data = read_biencoder(train)  # validated: a malformed record stops here with its number
    usable = [rec for rec in data if rec["positive_ctxs"]]  # the trainer skips the others (counted)
    if not usable:
        sys.exit(f"{train}: none of its {len(data)} records has a positive passage")
    lens, ends, missing = [], [], 0
    for rec in usable:
        p = rec["positive_ctxs"][0]
        n, end = answer_end_token(tok, p.get("title", ""), p["text"], rec["answers"])
        lens.append(n)
        if end is None:
            missing += 1
        else:
            ends.append(end)
    lens, ends = np.array(lens), np.array(ends)
    rows = [{"max_length": L, "positives_longer": float((lens > L).mean()),
             "answer_cut_off": float((ends > L - 1).sum() / len(lens))} for L in LENGTHS]
    res = {"train": train.name, "records": len(data), "no_positive": len(data) - len(usable), "questions": len(lens),
           "answer_not_found": missing, "median_length": float(np.median(lens)), "mean_length": float(lens.mean()),
           "rows": rows}
    out.write_text(json.dumps(res, indent=2) + "\n")
    print("| training max length | positives longer | answers ending past the cut-off |\n|---:|---:|---:|")
    for r in rows:
        print(f"| {r['max_length']} | {100 * r['positives_longer']:.1f} % | {100 * r['answer_cut_off']:.1f} % |")
    return res
