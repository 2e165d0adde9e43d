"""The ONNX Runtime backend (issue #13): each tower exported to ONNX (BERT towers with torch's
TorchScript exporter on eager attention, opset 17, so that ONNX Runtime's optimiser can fuse
attention; other towers with the dynamo exporter, opset 18; dynamic batch and sequence axes) and
run by ONNX Runtime's CPU execution provider;
``int8`` is ONNX Runtime's dynamic quantisation of the exported graph (int8 weights with one
scale per output channel, activations quantised on the fly), exported from the tower with its
feed-forward outlier channels smoothed as torch int8 does (:func:`dpr_xrisk.runtime.quantize.smooth_outliers`). Pooling and normalisation stay in :class:`~dpr_xrisk.retrieval.encoder.DualEncoder`,
so an ONNX tower returns what the torch tower returns: the last hidden states.

Exports are cached under a root folder (next to the model when it is writable, else
``~/.cache/dpr_xrisk/onnx``), one folder per tower and mode, named by the tower's weight
fingerprint: ``<root>/<fingerprint>-<fp32|int8>/model.onnx`` plus ``meta.json`` (the fingerprint,
the file's sha256, the opset, the versions that made it). An unchanged tower is never exported
again; a folder whose file no longer matches its meta (corrupted, cut short) is rebuilt with a
one-line notice. The model folder's ``dpr_xrisk.json`` records nothing of this.
"""

from __future__ import annotations

import copy
import hashlib
import inspect
import json
import os
import shutil
import sys
import warnings
from pathlib import Path

import torch
from torch import nn

from dpr_xrisk.errors import InputError, unknown_name

BACKENDS = ("torch", "onnx")
OPSET = 18
LEGACY_OPSET = 17  # the TorchScript exporter, for BERT towers (see export_tower)
# 2: BERT graphs fused by ONNX Runtime's transformer optimiser before quantisation; 3: BERT towers
# exported by the TorchScript exporter with eager attention, so that the optimiser fuses attention;
# 4: int8 exports of BERT towers have their FFN outlier channels smoothed (quantize.smooth_outliers)
FORMAT = 4
INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def check_backend(backend: str) -> None:
    if backend not in BACKENDS:
        raise unknown_name("backend", backend, BACKENDS)


def require_onnxruntime() -> None:
    """One line naming the extra to install when ONNX Runtime or the exporter's packages are missing."""
    for mod in ("onnxruntime", "onnx", "onnxscript"):
        try:
            __import__(mod)
        except ImportError:
            raise InputError(f"--backend onnx needs {mod}: pip install 'dpr_xrisk[fast]'") from None


def tower_fingerprint(model: nn.Module) -> str:
    """A short hash of a tower's class, config and weights: the key of its exports."""
    h = hashlib.sha256(type(model).__name__.encode())
    config = getattr(model, "config", None)
    if config is not None:
        h.update(config.to_json_string(use_diff=False).encode())
    for name, t in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(t.detach().cpu().contiguous().flatten().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()[:16]


def default_cache_root(model_dir: str | Path | None) -> Path:
    """``<model>/onnx`` when the model folder is writable, else ``~/.cache/dpr_xrisk/onnx``."""
    if model_dir is not None and Path(model_dir).is_dir() and os.access(model_dir, os.W_OK):
        return Path(model_dir) / "onnx"
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "dpr_xrisk" / "onnx"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 22):
            h.update(block)
    return h.hexdigest()


class _LastHidden(nn.Module):
    """The tower with a plain tensor output (what the exporter traces)."""

    def __init__(self, model: nn.Module, names: tuple[str, ...]):
        super().__init__()
        self.model, self.names = model, names

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        extra = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
        return self.model(input_ids=input_ids, attention_mask=attention_mask, **extra).last_hidden_state  # (B, T, H)


def tower_inputs(model: nn.Module) -> tuple[str, ...]:
    params = inspect.signature(model.forward).parameters
    return tuple(n for n in INPUTS if n in params)


