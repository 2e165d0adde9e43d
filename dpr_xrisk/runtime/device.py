"""Where the tensors live and in what precision: ``--device auto|cpu|cuda|cuda:N`` and
``--precision auto|fp32|bf16|fp16``, resolved and checked once, before any work starts.

``auto`` is CUDA when torch sees a GPU (under ``torchrun``: ``cuda:LOCAL_RANK``), else the CPU.
The CPU path is the one the toolkit always had: nothing moves, results are bit for bit the same.
Precision ``auto`` is bf16 where the device computes bfloat16 natively (where it measured faster
than fp32) and fp32 elsewhere (:func:`native_bf16`); the choice is printed once and the resolved
value, never ``auto``, is what a run records.
"""

from __future__ import annotations

import functools
import os
import sys

import torch

from dpr_xrisk.errors import InputError

PRECISIONS = ("fp32", "bf16", "fp16")
AUTO = "auto"
PRECISION_CHOICES = (AUTO, *PRECISIONS)


def available() -> str:
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return "cpu" + "".join(f", cuda:{i}" for i in range(n))


def resolve_device(spec: str | None = "auto", option: str = "--device") -> torch.device:
    """``auto`` | ``cpu`` | ``cuda`` | ``cuda:N`` -> a torch.device; an unavailable one is an
    InputError naming the option and what is available."""
    spec = (spec or "auto").strip().lower()
    local = int(os.environ.get("LOCAL_RANK", "0"))
    has_cuda = torch.cuda.is_available()
    if spec == "auto":
        return torch.device(f"cuda:{local}") if has_cuda else torch.device("cpu")
    if spec == "cpu":
        return torch.device("cpu")
    if spec == "cuda" or spec.startswith("cuda:"):
        if not has_cuda:
            raise InputError(f"{option} {spec}: CUDA is not available here (torch {torch.__version__}); available: {available()}")
        index = local if spec == "cuda" else spec.split(":", 1)[1]
        try:
            index = int(index)
        except ValueError:
            raise InputError(f"{option} {spec}: expected cuda:N with N a GPU number") from None
        if not 0 <= index < torch.cuda.device_count():
            raise InputError(f"{option} {spec}: no such GPU; available: {available()}")
        return torch.device(f"cuda:{index}")
    raise InputError(f"{option} {spec!r}: valid: auto, cpu, cuda, cuda:N")


def encode_batch_size(device: torch.device, bf16: bool = False) -> int:
    """Texts per forward pass when encoding, measured per path (`git show 3ee76c0:eval/bench_batch.py`, MiniLM,
    2 threads, 1,500 passages): torch fp32 73.6 psg/s at 16 vs 60.0 at 128; ONNX int8 78.1 vs
    64.1; bf16 peaks at 64. GPUs take 128 (larger batches fill them)."""
    if device.type != "cpu":
        return 128
    return 64 if bf16 else 16


@functools.lru_cache(maxsize=1)
def cpu_info() -> tuple[str, frozenset] | None:
    """(model name, instruction-set flags) of the first CPU in /proc/cpuinfo; None where it
    cannot be read (not Linux)."""
    model, flags = "", frozenset()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name") and not model:
                    model = line.split(":", 1)[1].strip()
                elif line.startswith("flags"):
                    flags = frozenset(line.split(":", 1)[1].split())
                    break
    except OSError:
        return None
    return model, flags


def cpu_has_native_bf16() -> bool:
    """AVX512-BF16 or AMX-BF16 in /proc/cpuinfo (Linux); unknown elsewhere counts as yes."""
    info = cpu_info()
    return info is None or bool(info[1] & {"avx512_bf16", "amx_bf16"})


def cpu_has_vnni() -> bool:
    """AVX-512 VNNI (int8 dot products with int32 accumulation, which fbgemm's kernels use) in
    /proc/cpuinfo; unknown elsewhere counts as no."""
    info = cpu_info()
    return info is not None and "avx512_vnni" in info[1]


def cpu_has_amx() -> bool:
    """AMX-BF16 (bfloat16 tile matrix units) in /proc/cpuinfo; unknown elsewhere counts as no."""
    info = cpu_info()
    return info is not None and "amx_bf16" in info[1]


def cpu_has_amx_int8() -> bool:
    """AMX-INT8 (int8 tile matrix units) in /proc/cpuinfo; unknown elsewhere counts as no."""
    info = cpu_info()
    return info is not None and "amx_int8" in info[1]


def warn_int8_without_vnni() -> None:
    """One stderr line where int8 buys no speed: on an x86 CPU without AVX-512 VNNI it measured no
    faster than fp32 (silent on other CPUs, e.g. ARM or unknown: nothing was measured there)."""
    info = cpu_info()
    if info is not None and "avx2" in info[1] and not cpu_has_vnni():
        print("note: this CPU has no AVX-512 VNNI: int8 encoding measured no faster than fp32 on such a CPU "
              "(AVX2-only: 17.4 against 16.6 passages/s, `git show 3ee76c0:eval/RESULTS.md`) and its activations are rounded to 7 bits; "
              "fp32 (the default) gives the same speed without the rounding", file=sys.stderr)


