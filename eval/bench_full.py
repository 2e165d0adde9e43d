"""Full-length training on SQuAD with 100k Wikipedia distractors (issue #17, item 1): the DPR
recipe, the shipped recommended recipe (DPM) and its listwise variant, and the DPR recipe at the
recommended recipe's wall time, against zero-shot MiniLM and BM25, dense and hybrid.

    python eval/bench_full.py                    # every system, seeds 0 1; resumable
    python eval/bench_full.py --tiny             # the whole pipeline on a toy slice (minutes), for checking
    python eval/bench_full.py --bf16 --systems recommended-fast dpr-eqwall-fast --seeds 1
                                                 # the recipe with its fast refresh (shipped since 2026-12-02)
                                                 # and the DPR recipe at its wall time

Data (eval/work/full/, git-ignored; ``dpr-xrisk convert squad --test-fraction 0.25 --seed 0``):
- training: every question of the 36 training articles except a held-out dev slice of
  ``--dev-questions`` (256, default_rng(1)) used for the training curves (dev DPR accuracy every
  ``--eval-every`` steps against the training corpus, shown by ``dpr-xrisk report``);
- training corpus (``--corpus``: N of in-batch q, refresh index, BM25 negatives of the DPR recipe
  via a BM25 index of it): the 1,543 training-article paragraphs + a 20,000-passage sample
  (default_rng(0)) of ../shared/data/wikipedia-100k;
- evaluation: the 3,244 held-out questions against all 102,067 passages (2,067 SQuAD paragraphs,
  training positives included, + 100,000 Wikipedia passages): DPR top-1/5/20/100, MRR@10 (own
  paragraph), hub rate (test top-1 = a training positive); hybrids with BM25 over the same corpus
  (``dpr-xrisk fuse``: RRF, and interpolation with alpha 0.5).
Every run records ``"protocol": "full-1"``; runs of another protocol are never reused. A killed
run resumes: training from its last checkpoint, encoding from its last finished chunk.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as common  # noqa: E402
import bench_diagnosis as bd  # noqa: E402
import bench_refresh as br  # noqa: E402
import paired  # noqa: E402
from _common import EVAL, RESULTS, WIKI, WORK, machine  # noqa: E402
from bench_squad_zeroshot import combined_corpus  # noqa: E402
from dpr_xrisk.train.config import toml_text  # noqa: E402

BASE = WORK / "full"
PROTOCOL = "full-1"
NEGATIVES = "dpr-bm25-negatives.jsonl"  # --carried-bm25: the DPR recipe's BM25 pools
METRICS = ["top1", "top5", "top20", "top100", "mrr@10"]
# the DPR recipe's settings (every DPR system) and the recipe's fast refresh as recommended-fast pins it
DPR = {"recipe": None, "loss": "infonce", "negatives": "bm25", "hard_negatives": 1}
# the DPR recipe at the shipped recipe's passage length and dropout (see dpr-eqwall-p256)
DPR_P256 = {**DPR, "passage_max_length": 256, "dropout": 0.0}
# the recipe's passage length until 2026-12-03 (256 since): pinned in the variants of the shipped
# recipe that ran with it, so that their settings (and runs) stay what they trained
P128 = {"passage_max_length": 128}
FAST = {"recipe": "recommended", "refresh_fraction": 0.5, "refresh_max_length": 64, "refresh_quantize": "int8",
        "refresh_questions": "upcoming"}
# name -> (what, train settings: {"recipe": name or None, **TrainConfig keys}); None = no training
SYSTEMS: dict[str, tuple[str, dict | None]] = {
    "zero-shot": ("MiniLM, no training", None),
    "dpr": ("DPR recipe: InfoNCE + 1 BM25 hard negative (BM25 over the training corpus), in-batch negatives", DPR),
    "recommended": ("the shipped recipe before its fast refresh (train --recipe recommended, PINNED below)",
                    {"recipe": "recommended"}),
    "recommended-listwise": ("the recipe with the listwise loss (logistic pairwise loss)",
                             {"recipe": "recommended", "loss": "listwise", "pairwise_loss": "logistic"}),
    # issue #13 on the shipped recipe: the same recipe with the refresh on the fast path that
    # eval/RESULTS-refresh-fast4.md measured (half the corpus re-encoded per refresh, oldest first,
    # at 64 word pieces, by an int8 copy of the current passage tower; only the questions the next
    # window draws re-mined; the first int8 refresh's fp32 guard on)
    "recommended-fast": ("the shipped recipe with the refresh on the fast path (int8, half corpus, 64 word pieces, "
                         "upcoming questions)",
                         FAST),
    # the recipe exactly as `train --recipe recommended` resolves it on the host (refresh_quantize
    # "auto": the tower itself at the training precision under --bf16 on a CPU with AMX, int8 on
    # other CPUs with VNNI, none elsewhere): recommended-fast pins int8, so on an AMX host this is
    # the full-length run of the default that session 19 changed (refresh share and quality)
    "shipped": ("the shipped recipe verbatim (train --recipe recommended, nothing pinned)", {"recipe": "recommended"}),
    # the shipped recipe without dropout from the first step (the runs before 2026-12-03 trained
    # with it only until their first improving dev evaluation, step 100, by a bug; this measures
    # what the recipe gains or loses from dropout over the whole run)
    "shipped-nodropout": ("the shipped recipe with dropout 0 (train --recipe recommended --config: dropout = 0.0)",
                          {"recipe": "recommended", "dropout": 0.0, **P128}),
    # one factor of the shipped recipe at full length (issue #17 item 4: "not measured at full
    # length"), against recommended-fast of the same seed: three hard negatives per question per
    # step instead of one (the pool sampler draws them without replacement from the top 50)
    "recommended-fast-h3": ("recommended-fast with 3 hard negatives per question per step",
                            {**FAST, "hard_negatives": 3}),
    # the pool sampler the refresh benchmark favoured (eval/RESULTS-refresh.md: softmax over the
    # retrieval scores at temperature 0.05, top-5 +0.7 [+0.1, +1.4] over uniform, one seed at 32
    # steps), on the recipe as shipped otherwise (issue #17 item 4: not yet measured at full length)
    # (measured before the recipe took refresh_margin 0.05 and the half-epoch refresh: as then)
    "shipped-softmax": ("the shipped recipe with the softmax pool sampler (pool_sampler = softmax, temperature 0.05), "
                        "no refresh_margin",
                        {"recipe": "recommended", "pool_sampler": "softmax", "refresh_margin": None,
                         "refresh_every_epochs": 0.25, **P128}),
    # the recipe as shipped until 2026-12-03, before it took the positive-aware pool filter
    # (refresh_margin 0.05, issue #17: margins "as sentence-transformers' mine_hard_negatives uses
    # them"; NV-Retriever's TopK-PercPos). Its runs were recorded as `shipped` and the filter's as
    # `shipped-margin05` (now `shipped-r025`, below); the records and run folders moved to these
    # names with that change (the trained settings are the same)
    "shipped-nomargin": ("the shipped recipe without its positive-aware margin (refresh_margin = \"none\"), "
                         "refreshing every quarter epoch (as it ran)",
                         {"recipe": "recommended", "refresh_margin": None, "refresh_every_epochs": 0.25, **P128}),
    # the refresh period (issue #17 item 4; issue #13's refresh share): the recipe refreshed every
    # quarter epoch until 2026-12-03, then every half (the runs of this system were `shipped`, and
    # `shipped-r050`'s are `shipped` now; records and folders moved with the recipe change)
    "shipped-r025": ("the shipped recipe refreshing every quarter epoch (refresh_every_epochs = 0.25)",
                     {"recipe": "recommended", "refresh_every_epochs": 0.25, **P128}),
    # more epochs of the recipe itself (issue #17 item 4, not measured at full length; the DPR
    # recipe lost with more epochs): 3 instead of 2, the recipe as shipped otherwise (its own
    # epochs, whatever --epochs says for the others)
    "shipped-e3": ("the shipped recipe for 3 epochs instead of 2", {"recipe": "recommended", "epochs": 3.0, **P128}),
    # more in-batch negatives at the same compute (issue #17 item 4: batch size not measured at full
    # length; DPR and Tevatron train with bigger batches): 64 questions per step instead of 32, so
    # half the steps for the same 2 epochs, the recipe as shipped otherwise (its own batch size,
    # whatever --batch-size says for the others)
    "shipped-b64": ("the shipped recipe with batch 64 instead of 32 (same epochs, half the steps)",
                    {"recipe": "recommended", "batch_size": 64, **P128}),
    # the temperature between the diagnosis' two (issue #17 item 4: "tau between 0.02 and 0.05" not
    # measured at full length): 0.03 = cosine scale 33, the recipe as shipped otherwise
    "shipped-t03": ("the shipped recipe at tau 0.03 instead of 0.02", {"recipe": "recommended", "tau": 0.03, **P128}),
    # training at the inference length (issue #17 item 0: "training vs inference lengths", not
    # tested in the diagnosis grid): the recipe trained passages at 128 word pieces until
    # 2026-12-03 and searched at MiniLM's 256; 69 % of bench_full's training positives (title +
    # text) are longer than 128 word pieces and 14.5 % of the training questions' answers end past
    # the 128th (eval/stats_lengths.py), so those positives trained without their answer. The
    # recipe trains at 256 since (its runs were `shipped-p256`, now `shipped`); this is the recipe
    # as it was, 128 (its runs were `shipped`).
    "shipped-p128": ("the shipped recipe training passages at 128 word pieces (the recipe until 2026-12-03)",
                     {"recipe": "recommended", **P128}),
    # the refresh's mining length at the recipe's training length (issue #17; not measured since the
    # recipe trains at 256): the refresh encodes passages at 64 word pieces (the fast path of issue
    # #13, measured when training was at 128), so the index it mines from sees the first 64 word
    # pieces of passages the model now trains on at 256 -- for 46.5 % of the training questions the
    # answer ends past the 64th (eval/stats_lengths.py), which also lowers the positive's score that
    # the positive-aware margin compares candidates with. This mines at 128 (14.5 %).
    "shipped-rl128": ("the shipped recipe with the refresh mining at 128 word pieces instead of 64",
                      {"recipe": "recommended", "refresh_max_length": 128}),
    # a rank window on the refresh pools (issue #17's goals: "rank windows and margins as
    # FlagEmbedding's range_for_sampling and sentence-transformers' mine_hard_negatives use them";
    # the margin was measured at full length, a window never): the first 10 retrieved ranks are
    # left out of every pool besides what the positive, answer and margin filters remove, so the
    # pool is ranks 10-49 (FlagEmbedding documents 10-210 as the window to use when the top ranks
    # hold unlabelled positives), the recipe as shipped otherwise
    "shipped-skip10": ("the shipped recipe with the refresh pools' first 10 ranks skipped (refresh_skip_ranks = 10)",
                       {"recipe": "recommended", "refresh_skip_ranks": 10}),
    # the learning rate at full length (issue #17 item 4 lists lr; measured only in the diagnosis,
    # 64 steps, where 1e-5 and 2e-5 tied within +-1 top-1): twice the recipe's 2e-5, same linear
    # warm-up (10 %) and decay, the recipe as shipped otherwise
    "shipped-lr4e5": ("the shipped recipe at lr 4e-5 instead of 2e-5", {"recipe": "recommended", "lr": 4e-5}),
    # and half of it (seed 0 at 4e-5 lost to the recipe: top-5 -0.9 [-1.6, -0.2], RR@10 -0.7
    # [-1.2, -0.2], hub 1.29 % vs 0.92 %): does a smaller step keep more of the starting model?
    "shipped-lr1e5": ("the shipped recipe at lr 1e-5 instead of 2e-5", {"recipe": "recommended", "lr": 1e-5}),
    # a wider positive-aware margin (issue #17's goals: "margins as sentence-transformers'
    # mine_hard_negatives uses them"; the recipe's 0.05 beat no margin at full length, both seeds,
    # top-5 +0.7 [+0.2, +1.2], and no other margin was measured there): candidates scoring above
    # 0.90 x the question's score with its positive are dropped instead of above 0.95, the recipe
    # as shipped otherwise
    "shipped-m10": ("the shipped recipe with refresh_margin 0.10 instead of 0.05", {"recipe": "recommended", "refresh_margin": 0.10}),
    # the importance weights at full length (issue #17 item 3: "the full-length runs report the
    # corrected weights against zeta 0 and against today's weights"; measured only in the
    # diagnosis, 64 steps, and the 32-step refresh benchmark): the recipe without them
    # (zeta_scale 0: plain softmax over the same candidates) ...
    "shipped-z0": ("the shipped recipe without importance weights (zeta_scale 0)", {"recipe": "recommended", "zeta_scale": 0.0}),
    # ... and with the weights as they were before SPEC section 3's update (q_rule = "separate":
    # i's own pool draws at the pool q, every other candidate at the in-batch q n_b/N, even one of
    # i's pool that arrived as another question's positive), the recipe as shipped otherwise
    "shipped-qsep": ("the shipped recipe with the weights before SPEC section 3's update (q_rule separate)",
                     {"recipe": "recommended", "q_rule": "separate"}),
    # three hard negatives per question per step, the recipe as shipped now (256 word pieces,
    # margin 0.05, half-epoch refresh): recommended-fast-h3 (128 word pieces, before the margin)
    # gained top-1 +1.0 [+0.1, +1.8], MRR@10 +0.55 [+0.05, +1.05] over one negative but lost
    # top-5 -0.5 [-1.1, +0.2], with a 57 % longer loop; does the lead hold on the recipe now?
    "shipped-h3": ("the shipped recipe with 3 hard negatives per question per step instead of 1",
                   {"recipe": "recommended", "hard_negatives": 3}),
    "dpr-eqwall": ("DPR recipe with the recommended recipe's train wall time", DPR),
    "dpr-eqwall-fast": ("DPR recipe with recommended-fast's train wall time", DPR),
    # (its recorded runs: 410 steps, sized by the session-25 recipe's loops, given by --eqwall-steps)
    "dpr-eqwall-shipped": ("DPR recipe with shipped-p128's train wall time", DPR),
    # the DPR recipe trained at the recipe's passage length (256 word pieces, DPR's own sequence
    # length) and without dropout (the recipe's dropout = 0.0), at the recipe's wall time: the two
    # then differ only in the loss and where the hard negative comes from. (With MiniLM's dropout
    # 0.1 the DPR recipe's steps at 256 took 8-10 s on this host, median 9.7 s over 15 steps,
    # against 2.5-2.9 s without it: dropout's share grows with the length, its attention part
    # with the square; at 128 it cost 27 % of the loop, eval/RESULTS-full.md "Session 24".)
    # (no DPR run at these settings existed to time its steps: its 500 steps were given by hand)
    "dpr-eqwall-p256": ("DPR recipe at 256 word pieces, dropout 0, with shipped's train wall time", DPR_P256),
    # the same at shipped-h3's wall time (its loop took 1.93x the recipe's); DPR's step time at
    # these settings comes from dpr-eqwall-p256 (EQWALL below): 912 = 500 x 2,789 s / 1,530 s for
    # seed 0 (the undisturbed loops of shipped-h3 and dpr-eqwall-p256)
    "dpr-eqwall-h3": ("DPR recipe at 256 word pieces, dropout 0, with shipped-h3's train wall time", DPR_P256),
}
# The recipe's refresh as these two systems ran it, before the recipe moved to the fast path
# (2026-12-02): every passage re-encoded at 128 word pieces at the training precision, every
# question re-mined. Applied when they train, not part of their settings, so their finished runs
# stay theirs; fraction 1.0 re-encodes every passage (the unset value cannot be written in TOML).
PINNED = {"refresh_fraction": 1.0, "refresh_max_length": 128, "refresh_quantize": "none", "refresh_questions": "all"}
PINNED_SYSTEMS = ("recommended", "recommended-listwise")
# equal-wall-time DPR runs -> (the system whose loop time they match, the DPR run at their own
# settings whose time per step sizes them). None: no such run exists, the steps must be given
# (--eqwall-steps); a DPR step at another length or dropout costs another time (at 256 word
# pieces with dropout 0 about 3.1 s, at 128 with dropout 0.1 about 3.6 s on the AMX host)
EQWALL = {"dpr-eqwall": ("recommended", "dpr"), "dpr-eqwall-fast": ("recommended-fast", "dpr"),
          "dpr-eqwall-shipped": ("shipped-p128", "dpr"), "dpr-eqwall-p256": ("shipped", None),
          "dpr-eqwall-h3": ("shipped-h3", "dpr-eqwall-p256")}


def eqwall_steps(system: str, recs: dict, seed: int, dpr_seed: int) -> tuple[int | None, str]:
    """Steps for the equal-wall-time DPR run ``system``: DPR's steps x the reference's loop time /
    DPR's loop time (both undisturbed), from the recorded reference run of ``seed`` and the DPR
    step-time run of ``dpr_seed`` (EQWALL). (None, why) where they cannot be sized here."""
    ref, timer = EQWALL[system]
    if timer is None:
        return None, (f"not run: no DPR run at {system}'s settings times its steps; give them with "
                      "--eqwall-steps")
    if SYSTEMS[timer][1] != SYSTEMS[system][1]:  # the table's own check: a step at other settings costs other time
        raise ValueError(f"EQWALL: {timer}'s settings are not {system}'s; its step time does not size {system}")
    r, a = recs.get(ref, {}).get(seed), recs.get(timer, {}).get(dpr_seed)
    if not (r and a and "undisturbed_loop_s" in r and "undisturbed_loop_s" in a):
        return None, f"waits for {ref} (seed {seed}) and {timer} (seed {dpr_seed})"
    kinds = [cpu_kind_of(x) for x in (r, a)]
    # two recorded kinds, or one recorded and one not, must agree; two unrecorded ones are the
    # legacy runs of one invocation of one seed (both on one machine)
    if kinds[0] != kinds[1] or (dpr_seed != seed and None in kinds):
        return None, (f"not run: {ref} seed {seed} and {timer} seed {dpr_seed} ran on other (or unrecorded) "
                      "kinds of CPU; their loop times do not compare")
    r_s, a_s = r["undisturbed_loop_s"], a["undisturbed_loop_s"]
    steps = max(1, round(a["steps"] * r_s / a_s))
    return steps, (f"{steps} steps = {a['steps']} x {r_s:.0f} s / {a_s:.0f} s (loop times of {ref} seed {seed} "
                   f"and {timer} seed {dpr_seed}, less what other jobs added)")


def training_files(args, data: dict) -> tuple[list[dict], Path]:
    """train.json (the training split less the dev slice), dev.qa.tsv and the training corpus (the
    training-article paragraphs + a ``--refresh-wiki`` Wikipedia sample) under BASE, from
    bench_refresh's ``prepare_data``; returns (training questions, training corpus path)."""
    train_all = json.loads((br.SQUAD / "biencoder-train.json").read_text(encoding="utf-8"))
    dev_pick = set(np.random.default_rng(1).choice(len(train_all), size=args.dev_questions, replace=False).tolist())
    train = [q for i, q in enumerate(train_all) if i not in dev_pick][: args.train_questions]
    common.write_if_changed(BASE / "train.json", json.dumps(train, indent=1))
    dev = [train_all[i] for i in sorted(dev_pick)]
    common.write_if_changed(BASE / "dev.qa.tsv", "".join(f"{q['question']}\t{json.dumps(q['answers'])}\n" for q in dev))
    # training corpus: training-article paragraphs + a Wikipedia sample
    wiki_lines = WIKI.read_text(encoding="utf-8").splitlines(keepends=True)
    pick = set(np.random.default_rng(0).choice(len(wiki_lines) - 1, size=min(args.refresh_wiki, len(wiki_lines) - 1),
                                               replace=False).tolist())
    tc = Path(data["train_corpus"]).read_text(encoding="utf-8")
    train_corpus = BASE / f"train-corpus-wiki{args.refresh_wiki}.tsv"
    common.write_if_changed(train_corpus, tc + "".join(wiki_lines[1 + i] for i in sorted(pick)))
    return train, train_corpus


