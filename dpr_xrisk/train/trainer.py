"""The training loop: plain, readable PyTorch (no HF Trainer).

One optimiser step = one batch of ``batch_size`` questions from one training set (chosen with
probability ∝ λ_t, so in-batch negatives share a corpus), split into ``grad_accum``
micro-batches. Every random choice of step t (data set, positives, negatives, dropout) is seeded
from (seed, t), and the data order of each set and epoch from (seed, set, epoch), so a resumed
run repeats exactly what an uninterrupted run would have done.

This module owns the loop and the session it runs (:class:`Session`); construction is
``train/setup.py``, a step's arithmetic ``train/step.py``, refreshes ``train/refresh.py``, dev
evaluation ``train/dev_eval.py``, the estimator probe ``train/probe.py``.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from dpr_xrisk.errors import InputError
from dpr_xrisk.train.config import TrainConfig
from dpr_xrisk.train.dev_eval import DevSet, load_dev, run_eval
from dpr_xrisk.train.log import JsonlLog, trim_log
from dpr_xrisk.train.order import DataOrder, step_draw
from dpr_xrisk.train.probe import probe_estimator, probe_set
from dpr_xrisk.train.refresh import RefreshSchedule, prune_refresh_cache, refresh, restore_pools, rows_to_mine
from dpr_xrisk.train.setup import build_loss, linear_schedule, prepare, resolve_run_config, say_precision, weight_margin
from dpr_xrisk.train.step import backward_step, batch_to

# re-exported: tests and eval/ scripts import these names from here
from dpr_xrisk.train.order import upcoming_rows  # noqa: F401,E402
from dpr_xrisk.train.refresh import refresh_quantize_on  # noqa: F401,E402
from dpr_xrisk.train.setup import set_dropout  # noqa: F401,E402
from dpr_xrisk.train.step import cached_step_loss, step_loss  # noqa: F401,E402

__all__ = ["Session", "train", "start", "optimiser_step", "checkpoint", "finish", "build_loss", "linear_schedule",
           "prepare", "weight_margin", "RefreshSchedule", "DataOrder", "upcoming_rows", "refresh_quantize_on",
           "set_dropout", "cached_step_loss", "step_loss", "probe_estimator"]


@dataclass
class Session:
    """One training session: the resolved config and everything the loop reads and updates."""

    cfg: TrainConfig
    out: Path
    device: torch.device
    precision: str
    ddp: object  # train.distributed.Dist
    encoder: object
    store: object
    sets: list
    saved_settings: object  # EncoderSettings written with every saved model (inference lengths)
    steps: int
    total_q: int
    weights: np.ndarray  # λ_t, normalised
    offsets: list[int]  # estimator rows of each set
    corpus_size: int | None
    tau: float
    loss_fn: object
    params: list
    optimizer: object
    scheduler: object
    scaler: object
    schedule: RefreshSchedule
    state: dict
    order: DataOrder | None = None  # set once the state is restored
    log: JsonlLog | None = None
    dev: DevSet | None = None
    probe: list | None = None
    probe_passages: dict | None = None
    answers: object | None = None  # AnswerIndex of the training questions, made once for every refresh
    progress: bool = False
    t_start: float = field(default_factory=time.perf_counter)

    def say(self, line: str) -> None:
        """A progress line on stderr (main process, progress on)."""
        if self.progress:
            print(line, file=sys.stderr, flush=True)

    def refresh(self, step: int) -> None:
        self.state["refresh_seconds"] += refresh(
            self.encoder, self.cfg, self.sets, self.store, step, self.out, self.log, self.ddp, self.state,
            progress=self.progress, only=rows_to_mine(self.cfg, self.schedule, self.order, self.weights, step),
            answers=self.answers)

    def evaluate(self, step: int, say=None) -> None:
        run_eval(self.encoder, self.cfg, self.dev, self.state, step, self.log, self.out, self.saved_settings,
                 self.ddp, say=say)


def train(cfg: TrainConfig, out_dir: str | Path, resume: bool = False, progress: bool = True, on_step=None) -> dict:
    """Train and return a summary; ``on_step(step)`` is a test hook called after each step."""
    from tqdm import tqdm

    s = start(cfg, Path(out_dir), resume, progress)
    cfg = s.cfg
    if cfg.negatives == "model" and s.state["step"] == 0:
        s.say("mining the first negative pools with the starting encoder")
        s.refresh(0)
    s.probe, s.probe_passages = probe_set(cfg, s.sets, s.store)
    if s.dev is not None and s.state["step"] == 0:
        s.evaluate(0, say=s.say)  # the "before" point
    s.encoder.train()
    bar = tqdm(total=s.steps, initial=s.state["step"], desc="train", unit="step", disable=not s.progress)
    try:
        for step in range(s.state["step"], s.steps):
            t0 = time.perf_counter()
            if s.schedule.due(step):
                s.refresh(step)
                t0 = time.perf_counter()
            t, total_loss, grad_norm = optimiser_step(s, step)
            done = step + 1
            if done % cfg.log_every == 0 or done == s.steps:
                _log_step(s, step, t, total_loss, grad_norm, time.perf_counter() - t0)
            bar.set_postfix(loss=f"{total_loss:.4f}", lr=f"{s.scheduler.get_last_lr()[0]:.2e}")
            bar.update(1)
            _after_step(s, done, say=bar.write if s.progress else None)
            if on_step is not None:
                on_step(done)
    finally:
        bar.close()
    return finish(s)


def start(cfg: TrainConfig, out: Path, resume: bool, progress: bool) -> Session:
    """Resolve the run on this machine, load everything, restore a checkpoint when resuming, and
    open the logs: the session the loop runs. Every bad input fails here, before step 1."""
    from dpr_xrisk.runtime.device import resolve_device, use_tf32
    from dpr_xrisk.train.checkpoint import list_checkpoints
    from dpr_xrisk.train.distributed import Dist

    device = resolve_device(cfg.device, "device")
    ddp = Dist.from_env(device.type)
    ckpts = list_checkpoints(out)
    resumed = ckpts[-1] if resume and ckpts else None
    if ckpts and not resume:
        raise InputError("output folder holds checkpoints; use --resume to continue, or a new --out", out)
    asked, (cfg, precision) = cfg, resolve_run_config(cfg, device, ddp, resumed, out)
    use_tf32(device)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    if cfg.refresh_quantize == "int8" and ddp.main:
        from dpr_xrisk.runtime.device import warn_int8_without_vnni

        warn_int8_without_vnni()  # an explicit int8 refresh on a CPU where it buys no speed
    torch.manual_seed(cfg.seed)
    encoder, store, sets, saved_settings = prepare(cfg)
    if ddp.main:
        say_precision(asked, precision, device, resumed is not None)  # once every input is checked
    encoder.to(device)
    s = _session(cfg, out, device, precision, ddp, encoder, store, sets, saved_settings)
    s.progress = progress and ddp.main
    if cfg.refreshing and cfg.filter_answers:
        from dpr_xrisk.train.answer_index import AnswerIndex

        s.answers = AnswerIndex.of_sets(sets)  # the refreshes' answer filter: each passage tokenised once per run
    s.dev = load_dev(cfg, store)
    if resumed is not None:
        _restore(s, resumed)
    s.order = DataOrder([len(ts) for ts in sets], cfg.batch_size, cfg.seed, s.state["order"])
    _open_logs(s, resumed is not None)
    from dpr_xrisk.retrieval.encode import warm_heap

    warm_heap()  # the step-0 refresh and dev evaluation at the speed of the later ones (no page fault per batch)
    s.t_start = time.perf_counter()  # training wall time, the initial mining included
    return s


def _session(cfg: TrainConfig, out: Path, device, precision: str, ddp, encoder, store, sets, saved_settings) -> Session:
    """The run's length, loss, optimiser, schedules and fresh state."""
    tau = cfg.resolved_tau(encoder.settings.normalize)
    weights = np.array(cfg.train_weights or [1.0] * len(sets), dtype=float)
    total_q = sum(len(ts) for ts in sets)
    steps = cfg.max_steps or max(1, math.ceil(cfg.epochs * total_q / cfg.batch_size))
    loss_fn = build_loss(cfg, tau, sets, max(1, total_q // cfg.batch_size), steps).to(device)
    params = list(dict.fromkeys(encoder.parameters()))  # a shared tower's parameters once
    optimizer = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay, eps=cfg.adam_eps)
    return Session(
        cfg=cfg, out=out, device=device, precision=precision, ddp=ddp, encoder=encoder, store=store, sets=sets,
        saved_settings=saved_settings, steps=steps, total_q=total_q, weights=weights / weights.sum(),
        offsets=np.cumsum([0] + [len(ts) for ts in sets])[:-1].tolist(), corpus_size=_corpus_size(cfg), tau=tau,
        loss_fn=loss_fn, params=params, optimizer=optimizer,
        scheduler=linear_schedule(optimizer, cfg.warmup_steps or int(cfg.warmup_ratio * steps), steps),
        scaler=torch.amp.GradScaler(device.type, enabled=precision == "fp16"),  # fp16 only (CUDA)
        # docs/method.md §5 "every R steps and/or every E epochs"
        schedule=RefreshSchedule(cfg.refresh_every, cfg.refresh_every_epochs, total_q / cfg.batch_size, steps),
        state={"step": 0, "order": None, "best": None, "best_step": None, "pools": None, "refresh_seconds": 0.0})


def _corpus_size(cfg: TrainConfig) -> int | None:
    """N of in-batch q = n_b / N: the corpus, not what training saw."""
    if cfg.corpus_size:
        return cfg.corpus_size
    if cfg.corpus:
        from dpr_xrisk.io.passages import count_passages

        return count_passages(cfg.corpus)
    return None  # docs/method.md §3: N is never guessed from the passages the training files mention


def _restore(s: Session, ckpt: Path) -> None:
    """The state of checkpoint ``ckpt``: weights, optimiser, schedules, estimator, loss scale, pools."""
    from dpr_xrisk.train.checkpoint import load_checkpoint

    s.state = load_checkpoint(ckpt, s.encoder, s.optimizer, s.scheduler, s.loss_fn)
    if s.state.get("grad_scaler") and s.scaler.is_enabled():
        s.scaler.load_state_dict(s.state["grad_scaler"])
    if s.state.get("pools") is not None:  # the pools in use when the checkpoint was written
        restore_pools(s.sets, s.store, s.state["pools"], s.cfg.corpus)


def _open_logs(s: Session, resumed: bool) -> None:
    """config.json, the logs (trimmed to the checkpoint when resuming), the start record and the
    warnings about the run's settings."""
    cfg, ddp = s.cfg, s.ddp
    s.out.mkdir(parents=True, exist_ok=True)
    if ddp.main:
        (s.out / "config.json").write_text(cfg.to_json())
        if resumed:
            for name in ("train_log.jsonl", "refresh_log.jsonl"):
                trim_log(s.out / name, s.state["step"])
    s.log = JsonlLog(s.out / "train_log.jsonl", enabled=ddp.main)
    pooled = any(ts.pools for ts in s.sets)
    s.log.write({"event": "start", "step": s.state["step"], "steps": s.steps, "tau": s.tau, "questions": s.total_q,
                 "world_size": ddp.world, "skipped_no_positive": sum(ts.skipped_no_positive for ts in s.sets),
                 "resumed": resumed,
                 "mean_pool_size": float(np.mean([len(p) for ts in s.sets for p in ts.pools])) if pooled else 0.0,
                 "negatives": cfg.negatives, "in_batch_q": cfg.in_batch_q, "q_rule": cfg.q_rule,
                 "corpus_size": s.corpus_size, **s.schedule.log()})
    margin = weight_margin(cfg, s.tau, s.corpus_size, s.encoder.settings.normalize)
    if margin is not None and margin > 0.4 and ddp.main:
        print(f"warning: importance weights at tau {s.tau:g} and N = {s.corpus_size:,} ask the positive to beat the "
              f"weighted in-batch negatives by ~{margin:.2f} in cosine; such runs lost to the starting model in "
              "git show 3ee76c0:eval/RESULTS-diagnosis.md (use --recipe recommended: tau 0.02, or zeta_normalize)", file=sys.stderr)
    if s.corpus_size is None and cfg.in_batch_q == "uniform" and cfg.zeta_scale > 0 and ddp.main:
        print("note: corpus size N unknown (no --corpus, no corpus_size): in-batch negatives get q = 1 "
              "(docs/method.md §3)", file=sys.stderr)


def optimiser_step(s: Session, step: int) -> tuple[int, float, float]:
    """Step ``step``: draw its set and questions, back-propagate its micro-batches, clip, update.
    Returns the set trained on, the loss and the gradient norm before clipping."""
    from dpr_xrisk.train.batch import collate

    cfg = s.cfg
    rng, t = step_draw(cfg.seed, step, s.weights)
    # dropout of step t, independent of history; each rank its own stream under torchrun
    torch.manual_seed(cfg.seed * 1_000_003 + step + (7_919_993 * s.ddp.rank if s.ddp.active else 0))
    rows = s.order.next(t)
    micro = cfg.batch_size // cfg.grad_accum
    batches = (batch_to(collate(s.encoder, s.sets[t], s.store, rows[m * micro : (m + 1) * micro], rng, loss=cfg.loss,
                                hard_negatives=cfg.hard_negatives, max_positives=cfg.max_positives,
                                in_batch_q=cfg.in_batch_q, corpus_size=s.corpus_size,
                                filter_answers=cfg.filter_answers, sampler=cfg.pool_sampler,
                                temperature=cfg.pool_temperature, q_rule=cfg.q_rule), s.device)
               for m in range(cfg.grad_accum))  # made one at a time, as the step consumes them
    total_loss = backward_step(s.encoder, s.loss_fn, batches, cfg.grad_accum, s.precision, step, s.offsets[t], s.ddp,
                               s.scaler, cfg.grad_cache_chunk)
    s.ddp.sum_grads(s.params)  # the global loss's gradient: each rank holds its slice's part
    s.scaler.unscale_(s.optimizer)  # (fp16) clip and log the true gradient
    grad_norm = float(torch.nn.utils.clip_grad_norm_(s.params, cfg.max_grad_norm))
    s.scaler.step(s.optimizer)  # = optimizer.step() unless fp16 (then skipped on inf/nan)
    s.scaler.update()
    s.scheduler.step()
    s.optimizer.zero_grad(set_to_none=True)
    return t, total_loss, grad_norm


def _log_step(s: Session, step: int, t: int, total_loss: float, grad_norm: float, dt: float) -> None:
    cfg = s.cfg
    record = {"step": step + 1, "loss": total_loss, "lr": s.scheduler.get_last_lr()[0], "grad_norm": grad_norm,
              "dataset": s.sets[t].name, "epoch": s.order.epoch[t], "seconds": round(dt, 4),
              "questions_per_s": round(cfg.batch_size / dt, 3)}
    if cfg.estimator == "fcco":
        record.update({"gamma": s.loss_fn.gamma_at(step), **{f"fcco_{k}": v for k, v in s.loss_fn.stats().items()}})
    s.log.write(record)


def _after_step(s: Session, done: int, say) -> None:
    """What follows step ``done``: a dev evaluation, an estimator probe, a checkpoint, when due."""
    cfg = s.cfg
    if s.dev is not None and cfg.eval_every and done % cfg.eval_every == 0 and done < s.steps:
        s.evaluate(done, say=say)
    if s.probe is not None and done % cfg.probe_every == 0 and s.ddp.main:
        s.log.write({"event": "probe", "step": done, **probe_estimator(
            s.encoder, s.loss_fn, cfg, s.sets, s.store, s.offsets, s.probe, s.probe_passages)})
    if cfg.save_every and done % cfg.save_every == 0 and done < s.steps:
        checkpoint(s, done)
        if s.progress:
            say(f"checkpoint step-{done} saved")


def checkpoint(s: Session, step: int) -> None:
    """Everything a resumed run needs to continue after ``step`` (rank 0 writes; all wait)."""
    from dpr_xrisk.train.checkpoint import prune_checkpoints, save_checkpoint

    cfg, state = s.cfg, s.state
    pools = [[[[k, sc] for k, sc in p] for p in ts.pools] for ts in s.sets] if cfg.refreshing else None
    wall = state.get("wall_seconds", 0.0) + time.perf_counter() - s.t_start  # across resumes
    st = dict(state, step=step, order=s.order.state(), pools=pools, wall_seconds=wall)
    if s.scaler.is_enabled():  # fp16: the loss scale continues where it was
        st["grad_scaler"] = s.scaler.state_dict()
    if s.ddp.main:
        save_checkpoint(s.out / "checkpoints" / f"step-{step}", s.encoder, s.optimizer, s.scheduler, s.loss_fn, st,
                        cfg.to_json())
        prune_checkpoints(s.out, cfg.keep_checkpoints)
        if cfg.refresh_fraction is not None:
            prune_refresh_cache(s.out, state.get("refresh_cache_step"))
    s.ddp.barrier()


def finish(s: Session) -> dict:
    """The last evaluation and checkpoint, the trained model in ``out`` (a model folder for
    encode/search, with its provenance), and the run's summary."""
    cfg, state = s.cfg, s.state
    if s.dev is not None:
        s.evaluate(s.steps, say=s.say)
    checkpoint(s, s.steps)
    s.encoder.eval()
    if s.ddp.main:
        from dpr_xrisk.io.common import write_json
        from dpr_xrisk.retrieval.encode import provenance

        s.encoder.save(s.out, s.saved_settings)
        write_json(s.out / "provenance.json", {"base_model": cfg.model, "inputs": provenance(
            train=list(cfg.train), corpus=cfg.corpus, dev=cfg.dev, dev_corpus=cfg.dev_corpus,
            negatives_file=cfg.negatives_file)})
    s.ddp.barrier()
    wall = state.get("wall_seconds", 0.0) + time.perf_counter() - s.t_start  # all sessions of a resumed run
    summary = {"steps": s.steps, "seconds": round(wall, 3), "best": state["best"], "best_step": state["best_step"],
               "tau": s.tau, "refresh_seconds": round(state["refresh_seconds"], 3),
               "refresh_share": round(state["refresh_seconds"] / wall, 4) if wall > 0 else 0.0}
    s.log.write({"event": "end", **summary})
    s.ddp.close()
    return summary
