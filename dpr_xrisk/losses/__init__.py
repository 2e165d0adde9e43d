"""Training objectives: losses over a :class:`CandidateBatch` of scores and masks.

Owns the loss registry (``LOSSES``, ``PAIRWISE``) and ``make_loss``. Each loss lives in its own
module with its formula (docs/method.md §1–2); the shared batch layout is in ``layout.py``; the moving-average
(FCCO) estimator of docs/method.md §4 (``fcco.py``) wraps the per-pair terms (``dpm_log_terms``,
``listwise_log_terms``). Does not own the encoder or the samplers that produce q.

Input format → suitable losses:

==============================================  ===================================
one or more positives, in-batch/hard negatives  ``dpm``, ``infonce`` (no weights)
a ranked candidate list with several positives  ``listwise`` (positives stay in the list)
==============================================  ===================================
"""

from __future__ import annotations

from enum import StrEnum

from torch import nn

from ..errors import unknown_name
from .dpm import DPMLoss, dpm_log_terms, dpm_reverse_log_terms
from .fcco import GAMMA_SCHEDULES, FCCOLoss, FCCOResult, scheduled_gamma
from .infonce import InfoNCELoss
from .layout import CandidateBatch, PairTerms, validate_layout
from .listwise import PAIRWISE, ListwiseLoss, listwise_log_terms

LOSSES: dict[str, type[nn.Module]] = {
    "dpm": DPMLoss,
    "listwise": ListwiseLoss,
    "infonce": InfoNCELoss,
}

# str Enums of the registries, for Typer choices (the dicts stay the source of truth)
LossName = StrEnum("LossName", {name: name for name in LOSSES})
PairwiseName = StrEnum("PairwiseName", {name: name for name in PAIRWISE})


def make_loss(name: str, **kwargs) -> nn.Module:
    """Build a loss by registry name; an unknown name is an InputError listing the valid ones."""
    if name not in LOSSES:
        raise unknown_name("loss", name, LOSSES)
    return LOSSES[name](**kwargs)


__all__ = [
    "LOSSES",
    "PAIRWISE",
    "CandidateBatch",
    "DPMLoss",
    "FCCOLoss",
    "FCCOResult",
    "GAMMA_SCHEDULES",
    "InfoNCELoss",
    "ListwiseLoss",
    "LossName",
    "PairwiseName",
    "PairTerms",
    "dpm_log_terms",
    "dpm_reverse_log_terms",
    "listwise_log_terms",
    "make_loss",
    "scheduled_gamma",
    "validate_layout",
]