def prepare(args) -> dict:
    BASE.mkdir(parents=True, exist_ok=True)
    ns = argparse.Namespace(train_questions=10 ** 9, test_questions=args.test_questions, eval_corpus="all",
                            no_bm25=args.carried_bm25)
    data = br.prepare_data(ns)  # the SQuAD split, its 1,543-paragraph training corpus and test subset
    train, train_corpus = training_files(args, data)
    bm25_train = BASE / f"train-corpus-wiki{args.refresh_wiki}-bm25"
    log = BASE / "prepare.log"
    if not (bm25_train / "meta.json").exists() and not args.carried_bm25:
        br.cli(["bm25", "index", "--corpus", train_corpus, "--out", bm25_train, "--overwrite"], log)
    # evaluation corpus: every SQuAD paragraph + the first --wiki Wikipedia passages
    eval_corpus = combined_corpus(br.SQUAD / "passages.tsv", args.wiki, BASE / f"eval-corpus-wiki{args.wiki}.tsv")
    bm25_run = BASE / f"bm25-wiki{args.wiki}-q{data['test_questions']}.json"
    if args.carried_bm25:  # computed on a machine with Java: see --export-carry
        bm25_run = bm25_run.with_suffix(".trec")
        for p in (bm25_run, bm25_run.with_suffix(".eval.json"), BASE / NEGATIVES):
            if not p.exists():
                sys.exit(f"--carried-bm25: {p} is missing (write it with --export-carry on a machine with Java)")
    else:
        bm25_eval = BASE / f"eval-corpus-wiki{args.wiki}-bm25"
        if not (bm25_eval / "meta.json").exists():
            br.cli(["bm25", "index", "--corpus", eval_corpus, "--out", bm25_eval, "--overwrite"], log)
        if not bm25_run.exists():
            br.cli(["bm25", "search", "--index", bm25_eval, "--queries", data["qa"], "--k", 100, "--out-json", bm25_run], log)
    return {**data, "dev_corpus": data["train_corpus"], "train": str(BASE / "train.json"), "train_questions": len(train), "dev": str(BASE / "dev.qa.tsv"),
            "train_corpus": str(train_corpus), "bm25": str(bm25_train), "eval_corpus": str(eval_corpus),
            "eval_passages": sum(1 for _ in open(eval_corpus, encoding="utf-8")) - 1, "bm25_run": str(bm25_run),
            "train_positives": {p["passage_id"] for q in train for p in q["positive_ctxs"]}}


