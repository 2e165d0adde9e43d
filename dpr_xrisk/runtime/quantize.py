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

Outlier channels (:func:`smooth_outliers`): activations are quantised with one range per tensor,
and the inputs of a BERT layer's two feed-forward Linears carry a few channels far outside the rest
(MiniLM: channel 99 of the FFN input reaches 28 where the median channel's maximum is 2; the GELU
output feeding the FFN's second Linear has channels at 24 against a median of 1.1), so the step
of the 8-bit grid is set by them. Before quantising, the ``SMOOTH_CHANNELS`` largest input
channels of those Linears (largest by absolute maximum on a data-free calibration batch: random
token ids, fixed seed) are divided down to the next channel's level, and the weight's matching
input columns multiplied up by the same factor: in fp32 the same function (SmoothQuant's
migration, applied to the outliers only). On MiniLM (3,244 SQuAD questions x 524 paragraphs) the
overlap of int8's top-20 with fp32's rose from 0.943 to 0.958 (retired quantize benchmark:
`git show 3ee76c0:eval/RESULTS.md`, raw numbers in ``eval/results/bench_quantize-quality.json``).

Kernels (:func:`int8_engine`): torch packs each int8 weight for one quantised engine. Where the
CPU has AMX-INT8 the copy is packed for ``onednn``, whose dynamic int8 Linear runs on the AMX
tiles; elsewhere for torch's default (``x86``: fbgemm's VNNI/AVX2 kernels). Measured on a Xeon
with AMX (2 threads, MiniLM, 400 Wikipedia passages, batch 16): 181 passages/s with onednn
against 141 with x86, the same vectors to 1e-4 in cosine (mean 0.9961, min 0.9919 against
fp32 either way). A packed weight keeps its engine when torch's global engine is changed later,
but a ``copy.deepcopy`` of an int8 tower re-packs it for the engine current at that time.

