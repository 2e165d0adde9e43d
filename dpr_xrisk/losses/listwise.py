"""The listwise cross-entropy loss (compositional OCE with φ = KL, docs/method.md §2), its pairwise losses ℓ
and its per-pair terms.

Owns the formula of docs/method.md §2 and the registry ``PAIRWISE`` of ℓ. Does not own the batch layout
(``layout.py``) nor how q is obtained (the samplers).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor, nn

from ..errors import unknown_name
from .layout import CandidateBatch, PairTerms, check_tau, check_zeta_scale, loss_dtype, masked_logsumexp


def linear(d: Tensor, margin: float) -> Tensor:
    """ℓ(d) = d (the listwise cross-entropy); margin unused."""
    return d


def squared_hinge(d: Tensor, margin: float) -> Tensor:
    """ℓ(d) = max(0, d + c)², c = margin."""
    return torch.clamp(d + margin, min=0) ** 2


def logistic(d: Tensor, margin: float) -> Tensor:
    """ℓ(d) = log(1 + e^d), computed exactly and stably as logaddexp(d, 0); margin unused."""
    return torch.logaddexp(d, torch.zeros_like(d))


PAIRWISE: dict[str, Callable[[Tensor, float], Tensor]] = {
    "linear": linear,
    "squared_hinge": squared_hinge,
    "logistic": logistic,
}


def get_pairwise(name: str) -> Callable[[Tensor, float], Tensor]:
    """ℓ by name; an unknown name is an InputError listing the valid ones."""
    if name not in PAIRWISE:
        raise unknown_name("pairwise loss", name, PAIRWISE)
    return PAIRWISE[name]


def listwise_log_terms(
    batch: CandidateBatch,
    tau: float,
    zeta_scale: float = 1.0,
    pairwise: str = "linear",
    margin: float = 1.0,
    zeta_normalize: bool = False,
) -> PairTerms:
    """log ĝ_ik = log((1/|C_i|) Σ_{j∈C_i} exp((ℓ(s_ij − s_ik) + ζ_ij)/τ)), per (i, k) slot.

    C_i = i's positives ∪ its unmasked negatives (k itself included, with ℓ(0) taken literally:
    0 linear, c² squared hinge, log 2 logistic). ζ = 0 on positives, −zeta_scale·τ·log q on
    negatives. Weights: 1/(B·K_i), i.e. the loss is the mean over questions of the mean over
    their positives. Memory O(B·K·N), K = max_i K_i.
    """
    tau = check_tau(tau)
    zeta_scale = check_zeta_scale(zeta_scale)
    ell = get_pairwise(pairwise)
    dtype = loss_dtype(batch.scores)
    s = batch.scores.to(dtype)  # (B, N)
    zeta = batch.zeta(tau, zeta_scale, dtype, zeta_normalize)  # (B, N)
    cols, valid = batch.positive_slots  # (B, K), (B, K)
    s_pos = s.gather(1, cols)  # (B, K)
    d = s[:, None, :] - s_pos[:, :, None]  # (B, K, N) d_ikj = s_ij − s_ik
    z = (ell(d, margin) + zeta[:, None, :]) / tau  # (B, K, N)
    in_list = batch.pos_mask | batch.neg_mask  # (B, N) C_i, never empty (holds i's positives)
    lse = masked_logsumexp(z, in_list[:, None, :].expand_as(z), dim=2)  # (B, K)
    size = in_list.sum(dim=1).to(dtype)  # (B,) |C_i|
    log_g = lse - torch.log(size)[:, None]  # (B, K)
    log_g = torch.where(valid, log_g, 0.0)  # (B, K)
    k_i = batch.num_positives.to(dtype)  # (B,)
    weight = valid.to(dtype) / (k_i[:, None] * s.shape[0])  # (B, K)
    return PairTerms(log_g, valid, cols, weight)


class ListwiseLoss(nn.Module):
    r"""Listwise cross-entropy with importance weights (docs/method.md §2).

    .. math::
        L(i) = \frac{1}{K_i} \sum_{k \in P_i} \tau \log \Big( \frac{1}{|C_i|}
               \sum_{j \in C_i} \exp\big((\ell(s_{ij} - s_{ik}) + \zeta_{ij})/\tau\big) \Big)

    with C_i = P_i ∪ {j: m_ij = 1}, ζ_ij = −α·τ·log q_ij on negatives and 0 on positives,
    α = ``zeta_scale``; the batch loss is the mean over questions. Unlike DPM, the other positives
    of i stay in the list of each positive k. ``pairwise`` picks ℓ from :data:`PAIRWISE`
    (``linear``: d, ``squared_hinge``: max(0, d + margin)², ``logistic``: log(1 + e^d)).

    Input: a :class:`~dpr_xrisk.losses.layout.CandidateBatch`. Output: a scalar.
    Reference: Yang, "Algorithmic Foundations of Empirical X-risk Minimization" (compositional OCE).
    Oracle: K_i = 1, ℓ linear, q ≡ 1 gives τ·CE(s/τ) − τ·log|C_i|.

    Example::

        batch = CandidateBatch.from_embeddings(q, p, pos_mask=torch.eye(4, dtype=torch.bool))
        loss = ListwiseLoss(tau=0.05, pairwise="squared_hinge", margin=1.0)(batch)
    """

    def __init__(
        self,
        tau: float = 0.05,
        zeta_scale: float = 1.0,
        pairwise: str = "linear",
        margin: float = 1.0,
        zeta_normalize: bool = False,
    ):
        super().__init__()
        # τ = 0.05 suits cosine scores (as for DPMLoss); use τ ≈ 1 for raw dot products.
        self.tau = check_tau(tau)
        # α = 1: importance-weighted, as docs/method.md §2; α = 0 ignores log_q.
        self.zeta_scale = check_zeta_scale(zeta_scale)
        get_pairwise(pairwise)  # fail at construction, not at the first batch
        self.pairwise = pairwise
        # c = 1 is LibAUC's default margin for its squared-hinge surrogates; only squared_hinge reads it.
        if not math.isfinite(margin):
            raise ValueError(f"margin must be finite, got {margin!r}")
        self.margin = float(margin)
        # self-normalised weights (CandidateBatch.zeta): keep the ratios of 1/q, drop their scale
        self.zeta_normalize = bool(zeta_normalize)

    def forward(self, batch: CandidateBatch) -> Tensor:
        terms = listwise_log_terms(batch, self.tau, self.zeta_scale, self.pairwise, self.margin, self.zeta_normalize)
        return self.tau * terms.mean()  # ()

    def extra_repr(self) -> str:
        return (f"tau={self.tau}, zeta_scale={self.zeta_scale}, pairwise={self.pairwise!r}, margin={self.margin}, "
                f"zeta_normalize={self.zeta_normalize}")
