r"""Moving-average (FCCO) estimator around the DPM and listwise losses (docs/method.md §4).

Both losses are τ·Σ_ik w_ik·log g_ik (f = τ·log of an inner average g_ik). A mini-batch estimate
ĝ_ik inside the log gives a biased gradient; FCCO (finite-sum coupled compositional optimisation,
as in SogCLR and LibAUC's GCLoss) keeps an estimate u_ik of g_ik for every training question i (its
stable index) and positive slot k, and uses it in f'(u) = τ/u:

.. math::
    v_{ik} \leftarrow \log\big((1-\gamma)\,e^{v_{ik}} + \gamma\,\hat g_{ik}\big)
          = \mathrm{logaddexp}\big(\log(1-\gamma) + v_{ik},\ \log\gamma + \log\hat g_{ik}\big)
    \quad (\text{first visit: } v_{ik} \leftarrow \log\hat g_{ik})

    \text{surrogate} = \tau \sum_{ik} w_{ik} \exp\big(\log\hat g_{ik} - \mathrm{sg}(v_{ik})\big),
    \qquad \nabla = \tau \sum_{ik} w_{ik}\, \nabla\hat g_{ik} / u_{ik},
    \qquad \text{value} = \tau \sum_{ik} w_{ik}\, v_{ik}

with v = log u (the updated one) and ĝ detached in the update. Everything stays in log space, so
no batch-wide maximum is ever needed to keep exp() finite (LibAUC's bug: a moving average
stabilised by one batch's max and never rescaled). γ = 1 gives v = log ĝ: the surrogate's gradient
is then exactly the plain mini-batch loss's, and ``value`` is exactly the plain loss.

Owns the state (``v`` and ``seen``, registered float32/bool buffers of shape
(num_questions, max_positives), so they travel with ``state_dict`` and ``.to()``), the update rule,
the γ schedule and diagnostics. Does not own the log-terms (``dpm.py``, ``listwise.py``), the batch
layout (``layout.py``), which question/positive a row is (the collator supplies ``question_idx``
and optionally ``slot_ids``), nor cross-process synchronisation of the state.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor, nn

from ..errors import unknown_name
from .dpm import DPMLoss, dpm_log_terms, dpm_reverse_log_terms
from .layout import CandidateBatch, PairTerms, masked_logsumexp
from .listwise import ListwiseLoss, listwise_log_terms

GAMMA_SCHEDULES = ("constant", "cosine")


class FCCOResult(NamedTuple):
    """What :meth:`FCCOLoss.forward` returns: backpropagate ``surrogate``, log ``value``."""

    surrogate: Tensor  # () differentiable; its gradient is the FCCO gradient, its value is meaningless (≈ τ)
    value: Tensor  # () detached; τ·Σ w·v, the moving-average estimate of the loss (= plain loss when γ = 1)


def check_gamma(gamma: float) -> float:
    """γ must lie in (0, 1]."""
    if not (isinstance(gamma, (int, float)) and math.isfinite(gamma) and 0 < gamma <= 1):
        raise ValueError(f"FCCO gamma must be in (0, 1], got {gamma!r}")
    return float(gamma)


def scheduled_gamma(step: int, gamma: float, schedule: str = "constant", warmup_steps: int = 0,
                    decay_steps: int = 0) -> float:
    """γ at optimiser step ``step`` (0-based): 1 for the first ``warmup_steps`` (e.g. one epoch),
    then ``gamma`` (constant) or a half-cosine from 1 down to ``gamma`` over ``decay_steps``."""
    if schedule not in GAMMA_SCHEDULES:
        raise unknown_name("gamma schedule", schedule, GAMMA_SCHEDULES)
    gamma = check_gamma(gamma)
    if step < warmup_steps:
        return 1.0
    if schedule == "constant" or decay_steps <= 0:
        return gamma
    frac = min(1.0, (step - warmup_steps) / decay_steps)
    return gamma + (1.0 - gamma) * 0.5 * (1.0 + math.cos(math.pi * frac))


class FCCOLoss(nn.Module):
    r"""Stateful FCCO wrapper of a :class:`DPMLoss` or :class:`ListwiseLoss` (docs/method.md §4, module docstring).

    The base loss supplies τ, ζ scale and (listwise) ℓ/margin; its per-pair log ĝ_ik and weights
    w_ik are reused unchanged. A symmetric DPM's reverse (passage→question) half has no stable
    per-question inner function, so it stays the plain mini-batch term and is averaged with the
    FCCO forward half exactly as :class:`DPMLoss` does: (fwd + bwd)/2, for surrogate and value.

    Slots: state row ``question_idx[i]``, column ``slot_ids[i, k]`` holds the estimate for the
    k-th positive of batch row i (PairTerms order: its positives by increasing column). By default
    ``slot_ids[i, k] = k``; since DPM draws one positive per step, a collator should pass the
    positive's index in the question's positive list instead, so each positive keeps its own
    estimate. Padding slots (``valid`` False) are ignored.

    Per call with ``update=True`` every (question, slot) present is updated once, from the state
    before the call. Call it once per micro-batch: micro-batches of one optimiser step hold
    different questions, so that is one update per (question, slot) per optimiser step. A
    (question, slot) occurring several times in one batch: every occurrence gets its own
    surrogate weight from the shared old state (so γ = 1 still matches the plain gradient), and
    the state stores their mean in u-space, i.e. the update with the mean of their ĝ;
    deterministic. ``update=False`` computes the same outputs but leaves the state untouched
    (e.g. a dev-set loss).

    Example (per micro-batch; ``grad_accum`` micro-batches per optimiser step)::

        fcco = FCCOLoss(DPMLoss(tau=0.05), num_questions=len(train), max_positives=8)
        out = fcco(batch, b.question_idx, b.slot_ids, gamma=fcco.gamma_at(step))
        (out.surrogate / grad_accum).backward()
        logged_loss += float(out.value) / grad_accum
    """

    v: Tensor
    seen: Tensor

    def __init__(
        self,
        base: DPMLoss | ListwiseLoss,
        num_questions: int,
        max_positives: int,
        gamma: float = 0.9,
        gamma_schedule: str = "constant",
        gamma_warmup_steps: int = 0,
        gamma_decay_steps: int = 0,
    ):
        super().__init__()
        if not isinstance(base, (DPMLoss, ListwiseLoss)):
            raise TypeError(f"FCCOLoss wraps a DPMLoss or a ListwiseLoss, got {type(base).__name__}")
        if num_questions < 1 or max_positives < 1:
            raise ValueError(f"num_questions and max_positives must be >= 1, got {num_questions}, {max_positives}")
        self.base = base
        # γ = 0.9 is SogCLR's and LibAUC GCLoss's default (u ← (1−γ)u + γĝ): mostly the fresh
        # estimate, a little memory. Smaller γ averages over more visits (less bias, more lag);
        # with the cosine schedule it is the value reached after the decay.
        self.gamma = check_gamma(gamma)
        if gamma_schedule not in GAMMA_SCHEDULES:
            raise unknown_name("gamma schedule", gamma_schedule, GAMMA_SCHEDULES)
        self.gamma_schedule = gamma_schedule
        # warmup 0: γ = 1 is already implied on a (question, slot)'s first visit (v ← log ĝ);
        # set it to one epoch of steps for docs/method.md's "γ = 1 for the first epoch".
        self.gamma_warmup_steps = int(gamma_warmup_steps)
        self.gamma_decay_steps = int(gamma_decay_steps)
        if gamma_schedule == "cosine" and self.gamma_decay_steps <= 0:
            raise ValueError("gamma_schedule='cosine' needs gamma_decay_steps >= 1")
        # float32 whatever the scores' dtype or autocast: the state is long-lived and checkpointed
        self.register_buffer("v", torch.zeros(num_questions, max_positives, dtype=torch.float32))
        self.register_buffer("seen", torch.zeros(num_questions, max_positives, dtype=torch.bool))
        self._last_weights: Tensor | None = None  # diagnostics only (not state): exp(log ĝ − v)

    @property
    def tau(self) -> float:
        return self.base.tau

    def gamma_at(self, step: int) -> float:
        """γ of this module's schedule at optimiser step ``step`` (0-based)."""
        return scheduled_gamma(step, self.gamma, self.gamma_schedule, self.gamma_warmup_steps,
                               self.gamma_decay_steps)

    def log_terms(self, batch: CandidateBatch) -> PairTerms:
        """The base loss's per-pair log ĝ_ik and weights, with its own settings."""
        b = self.base
        if isinstance(b, DPMLoss):
            return dpm_log_terms(batch, b.tau, b.zeta_scale, b.zeta_normalize)
        return listwise_log_terms(batch, b.tau, b.zeta_scale, b.pairwise, b.margin, b.zeta_normalize)

    def forward(
        self,
        batch: CandidateBatch,
        question_idx: Tensor,  # (B,) long, stable index of each row's question
        slot_ids: Tensor | None = None,  # (B, K) long, state column of each positive slot; None = k
        gamma: float | None = None,  # None: the constant γ, or gamma_at(step) when step is given
        *,
        step: int | None = None,
        update: bool = True,
    ) -> FCCOResult:
        if gamma is None:
            if step is not None:
                gamma = self.gamma_at(step)
            elif self.gamma_schedule == "constant" and self.gamma_warmup_steps == 0:
                gamma = self.gamma
            else:
                raise ValueError("a scheduled gamma needs gamma= or step= (e.g. gamma=fcco.gamma_at(step))")
        gamma = check_gamma(gamma)
        terms = self.log_terms(batch)
        rows, cols = self._state_index(terms, question_idx, slot_ids)  # (P,), (P,)
        # at least float32 (bf16 under autocast is upcast; float64 stays float64 for exact tests)
        dtype = torch.promote_types(terms.log_g.dtype, torch.float32)
        log_g = terms.log_g[terms.valid].to(dtype)  # (P,) valid pairs in PairTerms (row-major) order
        v_new = self._update(log_g.detach(), rows, cols, gamma, update)  # (P,) dtype of log_g
        w = terms.weight[terms.valid].to(log_g.dtype)  # (P,)
        ratio = torch.exp(log_g - v_new)  # (P,) ĝ/u, with gradient through ĝ only
        tau = self.tau
        surrogate = tau * (w * ratio).sum()  # ()
        value = tau * (w * v_new).sum()  # ()
        if isinstance(self.base, DPMLoss) and self.base.symmetric:
            rev = tau * dpm_reverse_log_terms(batch, tau).mean()  # () plain mini-batch reverse half
            surrogate = (surrogate + rev) / 2
            value = (value + rev.detach()) / 2
        self._last_weights = ratio.detach()
        return FCCOResult(surrogate, value.detach())

    def _state_index(self, terms: PairTerms, question_idx: Tensor, slot_ids: Tensor | None):
        """(row, column) in the state of every valid pair, flattened in PairTerms order; validated."""
        B, K = terms.valid.shape
        n_q, n_s = self.v.shape
        if question_idx.shape != (B,) or question_idx.dtype not in (torch.int32, torch.int64):
            raise ValueError(f"question_idx must be an integer tensor of shape ({B},), got "
                             f"{question_idx.dtype} {tuple(question_idx.shape)}")
        if slot_ids is None:
            if K > n_s:
                raise ValueError(f"a question has {K} positives but the state has max_positives={n_s}; "
                                 "raise max_positives or pass slot_ids")
            slot_ids = torch.arange(K, device=terms.valid.device).expand(B, K)  # (B, K)
        elif slot_ids.shape != (B, K) or slot_ids.dtype not in (torch.int32, torch.int64):
            raise ValueError(f"slot_ids must be an integer tensor of shape ({B}, {K}), got "
                             f"{slot_ids.dtype} {tuple(slot_ids.shape)}")
        rows = question_idx.to(self.v.device, torch.int64)[:, None].expand(B, K)[terms.valid]  # (P,)
        cols = slot_ids.to(self.v.device, torch.int64)[terms.valid]  # (P,)
        if bool(((rows < 0) | (rows >= n_q)).any()):
            raise ValueError(f"question_idx out of range [0, {n_q}): {question_idx.tolist()[:10]}")
        if bool(((cols < 0) | (cols >= n_s)).any()):
            raise ValueError(f"slot_ids out of range [0, {n_s}) at a valid slot")
        return rows, cols

    @torch.no_grad()
    def _update(self, log_g: Tensor, rows: Tensor, cols: Tensor, gamma: float, update: bool) -> Tensor:
        """v_new per pair from the state before this call; writes the state when ``update``."""
        v_old = self.v[rows, cols].to(log_g.dtype)  # (P,)
        if gamma == 1.0:
            v_new = log_g.clone()  # (P,) exactly log ĝ, the plain-gradient oracle
        else:
            ma = torch.logaddexp(math.log1p(-gamma) + v_old, math.log(gamma) + log_g)  # (P,)
            v_new = torch.where(self.seen[rows, cols], ma, log_g)  # (P,) first visit: v ← log ĝ
        if update:
            key = rows * self.v.shape[1] + cols  # (P,)
            uniq, inv, counts = torch.unique(key, return_inverse=True, return_counts=True)  # (U,) (P,) (U,)
            if int(counts.max()) > 1:
                # duplicates: store log of the mean of their u_new (every duplicate then writes the
                # same value, so the scatter is deterministic); dense (U, P), only in this rare case
                member = inv[None, :] == torch.arange(len(uniq), device=inv.device)[:, None]  # (U, P)
                mean = masked_logsumexp(v_new[None, :].expand_as(member), member, dim=1)  # (U,)
                store = (mean - counts.to(v_new.dtype).log())[inv]  # (P,)
            else:
                store = v_new  # (P,)
            self.v[rows, cols] = store.to(self.v.dtype)
            self.seen[rows, cols] = True
        return v_new

    def stats(self) -> dict[str, float]:
        """Diagnostics: mean/std of the weights ĝ/u over the last batch's pairs, the fraction of
        (question, slot) states seen (slots past a question's own positive count are never seen),
        and the mean v over seen states."""
        w = self._last_weights
        n_seen = int(self.seen.sum())
        return {
            "weight_mean": float(w.mean()) if w is not None and w.numel() else math.nan,
            "weight_std": float(w.std(unbiased=False)) if w is not None and w.numel() else math.nan,
            "seen_fraction": n_seen / self.seen.numel(),
            "v_mean": float(self.v[self.seen].mean()) if n_seen else math.nan,
        }

    def extra_repr(self) -> str:
        n_q, n_s = self.v.shape
        return (f"num_questions={n_q}, max_positives={n_s}, gamma={self.gamma}, "
                f"gamma_schedule={self.gamma_schedule!r}, gamma_warmup_steps={self.gamma_warmup_steps}, "
                f"gamma_decay_steps={self.gamma_decay_steps}")
