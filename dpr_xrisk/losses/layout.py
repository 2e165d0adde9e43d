"""The batch layout every loss reads (:class:`CandidateBatch`) and the per-pair output (:class:`PairTerms`).

This module owns the *one* definition of how a training batch reaches a loss, shared by the
collator, the losses, the moving-average (FCCO) estimator and the tests, plus the few numerical
helpers all losses use (masked log-sum-exp, the dtype rule, the temperature check).
It does not own how negatives are sampled or how q is computed (the samplers, docs/method.md §3), nor any
loss formula (``dpm.py``, ``listwise.py``, ``infonce.py``).

Layout (B questions, N candidate passages = every passage in the batch)::

    scores    (B, N) float  s_ij, score of question i against passage j (dot product or cosine)
    pos_mask  (B, N) bool   True where j is a positive of i; every row needs K_i >= 1
    neg_mask  (B, N) bool   m_ij of docs/method.md: True where j may act as a negative of i. False for i's
                            positives, duplicates of them, known false negatives and padding.
                            In-batch negatives are simply other questions' passages left True.
    log_q     (B, N) float  log q_ij <= 0, log of the probability with which the sampler put j in
                            i's sample (0 = certain). Only read where neg_mask is True; None = all 0.

A candidate with neither mask set is ignored by every loss and gets exactly zero gradient.

Per-pair output: both DPM and listwise are f(ĝ_ik) with f = τ·log (docs/method.md §4). The functions
``dpm_log_terms`` / ``listwise_log_terms`` return :class:`PairTerms`, indexed by *slots*
(B, K), K = max_i K_i: slot k of row i is the k-th positive of question i in increasing column
order (``cols[i, k]`` is its column in ``scores``); slots past K_i are padding (``valid`` False,
``log_g`` 0, ``weight`` 0). The batch loss is ``tau * terms.mean()`` = τ · Σ_ik w_ik · log ĝ_ik.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import torch
from torch import Tensor


@dataclass(frozen=True)
class CandidateBatch:
    """Scores and masks of one batch, validated on construction (see the module docstring)."""

    scores: Tensor  # (B, N) float
    pos_mask: Tensor  # (B, N) bool
    neg_mask: Tensor  # (B, N) bool
    log_q: Tensor | None = None  # (B, N) float, or None for q ≡ 1

    def __post_init__(self):
        validate_layout(self.scores, self.pos_mask, self.neg_mask, self.log_q)

    @classmethod
    def from_embeddings(
        cls,
        q_emb: Tensor,  # (B, D)
        p_emb: Tensor,  # (N, D)
        pos_mask: Tensor,  # (B, N) bool
        neg_mask: Tensor | None = None,  # (B, N) bool; default: every non-positive is a negative
        log_q: Tensor | None = None,  # (B, N)
    ) -> CandidateBatch:
        """Layout with scores = q_emb @ p_emb.T (cosine when the encoder L2-normalises)."""
        scores = q_emb @ p_emb.T  # (B, N)
        if neg_mask is None:
            neg_mask = ~pos_mask  # (B, N)
        return cls(scores, pos_mask, neg_mask, log_q)

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.scores.shape)

    @cached_property
    def num_positives(self) -> Tensor:
        """K_i per question, (B,) long."""
        return self.pos_mask.sum(dim=1)  # (B,)

    @cached_property
    def positive_slots(self) -> tuple[Tensor, Tensor]:
        """(cols, valid), both (B, K): column of the k-th positive of row i, and k < K_i."""
        k_max = int(self.num_positives.max())
        # a stable sort on "is not positive" puts each row's positive columns first, in column order
        order = torch.sort((~self.pos_mask).to(torch.uint8), dim=1, stable=True).indices  # (B, N)
        cols = order[:, :k_max]  # (B, K)
        slot = torch.arange(k_max, device=cols.device)  # (K,)
        valid = slot[None, :] < self.num_positives[:, None]  # (B, K)
        return cols, valid

    def zeta(self, tau: float, zeta_scale: float, dtype: torch.dtype, normalize: bool = False) -> Tensor:
        """ζ_ij = −zeta_scale·τ·log q_ij where neg_mask, else 0 (positives are certain), (B, N).

        ``normalize`` (self-normalised importance weights): each row's ζ on its n_i negatives is
        shifted by c_i = τ·log((1/n_i) Σ_j exp(ζ_ij/τ)), so that the weights exp(ζ_ij/τ) = 1/q_ij
        average 1 over i's negatives. Ratios between weights are kept (a hard negative drawn with
        a high q still counts less than an in-batch one), but their common scale -- for in-batch
        negatives ~N/n_b, which makes the positive one item among N and leaves its pull
        unsaturated -- is removed: Σ_j exp((s_ij + ζ_ij)/τ) = n_i · Σ_j w_j e^{s_ij/τ} / Σ_j w_j.
        With equal q on every negative this is exactly ζ = 0."""
        if self.log_q is None or zeta_scale == 0:
            return torch.zeros(self.shape, dtype=dtype, device=self.scores.device)  # (B, N)
        log_q = torch.where(self.neg_mask, self.log_q.to(dtype), 0.0)  # (B, N) unused entries never read
        zeta = -zeta_scale * tau * log_q  # (B, N)
        if not normalize:
            return zeta
        n = self.neg_mask.sum(dim=1, keepdim=True).clamp(min=1).to(dtype)  # (B, 1)
        shift = tau * (masked_logsumexp(zeta / tau, self.neg_mask, dim=1)[:, None] - torch.log(n))  # (B, 1)
        shift = torch.where(self.neg_mask.any(dim=1, keepdim=True), shift, 0.0)  # (B, 1) rows without negatives
        return torch.where(self.neg_mask, zeta - shift, 0.0)  # (B, N)


@dataclass(frozen=True)
class PairTerms:
    """log ĝ_ik per (question, positive slot), with the weights of the batch mean (module docstring)."""

    log_g: Tensor  # (B, K) log ĝ_ik, differentiable; 0 on padding slots
    valid: Tensor  # (B, K) bool, slot k < K_i
    cols: Tensor  # (B, K) long, column of the slot's positive in scores
    weight: Tensor  # (B, K) weight of the pair in the batch mean; sums to 1, 0 on padding

    def mean(self) -> Tensor:
        """Σ_ik w_ik · log ĝ_ik, a scalar; the loss is τ times this."""
        return (self.weight * self.log_g).sum()


def validate_layout(scores: Tensor, pos_mask: Tensor, neg_mask: Tensor, log_q: Tensor | None) -> None:
    """Raise ValueError with a clear message when the tensors break the layout contract."""
    if scores.dim() != 2:
        raise ValueError(f"scores must be (B, N), got shape {tuple(scores.shape)}")
    if not scores.is_floating_point():
        raise ValueError(f"scores must be floating point, got {scores.dtype}")
    if scores.shape[0] == 0 or scores.shape[1] == 0:
        raise ValueError(f"empty batch: scores has shape {tuple(scores.shape)}")
    named = {"pos_mask": pos_mask, "neg_mask": neg_mask}
    if log_q is not None:
        named["log_q"] = log_q
    for name, t in named.items():
        if t.shape != scores.shape:
            raise ValueError(f"{name} has shape {tuple(t.shape)}, scores has {tuple(scores.shape)}")
    for name in ("pos_mask", "neg_mask"):
        if named[name].dtype != torch.bool:
            raise ValueError(f"{name} must be a bool tensor, got {named[name].dtype}")
    no_pos = (~pos_mask.any(dim=1)).nonzero().flatten()  # (#rows without a positive,)
    if no_pos.numel():
        raise ValueError(f"every question needs >= 1 positive; rows without one: {no_pos.tolist()[:10]}")
    overlap = (pos_mask & neg_mask).nonzero()  # (#overlaps, 2)
    if overlap.numel():
        raise ValueError(f"pos_mask and neg_mask overlap at (row, col) {overlap[:5].tolist()}")
    if log_q is not None:
        if not log_q.is_floating_point():
            raise ValueError(f"log_q must be floating point, got {log_q.dtype}")
        used = log_q[neg_mask]  # (#negatives,)
        if not bool(torch.isfinite(used).all()):
            raise ValueError("log_q must be finite where neg_mask is True (q > 0 for a sampled negative)")
        if bool((used > 0).any()):
            raise ValueError(f"log_q must be <= 0 where neg_mask is True (q <= 1); max is {used.max().item():g}")


# ---- numerical helpers shared by the losses ------------------------------------------------


def check_tau(tau: float) -> float:
    """τ must be a positive finite number."""
    if not (isinstance(tau, (int, float)) and math.isfinite(tau) and tau > 0):
        raise ValueError(f"temperature tau must be > 0, got {tau!r}")
    return float(tau)


def check_zeta_scale(zeta_scale: float) -> float:
    """α = zeta_scale must be ≥ 0 (docs/method.md: 0 = unweighted, 1 = importance-weighted)."""
    if not (isinstance(zeta_scale, (int, float)) and math.isfinite(zeta_scale) and zeta_scale >= 0):
        raise ValueError(f"zeta_scale must be >= 0, got {zeta_scale!r}")
    return float(zeta_scale)


def loss_dtype(t: Tensor) -> torch.dtype:
    """Work in the input dtype, but upcast 16-bit scores (e.g. from bf16 autocast) to float32."""
    return torch.float32 if t.dtype in (torch.float16, torch.bfloat16) else t.dtype


def masked_logsumexp(x: Tensor, mask: Tensor, dim: int) -> Tensor:
    """log Σ_{mask} exp(x) along dim, with exactly zero gradient on masked entries.

    Masked entries are replaced (torch.where, so no gradient flows to them) by the most negative
    finite number rather than -inf: an all-masked slice then gives a huge negative finite value
    instead of -inf, whose backward would be NaN (exp(-inf - -inf)).
    """
    fill = torch.finfo(x.dtype).min
    return torch.logsumexp(torch.where(mask, x, fill), dim=dim)