def export_carry(args, data, out: Path) -> None:
    """The BM25 products a machine without Java (a lent GPU) needs, into ``out``: the BM25 test run
    as TREC with its evaluation, and the DPR recipe's initial pools as a negatives file (the same
    BM25 search, depth and question order that ``negatives = "bm25"`` does at training start; the
    trainer filters both the same way)."""
    from dpr_xrisk.retrieval.bm25 import bm25_search
    from dpr_xrisk.io.questions import Question
    from dpr_xrisk.io.trec import write_run

    out.mkdir(parents=True, exist_ok=True)
    run_json = Path(data["bm25_run"])
    run = {q: [(c["docid"], float(c["score"])) for c in v["contexts"]]
           for q, v in json.loads(run_json.read_text(encoding="utf-8")).items()}
    write_run(out / run_json.with_suffix(".trec").name, run, tag="bm25")
    shutil.copy(run_json.with_suffix(".eval.json"), out / run_json.with_suffix(".eval.json").name)
    train = json.loads(Path(data["train"]).read_text(encoding="utf-8"))
    qs = [Question(str(i), q["question"], tuple(q["answers"])) for i, q in enumerate(train)]
    hits = bm25_search(data["bm25"], qs, k=100, progress=True)
    with open(out / NEGATIVES, "w", encoding="utf-8") as f:
        for i in range(len(train)):
            f.write(json.dumps({"question": i, "negatives": [{"passage_id": d, "score": sc} for d, sc in hits.get(str(i), [])]}) + "\n")
    print(f"wrote {out}: {len(run)} BM25 test questions, {len(train)} training questions' BM25 pools", flush=True)


