"""The InfoNCE / DPR negative log-likelihood baseline (no importance weights).

Owns the baseline loss only; it reuses the DPM per-pair terms with ζ = 0, since
InfoNCE(τ) = DPM(τ, zeta_scale=0) / τ. Does not own the batch layout (``layout.py``).
"""

from __future__ import annotations

from torch import Tensor, nn

from .dpm import dpm_log_terms, dpm_reverse_log_terms
from .layout import CandidateBatch, check_tau


class InfoNCELoss(nn.Module):
    r"""DPR's NLL loss / InfoNCE over each positive and the unmasked negatives.

    .. math::
        L(i,k) = -\log \frac{\exp(s_{ik}/\tau)}{\exp(s_{ik}/\tau) + \sum_{j: m_{ij}=1} \exp(s_{ij}/\tau)}

    averaged over every (question i, positive k) pair; other positives of i are not negatives.
    No importance weights: ``log_q`` is ignored. This equals ``DPMLoss(tau, zeta_scale=0)`` divided
    by τ. ``symmetric=True`` averages it with the passage→question direction (CLIP-style, see
    :func:`~dpr_xrisk.losses.dpm.dpm_reverse_log_terms`): loss = (fwd + bwd)/2.

    Input: a :class:`~dpr_xrisk.losses.layout.CandidateBatch`. Output: a scalar.
    Reference: Karpukhin et al., "Dense Passage Retrieval for Open-Domain Question Answering" (τ = 1,
    dot product); van den Oord et al., "Representation Learning with Contrastive Predictive Coding".

    Example::

        batch = CandidateBatch.from_embeddings(q, p, pos_mask=torch.eye(4, dtype=torch.bool))
        loss = InfoNCELoss()(batch)  # DPR's loss on dot-product scores
    """

    def __init__(self, tau: float = 1.0, symmetric: bool = False):
        super().__init__()
        # τ = 1 is DPR's loss on raw dot products; for cosine scores use τ = 0.05
        # (sentence-transformers' MultipleNegativesRankingLoss uses scale 20 = 1/0.05).
        self.tau = check_tau(tau)
        self.symmetric = bool(symmetric)

    def forward(self, batch: CandidateBatch) -> Tensor:
        loss = dpm_log_terms(batch, self.tau, zeta_scale=0.0).mean()  # ()
        if self.symmetric:
            loss = (loss + dpm_reverse_log_terms(batch, self.tau).mean()) / 2  # ()
        return loss

    def extra_repr(self) -> str:
        return f"tau={self.tau}, symmetric={self.symmetric}"
