"""The index refresh during training (docs/method.md §5): when the pools are re-mined, with which
copy of the current towers (fp32, bfloat16 weights, int8, ONNX; at ``refresh_max_length``), the
first int8 refresh's quality guard, swapping the new pools in, and restoring them on resume.

This module owns the orchestration of a refresh; one mining pass itself is ``train/mining.py``
(its names are re-exported here for callers that import them from this module). The trainer
calls this module; this module never imports the trainer.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

from dpr_xrisk.errors import InputError
from dpr_xrisk.train.config import TrainConfig
from dpr_xrisk.train.log import JsonlLog
from dpr_xrisk.train.mining import (  # noqa: F401 (re-exported)
    RefreshResult, partial_reencode, pool_log_q, prune_cache, refresh_pools, sample_negatives, validate_refresh,
    with_passage_length)
from dpr_xrisk.train.order import DataOrder, upcoming_rows


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


def refresh_quantize_on(cfg: TrainConfig, device, vnni: bool | None = None,
                        amx: bool | None = None) -> str:
    """``cfg.refresh_quantize`` for a run on ``device`` (``cfg.bf16`` already resolved from the
    precision): ``auto`` is int8 on a CPU with AVX-512 VNNI (``vnni``; None = this machine's),
    except where a torch refresh (``refresh_backend``) follows bfloat16 training on a CPU with
    AMX (``amx``), and none elsewhere; an explicit int8 torch refresh on a GPU is refused (its
    int8 kernels are CPU-only).
    Measured (`git show 3ee76c0:eval/RESULTS.md` and `:eval/RESULTS-refresh-amx.md`): without VNNI int8 encoding is no
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


def refresh(encoder, cfg: TrainConfig, sets, store, step: int, out: Path, log, ddp=None, state=None,
            progress: bool = False, only: list[list[int]] | None = None, answers=None) -> float:
    """Re-mine every set's pools with the current encoder; swap them in at once; log; seconds.
    Under torchrun, rank 0 mines and broadcasts the pools (and their texts) to the others.
    With ``refresh_fraction`` only that share of the corpus is re-encoded (oldest first); the
    embedding version in use and the cursor are kept in ``state`` (hence in checkpoints).
    ``only``: per set, the question rows to re-mine (:func:`rows_to_mine`); the others keep their pools.
    ``answers``: the run's :class:`~dpr_xrisk.train.answer_index.AnswerIndex`, reused by every refresh."""
    state = state if state is not None else {}
    result = None
    if ddp is None or ddp.main:
        result = _mine(encoder, cfg, sets, store, step, out, state, progress, only, answers)
    if ddp is not None and ddp.active:
        result = ddp.broadcast(result)
        for key, (title, text) in result.texts.items():
            store.add_text(key, title, text)
    _swap_pools(sets, result.pools, step, only)
    if "cursor" in result.stats:  # a partial refresh: version `step` of the cache is now in use
        state.update(refresh_cache_step=step, refresh_cursor=result.stats["cursor"])
    record = {"event": "refresh", "step": step, **result.stats}
    if ddp is None or ddp.main:
        JsonlLog(out / "refresh_log.jsonl").write(record)
    log.write(record)
    return result.stats["seconds"]


def _mine(encoder, cfg: TrainConfig, sets, store, step: int, out: Path, state: dict, progress: bool,
          only, answers=None) -> RefreshResult:
    """One refresh's mining on this process: the mining copy of the towers, the (partial)
    re-encoding, the pools, their statistics and, on the first int8 refresh, the fp32 guard."""
    from dpr_xrisk.retrieval.tokens import CorpusTokens
    from dpr_xrisk.runtime.device import encode_batch_size

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
    encoder = _mining_copy(encoder, cfg, out, enc_bf16, extra)
    if cfg.refresh_fraction is not None:
        t0 = time.perf_counter()
        emb, cursor, part = partial_reencode(encoder, cfg.corpus, out / "refresh_cache", step,
                                             state.get("refresh_cache_step"), state.get("refresh_cursor", 0),
                                             cfg.refresh_fraction, bf16=enc_bf16, progress=progress, tokens=tokens,
                                             batch_size=bs)
        extra.update(part, encode_s=round(time.perf_counter() - t0, 3), cursor=cursor)
    result = refresh_pools(encoder, sets, store, cfg.corpus, k=cfg.refresh_k, factory=cfg.refresh_factory,
                           skip_ranks=cfg.refresh_skip_ranks, margin=cfg.refresh_margin,
                           filter_answers=cfg.filter_answers, bf16=enc_bf16, work_dir=out, embeddings=emb,
                           progress=progress, tokens=tokens, batch_size=bs, only=only, answers=answers)
    result.stats["seconds"] = round(result.stats["seconds"] + extra.get("encode_s", 0) + extra.get("quantize_s", 0)
                                    + extra.get("cast_s", 0) + extra.get("export_s", 0) + extra["tokens_s"], 3)
    result.stats.update(extra)
    if "encode_s" in extra:
        prune_refresh_cache(out, step)
    if cfg.refresh_quantize != "none" and cfg.refresh_guard and not state.get("quantize_checked"):
        result.stats.update(quantize_check(fp32_encoder, cfg, sets, store, result, tokens, batch_size=bs,
                                           answers=answers))
        state["quantize_checked"] = True
    return result


def _mining_copy(encoder, cfg: TrainConfig, out: Path, enc_bf16: bool, extra: dict):
    """The towers the corpus is encoded with: ONNX, bfloat16 weights (CPU), int8, or ``encoder``
    itself; what making it took goes into ``extra`` (the refresh's log record)."""
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
    return encoder


def _swap_pools(sets, pools_per_set, step: int, only) -> None:
    """The new pools in use from ``step`` on; with ``only``, questions not mined keep their pools
    (no step before the next refresh draws them)."""
    for s, pools in zip(sets, pools_per_set):
        if only is not None:
            old = s.pools or [[] for _ in pools]
            pools = [p if p is not None else o for p, o in zip(pools, old)]
        s.pools, s.pool_source = pools, f"refresh@{step}"


def rows_to_mine(cfg: TrainConfig, schedule: "RefreshSchedule", order: DataOrder, weights,
                 step: int) -> list[list[int]] | None:
    """The ``only`` of the refresh at ``step``: with ``refresh_questions = "upcoming"`` the rows
    the steps until the next refresh will draw, else None (every question)."""
    if cfg.refresh_questions != "upcoming":
        return None
    return upcoming_rows(order, len(order.sizes), weights, cfg.seed, step, schedule.next_after(step))


def quantize_check(fp32_encoder, cfg: TrainConfig, sets, store, result, tokens=None, batch_size: int = 128,
                   answers=None) -> dict:
    """The first int8 refresh's quality guard: the same mining with the fp32 towers, compared on
    256 training questions (pool overlap; share of mined negatives that differ)."""
    import numpy as np

    from dpr_xrisk.runtime.quantize import check_rows, pool_overlap

    only = check_rows(result.pools, np.random.default_rng([cfg.seed, 11]))  # fp32 mining of the compared questions
    ref = refresh_pools(fp32_encoder, sets, store, cfg.corpus, k=cfg.refresh_k, factory=cfg.refresh_factory,
                        skip_ranks=cfg.refresh_skip_ranks, margin=cfg.refresh_margin, filter_answers=cfg.filter_answers,
                        bf16=False, tokens=tokens, batch_size=batch_size,
                        only=only, answers=answers)  # fp32, as the guard says, whatever the training precision
    n, overlap = pool_overlap(ref.pools, result.pools)
    return {"int8_check_questions": n, "int8_pool_overlap_vs_fp32": round(overlap, 4),
            "int8_negatives_differing_share": round(1 - overlap, 4), "int8_check_seconds": ref.stats["seconds"]}


def prune_refresh_cache(out: Path, current: int | None) -> None:
    """Keep the embedding versions in use now or referred to by a checkpoint on disk."""
    keep = {current} | {json.loads(p.read_text()).get("refresh_cache_step")
                        for p in (out / "checkpoints").glob("step-*/state.json")}
    prune_cache(out / "refresh_cache", keep)


def restore_pools(sets, store, saved, corpus) -> None:
    """On resume: the pools in use when the checkpoint was written, and their passages' texts."""
    from dpr_xrisk.retrieval.search import load_passage_texts

    wanted = {k for sp in saved for p in sp for k, _ in p} - store.texts.keys()
    for key, (title, text) in (load_passage_texts(corpus, wanted) if wanted else {}).items():
        store.add_text(key, title, text)
    for s, sp in zip(sets, saved):
        s.pools = [[(k, float(sc)) for k, sc in p] for p in sp]
