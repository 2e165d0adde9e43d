"""Inference with int8 towers: dynamic int8 quantisation of every Linear layer
(``torch.ao.quantization.quantize_dynamic``, fbgemm/x86 kernels on CPUs) -- weights int8 with one
scale per output channel, activations quantised on the fly, embeddings, LayerNorms and pooling in
float32.

Activations use all 8 bits where the CPU has AVX-512 VNNI (``avx512_vnni``), whose int8 dot
products accumulate in int32; elsewhere 7 bits (torch's default ``reduce_range``), because the
AVX2/AVX-512 kernels without VNNI add pairs of uint8 x int8 products in int16, which 8-bit
activations can overflow. (AVX-VNNI alone, ``avx_vnni``, is left at 7 bits: whether fbgemm uses
it is not checked here.)
Measured on MiniLM (200 Wikipedia passages, cosine to the fp32 vectors, mean / min): torch's
defaults (per-tensor weights, 7-bit activations) 0.933 / 0.890; per-channel weights 0.982 /
0.958; per-channel and 8-bit activations 0.995 / 0.990.

The quantised copy keeps the model's fingerprint (it is the same model, run in int8); the
embeddings and index metas record the ``quantize`` used, and ``search`` refuses queries of another
mode unless ``--allow-backend-mismatch``. Model folders never hold anything quantisation-specific.
"""

from __future__ import annotations

import copy
import warnings

import torch
from torch import nn

from dpr_xrisk.device import cpu_has_vnni
from dpr_xrisk.errors import unknown_name

QUANTIZE = ("none", "int8")


def _full_range_linear_class():
    """The dynamic int8 Linear with 8-bit activations (``reduce_range=False``): safe only with VNNI."""
    import torch.ao.nn.quantized.dynamic as dq

    class FullRangeLinear(dq.Linear):
        def forward(self, x):
            return torch.ops.quantized.linear_dynamic(x, self._packed_params._packed_params,
                                                      reduce_range=False).to(x.dtype)

    return FullRangeLinear


def activation_bits(full_range: bool | None = None) -> int:
    """8 where int8 towers quantise activations with the full range on this CPU, else 7."""
    return 8 if (cpu_has_vnni() if full_range is None else full_range) else 7


def quantized(encoder, mode: str | None = "none", full_range: bool | None = None):
    """``encoder`` itself for ``none``; for ``int8`` a copy with dynamically quantised towers
    (the original is untouched; CPU only). ``full_range``: 8-bit activations (default: where the
    CPU has VNNI, see the module's notes); the copy's ``activation_bits`` says which ran."""
    mode = mode or "none"
    if mode not in QUANTIZE:
        raise unknown_name("quantize mode", mode, QUANTIZE)
    if mode == "none":
        return encoder
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    bits = activation_bits(full_range)
    full = _full_range_linear_class() if bits == 8 else None

    def q(model):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's deprecation notice of quantised tensor creation
            out = quantize_dynamic(copy.deepcopy(model).cpu().eval(), {nn.Linear: per_channel_dynamic_qconfig},
                                   dtype=torch.qint8)
        if full is not None:
            for m in out.modules():
                if type(m) is full.__bases__[0]:
                    m.__class__ = full
        return out

    qm = q(encoder.query_model)
    pm = qm if encoder.passage_model is encoder.query_model else q(encoder.passage_model)
    return with_towers(encoder, qm, pm, quantize=mode, activation_bits=bits)


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