def own(args, system: str, key: str):
    """A trained system's ``epochs`` or ``batch_size``: its own where its spec sets it (shipped-e3,
    shipped-b64), else the command's (--epochs, --batch-size)."""
    return SYSTEMS[system][1].get(key, getattr(args, key))


def settings_of(args, data, system, seed, steps) -> dict:
    s = {"system": system, "protocol": PROTOCOL, "test_questions": data["test_questions"],
         "eval_passages": data["eval_passages"], "train_questions": data["train_questions"], "tiny": args.tiny,
         "bf16_encode": bool(args.bf16_encode or args.bf16)}
    if args.device != "cpu":  # (absent for CPU runs, so the runs made before this option are reused)
        s["device"] = args.device
    if SYSTEMS[system][1] is not None:
        s.update(seed=seed, spec=SYSTEMS[system][1], steps=steps, epochs=own(args, system, "epochs"),
                 batch_size=own(args, system, "batch_size"),
                 bf16_train=args.bf16)
    if system.startswith("shipped"):  # the recipe file's values: a changed recipe is another run
        from dpr_xrisk import recipes
        s["recipe_values"] = recipes.load("recommended")
        # the trainer's refresh steps for refresh_every_epochs since 2026-12-03: the first step after
        # each quarter epoch (56, 111, ..., 387 of 442), no longer multiples of a rounded 55 (which
        # refreshed at step 440 for the last 2 steps); runs made before are another run
        s["refresh_schedule"] = "epoch-fractions"
        # and the towers stay in training mode after an improving dev evaluation (before 2026-12-03
        # they trained without dropout from the first one on, step 100 here): another run
        s["train_mode_after_eval"] = "kept"
    return s


