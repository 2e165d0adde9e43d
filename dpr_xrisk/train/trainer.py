"""The training loop: plain, readable PyTorch (no HF Trainer).

One optimiser step = one batch of ``batch_size`` questions from one training set (chosen with
probability ∝ λ_t, so in-batch negatives share a corpus), split into ``grad_accum``
micro-batches. Every random choice of step t (data set, positives, negatives, dropout) is seeded
from (seed, t), and the data order of each set and epoch from (seed, set, epoch), so a resumed
run repeats exactly what an uninterrupted run would have done.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch

from dpr_xrisk.errors import InputError
from dpr_xrisk.train.config import TrainConfig, incompatible_keys


class DataOrder:
    """Per-set shuffled order with drop-last epochs; the position is plain JSON state."""

    def __init__(self, sizes: list[int], batch_size: int, seed: int, state: dict | None = None):
        self.sizes, self.batch_size, self.seed = sizes, batch_size, seed
        self.epoch = state["epoch"] if state else [0] * len(sizes)
        self.pos = state["pos"] if state else [0] * len(sizes)

    def next(self, t: int) -> list[int]:
        if self.pos[t] + self.batch_size > self.sizes[t]:
            self.epoch[t] += 1
            self.pos[t] = 0
        perm = np.random.default_rng([self.seed, t, self.epoch[t]]).permutation(self.sizes[t])
        rows = perm[self.pos[t] : self.pos[t] + self.batch_size].tolist()
        self.pos[t] += self.batch_size
        return rows

    def state(self) -> dict:
        return {"epoch": list(self.epoch), "pos": list(self.pos)}


def build_loss(cfg: TrainConfig, tau: float, sets=None, steps_per_epoch: int = 1, total_steps: int = 1):
    """The loss module; with ``estimator = 'fcco'`` wrapped in the moving-average estimator,
    whose state has one row per training question of all sets (a set's rows start at its offset)."""
    from dpr_xrisk.losses import FCCOLoss, make_loss

    if cfg.loss == "dpm":
        base = make_loss("dpm", tau=tau, zeta_scale=cfg.zeta_scale, symmetric=cfg.symmetric,
                         zeta_normalize=cfg.zeta_normalize)
    elif cfg.loss == "listwise":
        if cfg.symmetric:
            raise InputError("symmetric applies to dpm and infonce only")
        base = make_loss("listwise", tau=tau, zeta_scale=cfg.zeta_scale, pairwise=cfg.pairwise_loss, margin=cfg.margin,
                         zeta_normalize=cfg.zeta_normalize)
    else:
        base = make_loss("infonce", tau=tau, symmetric=cfg.symmetric)
    if cfg.estimator == "minibatch":
        return base
    warmup = steps_per_epoch if cfg.gamma_warmup_steps < 0 else cfg.gamma_warmup_steps
    decay = cfg.gamma_decay_steps or max(1, total_steps - warmup)
    return FCCOLoss(base, num_questions=sum(len(s) for s in sets),
                    max_positives=max(len(q.positives) for s in sets for q in s.questions), gamma=cfg.gamma,
                    gamma_schedule=cfg.gamma_schedule, gamma_warmup_steps=warmup,
                    gamma_decay_steps=decay if cfg.gamma_schedule == "cosine" else 0)


def set_dropout(encoder, p: float) -> int:
    """Every dropout of the towers (hidden states and attention probabilities) at probability
    ``p`` during training (the model's saved config keeps its own value; inference has none).
    Returns the number of dropout modules set."""
    n = 0
    for tower in dict.fromkeys((encoder.query_model, encoder.passage_model)):
        for m in tower.modules():
            if isinstance(m, torch.nn.Dropout):
                m.p = float(p)
                n += 1
    return n


def linear_schedule(optimizer, warmup: int, total: int):
    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return max(0.0, (total - step) / max(1, total - warmup))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


class JsonlLog:
    def __init__(self, path: Path, enabled: bool = True):
        self.path, self.enabled = path, enabled

    def write(self, record: dict) -> None:
        if not self.enabled:
            return
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")


def trim_log(path: Path, step: int) -> None:
    """On resume from the checkpoint of ``step``: drop the records of the killed session that the
    resumed one writes again (steps, evaluations and probes after ``step``; refreshes at or after
    it, since the refresh of step S runs after the checkpoint of S), so every step is logged once."""
    if not path.exists():
        return
    from dpr_xrisk.io.common import atomic_write

    keep = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut by the kill
        s = rec.get("step", 0)
        if s > step or (rec.get("event") == "refresh" and s >= step and step > 0):
            continue
        keep.append(line + "\n")
    with atomic_write(path) as f:
        f.write("".join(keep))


def prepare(cfg: TrainConfig):
    """Load model, data and negative pools; every bad input fails here, before step 1."""
    from dpr_xrisk.retrieval.encoder import DualEncoder
    from dpr_xrisk.train import data as D

    if not cfg.train:
        raise InputError("no training file (set `train` in the config or --train)")
    encoder = DualEncoder.load(cfg.model, shared=cfg.shared or None, pooling=cfg.pooling, normalize=cfg.normalize,
                               query_max_length=cfg.query_max_length, passage_max_length=cfg.passage_max_length)
    if cfg.dropout is not None:
        set_dropout(encoder, cfg.dropout)
    store = D.PassageStore()
    sets = [D.load_training_set(p, store, cfg.no_positive) for p in cfg.train]
    for s in sets:
        if len(s) < cfg.batch_size:
            raise InputError(f"batch_size {cfg.batch_size} is larger than the {len(s)} usable questions", s.path)
    if cfg.corpus:
        from dpr_xrisk.io.passages import read_passages

        corpus_ids = {p.id for p in read_passages(cfg.corpus)}
        D.check_positives_in_corpus(sets, corpus_ids)
    if cfg.refresh_every is not None or cfg.refresh_every_epochs is not None or cfg.negatives == "model":
        from dpr_xrisk.train.refresh import validate_refresh

        validate_refresh(encoder, cfg.corpus, cfg.refresh_k, cfg.refresh_factory)
        if cfg.refresh_backend == "onnx":
            from dpr_xrisk.runtime.onnx_backend import require_onnxruntime

            require_onnxruntime()
    for s in sets:
        if cfg.negatives == "file":
            D.pools_from_file_negatives(s, store, cfg.filter_answers)
        elif cfg.negatives == "bm25":
            D.pools_from_bm25(s, store, cfg.bm25_index, cfg.corpus, cfg.bm25_depth, cfg.filter_answers)
        elif cfg.negatives == "negatives-file":
            D.pools_from_negatives_file(s, store, cfg.negatives_file, cfg.corpus, cfg.filter_answers)
    return encoder, store, sets


def refresh(encoder, cfg: TrainConfig, sets, store, step: int, out: Path, log, ddp=None, state=None,
            progress: bool = False, only: list[list[int]] | None = None) -> float:
    """Re-mine every set's pools with the current encoder; swap them in at once; log; seconds.
    Under torchrun, rank 0 mines and broadcasts the pools (and their texts) to the others.
    With ``refresh_fraction`` only that share of the corpus is re-encoded (oldest first); the
    embedding version in use and the cursor are kept in ``state`` (hence in checkpoints).
    ``only``: per set, the question rows to re-mine (:func:`upcoming_rows`); the others keep their pools."""
    from dpr_xrisk.runtime.device import encode_batch_size
    from dpr_xrisk.retrieval.tokens import CorpusTokens
    from dpr_xrisk.train.refresh import partial_reencode, refresh_pools, with_passage_length

    state = state if state is not None else {}
    result = None
    if ddp is None or ddp.main:
        # bf16 autocast is for the torch tower only: an int8 or ONNX copy runs its own kernels (and
        # int8 Linears refuse bf16 inputs), whatever the training precision
        enc_bf16 = cfg.bf16 and cfg.refresh_backend == "torch" and cfg.refresh_quantize == "none"
        # the measured encode batch of the path (CPU fp32 16, bf16 64, GPU 128), not a fixed 128
        bs = encode_batch_size(encoder.device, enc_bf16)
        emb, extra = None, {"encode_batch_size": bs}
        if cfg.refresh_max_length is not None:
            encoder = with_passage_length(encoder, cfg.refresh_max_length)
            extra["max_length"] = cfg.refresh_max_length
        fp32_encoder = encoder
        t0 = time.perf_counter()
        # the corpus's word pieces, tokenised at the run's first refresh and reused by every later one
        tokens = CorpusTokens.load_or_build(encoder, cfg.corpus, out / "refresh_tokens", progress=progress)
        extra["tokens_s"] = round(time.perf_counter() - t0, 3)
        if cfg.refresh_backend == "onnx":
            import shutil

            from dpr_xrisk.runtime.onnx_backend import onnx_encoder

            shutil.rmtree(out / "refresh_onnx", ignore_errors=True)  # the towers have changed since the last one
            encoder, export_s = onnx_encoder(encoder, cfg.refresh_quantize, out / "refresh_onnx")
            extra["export_s"] = round(export_s, 3)
        elif enc_bf16 and encoder.device.type == "cpu":
            from dpr_xrisk.runtime.quantize import bf16_towers

            t0 = time.perf_counter()
            # a copy with bfloat16 weights: on a CPU 1.2x faster than autocast (quantize.bf16_towers)
            encoder = bf16_towers(encoder)
            extra["cast_s"] = round(time.perf_counter() - t0, 3)
            extra["bf16_weights"] = True
        elif cfg.refresh_quantize != "none":
            from dpr_xrisk.runtime.quantize import REFRESH_CALIBRATION, quantized

            t0 = time.perf_counter()
            # an int8 CPU copy of the current towers, calibrated on the refresh's smaller batch
            encoder = quantized(encoder, cfg.refresh_quantize, calibration=REFRESH_CALIBRATION)
            extra["quantize_s"] = round(time.perf_counter() - t0, 3)
            extra["activation_bits"] = encoder.activation_bits
            extra["smoothed_channels"] = encoder.smoothed_channels
            extra["int8_engine"] = encoder.int8_engine
            extra["calibration"] = list(REFRESH_CALIBRATION)
        if cfg.refresh_fraction is not None:
            t0 = time.perf_counter()
            cache = out / "refresh_cache"
            emb, cursor, part = partial_reencode(encoder, cfg.corpus, cache, step, state.get("refresh_cache_step"),
                                                 state.get("refresh_cursor", 0), cfg.refresh_fraction, bf16=enc_bf16,
                                                 progress=progress, tokens=tokens, batch_size=bs)
            extra.update(part, encode_s=round(time.perf_counter() - t0, 3), cursor=cursor)
        result = refresh_pools(encoder, sets, store, cfg.corpus, k=cfg.refresh_k, factory=cfg.refresh_factory,
                               skip_ranks=cfg.refresh_skip_ranks, margin=cfg.refresh_margin,
                               filter_answers=cfg.filter_answers, bf16=enc_bf16, work_dir=out, embeddings=emb,
                               progress=progress, tokens=tokens, batch_size=bs, only=only)
        result.stats["seconds"] = round(result.stats["seconds"] + extra.get("encode_s", 0) + extra.get("quantize_s", 0)
                                        + extra.get("cast_s", 0) + extra.get("export_s", 0) + extra["tokens_s"], 3)
        result.stats.update(extra)
        if "encode_s" in extra:
            prune_refresh_cache(out, step)
        if cfg.refresh_quantize != "none" and cfg.refresh_guard and not state.get("quantize_checked"):
            result.stats.update(quantize_check(fp32_encoder, cfg, sets, store, result, tokens, batch_size=bs))
            state["quantize_checked"] = True
    if ddp is not None and ddp.active:
        result = ddp.broadcast(result)
        for key, (title, text) in result.texts.items():
            store.add_text(key, title, text)
    for s, pools in zip(sets, result.pools):
        if only is not None:  # questions not mined keep their pools (no step before the next refresh draws them)
            old = s.pools or [[] for _ in pools]
            pools = [p if p is not None else o for p, o in zip(pools, old)]
        s.pools, s.pool_source = pools, f"refresh@{step}"
    if "cursor" in result.stats:  # a partial refresh: version `step` of the cache is now in use
        state.update(refresh_cache_step=step, refresh_cursor=result.stats["cursor"])
    record = {"event": "refresh", "step": step, **result.stats}
    if ddp is None or ddp.main:
        JsonlLog(out / "refresh_log.jsonl").write(record)
    log.write(record)
    return result.stats["seconds"]


def quantize_check(fp32_encoder, cfg: TrainConfig, sets, store, result, tokens=None, batch_size: int = 128) -> dict:
    """The first int8 refresh's quality guard: the same mining with the fp32 towers, compared on
    256 training questions (pool overlap; share of mined negatives that differ)."""
    import numpy as np

    from dpr_xrisk.runtime.quantize import check_rows, pool_overlap
    from dpr_xrisk.train.refresh import refresh_pools

    only = check_rows(result.pools, np.random.default_rng([cfg.seed, 11]))  # fp32 mining of the compared questions
    ref = refresh_pools(fp32_encoder, sets, store, cfg.corpus, k=cfg.refresh_k, factory=cfg.refresh_factory,
                        skip_ranks=cfg.refresh_skip_ranks, margin=cfg.refresh_margin, filter_answers=cfg.filter_answers,
                        bf16=False, tokens=tokens, batch_size=batch_size,
                        only=only)  # fp32, as the guard says, whatever the training precision
    n, overlap = pool_overlap(ref.pools, result.pools)
    return {"int8_check_questions": n, "int8_pool_overlap_vs_fp32": round(overlap, 4),
            "int8_negatives_differing_share": round(1 - overlap, 4), "int8_check_seconds": ref.stats["seconds"]}


def prune_refresh_cache(out: Path, current: int | None) -> None:
    """Keep the embedding versions in use now or referred to by a checkpoint on disk."""
    from dpr_xrisk.train.refresh import prune_cache

    keep = {current} | {json.loads(p.read_text()).get("refresh_cache_step")
                        for p in (out / "checkpoints").glob("step-*/state.json")}
    prune_cache(out / "refresh_cache", keep)


def probe_estimator(encoder, loss_fn, cfg: TrainConfig, sets, store, offsets, probe, passages) -> dict:
    """docs/method.md §4 diagnostic on a fixed probe set of training questions: the estimator's τ·v of
    (question, first positive) against the exact DPM loss over the whole corpus, by brute force:
    τ·log Σ_{j ∈ {k} ∪ negatives} exp((s_ij − s_ik)/τ) (no sampling, q ≡ 1), where the negatives
    are what training may sample: the corpus minus the question's positives (by id and by
    normalised text) and, with ``filter_answers``, minus the passages containing an answer."""
    import torch as T

    from dpr_xrisk.evaluation.answers import has_answer
    from dpr_xrisk.train.data import text_key

    was_training = encoder.training
    encoder.eval()
    keys = list(passages)
    col = {k: j for j, k in enumerate(keys)}
    p = encoder.encode_passages([passages[k][0] for k in keys], [passages[k][1] for k in keys], bf16=cfg.bf16)
    qs = [(t, r, sets[t].questions[r]) for t, r in probe]
    qv = encoder.encode_queries([q.text for _, _, q in qs], bf16=cfg.bf16)
    encoder.train(was_training)
    scores = T.from_numpy(qv @ p.T).double()  # (P, Nc)
    tkeys = [text_key(*passages[x]) for x in keys]
    tau = loss_fn.tau
    exact, est = [], []
    for n, (t, r, q) in enumerate(qs):
        k = q.positives[0]
        if k not in col:
            continue
        pos_tk = {text_key(*passages[x]) for x in q.positives if x in passages}
        neg = T.tensor([not (x in q.positives or tk in pos_tk
                             or (cfg.filter_answers and q.answers and has_answer(passages[x][1], q.answers)))
                        for x, tk in zip(keys, tkeys)], dtype=T.bool)
        d = (scores[n] - scores[n, col[k]]) / tau  # (Nc,)
        exact.append(float(tau * T.logsumexp(T.cat([d[neg], T.zeros(1, dtype=d.dtype)]), 0)))
        g = offsets[t] + r
        if bool(loss_fn.seen[g, 0]):
            est.append((len(exact) - 1, float(tau * loss_fn.v[g, 0])))
    out = {"probe_exact_loss": float(np.mean(exact)) if exact else None, "probe_seen": len(est)}
    if est:
        out["probe_tau_v"] = float(np.mean([v for _, v in est]))
        out["probe_gap"] = float(np.mean([v - exact[i] for i, v in est]))
        out["probe_abs_gap"] = float(np.mean([abs(v - exact[i]) for i, v in est]))
    return out


def evaluate_dev(encoder, cfg: TrainConfig, dev_questions, dev_corpus) -> dict:
    """DPR top-k accuracy of the current encoder on the dev questions (exact search)."""
    from dpr_xrisk.evaluation.answers import has_answer
    from dpr_xrisk.evaluation.metrics import dpr_topk_accuracy

    was_training = encoder.training
    encoder.eval()
    ids = list(dev_corpus)
    p = encoder.encode_passages([dev_corpus[i][0] for i in ids], [dev_corpus[i][1] for i in ids], bf16=cfg.bf16)
    q = encoder.encode_queries([x.text for x in dev_questions], bf16=cfg.bf16)
    k = min(max(cfg.eval_ks), len(ids))
    top = np.argsort(-(q @ p.T), axis=1)[:, :k]  # (nq, k)
    hits = {x.qid: [has_answer(dev_corpus[ids[j]][1], x.answers) for j in top[n]] for n, x in enumerate(dev_questions)}
    encoder.train(was_training)
    return {f"top{k_}": v for k_, v in dpr_topk_accuracy(hits, cfg.eval_ks).items()}


def refresh_quantize_on(cfg: TrainConfig, device: torch.device, vnni: bool | None = None,
                        amx: bool | None = None) -> str:
    """``cfg.refresh_quantize`` for a run on ``device`` (``cfg.bf16`` already resolved from the
    precision): ``auto`` is int8 on a CPU with AVX-512 VNNI (``vnni``; None = this machine's),
    except where a torch refresh (``refresh_backend``) follows bfloat16 training on a CPU with
    AMX (``amx``), and none elsewhere; an explicit int8 torch refresh on a GPU is refused (its
    int8 kernels are CPU-only).
    Measured (eval/RESULTS.md, eval/RESULTS-refresh-amx.md): without VNNI int8 encoding is no
    faster than fp32 (AVX2-only CPU: 17.4 against 16.6 passages/s, top-20 overlap with fp32 0.93;
    with VNNI 2.1x faster, overlap 0.96), so the refresh would pay int8's rounding and the fp32
    guard for nothing; with AMX a bf16 refresh took 3.6-4.1 s against int8's 6.5-7.3 s (772
    passages at 64 word pieces, 1 thread; encoding alone 2.8-3.3 s against 5.0-5.5 s) and needs
    neither the int8 copy nor the guard. (An ONNX refresh runs in fp32 whatever the training
    precision, so there AMX changes nothing.)"""
    on_cpu = device.type == "cpu"
    if cfg.refresh_quantize == "auto":
        from dpr_xrisk.runtime.device import cpu_has_amx, cpu_has_vnni

        if not on_cpu or (cfg.bf16 and cfg.refresh_backend == "torch" and (cpu_has_amx() if amx is None else amx)):
            return "none"  # the refresh runs at the training precision
        return "int8" if (cpu_has_vnni() if vnni is None else vnni) else "none"
    if cfg.refresh_quantize == "int8" and cfg.refresh_backend == "torch" and not on_cpu:
        raise InputError(f"refresh_quantize = 'int8' runs on the CPU only, and this run trains on {device}; "
                         "use 'auto' (int8 on a CPU with VNNI, none on a GPU) or 'none'")
    return cfg.refresh_quantize


def train(cfg: TrainConfig, out_dir: str | Path, resume: bool = False, progress: bool = True, on_step=None) -> dict:
    """Train and return a summary; ``on_step(step)`` is a test hook called after each step."""
    from tqdm import tqdm

    from dpr_xrisk.train.batch import collate
    from dpr_xrisk.train.checkpoint import list_checkpoints, load_checkpoint, prune_checkpoints, save_checkpoint
    from dpr_xrisk.train.distributed import Dist

    import dataclasses

    from dpr_xrisk.runtime.device import resolve_device, resolve_precision, use_tf32

    out = Path(out_dir)
    device = resolve_device(cfg.device, "device")
    ddp = Dist.from_env(device.type)
    precision = resolve_precision(cfg.precision, device, cfg.bf16, warn=ddp.main)
    # the encoders of refresh and dev evaluation follow the training precision's bfloat16 switch
    cfg = dataclasses.replace(cfg, bf16=precision == "bf16")
    asked_quantize = cfg.refresh_quantize
    cfg = dataclasses.replace(cfg, refresh_quantize=refresh_quantize_on(cfg, device))
    use_tf32(device)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    progress = progress and ddp.main
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    ckpts = list_checkpoints(out)
    if ckpts and not resume:
        raise InputError("output folder holds checkpoints; use --resume to continue, or a new --out", out)
    if resume and ckpts:
        saved = json.loads((ckpts[-1] / "config.json").read_text())
        bad = incompatible_keys(saved, cfg)
        if bad:
            raise InputError(f"checkpoint {ckpts[-1].name} was made with another config (differs in {', '.join(bad)})", out)
        first = saved.get("refresh_quantize", "auto")
        if asked_quantize == "auto" and first not in ("auto", cfg.refresh_quantize):
            # a resumed run keeps the refresh path its first session resolved, whatever this machine
            # would pick (another CPU kind, or a later default): one run, one refresh path
            if ddp.main:
                print(f"note: refresh_quantize = 'auto' resolved to {first!r} when this run started; the resumed run "
                      f"keeps it (this machine would pick {cfg.refresh_quantize!r})", file=sys.stderr)
            cfg = dataclasses.replace(cfg, refresh_quantize=refresh_quantize_on(
                dataclasses.replace(cfg, refresh_quantize=first), device))
    if cfg.refresh_quantize == "int8" and ddp.main:
        from dpr_xrisk.runtime.device import warn_int8_without_vnni

        warn_int8_without_vnni()  # an explicit int8 refresh on a CPU where it buys no speed
    torch.manual_seed(cfg.seed)
    encoder, store, sets = prepare(cfg)
    encoder.to(device)
    tau = cfg.resolved_tau(encoder.settings.normalize)
    dev_questions = dev_corpus = None
    if cfg.dev:
        from dpr_xrisk.io.questions import read_questions
        from dpr_xrisk.retrieval.search import load_passage_texts

        dev_questions = read_questions(cfg.dev)
        dev_src = cfg.dev_corpus or cfg.corpus
        dev_corpus = load_passage_texts(dev_src) if dev_src else dict(store.texts)

    weights = np.array(cfg.train_weights or [1.0] * len(sets), dtype=float)
    weights = weights / weights.sum()
    total_q = sum(len(s) for s in sets)
    steps = cfg.max_steps or max(1, math.ceil(cfg.epochs * total_q / cfg.batch_size))
    warmup = cfg.warmup_steps or int(cfg.warmup_ratio * steps)
    steps_per_epoch = max(1, total_q // cfg.batch_size)
    loss_fn = build_loss(cfg, tau, sets, steps_per_epoch, steps).to(device)
    scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16")  # fp16 only (CUDA)
    refresh_at = RefreshSchedule(cfg.refresh_every, cfg.refresh_every_epochs, total_q / cfg.batch_size, steps)  # docs/method.md §5 "every R steps and/or every E epochs"
    offsets = np.cumsum([0] + [len(s) for s in sets])[:-1].tolist()  # estimator rows of each set
    params = list(dict.fromkeys(encoder.parameters()))  # a shared tower's parameters once
    optimizer = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay, eps=cfg.adam_eps)
    scheduler = linear_schedule(optimizer, warmup, steps)
    if cfg.corpus_size:
        corpus_size = cfg.corpus_size
    elif cfg.corpus:
        from dpr_xrisk.io.passages import count_passages

        corpus_size = count_passages(cfg.corpus)  # N of in-batch q = n_b / N: the corpus, not what training saw
    else:
        corpus_size = None  # docs/method.md §3: N is never guessed from the passages the training files mention

    state = {"step": 0, "order": None, "best": None, "best_step": None, "pools": None, "refresh_seconds": 0.0}
    if resume and ckpts:
        state = load_checkpoint(ckpts[-1], encoder, optimizer, scheduler, loss_fn)
        if state.get("grad_scaler") and scaler.is_enabled():
            scaler.load_state_dict(state["grad_scaler"])
        if state.get("pools") is not None:  # the pools in use when the checkpoint was written
            restore_pools(sets, store, state["pools"], cfg.corpus)
    order = DataOrder([len(s) for s in sets], cfg.batch_size, cfg.seed, state["order"])
    out.mkdir(parents=True, exist_ok=True)
    if ddp.main:
        (out / "config.json").write_text(cfg.to_json())
        if resume and ckpts:
            for name in ("train_log.jsonl", "refresh_log.jsonl"):
                trim_log(out / name, state["step"])
    log = JsonlLog(out / "train_log.jsonl", enabled=ddp.main)
    log.write({"event": "start", "step": state["step"], "steps": steps, "tau": tau, "questions": total_q,
               "world_size": ddp.world,
               "skipped_no_positive": sum(s.skipped_no_positive for s in sets), "resumed": bool(resume and ckpts),
               "mean_pool_size": float(np.mean([len(p) for s in sets for p in s.pools])) if any(s.pools for s in sets) else 0.0,
               "negatives": cfg.negatives, "in_batch_q": cfg.in_batch_q, "q_rule": cfg.q_rule, "corpus_size": corpus_size,
               **refresh_at.log()})
    margin = weight_margin(cfg, tau, corpus_size, encoder.settings.normalize)
    if margin is not None and margin > 0.4 and ddp.main:
        print(f"warning: importance weights at tau {tau:g} and N = {corpus_size:,} ask the positive to beat the weighted "
              f"in-batch negatives by ~{margin:.2f} in cosine; such runs lost to the starting model in "
              "eval/RESULTS-diagnosis.md (use --recipe recommended: tau 0.02, or zeta_normalize)", file=sys.stderr)
    if corpus_size is None and cfg.in_batch_q == "uniform" and cfg.zeta_scale > 0 and ddp.main:
        print("note: corpus size N unknown (no --corpus, no corpus_size): in-batch negatives get q = 1 (docs/method.md §3)",
              file=sys.stderr)

    from dpr_xrisk.retrieval.encode import warm_heap

    warm_heap()  # the step-0 refresh and dev evaluation at the speed of the later ones (no page fault per batch)
    t_start = time.perf_counter()  # training wall time, the initial mining included

    def upcoming(step: int) -> list[list[int]] | None:
        """refresh_questions = "upcoming": the rows the steps until the next refresh will draw."""
        if cfg.refresh_questions != "upcoming":
            return None
        stop = refresh_at.next_after(step)
        return upcoming_rows(order, len(sets), weights, cfg.seed, step, stop)

    def say(line: str) -> None:  # a progress line on stderr (main process, progress on)
        if progress:
            print(line, file=sys.stderr, flush=True)
    if cfg.negatives == "model" and state["step"] == 0:
        if progress:
            print("mining the first negative pools with the starting encoder", file=sys.stderr, flush=True)
        state["refresh_seconds"] += refresh(encoder, cfg, sets, store, 0, out, log, ddp, state, progress=progress,
                                            only=upcoming(0))
    refreshing = bool(cfg.refresh_every or cfg.refresh_every_epochs) or cfg.negatives == "model"
    probe = probe_passages = None
    if cfg.probe_every and cfg.estimator == "fcco" and cfg.loss == "dpm":
        from dpr_xrisk.retrieval.search import load_passage_texts

        pick = np.random.default_rng([cfg.seed, 7]).permutation(total_q)[: cfg.probe_size]
        flat = [(t, r) for t, s in enumerate(sets) for r in range(len(s))]
        probe = [flat[i] for i in sorted(pick)]
        probe_passages = load_passage_texts(cfg.corpus) if cfg.corpus else dict(store.texts)

    def checkpoint(step: int) -> None:
        pools = [[[[k, sc] for k, sc in p] for p in s.pools] for s in sets] if refreshing else None
        wall = state.get("wall_seconds", 0.0) + time.perf_counter() - t_start  # across resumes
        st = dict(state, step=step, order=order.state(), pools=pools, wall_seconds=wall)
        if scaler.is_enabled():  # fp16: the loss scale continues where it was
            st["grad_scaler"] = scaler.state_dict()
        if ddp.main:
            save_checkpoint(out / "checkpoints" / f"step-{step}", encoder, optimizer, scheduler, loss_fn, st, cfg.to_json())
            prune_checkpoints(out, cfg.keep_checkpoints)
            if cfg.refresh_fraction is not None:
                prune_refresh_cache(out, state.get("refresh_cache_step"))
        ddp.barrier()

    if dev_questions is not None and state["step"] == 0:
        run_eval(encoder, cfg, dev_questions, dev_corpus, state, 0, log, out, ddp, say=say)  # the "before" point
    encoder.train()
    micro = cfg.batch_size // cfg.grad_accum
    bar = tqdm(total=steps, initial=state["step"], desc="train", unit="step", disable=not progress)
    try:
        for step in range(state["step"], steps):
            t0 = time.perf_counter()
            if refresh_at.due(step):
                state["refresh_seconds"] += refresh(encoder, cfg, sets, store, step, out, log, ddp, state,
                                                    progress=progress, only=upcoming(step))
                t0 = time.perf_counter()
            rng, t = step_draw(cfg.seed, step, weights)
            # dropout of step t, independent of history; each rank its own stream under torchrun
            torch.manual_seed(cfg.seed * 1_000_003 + step + (7_919_993 * ddp.rank if ddp.active else 0))
            rows = order.next(t)
            total_loss = 0.0
            for m in range(cfg.grad_accum):
                b = collate(encoder, sets[t], store, rows[m * micro : (m + 1) * micro], rng, loss=cfg.loss,
                            hard_negatives=cfg.hard_negatives, max_positives=cfg.max_positives,
                            in_batch_q=cfg.in_batch_q, corpus_size=corpus_size, filter_answers=cfg.filter_answers,
                            sampler=cfg.pool_sampler, temperature=cfg.pool_temperature, q_rule=cfg.q_rule)
                b = batch_to(b, device)
                if cfg.grad_cache_chunk:
                    value = cached_step_loss(encoder, loss_fn, b, precision, step, offsets[t], ddp,
                                             cfg.grad_cache_chunk, scale=1.0 / cfg.grad_accum, scaler=scaler)
                else:
                    loss, value = step_loss(encoder, loss_fn, b, precision, step, offsets[t], ddp)
                    scaler.scale(loss / cfg.grad_accum).backward()
                total_loss += float(value) / cfg.grad_accum
            ddp.sum_grads(params)  # the global loss's gradient: each rank holds its slice's part
            scaler.unscale_(optimizer)  # (fp16) clip and log the true gradient
            grad_norm = float(torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm))
            scaler.step(optimizer)  # = optimizer.step() unless fp16 (then skipped on inf/nan)
            scaler.update()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            done = step + 1
            dt = time.perf_counter() - t0
            if done % cfg.log_every == 0 or done == steps:
                record = {"step": done, "loss": total_loss, "lr": scheduler.get_last_lr()[0], "grad_norm": grad_norm,
                          "dataset": sets[t].name, "epoch": order.epoch[t], "seconds": round(dt, 4),
                          "questions_per_s": round(cfg.batch_size / dt, 3)}
                if cfg.estimator == "fcco":
                    record.update({"gamma": loss_fn.gamma_at(step), **{f"fcco_{k}": v for k, v in loss_fn.stats().items()}})
                log.write(record)
            bar.set_postfix(loss=f"{total_loss:.4f}", lr=f"{scheduler.get_last_lr()[0]:.2e}")
            bar.update(1)
            if dev_questions is not None and cfg.eval_every and done % cfg.eval_every == 0 and done < steps:
                run_eval(encoder, cfg, dev_questions, dev_corpus, state, done, log, out, ddp, say=bar.write if progress else None)
            if probe is not None and done % cfg.probe_every == 0 and ddp.main:
                log.write({"event": "probe", "step": done,
                           **probe_estimator(encoder, loss_fn, cfg, sets, store, offsets, probe, probe_passages)})
            if cfg.save_every and done % cfg.save_every == 0 and done < steps:
                checkpoint(done)
                if progress:
                    bar.write(f"checkpoint step-{done} saved")
            if on_step is not None:
                on_step(done)
    finally:
        bar.close()
    if dev_questions is not None:
        run_eval(encoder, cfg, dev_questions, dev_corpus, state, steps, log, out, ddp, say=say)
    checkpoint(steps)
    encoder.eval()
    if ddp.main:
        encoder.save(out, inference_settings(encoder, cfg))  # the output folder is a model folder for encode/search
        from dpr_xrisk.retrieval.encode import provenance
        from dpr_xrisk.io.common import write_json

        write_json(out / "provenance.json", {"base_model": cfg.model, "inputs": provenance(
            train=list(cfg.train), corpus=cfg.corpus, dev=cfg.dev, dev_corpus=cfg.dev_corpus,
            negatives_file=cfg.negatives_file)})
    ddp.barrier()
    wall = state.get("wall_seconds", 0.0) + time.perf_counter() - t_start  # all sessions of a resumed run
    summary = {"steps": steps, "seconds": round(wall, 3), "best": state["best"], "best_step": state["best_step"],
               "tau": tau, "refresh_seconds": round(state["refresh_seconds"], 3),
               "refresh_share": round(state["refresh_seconds"] / wall, 4) if wall > 0 else 0.0}
    log.write({"event": "end", **summary})
    ddp.close()
    return summary