def native_bf16(device: torch.device) -> str | None:
    """Why ``device`` gets bf16 under precision ``auto`` (``"AMX"``, ``"AVX512-BF16"``, ``"CUDA
    sm_90"``), or None: fp32. Native bfloat16 only: a GPU of compute capability 8.0 or later
    (Ampere on), a CPU with AMX-BF16 or AVX512-BF16. On an AVX512-BF16 EPYC a recipe-shaped training
    step (MiniLM, batch 32, 256 word pieces, one hard negative, the recipe's dropout 0) took 1.79x
    less time in bf16 than in fp32 (eval/results/train_speed.json), the recipe's NQ loop 1.22x, and
    the bf16 runs passed NQ's paired quality guard over 3 seeds (docs/results.md#natural-questions).
    On a CPU without them bf16 autocast measured ~10x slower; an unknown CPU (not Linux) counts as
    without."""
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        return f"CUDA sm_{major}{minor}" if major >= 8 else None
    if device.type != "cpu":
        return None
    info = cpu_info()
    return bf16_kind(info[1] if info is not None else frozenset())


def bf16_kind(flags) -> str | None:
    """A CPU's native bfloat16 from its /proc/cpuinfo flags: ``"AMX"``, ``"AVX512-BF16"`` or None."""
    return "AMX" if "amx_bf16" in flags else "AVX512-BF16" if "avx512_bf16" in flags else None


def auto_precision(device: torch.device) -> tuple[str, str]:
    """(precision, the reason shown) of ``auto`` on ``device``: bf16 where :func:`native_bf16`
    names a reason, else fp32."""
    why = native_bf16(device)
    if why is not None:
        return "bf16", why
    return "fp32", "no native bfloat16 on this GPU" if device.type == "cuda" else "no AMX/AVX512-BF16 on this CPU"


def resolve_precision(precision: str | None, device: torch.device, bf16_alias: bool = False, warn: bool = True) -> str:
    """auto | fp32 | bf16 | fp16 checked against the device, returned resolved (never ``auto``);
    the old ``bf16`` switch means ``bf16``. ``auto`` prints its choice once (``warn``: this
    process is the one that speaks, e.g. rank 0)."""
    p = (precision or "fp32").lower()
    if p not in PRECISION_CHOICES:
        raise InputError(f"--precision {p!r}: valid: {', '.join(PRECISION_CHOICES)}")
    if bf16_alias and p in ("fp32", AUTO):
        p = "bf16"
    if p == AUTO:
        p, why = auto_precision(device)
        if warn:
            print(f"precision auto → {p} ({why})", file=sys.stderr)
    if p == "fp16" and device.type != "cuda":
        raise InputError("--precision fp16 needs a CUDA device (CPUs have no fast float16 path); use bf16 or fp32")
    if p == "bf16" and device.type == "cpu" and warn and not cpu_has_native_bf16():
        print("warning: this CPU has no native bfloat16 (no AVX512-BF16/AMX): bf16 autocast measured ~10x slower "
              "than fp32 on such CPUs (`git show 3ee76c0:eval/RESULTS.md`); use --precision fp32", file=sys.stderr)
    return p


PRECISION_ENV = "DPR_XRISK_PRECISION"  # the inference commands' precision when --bf16/--fp32 is not given


def resolve_bf16(bf16: bool | None, device: torch.device, backend: str = "torch", quantize: str = "none",
                 warn: bool = True) -> bool:
    """The inference commands' ``--bf16/--fp32`` (encode, search, ask, serve): as given, or, unset,
    the environment's ``DPR_XRISK_PRECISION`` (auto | fp32 | bf16), else ``auto``: bf16 where
    :func:`native_bf16` names a reason, fp32 elsewhere, the choice printed once on stderr. Only
    the torch path can switch: ONNX Runtime and int8 run their own precision, so there unset
    stays fp32, silently."""
    if bf16 is not None:
        return bf16
    if backend != "torch" or quantize != "none":
        return False
    asked = os.environ.get(PRECISION_ENV, "").strip().lower() or AUTO
    if asked not in (AUTO, "fp32", "bf16"):
        raise InputError(f"{PRECISION_ENV}={asked!r}: valid: auto, fp32, bf16")
    return resolve_precision(asked, device, warn=warn) == "bf16"


def autocast(device: torch.device, precision: str):
    """The towers' autocast for ``precision`` on ``device`` (a no-op context for fp32)."""
    if precision == "fp32":
        return torch.autocast(device.type, enabled=False)
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device.type, dtype=dtype)


def use_tf32(device: torch.device) -> None:
    """TF32 matmuls on GPUs that have them (Ampere and later): the usual default for training."""
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