def evaluate(args, data, d: Path, model, log: Path, rec: dict) -> None:
    emb, idx, run = d / "emb", d / "index", d / "run.json"
    if not (run.exists() and (d / "eval.json").exists()):
        br.cli(["encode", "--model", model, "--corpus", data["eval_corpus"], "--out", emb, "--threads", args.threads,
                "--batch-size", 64 if args.device == "cpu" else 512, "--bf16" if (args.bf16_encode or args.bf16) else "--fp32", "--device", args.device], log)
        br.cli(["index", "--embeddings", emb, "--out", idx, "--threads", args.threads, "--overwrite"], log)
        br.cli(["search", "--index", idx, "--queries", data["qa"], "--k", 100, "--out-json", run,
                "--out-run", d / "run.trec", "--device", args.device], log)
    rec["metrics"] = {"dense": score(data, run, d / "eval-dense.json", log)}
    if not args.carried_bm25:  # else the BM25 JSON run with texts stayed behind: fused later (one_run)
        hybrids(data, d, run, rec)
    zs = BASE / "runs" / "zero-shot" / "run.json"
    # (hub_stats caches the run's first_hit.npy, which paired.py reads where run.json was not kept)
    rec.update(bd.hub_stats(run, data["train_positives"], paired.first_hit(zs) if paired.available(zs) and model != "minilm" else None))
    if not args.tiny:  # the per-question ranks, committed: paired comparisons outlive eval/work
        paired.keep(run)
    shutil.rmtree(emb, ignore_errors=True)
    shutil.rmtree(idx, ignore_errors=True)