def export_tower(model: nn.Module, path: Path, quantize: str = "none") -> None:
    """Export ``model`` (a transformers encoder) to ``path``; ``int8``: then ONNX Runtime's
    dynamic quantisation of the exported graph."""
    import logging

    names = tower_inputs(model)
    tower = copy.deepcopy(model).float().cpu().eval()
    # BERT: the TorchScript exporter on eager attention gives the graph ONNX Runtime's optimiser
    # fuses into Attention nodes (QAttention once quantised: MiniLM int8 ~1.2x faster than the
    # dynamo export, whose attention it cannot fuse); the dynamo exporter for everything else
    legacy = _legacy_export(model)
    if legacy:
        tower.set_attn_implementation("eager")
    if quantize == "int8":
        # the FFN inputs' outlier channels divided down first (fp32-exact), as for torch int8
        from dpr_xrisk.runtime.quantize import smooth_outliers

        tower = smooth_outliers(tower, copy_model=False)[0]  # tower is already a float32 copy
    m = _LastHidden(tower, names)
    example = (torch.full((2, 16), 7, dtype=torch.long), torch.ones(2, 16, dtype=torch.long),
               torch.zeros(2, 16, dtype=torch.long))[: len(names)]
    batch, seq = torch.export.Dim("batch"), torch.export.Dim("sequence")
    fp32 = path if quantize == "none" else path.with_name("fp32.onnx")
    quiet = logging.getLogger("torch.onnx")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from contextlib import redirect_stdout

            with redirect_stdout(sys.stderr if os.environ.get("DPR_XRISK_ONNX_VERBOSE") else open(os.devnull, "w")):
                if legacy:
                    axes = {n: {0: "batch", 1: "sequence"} for n in (*names, "last_hidden_state")}
                    torch.onnx.export(m, example, str(fp32), dynamo=False, opset_version=LEGACY_OPSET,
                                      input_names=list(names), output_names=["last_hidden_state"], dynamic_axes=axes)
                else:
                    torch.onnx.export(m, example, str(fp32), dynamo=True, opset_version=OPSET, input_names=list(names),
                                      output_names=["last_hidden_state"], external_data=False,
                                      dynamic_shapes={n: ({0: batch, 1: seq} if n in names else None) for n in INPUTS})
    finally:
        quiet.setLevel(level)
    fuse(model, fp32)
    if quantize == "int8":
        from onnxruntime.quantization import QuantType, quantize_dynamic

        root_log = logging.getLogger()
        level = root_log.level
        root_log.setLevel(logging.ERROR)  # its advice to pre-process is for static quantisation
        try:
            # per-channel weight scales: on MiniLM the per-tensor default left vectors at cosine 0.94
            # to fp32 (min over 200 passages); per channel 0.99
            # (DefaultTensorType: the fused graph's com.microsoft nodes defeat ONNX shape inference)
            import onnx

            quantize_dynamic(str(fp32), str(path), weight_type=QuantType.QInt8, per_channel=True,
                             extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
        finally:
            root_log.setLevel(level)
        fp32.unlink()


def _is_bert(model: nn.Module) -> bool:
    return getattr(getattr(model, "config", None), "model_type", None) == "bert"


def _legacy_export(model: nn.Module) -> bool:
    """Whether ``model`` is exported by the TorchScript exporter on eager attention (BERT)."""
    return _is_bert(model) and hasattr(model, "set_attn_implementation")


def fuse(model: nn.Module, path: Path) -> bool:
    """ONNX Runtime's transformer optimiser on a BERT graph, in place (embeddings + LayerNorm into
    EmbedLayerNormalization, the attention block into Attention, LayerNorm + residual into
    SkipLayerNormalization, bias + GELU into BiasGelu): int8 then quantises the fused graph
    (QAttention, QEmbedLayerNormalization), where those fusions can no longer happen at load time.
    Other model types are left as exported. Returns whether it ran."""
    config = getattr(model, "config", None)
    if not _is_bert(model):
        return False
    import logging

    from onnxruntime.transformers.optimizer import optimize_model

    root_log = logging.getLogger()
    level = root_log.level
    root_log.setLevel(logging.ERROR)
    try:
        opt = optimize_model(str(path), model_type="bert", num_heads=config.num_attention_heads,
                             hidden_size=config.hidden_size, opt_level=1)
        opt.save_model_to_file(str(path))
    finally:
        root_log.setLevel(level)
    return True


def load_or_export(model: nn.Module, root: Path, quantize: str = "none") -> tuple[Path, bool]:
    """The cached export of ``model`` in ``quantize`` mode under ``root`` (exported when missing,
    rebuilt with a notice when damaged); returns (path, whether it was exported now)."""
    key = tower_fingerprint(model)
    folder = Path(root) / f"{key}-{'fp32' if quantize == 'none' else quantize}"
    path, meta_path = folder / "model.onnx", folder / "meta.json"
    if meta_path.exists():
        try:
            meta = json.loads(meta_path.read_text())
            if meta.get("fingerprint") == key and meta.get("quantize") == quantize and meta.get("format") == FORMAT \
                    and path.exists() and _sha256(path) == meta.get("sha256"):
                return path, False
            problem = "does not match its meta.json (changed or cut short)"
        except (OSError, ValueError) as e:
            problem = f"is unreadable ({str(e).splitlines()[0]})"
        print(f"ONNX cache {folder} {problem}; exporting again", file=sys.stderr)
    shutil.rmtree(folder, ignore_errors=True)
    tmp = folder.with_name(folder.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        export_tower(model, tmp / "model.onnx", quantize)
        import onnxruntime

        meta = {"fingerprint": key, "quantize": quantize, "opset": LEGACY_OPSET if _legacy_export(model) else OPSET, "format": FORMAT, "inputs": list(tower_inputs(model)),
                "sha256": _sha256(tmp / "model.onnx"), "torch": torch.__version__, "onnxruntime": onnxruntime.__version__}
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
        tmp.rename(folder)
    except BaseException as e:  # a failed export leaves no half-written cache, and names the cache folder
        shutil.rmtree(tmp, ignore_errors=True)
        from dpr_xrisk.io.common import user_paths

        user_paths(e, tmp, folder)
        raise
    return path, True


class _Output:
    def __init__(self, last_hidden_state: torch.Tensor):
        self.last_hidden_state = last_hidden_state


class OrtTower(nn.Module):
    """An ONNX Runtime session in a tower's place: called like a transformers encoder, returns
    ``.last_hidden_state`` as a CPU float32 tensor."""

    def __init__(self, path: Path, config=None, threads: int | None = None):
        super().__init__()
        import onnxruntime as ort

        self.config = config  # the exported tower's (hidden size, ...)
        # DualEncoder reads a tower's device from its parameters: this one lives on the CPU
        self.anchor = nn.Parameter(torch.zeros(1), requires_grad=False)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads or torch.get_num_threads()
        opts.inter_op_num_threads = 1
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.log_severity_level = 3
        self.session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        self.names = [i.name for i in self.session.get_inputs()]

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        feed = {"input_ids": input_ids, "attention_mask": attention_mask,
                "token_type_ids": token_type_ids if token_type_ids is not None else torch.zeros_like(input_ids)}
        out = self.session.run(None, {n: feed[n].cpu().numpy() for n in self.names})[0]
        return _Output(torch.from_numpy(out))


def onnx_encoder(encoder, quantize: str = "none", cache_root: str | Path | None = None, threads: int | None = None):
    """A copy of ``encoder`` whose towers run in ONNX Runtime (``quantize``: none | int8); the
    original is untouched and the copy keeps its fingerprint (the same model, another runtime).
    Returns (encoder, seconds spent exporting; 0 when every tower came from the cache)."""
    import time

    require_onnxruntime()
    from dpr_xrisk.runtime.quantize import with_towers

    root = Path(cache_root) if cache_root is not None else default_cache_root(None)
    t0 = time.perf_counter()
    exported = False
    towers = {}
    for name in ("query_model", "passage_model"):
        model = getattr(encoder, name)
        if name == "passage_model" and model is encoder.query_model:
            towers[name] = towers["query_model"]
            continue
        path, fresh = load_or_export(model, root, quantize)
        exported |= fresh
        towers[name] = OrtTower(path, getattr(model, "config", None), threads)
    from dpr_xrisk.runtime.quantize import SMOOTH_CHANNELS, smoothable

    # what export_tower's smooth_outliers did to the int8 export
    smoothed = SMOOTH_CHANNELS if quantize == "int8" and smoothable(encoder.query_model) else 0
    out = with_towers(encoder, towers["query_model"], towers["passage_model"], quantize=quantize, backend="onnx",
                      smoothed_channels=smoothed)
    return out, (time.perf_counter() - t0) if exported else 0.0


def vector_mode(backend: str, quantize: str) -> str:
    """What decides an index's vectors beyond the model: fp32 towers agree across backends
    (ONNX fp32 = torch fp32 within 1e-5); each backend's int8 is its own."""
    return "fp32" if quantize in (None, "none") else f"{backend}-{quantize}"