The quantised copy keeps the model's fingerprint (it is the same model, run in int8); the
embeddings and index metas record the ``quantize`` used, and ``search`` refuses queries of another
mode unless ``--allow-backend-mismatch``. Model folders never hold anything quantisation-specific.
"""

from __future__ import annotations

import copy
import warnings
from contextlib import contextmanager

import torch
from torch import nn

from dpr_xrisk.runtime.device import cpu_has_amx_int8, cpu_has_vnni
from dpr_xrisk.errors import unknown_name

QUANTIZE = ("none", "int8")
SMOOTH_CHANNELS = 32  # input channels per FFN Linear divided down before quantising (smooth_outliers)
CALIBRATION = (32, 128)  # (sequences, tokens) of smooth_outliers' data-free calibration batch
# the training refresh makes an int8 copy at every refresh: there the calibration forward (4,096
# tokens, ~2 s a tower on one core) cost as much as encoding half the refresh corpus; 16 x 64 tokens
# finds the same outliers (MiniLM, 300 Wikipedia passages, cosine to fp32 mean / min: 0.9961 /
# 0.9933 vs 0.9961 / 0.9930 with 32 x 128) at a quarter of the cost, and the refresh's own quality
# guard measures the result at the first refresh
REFRESH_CALIBRATION = (16, 64)


def int8_engine() -> str:
    """The quantised engine int8 towers are packed for: ``onednn`` on a CPU with AMX-INT8 (its
    Linear runs on the tiles, 1.3x the x86 engine's speed there; module notes), else torch's
    current engine (``x86`` on x86 builds, ``qnnpack`` on ARM: what int8 always used there)."""
    if cpu_has_amx_int8() and "onednn" in torch.backends.quantized.supported_engines:
        return "onednn"
    return torch.backends.quantized.engine


@contextmanager
def quantized_engine(name: str):
    """torch's quantised engine set to ``name`` inside the block (packing happens there), restored
    after: the rest of the process keeps its own setting."""
    if name not in torch.backends.quantized.supported_engines:
        raise unknown_name("quantized engine", name, tuple(torch.backends.quantized.supported_engines))
    before = torch.backends.quantized.engine
    torch.backends.quantized.engine = name
    try:
        yield
    finally:
        torch.backends.quantized.engine = before


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


class InputScaled(nn.Module):
    """``linear`` applied to ``x / scale`` with ``scale`` folded into the weight's input columns:
    in fp32 the same function as ``linear``; quantised, the scaled-down channels no longer set the
    activations' range. ``inv_scale`` is kept as a buffer (one multiply per call). Takes ``linear``
    over: its weight is scaled in place (:func:`smooth_outliers` passes Linears of its own copy)."""

    def __init__(self, linear: nn.Linear, scale: torch.Tensor):
        super().__init__()
        self.linear = linear
        with torch.no_grad():
            self.linear.weight.mul_(scale.to(self.linear.weight))
        self.register_buffer("inv_scale", (1.0 / scale).to(self.linear.weight))

    def forward(self, x):
        return self.linear(x * self.inv_scale)


def ffn_sites(model: nn.Module) -> list[tuple[nn.Module, str]]:
    """(parent, attribute) of the two feed-forward Linears of each layer of a BERT-style encoder
    (``encoder.layer[i].intermediate.dense`` and ``.output.dense``); empty for other towers."""
    sites = []
    for layer in getattr(getattr(model, "encoder", None), "layer", None) or []:
        inter, out = getattr(layer, "intermediate", None), getattr(layer, "output", None)
        for parent in (inter, out):
            if isinstance(getattr(parent, "dense", None), nn.Linear):
                sites.append((parent, "dense"))
    return sites


def smoothable(model: nn.Module) -> bool:
    """Whether :func:`smooth_outliers` rewrites ``model``: BERT-style FFN blocks and a config with
    the vocabulary size its calibration batch is drawn from."""
    return hasattr(getattr(model, "config", None), "vocab_size") and bool(ffn_sites(model))


def _input_absmax(model: nn.Module, linears: list[nn.Module], n: int = 32, length: int = 128,
                  seed: int = 0) -> list[torch.Tensor]:
    """Per input channel, the absolute maximum that reaches each of ``linears`` on a data-free
    calibration batch: ``n`` sequences of ``length`` token ids drawn uniformly from the vocabulary
    (fixed ``seed``, so a model always gets the same scales)."""
    g = torch.Generator().manual_seed(seed)
    length = min(length, getattr(model.config, "max_position_embeddings", length + 2) - 2)  # RoBERTa offsets by 2
    ids = torch.randint(0, model.config.vocab_size, (n, length), generator=g)
    seen: list = [None] * len(linears)

    def hook(i):
        def record(module, args, output):
            a = args[0].detach().abs().reshape(-1, args[0].shape[-1]).amax(0)
            seen[i] = a if seen[i] is None else torch.maximum(seen[i], a)
        return record

    handles = [m.register_forward_hook(hook(i)) for i, m in enumerate(linears)]
    try:
        with torch.inference_mode():
            model(input_ids=ids, attention_mask=torch.ones_like(ids))
    finally:
        for h in handles:
            h.remove()
    return seen


def smooth_outliers(model: nn.Module, k: int = SMOOTH_CHANNELS, copy_model: bool = True,
                    calibration: tuple[int, int] = CALIBRATION) -> tuple[nn.Module, int]:
    """A float32 CPU copy of ``model`` (``copy_model=False``: ``model`` itself, rewritten in place;
    for callers that already hold a float32 CPU copy) whose feed-forward Linears (:func:`ffn_sites`) divide their
    ``k`` largest input channels (at most an eighth of them; calibrated by :func:`_input_absmax`)
    down to the level of the next one, the weights' input columns multiplied up to match
    (:class:`InputScaled`): the same function in fp32, a finer 8-bit grid once quantised.
    ``calibration``: (sequences, tokens) of the calibration batch.
    Returns (copy, Linears rewritten); towers that are not :func:`smoothable` come back unchanged
    with 0."""
    out = (copy.deepcopy(model) if copy_model else model).cpu().float().eval()
    if k <= 0 or not smoothable(out):
        return out, 0
    sites = ffn_sites(out)
    seqs, length = calibration
    for (parent, name), a in zip(sites, _input_absmax(out, [getattr(p, a) for p, a in sites], n=seqs, length=length)):
        kk = min(k, a.numel() // 8)  # outliers are a few channels: at most an eighth of them
        top = a.topk(kk + 1)
        scale = torch.ones_like(a)
        if top.values[kk] > 0:
            scale[top.indices[:kk]] = (top.values[:kk] / top.values[kk]).clamp(min=1.0)
        setattr(parent, name, InputScaled(getattr(parent, name), scale))
    return out, len(sites)


def quantized(encoder, mode: str | None = "none", full_range: bool | None = None, smooth: int = SMOOTH_CHANNELS,
              calibration: tuple[int, int] = CALIBRATION, engine: str | None = None):
    """``encoder`` itself for ``none``; for ``int8`` a copy with dynamically quantised towers
    (the original is untouched; CPU only). ``full_range``: 8-bit activations (default: where the
    CPU has VNNI, see the module's notes); the copy's ``activation_bits`` says which ran.
    ``smooth``: outlier channels divided down per FFN Linear before quantising
    (:func:`smooth_outliers`; 0: none); the copy's ``smoothed_channels`` is that ``k`` (0 where the
    towers have no BERT-style FFN; narrow towers get at most an eighth of their channels).
    ``calibration``: (sequences, tokens) of the outliers' calibration batch (:data:`CALIBRATION`).
    ``engine``: torch's quantised engine the weights are packed for (default :func:`int8_engine`);
    the copy's ``int8_engine`` says which."""
    mode = mode or "none"
    if mode not in QUANTIZE:
        raise unknown_name("quantize mode", mode, QUANTIZE)
    if mode == "none":
        return encoder
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    bits = activation_bits(full_range)
    full = _full_range_linear_class() if bits == 8 else None
    engine = engine or int8_engine()

    def q(model):
        model = smooth_outliers(model, smooth, calibration=calibration)[0]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's deprecation notice of quantised tensor creation
            with quantized_engine(engine):
                out = quantize_dynamic(model, {nn.Linear: per_channel_dynamic_qconfig}, dtype=torch.qint8)
        if full is not None:
            for m in out.modules():
                if type(m) is full.__bases__[0]:
                    m.__class__ = full
        return out

    qm = q(encoder.query_model)
    pm = qm if encoder.passage_model is encoder.query_model else q(encoder.passage_model)
    return with_towers(encoder, qm, pm, quantize=mode, activation_bits=bits, int8_engine=engine,
                       smoothed_channels=smooth if smooth > 0 and smoothable(encoder.query_model) else 0)


def bf16_towers(encoder):
    """A copy of ``encoder`` whose towers hold bfloat16 weights (the original is untouched; the copy
    keeps its fingerprint and has ``bf16_weights`` set): every op runs in bfloat16, LayerNorms and
    GELUs included, where bf16 autocast runs those in float32 and casts each Linear's input and
    output. For CPUs with native bfloat16 (the training refresh under ``--precision bf16``).
    Measured on a Xeon with AMX (2 threads, MiniLM, 1,024 Wikipedia passages at 64 word pieces,
    batch 64): 866-927 passages/s against 676-777 with autocast, min cosine to fp32 0.9999."""
    def cast(model):
        return copy.deepcopy(model).to(torch.bfloat16).eval()

    qm = cast(encoder.query_model)
    pm = qm if encoder.passage_model is encoder.query_model else cast(encoder.passage_model)
    return with_towers(encoder, qm, pm, bf16_weights=True)


def with_towers(encoder, query_model, passage_model, **attrs):
    """A copy of ``encoder`` that runs other towers (int8, bf16 weights, ONNX Runtime) in place of
    its own: the original is untouched and the copy keeps its fingerprint (the same model, run
    another way); ``attrs`` are set on the copy (``quantize``, ``backend``, ``bf16_weights``)."""
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


def check_rows(pools, rng, n: int = 256) -> list[list[int]]:
    """Per set, the rows of ``n`` questions drawn with ``rng`` among those mined in ``pools``
    (``RefreshResult.pools``; entries that are None were not mined): the questions a quality
    check re-mines (``refresh_pools(..., only=...)``) and compares (:func:`pool_overlap`)."""
    flat = [(t, r) for t, qs in enumerate(pools) for r in range(len(qs)) if qs[r] is not None]
    rows: list[list[int]] = [[] for _ in pools]
    for i in rng.permutation(len(flat))[:n]:
        rows[flat[i][0]].append(flat[i][1])
    return [sorted(r) for r in rows]


def pool_overlap(ref_pools, pools) -> tuple[int, float]:
    """(questions compared, mean overlap) of two minings' pools (``RefreshResult.pools``: per
    training set, per question, [(id, score)]; None = not mined) over the questions mined in both."""
    both = [(t, r) for t, qs in enumerate(ref_pools) for r in range(len(qs))
            if qs[r] is not None and pools[t][r] is not None]
    a = {i: [d for d, _ in ref_pools[t][r]] for i, (t, r) in enumerate(both)}
    b = {i: [d for d, _ in pools[t][r]] for i, (t, r) in enumerate(both)}
    return len(both), overlap_at_k(a, b)