def score(data, run: Path, ev: Path, log: Path) -> dict:
    """`dpr-xrisk evaluate` of one run against the test qrels: the METRICS of it."""
    br.cli(["evaluate", "--run", run, "--qrels", data["qrels"], "--k", 1, "--k", 5, "--k", 20, "--k", 100,
            "--qrels-k", 10, "--out", ev], log)
    m = json.loads(ev.read_text())["results"][0]["metrics"]
    return {k: m[k] for k in METRICS}


def hybrids(data, d: Path, dense: Path, rec: dict) -> None:
    """Dense run (DPR JSON, or the TREC run of a --carried-bm25 run) fused with BM25, scored into rec."""
    log = d / "bench.log"
    for fusion in ("rrf", "interpolation"):
        out = d / f"hybrid-{fusion}.json"
        if not out.exists():
            br.cli(["fuse", "--dense", dense, "--sparse", data["bm25_run"], "--queries", data["qa"], "--corpus",
                    data["eval_corpus"], "--fusion", fusion, "--alpha", 0.5, "--k", 100, "--out-json", out], log)
        rec["metrics"][f"hybrid-{fusion}"] = score(data, out, d / f"eval-hybrid-{fusion}.json", log)


def one_run(args, data, system: str, seed: int, steps: int | None) -> dict:
    spec = SYSTEMS[system][1]
    name = system if spec is None else f"{system}-s{seed}"
    d = BASE / "runs" / name
    settings = settings_of(args, data, system, seed, steps)
    finished = common.open_run(d, settings, name)  # a run of another protocol never matches: replaced
    if finished is not None:
        kept = paired.kept_path(d / "run.json")
        if kept is not None and not kept.exists() and paired.available(d / "run.json") and not args.tiny:
            paired.keep(d / "run.json")
        if "hybrid-rrf" not in finished["metrics"] and not args.carried_bm25:  # made with --carried-bm25
            hybrids(data, d, d / "run.trec", finished)
            (d / "bench.json").write_text(json.dumps(finished, indent=2))
        return finished
    log, rec = d / "bench.log", {"settings": settings}
    print(f"[{name}] {SYSTEMS[system][0]}", flush=True)
    model: str | Path = "minilm"
    if spec is not None:
        model = d
        cfg = {**(PINNED if system in PINNED_SYSTEMS else {}), **{k: v for k, v in spec.items() if k != "recipe"}}
        cfg.update(train=[data["train"]], corpus=data["train_corpus"], dev=data["dev"], dev_corpus=data["dev_corpus"],
                   batch_size=own(args, system, "batch_size"),
                   epochs=own(args, system, "epochs"), seed=seed, threads=args.threads, save_every=args.save_every,
                   eval_every=args.eval_every, model="minilm")
        if args.bf16:
            cfg["precision"] = "bf16"
        if args.device != "cpu":
            cfg["device"] = args.device
        if steps:
            cfg["max_steps"] = steps
        if cfg.get("negatives") == "bm25" and args.carried_bm25:  # the same pools, mined on a machine with Java
            cfg.update(negatives="negatives-file", negatives_file=str(BASE / NEGATIVES))
            rec["bm25_negatives"] = "carried negatives file (export_carry)"
        elif cfg.get("negatives") == "bm25":
            cfg["bm25_index"] = data["bm25"]
        if not (d / "dpr_xrisk.json").exists():
            (d / "config.toml").write_text(toml_text(cfg))
            ckpt = d / "checkpoints"
            resume = ["--resume"] if ckpt.is_dir() and any(ckpt.iterdir()) else []
            recipe = ["--recipe", spec["recipe"]] if spec.get("recipe") else []
            t0 = time.perf_counter()
            br.cli(["train", *recipe, "--config", d / "config.toml", *resume, "--out", d], log)
            (d / "train_wall.json").write_text(json.dumps({"train_wall_s": round(time.perf_counter() - t0, 1),
                                                           "resumed": bool(resume), "machine": args.machine}))
        wall = d / "train_wall.json"
        if not wall.exists():  # killed between the end of `train` and this line: the process time is lost
            wall.write_text(json.dumps({"train_wall_s": None, "resumed": True, "machine": args.machine,
                                        "note": "train finished but the bench was killed before timing it; "
                                                "train_loop_s (from train_log) is the run's time"}))
        rec.update(json.loads(wall.read_text()))
        end = [json.loads(x) for x in (d / "train_log.jsonl").read_text().splitlines() if '"event": "end"' in x][-1]
        rec.update(train_loop_s=end["seconds"], refresh_seconds=end["refresh_seconds"], steps=end["steps"],
                   undisturbed_loop_s=round(undisturbed_loop_s(d), 1))
        if not (d / "report" / "report.html").exists():
            br.cli(["report", "--train", f"{system}={d}", "--out", d / "report", "--title", f"{system} seed {seed}"], log)
    evaluate(args, data, d, model, log, rec)
    for p in list(d.glob("*.safetensors")) + [d / "checkpoints", d / "best"]:
        shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
    (d / "bench.json").write_text(json.dumps(rec, indent=2))
    print(f"[{name}] " + " ".join(f"{k} {v:.4f}" for k, v in rec["metrics"]["dense"].items())
          + f" hub {rec['hub_rate']:.4f}", flush=True)
    return rec


