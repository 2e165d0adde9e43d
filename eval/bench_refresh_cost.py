"""What the shipped recipe's refresh costs on this machine (issue #13), without a full-length run:
``train --recipe recommended`` on bench_full's data for one refresh period plus a few steps, then
the full-length schedule's refresh share projected from the measured parts.

    python eval/bench_refresh_cost.py            # ~25 min on an AVX2-only CPU, 2 threads

bench_full's full-length runs measured the refresh share (25-28 %, 34-35 % with the first int8
refresh's fp32 guard) on an AVX-512 CPU with native bfloat16 and VNNI, training in bf16. Where a CPU
has neither (AVX2 only: fp32 training; int8 with 7-bit activations, no faster than fp32), the
step, the refresh and the guard change speed by different factors, so the share is measured again here rather than
carried over. Data: bench_full's training files (7,070 SQuAD training-article questions; refresh
corpus 1,543 training-article paragraphs + a 20,000-passage Wikipedia sample), the recipe's
defaults unchanged (batch 32, refresh every quarter epoch = at steps 56, 111, ..., 387, half the corpus re-encoded
per refresh at 64 word pieces -- by an int8 copy of the passage tower where the CPU has AVX-512
VNNI, else by the tower itself (``refresh_quantize = "auto"``; ``--refresh-quantize int8`` forces
int8) -- upcoming questions re-mined), fp32 training (``--precision`` left at its default), 2
epochs = 442 steps in the full schedule.

Measured: the step-0 refresh (every passage encoded, a whole period's questions mined), the first
partial refresh (step 56), the int8 guard where int8 runs, and the median training step.
Projected: the full run's loop = 442 median steps + the step-0 refresh + 7 partial refreshes, each
with the measured partial refresh's encoding time and the step-0 refresh's mining time per
question times the questions it mines (a period's, fewer for the last) [+ the guard]. A
projection, not a measurement of a full run: bench_full's runs showed the partial refreshes
varying by +-15 %.
The training run restarts from scratch when killed (it is short, and a resumed run would count
the step-0 refresh twice in the wall time).
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as common  # noqa: E402
import bench_full as bf  # noqa: E402
import bench_refresh as br  # noqa: E402
from _common import EVAL, RESULTS, WORK, kind_suffix, machine  # noqa: E402
from dpr_xrisk.train.config import toml_text  # noqa: E402

BASE = WORK / "refresh_cost"
FULL_STEPS_EPOCHS = 2.0  # bench_full's schedule


ENCODE_PARTS = ("tokens_s", "encode_s", "quantize_s", "export_s")  # a refresh's encoding; the rest of "seconds" is mining


def encode_s(r: dict) -> float:
    return sum(float(r.get(k, 0.0)) for k in ENCODE_PARTS)


def mine_s(r: dict) -> float:
    return float(r["seconds"]) - encode_s(r)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--extra-steps", type=int, default=9, help="steps run after the second refresh")
    ap.add_argument("--refresh-wiki", type=int, default=20_000)
    ap.add_argument("--dev-questions", type=int, default=256)
    ap.add_argument("--refresh-quantize", choices=["auto", "none", "int8"], default="auto",
                    help="the recipe's refresh_quantize (auto: int8 with AVX-512 VNNI, else none); another value "
                         "gets its own run and section")
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                    help="training precision (bf16 only where the CPU has native bfloat16); bf16 gets its own run "
                         "and section")
    args = ap.parse_args()
    args.train_questions = 10 ** 9
    ns = argparse.Namespace(train_questions=10 ** 9, test_questions=10 ** 9, eval_corpus="test-articles", no_bm25=True)
    bf.BASE.mkdir(parents=True, exist_ok=True)
    data = br.prepare_data(ns)
    train, corpus = bf.training_files(args, data)
    n_q = len(train)
    from dpr_xrisk import recipes
    from dpr_xrisk.train.trainer import RefreshSchedule

    recipe = recipes.load("recommended")
    full_steps = math.ceil(FULL_STEPS_EPOCHS * n_q / args.batch_size)
    # the trainer's own schedule: the first step after each quarter epoch, none at the end
    schedule = RefreshSchedule(recipe.get("refresh_every"), recipe["refresh_every_epochs"], n_q / args.batch_size,
                               full_steps).planned()
    period = schedule[0]  # the first refresh after step 0 (step 56 of 442)
    steps = period + args.extra_steps
    n_refresh = 1 + len(schedule)  # step 0 and the schedule's
    rq = ("" if args.refresh_quantize == "auto" else f"-{args.refresh_quantize}") + \
        ("" if args.precision == "fp32" else f"-{args.precision}")
    head, kind = kind_suffix()
    d = BASE / f"recommended{rq}{kind or '-vnni'}-s{args.seed}"
    cfg = {"train": [str(bf.BASE / "train.json")], "corpus": str(corpus), "batch_size": args.batch_size,
           "epochs": FULL_STEPS_EPOCHS, "max_steps": steps, "seed": args.seed, "threads": args.threads,
           "model": "minilm", "save_every": 0, "refresh_quantize": args.refresh_quantize}
    if args.precision != "fp32":
        cfg["precision"] = args.precision
    end = d / "train_log.jsonl"
    finished = end.exists() and '"event": "end"' in end.read_text()
    if finished and json.loads((d / "config.toml.json").read_text()) != cfg:
        finished = False
    if not finished:
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        (d / "config.toml").write_text(toml_text(cfg))
        (d / "config.toml.json").write_text(json.dumps(cfg))
        print(f"[{d.name}] {steps} steps of train --recipe recommended (refresh every {period} steps)", flush=True)
        t0 = time.perf_counter()
        br.cli(["train", "--recipe", "recommended", "--config", d / "config.toml", "--out", d], d / "bench.log")
        (d / "train_wall.json").write_text(json.dumps({"train_wall_s": round(time.perf_counter() - t0, 1)}))
    log = [json.loads(x) for x in (d / "train_log.jsonl").read_text().splitlines()]
    refreshes = {r["step"]: r for r in map(json.loads, (d / "refresh_log.jsonl").read_text().splitlines())}
    step_s = [r["seconds"] for r in log if "loss" in r and "event" not in r]
    end_rec = [r for r in log if r.get("event") == "end"][-1]
    first, second = refreshes[0], refreshes[period]
    guard = float(first.get("int8_check_seconds", 0.0))
    med = float(np.median(step_s))
    # A refresh re-mines the questions of the steps until the next one (refresh_questions =
    # "upcoming"), and this short run stops 9 steps after the second refresh, so that refresh mined
    # 9 steps' questions where a full run's mines a whole period's. Its encoding part is what a
    # full run's costs; its mining part is scaled from the step-0 refresh's rate per mined
    # question (a whole period's questions, the same corpus).
    rate = mine_s(first) / first["mined_questions"]
    later = [encode_s(second) + rate * (nxt - s) * args.batch_size for s, nxt in zip(schedule, schedule[1:] + [full_steps])]
    refresh_total = first["seconds"] + sum(later)
    loop = full_steps * med + refresh_total
    res = {"command": "python eval/bench_refresh_cost.py " + " ".join(sys.argv[1:]), "machine": machine(),
           "threads": args.threads, "seed": args.seed, "train_questions": n_q, "corpus_passages": sum(1 for _ in open(corpus)) - 1,
           "steps_run": steps, "period": period, "refresh_steps": [0] + schedule, "full_steps": full_steps, "full_refreshes": n_refresh,
           "median_step_s": round(med, 3), "steps_logged": len(step_s),
           "measured_loop_s": end_rec["seconds"], "measured_refresh_s": end_rec["refresh_seconds"],
           "first_refresh": first, "partial_refresh": second, "guard_s": guard,
           "mining_s_per_question": round(rate, 5), "projected_later_refreshes_s": [round(x, 1) for x in later],
           "projected": {"loop_s": round(loop, 1), "refresh_s": round(refresh_total, 1),
                         "share_without_guard": round(refresh_total / loop, 4),
                         "share_with_guard": round((refresh_total + guard) / (loop + guard), 4),
                         "training_steps_s": round(full_steps * med, 1)}}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"bench_refresh_cost{rq}{kind}.json").write_text(json.dumps(res, indent=2) + "\n")
    resolved = json.loads((d / "config.json").read_text())["refresh_quantize"]
    title = ("## The shipped recipe's refresh cost (issue #13)" + head
             + ("" if args.refresh_quantize == "auto" else f", refresh_quantize {args.refresh_quantize}")
             + ("" if args.precision == "fp32" else f", {args.precision} training"))
    m, p = res["machine"], res["projected"]
    changed = [k for k, v in (("refresh_quantize", args.refresh_quantize != "auto"), ("precision", args.precision != "fp32")) if v]

    def parts(r: dict) -> str:
        keys = ("tokens_s", "quantize_s", "encode_s", "seconds")
        return ", ".join(f"{k} {r[k]}" for k in keys if k in r) + (f", passages re-encoded {r['reencoded']:,}" if "reencoded" in r else "")

    section = (
        f"{title}\n\nCommand: `{res['command'].strip()}`  \nDate: {m['date']}; CPU {m.get('cpu_model', '?')} "
        f"({', '.join(m.get('cpu_flags', []))}); {args.threads} threads; {args.precision} training; refresh_quantize {args.refresh_quantize} "
        f"(resolved: {resolved}); seed {args.seed}.\n\n"
        f"`train --recipe recommended` ({'defaults but ' + ', '.join(changed) if changed else 'defaults unchanged'}) on bench_full's {n_q:,} training questions and "
        f"{res['corpus_passages']:,}-passage refresh corpus, {steps} steps (refresh at 0 and {period}):\n\n"
        "| part | measured |\n|---|---:|\n"
        f"| median training step (s, {len(step_s)} steps) | {med:.2f} |\n"
        f"| step-0 refresh, every passage (s) | {first['seconds']:.1f} |\n"
        f"| refresh at step {period}, half the corpus (s) | {second['seconds']:.1f} |\n"
        + (f"| int8 guard at step 0 (s; pool overlap with fp32 {first.get('int8_pool_overlap_vs_fp32', '—')}, "
           f"{first.get('activation_bits', '?')}-bit activations) | {guard:.1f} |\n" if resolved == "int8" else "")
        + f"| loop of this run (s; refresh share as the trainer counts it) | {end_rec['seconds']:.1f} ({end_rec['refresh_share']:.1%}) |\n\n"
        f"Step-0 refresh parts: {parts(first)}. Step-{period} refresh parts: {parts(second)}.\n\n"
        f"Projected full schedule ({full_steps} steps, {n_refresh} refreshes: step 0 as measured, then {n_refresh - 1} with step "
        f"{period}'s encoding ({encode_s(second):.1f} s) and the step-0 refresh's mining rate ({rate * 1000:.1f} ms per question) "
        f"times the questions of the steps until the next refresh, {min(later):.1f}-{max(later):.1f} s each): "
        f"loop {p['loop_s']:,.0f} s, of which training steps {p['training_steps_s']:,.0f} s and refreshes {p['refresh_s']:,.0f} s; "
        + (f"refresh share **{p['share_without_guard']:.1%}** without the guard, **{p['share_with_guard']:.1%}** with it "
           if resolved == "int8" else f"refresh share **{p['share_without_guard']:.1%}** (a refresh at the training precision: no int8 guard) ")
        + "(issue #13's goal: at most 15 %).\n")
    print(section)
    common.replace_section(EVAL / "RESULTS.md", title, section)


if __name__ == "__main__":
    main()