def weight_margin(cfg: TrainConfig, tau: float, corpus_size: int | None, normalize: bool) -> float | None:
    """α·τ·ln(N/n_b): the cosine margin by which a positive must beat in-batch negatives weighted
    1/q = N/n_b before the DPM/listwise loss saturates (n_b = batch_size - 1). None where it does
    not apply (no weights, self-normalised weights, unknown N, dot-product scores)."""
    if (cfg.loss == "infonce" or cfg.zeta_scale == 0 or cfg.zeta_normalize or cfg.in_batch_q == "one"
            or not corpus_size or not normalize):
        return None
    n_b = max(1, cfg.batch_size // cfg.grad_accum - 1)
    return cfg.zeta_scale * tau * math.log(max(1.0, corpus_size / n_b))


def step_draw(seed: int, step: int, weights) -> tuple[np.random.Generator, int]:
    """Step ``step``'s random stream and the training set it trains on (the stream's first draw,
    by ``weights``): one rule for the training loop and :func:`upcoming_rows`' replay of it."""
    rng = np.random.default_rng([seed, step])
    return rng, int(rng.choice(len(weights), p=weights))


def upcoming_rows(order: DataOrder, n_sets: int, weights, seed: int, start: int, stop: int) -> list[list[int]]:
    """Per set, the question rows that steps ``start .. stop - 1`` will draw, found by replaying
    the training loop's draws (:func:`step_draw`, then ``order.next``) on a copy of ``order``:
    the questions a refresh at ``start`` must mine."""
    sim = DataOrder(order.sizes, order.batch_size, order.seed, order.state())  # state(): fresh lists
    rows: list[set[int]] = [set() for _ in range(n_sets)]
    for step in range(start, stop):
        t = step_draw(seed, step, weights)[1]
        rows[t].update(sim.next(t))
    return [sorted(r) for r in rows]


class RefreshSchedule:
    """When the index is rebuilt (docs/method.md §5 "every R steps and/or every E epochs"): at every positive
    multiple of ``refresh_every`` and at the first step that starts once each multiple of
    ``refresh_every_epochs`` epochs of questions has been drawn (step ``ceil(k * E * questions /
    batch_size)``), so epoch-based refreshes stay on the epoch fractions instead of drifting by a
    rounded period, and none falls on the step that would end training. Step 0 (the first mining)
    is not part of it."""

    def __init__(self, every: int | None, every_epochs: float | None, steps_per_epoch: float, steps: int):
        """``steps_per_epoch``: questions / batch size, not rounded; ``steps``: the run's length."""
        self.every = every or None
        self.steps = steps
        epoch_steps: set[int] = set()
        period = (every_epochs or 0.0) * steps_per_epoch  # in steps, fractional
        if 0 < period <= 1:
            epoch_steps.update(range(1, steps))
        elif period > 1:
            k = 1
            while (at := math.ceil(k * period - 1e-9)) < steps:
                epoch_steps.add(at)
                k += 1
        self.epoch_steps = sorted(epoch_steps)
        self._epoch = frozenset(epoch_steps)

    def __bool__(self) -> bool:
        return bool(self.every or self.epoch_steps)

    def due(self, step: int) -> bool:
        return 0 < step < self.steps and ((self.every is not None and step % self.every == 0) or step in self._epoch)

    def next_after(self, step: int) -> int:
        """The first refresh after ``step``, or the number of steps when none is left."""
        nxt = [self.steps]
        if self.every:
            nxt.append((step // self.every + 1) * self.every)
        nxt += [t for t in self.epoch_steps if t > step][:1]
        return min(nxt)

    def planned(self) -> list[int]:
        """Every refresh step of the run, both periods together (step 0 not included)."""
        by_steps = range(self.every, self.steps, self.every) if self.every else ()
        return sorted(self._epoch.union(by_steps))

    def log(self) -> dict:
        return {"refresh_every": self.every, "refresh_epoch_steps": self.epoch_steps}


def restore_pools(sets, store, saved, corpus) -> None:
    from dpr_xrisk.retrieval.search import load_passage_texts

    wanted = {k for sp in saved for p in sp for k, _ in p} - store.texts.keys()
    for key, (title, text) in (load_passage_texts(corpus, wanted) if wanted else {}).items():
        store.add_text(key, title, text)
    for s, sp in zip(sets, saved):
        s.pools = [[(k, float(sc)) for k, sc in p] for p in sp]


def _amp(encoder, precision):
    """The towers' autocast: ``precision`` is fp32 | bf16 | fp16 (or the old bool for bf16)."""
    from dpr_xrisk.runtime.device import autocast

    if isinstance(precision, bool):
        precision = "bf16" if precision else "fp32"
    return autocast(encoder.device, precision)


def batch_to(b, device: torch.device):
    """A collated batch on ``device`` (tokenisation stays on the CPU; pinned, non-blocking copies
    to a GPU; nothing moves on the CPU)."""
    import dataclasses

    if device.type == "cpu":
        return b

    def move(t):
        return t.pin_memory().to(device, non_blocking=True)

    return dataclasses.replace(b, q_inputs={k: move(v) for k, v in b.q_inputs.items()},
                               p_inputs={k: move(v) for k, v in b.p_inputs.items()},
                               pos_mask=move(b.pos_mask), neg_mask=move(b.neg_mask), log_q=move(b.log_q),
                               rows=move(b.rows), slot_ids=move(b.slot_ids))


def _rng_state(device: torch.device):
    return torch.get_rng_state(), (torch.cuda.get_rng_state(device) if device.type == "cuda" else None)


def _set_rng_state(state, device: torch.device) -> None:
    torch.set_rng_state(state[0])
    if state[1] is not None:
        torch.cuda.set_rng_state(state[1], device)


def step_loss(encoder, loss_fn, b, bf16: bool | str, step: int = 0, row_offset: int = 0, ddp=None):
    """Forward one micro-batch: (tensor to backpropagate, loss value to log). Under torchrun
    each rank embeds its slice of questions and passages and all-gathers the rest."""
    B, N = b.pos_mask.shape
    with _amp(encoder, bf16):
        if ddp is not None and ddp.active:
            qa, qz = ddp.bounds(B)
            pa, pz = ddp.bounds(N)
            q = ddp.gather_rows(encoder.embed_queries(slice_rows(b.q_inputs, qa, qz)).float(), B)  # (B, H)
            p = ddp.gather_rows(encoder.embed_passages(slice_rows(b.p_inputs, pa, pz)).float(), N)  # (N, H)
        else:
            q = encoder.embed_queries(b.q_inputs)  # (B, H)
            p = encoder.embed_passages(b.p_inputs)  # (N, H)
    return _loss_on(loss_fn, q.float(), p.float(), b, step, row_offset)


def slice_rows(inputs: dict, a: int, z: int) -> dict:
    """Rows a..z of every tensor of a tokenised batch."""
    return {k: v[a:z] for k, v in inputs.items()}


def _loss_on(loss_fn, q: torch.Tensor, p: torch.Tensor, b, step: int, row_offset: int):
    """(tensor to backpropagate, loss value to log) of a micro-batch's (B, H) question and (N, H)
    passage embeddings; an FCCO loss updates the rows of this micro-batch here."""
    from dpr_xrisk.losses import CandidateBatch, FCCOLoss

    batch = CandidateBatch.from_embeddings(q, p, b.pos_mask, b.neg_mask, b.log_q)
    if isinstance(loss_fn, FCCOLoss):
        out = loss_fn(batch, b.rows + row_offset, b.slot_ids, step=step)
        return out.surrogate, out.value
    loss = loss_fn(batch)
    return loss, loss.detach()


def cached_step_loss(encoder, loss_fn, b, bf16: bool | str, step: int, row_offset: int, ddp, chunk: int,
                     scale: float = 1.0, scaler=None) -> torch.Tensor:
    """One micro-batch with cached gradients (GradCache, Gao et al. 2021): back-propagates
    ``scale`` x the loss and returns its value.

    1. embed the questions and passages (this rank's slice under torchrun) in chunks of ``chunk``
       rows without keeping activations, remembering each chunk's RNG state;
    2. compute the loss on those embeddings (detached, requiring grad) once -- the FCCO state is
       updated here, exactly as in an uncached step -- and its gradient w.r.t. every embedding;
    3. re-embed each chunk with gradients under its remembered RNG state (same dropout masks) and
       back-propagate that chunk's slice of the embedding gradient.
    The parameter gradients equal the uncached step's; the activation memory is one chunk's."""
    B, N = b.pos_mask.shape
    active = ddp is not None and ddp.active
    qa, qz = ddp.bounds(B) if active else (0, B)
    pa, pz = ddp.bounds(N) if active else (0, N)
    plan = [("q", encoder.embed_queries, b.q_inputs, a, min(a + chunk, qz)) for a in range(qa, qz, chunk)]
    plan += [("p", encoder.embed_passages, b.p_inputs, a, min(a + chunk, pz)) for a in range(pa, pz, chunk)]
    states, parts = [], []
    device = encoder.device
    with torch.no_grad(), _amp(encoder, bf16):
        for _, embed, inputs, a, z in plan:
            states.append(_rng_state(device))
            parts.append(embed(slice_rows(inputs, a, z)).float())
    n_q = len(range(qa, qz, chunk))
    empty = torch.zeros(0, encoder.dim, device=device)
    q_local = torch.cat(parts[:n_q]) if n_q else empty
    p_local = torch.cat(parts[n_q:]) if len(parts) > n_q else empty
    q = (ddp.gather_rows(q_local, B) if active else q_local).detach().requires_grad_(True)  # (B, H)
    p = (ddp.gather_rows(p_local, N) if active else p_local).detach().requires_grad_(True)  # (N, H)
    loss, value = _loss_on(loss_fn, q, p, b, step, row_offset)
    (loss * scale if scaler is None else scaler.scale(loss * scale)).backward()
    grads = [(q if kind == "q" else p).grad[a:z] for kind, _, _, a, z in plan]  # global rows a..z
    after = _rng_state(device)
    for (_, embed, inputs, a, z), state, g in zip(plan, states, grads):
        _set_rng_state(state, device)  # the chunk's own dropout masks again
        with _amp(encoder, bf16):
            emb = embed(slice_rows(inputs, a, z)).float()
        emb.backward(g)
    _set_rng_state(after, device)
    return value


def inference_settings(encoder, cfg: TrainConfig):
    """The settings saved with a trained model: training lengths are for training only."""
    import dataclasses

    q_len, p_len = getattr(encoder, "declared_lengths", (cfg.query_max_length, cfg.passage_max_length))
    return dataclasses.replace(encoder.settings, query_max_length=cfg.inference_query_max_length or q_len,
                               passage_max_length=cfg.inference_passage_max_length or p_len)


def run_eval(encoder, cfg, dev_questions, dev_corpus, state, step, log, out, ddp=None, say=None) -> None:
    if ddp is not None and not ddp.main:
        state.update(ddp.broadcast(None))  # rank 0 evaluates; the others learn the best so far
        return
    t0 = time.perf_counter()
    metrics = evaluate_dev(encoder, cfg, dev_questions, dev_corpus)
    value = metrics.get(cfg.select_metric)
    if value is None:
        raise InputError(f"select_metric {cfg.select_metric!r} is not computed; valid: {', '.join(metrics)}")
    improved = state["best"] is None or value > state["best"]
    if improved:
        state["best"], state["best_step"] = value, step
        was_training = encoder.training
        encoder.eval()
        encoder.save(out / "best", inference_settings(encoder, cfg))
        # back to the mode training was in: left in eval mode, every step after the first improving
        # in-loop evaluation trained without dropout (and a resumed run with it)
        encoder.train(was_training)
        (out / "best" / "dev_metrics.json").write_text(json.dumps({"step": step, **metrics}, indent=2))
    log.write({"event": "eval", "step": step, **metrics, "best": state["best"], "best_step": state["best_step"]})
    if say is not None:
        say(f"dev at step {step}: " + " ".join(f"{k} {v:.4f}" for k, v in metrics.items())
            + f" ({time.perf_counter() - t0:.0f} s)" + (" -- best so far, saved to best/" if improved else ""))
    if ddp is not None and ddp.active:
        ddp.broadcast({"best": state["best"], "best_step": state["best_step"]})