def undisturbed_loop_s(d: Path) -> float:
    """A finished run's training-loop wall time less what other jobs on the machine added: each
    step slower than twice the median step, and each refresh slower than 1.5 times the median
    refresh, counts at that bound. (Only the last attempt of a step counts: a resumed run repeats
    the steps after its checkpoint, and its wall time is the checkpoint's plus the new session's.)"""
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


def cpu_kind_of(rec: dict) -> tuple | None:
    """The kind of CPU a run trained on (model, flags, cores: ``_common.cpu_kind``), None where unrecorded."""
    m = rec.get("machine") or {}
    kind = (m.get("cpu_model"), tuple(m.get("cpu_flags") or ()), m.get("cpus"))
    return None if None in (kind[0], m.get("cpu_flags"), kind[2]) else kind


def recorded_runs(res: Path, args, data) -> dict:
    """The runs already in the results JSON that this invocation may keep beside its own: same
    protocol and the same data and settings a rerun would stamp (so a seed-1 invocation keeps
    seed 0's records even where the run folders under eval/work are gone); anything else is
    dropped, never mixed. {system: {seed or -1: record}}."""
    if not res.exists():
        return {}
    kept: dict = {}
    for system, by_seed in json.loads(res.read_text(encoding="utf-8"))["runs"].items():
        if system not in SYSTEMS:
            continue
        for seed, rec in by_seed.items():
            seed = int(seed)
            want = settings_of(args, data, system, seed, rec["settings"].get("steps"))
            if rec["settings"] == want:
                kept.setdefault(system, {})[seed] = rec
            else:
                print(f"[results] dropping the recorded {system} seed {seed}: other settings than this run's",
                      flush=True)
    return kept


