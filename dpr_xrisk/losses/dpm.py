"""The DPM loss (discriminative probabilistic modelling, docs/method.md §1) and its per-pair terms.

Owns the formula of docs/method.md §1, its optional CLIP-style reverse direction, and the per-pair
log ĝ_ik that the moving-average estimator (docs/method.md §4) wraps. Does not own the batch layout
(``layout.py``) nor how q is obtained (the samplers).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .layout import CandidateBatch, PairTerms, check_tau, check_zeta_scale, loss_dtype, masked_logsumexp


def _pair_weights(valid: Tensor, dtype: torch.dtype) -> Tensor:
    """Uniform weights over all valid (i, k) pairs: the batch loss is the mean over pairs."""
    w = valid.to(dtype)  # (B, K)
    return w / w.sum()  # (B, K)


def dpm_log_terms(batch: CandidateBatch, tau: float, zeta_scale: float = 1.0, zeta_normalize: bool = False) -> PairTerms:
    """log ĝ_ik = log Σ_{j ∈ {k} ∪ {j: m_ij = 1}} exp((s_ij + ζ_ij − s_ik)/τ), per (i, k) slot.

    The positive k contributes exp(0) = 1 (ζ = 0); the other positives of i are not in the sum
    (their m_ij is 0). ĝ_ik is a sum, so L_DPM(i,k) = τ·log ĝ_ik = −τ·log p̂(y_k | x_i).
    Cost O(B·N): log ĝ_ik = log(1 + exp(LSE_j[(s_ij + ζ_ij)/τ] − s_ik/τ)).
    """
    tau = check_tau(tau)
    zeta_scale = check_zeta_scale(zeta_scale)
    dtype = loss_dtype(batch.scores)
    s = batch.scores.to(dtype)  # (B, N)
    z = (s + batch.zeta(tau, zeta_scale, dtype, zeta_normalize)) / tau  # (B, N)
    lse_neg = masked_logsumexp(z, batch.neg_mask, dim=1)  # (B,) huge negative when i has no negative
    cols, valid = batch.positive_slots  # (B, K), (B, K)
    s_pos = s.gather(1, cols) / tau  # (B, K)
    log_g = torch.logaddexp(torch.zeros_like(s_pos), lse_neg[:, None] - s_pos)  # (B, K)
    log_g = torch.where(valid, log_g, 0.0)  # (B, K)
    return PairTerms(log_g, valid, cols, _pair_weights(valid, dtype))


def dpm_reverse_log_terms(batch: CandidateBatch, tau: float) -> PairTerms:
    """Passage→question direction: log ĝᵀ_ik = log Σ_{i' ∈ {i} ∪ {i': m_i'k = 1}} exp((s_i'k − s_ik)/τ).

    For a positive pair (i, k) the candidates are the questions of the batch: i itself plus every
    question i' that may take passage k as a negative (neg_mask[i', k]; this excludes the questions
    whose positive k is, and k's known false negatives / duplicates). Importance weights are q = 1
    in this direction (questions are not sampled per passage), so ζ = 0. Same slots and weights as
    :func:`dpm_log_terms`.
    """
    tau = check_tau(tau)
    dtype = loss_dtype(batch.scores)
    s = batch.scores.to(dtype) / tau  # (B, N)
    lse_q = masked_logsumexp(s, batch.neg_mask, dim=0)  # (N,) over questions that may negate passage j
    cols, valid = batch.positive_slots  # (B, K), (B, K)
    s_pos = s.gather(1, cols)  # (B, K)
    log_g = torch.logaddexp(torch.zeros_like(s_pos), lse_q[cols] - s_pos)  # (B, K)
    log_g = torch.where(valid, log_g, 0.0)  # (B, K)
    return PairTerms(log_g, valid, cols, _pair_weights(valid, dtype))


class DPMLoss(nn.Module):
    r"""Importance-weighted DPM loss (docs/method.md §1).

    .. math::
        L(i,k) = \tau \log \sum_{j \in \{k\} \cup \{j: m_{ij}=1\}}
                 \exp\big((s_{ij} + \zeta_{ij} - s_{ik})/\tau\big),
        \qquad \zeta_{ij} = -\alpha\,\tau \log q_{ij} \ (0 \text{ for } j = k)

    averaged over every (question i, positive k) pair of the batch; α = ``zeta_scale``.
    ζ makes Σ_j exp(s_ij/τ)/q_ij an importance-weighted estimate of the partition function Z(x_i).
    With ``symmetric=True`` the loss is (fwd + bwd)/2, where bwd is the mean over the same pairs of
    the passage→question term of :func:`dpm_reverse_log_terms` (CLIP-style, q = 1).

    Input: a :class:`~dpr_xrisk.losses.layout.CandidateBatch`. Output: a scalar.
    Reference: Wang, Lei, Ying and Yang, "On Discriminative Probabilistic Modeling for
    Self-Supervised Representation Learning". Oracle: q ≡ 1, K_i = 1 and every non-positive an
    unmasked negative give τ·cross_entropy(s/τ).

    Example::

        batch = CandidateBatch.from_embeddings(q, p, pos_mask=torch.eye(4, dtype=torch.bool))
        loss = DPMLoss(tau=0.05)(batch)
    """

    def __init__(self, tau: float = 0.05, zeta_scale: float = 1.0, symmetric: bool = False,
                 zeta_normalize: bool = False):
        super().__init__()
        # τ = 0.05 suits cosine scores (SimCSE, SogCLR and sentence-transformers' MNRL scale 20);
        # for raw dot products (DPR) use τ ≈ 1. The trainer may override.
        self.tau = check_tau(tau)
        # α = 1: the importance-weighted loss of docs/method.md §1; α = 0 ignores log_q.
        self.zeta_scale = check_zeta_scale(zeta_scale)
        self.symmetric = bool(symmetric)
        # self-normalised weights (CandidateBatch.zeta): keep the ratios of 1/q, drop their scale
        self.zeta_normalize = bool(zeta_normalize)

    def forward(self, batch: CandidateBatch) -> Tensor:
        loss = self.tau * dpm_log_terms(batch, self.tau, self.zeta_scale, self.zeta_normalize).mean()  # ()
        if self.symmetric:
            loss = (loss + self.tau * dpm_reverse_log_terms(batch, self.tau).mean()) / 2  # ()
        return loss

    def extra_repr(self) -> str:
        return (f"tau={self.tau}, zeta_scale={self.zeta_scale}, symmetric={self.symmetric}, "
                f"zeta_normalize={self.zeta_normalize}")
