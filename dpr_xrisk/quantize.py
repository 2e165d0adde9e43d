"""Inference with int8 towers: dynamic int8 quantisation of every Linear layer
(``torch.ao.quantization.quantize_dynamic``, fbgemm/x86 kernels on CPUs) -- weights int8,
activations quantised on the fly, embeddings, LayerNorms and pooling in float32.

The quantised copy keeps the model's fingerprint (it is the same model, run in int8); the
embeddings and index metas record the ``quantize`` used, and ``search`` refuses queries of another
mode unless ``--allow-backend-mismatch``. Model folders never hold anything quantisation-specific.
"""

from __future__ import annotations

import copy
import warnings

import torch
from torch import nn

from dpr_xrisk.errors import unknown_name

QUANTIZE = ("none", "int8")


def quantized(encoder, mode: str | None = "none"):
    """``encoder`` itself for ``none``; for ``int8`` a copy with dynamically quantised towers
    (the original is untouched; CPU only)."""
    mode = mode or "none"
    if mode not in QUANTIZE:
        raise unknown_name("quantize mode", mode, QUANTIZE)
    if mode == "none":
        return encoder
    from torch.ao.quantization import quantize_dynamic

    def q(model):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's deprecation notice of quantised tensor creation
            return quantize_dynamic(copy.deepcopy(model).cpu().eval(), {nn.Linear}, dtype=torch.qint8)

    qm = q(encoder.query_model)
    pm = qm if encoder.passage_model is encoder.query_model else q(encoder.passage_model)
    return with_towers(encoder, qm, pm, quantize=mode)


def with_towers(encoder, query_model, passage_model, **attrs):
    """A copy of ``encoder`` that runs other towers (int8, ONNX Runtime) in place of its own: the
    original is untouched and the copy keeps its fingerprint (the same model, run another way);
    ``attrs`` are set on the copy (``quantize``, ``backend``)."""
    fingerprint = encoder.fingerprint()
    out = copy.copy(encoder)
    out._modules = dict(encoder._modules)  # a shallow copy must not swap the original's towers
    out.query_model, out.passage_model = query_model, passage_model
    out.fingerprint = lambda: fingerprint
    for name, value in attrs.items():
        setattr(out, name, value)
    return out


def overlap_at_k(a, b) -> float:
    """Mean share of ``b``'s top-k ids that are in ``a``'s (two {qid: [ids]} dicts, same k)."""
    shares = [len(set(a[q]) & set(b[q])) / max(1, len(a[q])) for q in a if q in b]
    return sum(shares) / len(shares) if shares else 0.0


def pool_overlap(ref_pools, pools, rng, n: int = 256) -> tuple[int, float]:
    """(questions compared, mean overlap) of two minings' pools (``RefreshResult.pools``: per
    training set, per question, [(id, score)]) on ``n`` questions drawn with ``rng``."""
    flat = [(t, r) for t, qs in enumerate(ref_pools) for r in range(len(qs))]
    pick = rng.permutation(len(flat))[:n]
    a = {int(i): [d for d, _ in ref_pools[flat[i][0]][flat[i][1]]] for i in pick}
    b = {int(i): [d for d, _ in pools[flat[i][0]][flat[i][1]]] for i in pick}
    return len(pick), overlap_at_k(a, b)