def report(args, data, recs: dict) -> str:
    bm25 = json.loads(Path(data["bm25_run"]).with_suffix(".eval.json").read_text())["results"][0]["metrics"]
    lines = ["# Full-length training on SQuAD + 100k Wikipedia distractors (issue #17)", "",
             f"Command: `{args.command}`  ", f"Date: {args.machine['date']}  ",
             f"Machine: {args.machine['cpus']} CPU cores, torch {args.machine['torch']}, {args.threads} threads.", "",
             f"Training: {data['train_questions']:,} questions, {args.epochs:g} epochs, batch {args.batch_size}; "
             f"evaluation: {data['test_questions']:,} held-out questions x {data['eval_passages']:,} passages.", "",
             "train s: the training loop's wall time over all sessions of a resumed run (the trainer's own "
             "clock); undisturbed: less what other jobs on the machine added (`undisturbed_loop_s`).", "",
             "| system | seeds | run | top-1 | top-5 | top-20 | top-100 | MRR@10 | hub rate | steps | train s | undisturbed s |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
             f"| BM25 | — | bm25 | {bm25['top1']:.4f} | {bm25['top5']:.4f} | {bm25['top20']:.4f} | {bm25['top100']:.4f} | "
             f"{bm25['mrr@10']:.4f} | — | — | — | — |"]
    for system, by_seed in recs.items():
        # one row per seed, and their mean where there are several
        groups = [(str(seed if seed >= 0 else "—"), [seed]) for seed in by_seed]
        if len(by_seed) > 1:
            groups.append(("mean " + ",".join(map(str, by_seed)), list(by_seed)))
        for label, seeds in groups:
            rs = [by_seed[x] for x in seeds]
            for run in ("dense", "hybrid-rrf", "hybrid-interpolation"):
                if not all(run in r["metrics"] for r in rs):
                    continue
                cells = " | ".join(f"{np.mean([r['metrics'][run][k] for r in rs]):.4f}" for k in METRICS)
                hub = f"{np.mean([r['hub_rate'] for r in rs]):.4f}" if run == "dense" else "—"
                cost = "— | — | —"
                if "train_loop_s" in rs[0] and run == "dense":
                    calm = [r.get("undisturbed_loop_s") for r in rs]
                    calm = f"{np.mean(calm):.0f}" if None not in calm else "—"
                    cost = f"{np.mean([r['steps'] for r in rs]):.0f} | {np.mean([r['train_loop_s'] for r in rs]):.0f} | {calm}"
                lines.append(f"| {system} | {label} | {run} | {cells} | {hub} | {cost} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=list(SYSTEMS))
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--epochs", type=float, default=2.0)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--wiki", type=int, default=100_000, help="Wikipedia distractors in the evaluation corpus")
    ap.add_argument("--refresh-wiki", type=int, default=20_000, help="Wikipedia sample in the training corpus")
    ap.add_argument("--dev-questions", type=int, default=256)
    ap.add_argument("--train-questions", type=int, default=10 ** 9)
    ap.add_argument("--test-questions", type=int, default=10 ** 9)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--save-every", type=int, default=50)
    ap.add_argument("--eqwall-dpr-seed", type=int, default=None,
                    help="take the DPR recipe's time per step for the dpr-eqwall runs' step counts from this seed's DPR run "
                         "(default: the first of --seeds)")
    ap.add_argument("--eqwall-steps", type=int, default=None,
                    help="steps of the equal-wall-time DPR runs, taken as given instead of sized from loop times "
                         "(e.g. the count that another seed's runs measured on the CPU kind where both ran; the "
                         "record marks the count as given)")
    ap.add_argument("--no-zero-shot", action="store_true",
                    help="skip the zero-shot evaluation (its recorded metrics stay in the table)")
    ap.add_argument("--bf16-encode", action="store_true", help="bfloat16 evaluation encoding (fast on CPUs with AMX)")
    ap.add_argument("--bf16", action="store_true",
                    help="bfloat16 autocast for training, refresh and evaluation encoding (fast on CPUs with AMX)")
    ap.add_argument("--device", default="cpu", help="cpu | cuda | cuda:N (runs on a GPU go to eval/work/full-gpu and RESULTS-full-gpu.md)")
    ap.add_argument("--tiny", action="store_true", help="a toy slice that checks the whole pipeline in minutes")
    ap.add_argument("--carried-bm25", action="store_true",
                    help="no Java here (a lent GPU): read the BM25 products that --export-carry wrote; hybrids are "
                         "fused when the same command runs later on a machine with the BM25 run")
    ap.add_argument("--export-carry", type=Path, default=None, help="write the files --carried-bm25 needs here, then stop")
    args = ap.parse_args()
    if args.eqwall_steps is not None and args.eqwall_steps < 1:  # 0 would read as "not given" below: a full-length run
        ap.error(f"--eqwall-steps {args.eqwall_steps}: give a step count of at least 1")
    args.command = "python eval/bench_full.py " + " ".join(sys.argv[1:])
    args.machine = machine()
    if args.threads >= 2:
        # the tokenizer's own threads, as a user's `dpr-xrisk train` has them (bench_refresh.env()
        # switches them off for its 1-thread runs): the refresh's step-0 tokenisation of the
        # 21.5k-passage corpus took 5.6 s in runs with them off and 3.5 s with them on (standalone)
        br.EXTRA_ENV["TOKENIZERS_PARALLELISM"] = "true"
    args.machine["env"] = {"TOKENIZERS_PARALLELISM": br.env()["TOKENIZERS_PARALLELISM"]}
    global BASE
    if args.device != "cpu" and not args.tiny:  # never mixed with the CPU runs
        BASE = BASE.with_name("full-gpu")
    if args.tiny:  # its own folder: never mixed with the real runs
        BASE = BASE.with_name("full-tiny")
        args.wiki, args.refresh_wiki, args.dev_questions, args.train_questions = 300, 200, 16, 64
        args.test_questions, args.epochs, args.eval_every, args.save_every = 40, 1.0, 1, 1
    data = prepare(args)
    if args.export_carry:
        export_carry(args, data, args.export_carry)
        return
    bm25_eval = Path(data["bm25_run"]).with_suffix(".eval.json")
    if not bm25_eval.exists():
        score(data, data["bm25_run"], bm25_eval, BASE / "prepare.log")
    steps_full = int(np.ceil(args.epochs * data["train_questions"] / args.batch_size))
    gpu = "-gpu" if args.device != "cpu" else ""
    res, rep = (BASE / "bench_full.json", BASE / "RESULTS.md") if args.tiny else \
        (RESULTS / f"bench_full{gpu}.json", EVAL / f"RESULTS-full{gpu}.md")
    recs = recorded_runs(res, args, data)  # other seeds' records (e.g. seed 0's, whose run folders are gone)
    systems = ([] if args.no_zero_shot else ["zero-shot"]) + [s for s in args.systems if s != "zero-shot"]
    for seed in args.seeds:
        for system in systems:
            if SYSTEMS[system][1] is None and seed != args.seeds[0]:
                continue
            steps = None
            if system in EQWALL and args.eqwall_steps is not None:
                steps = args.eqwall_steps
                print(f"[{system}] {steps} steps, as given (--eqwall-steps)", flush=True)
            elif system in EQWALL:  # steps matched to the reference recipe's loop time
                # (the first seed's reference run; DPR's time per step from the DPR run at the same
                # settings of --eqwall-dpr-seed, by default the same seed)
                dpr_seed = args.seeds[0] if args.eqwall_dpr_seed is None else args.eqwall_dpr_seed
                steps, why = eqwall_steps(system, recs, args.seeds[0], dpr_seed)
                print(f"[{system}] {why}", flush=True)
                if steps is None:
                    continue
            rec = one_run(args, data, system, seed, steps)
            if system in EQWALL and args.eqwall_steps is not None:
                rec["eqwall_steps_source"] = "--eqwall-steps (given, not sized from this invocation's loop times)"
            recs.setdefault(system, {})[seed if SYSTEMS[system][1] else -1] = rec
            out = {"command": args.command, "machine": args.machine, "steps_full": steps_full,
                   "data": {k: v for k, v in data.items() if k != "train_positives"}, "runs": recs}
            # (the --tiny check writes its results under its work folder, never into eval/)
            common.replace_text(res, json.dumps(out, indent=2, default=str) + "\n")
            common.write_report(rep, report(args, data, recs))


if __name__ == "__main__":
    main()
