"""The encoder a search, an encode or a server runs with: torch fp32/bf16, torch int8, or ONNX
Runtime (fp32 or int8), checked before anything loads."""

from __future__ import annotations


def check_inference(backend: str, quantize: str, device, bf16: bool = False) -> None:
    """Refuse, before anything loads: unknown names, the CPU-only modes on another device, --bf16
    outside the torch backend or with --quantize, --backend onnx without ONNX Runtime."""
    from dpr_xrisk.errors import InputError
    from dpr_xrisk.runtime.onnx_backend import check_backend, require_onnxruntime
    from dpr_xrisk.runtime.quantize import QUANTIZE

    check_backend(backend)
    if quantize not in QUANTIZE:
        from dpr_xrisk.errors import unknown_name

        raise unknown_name("quantize mode", quantize, QUANTIZE)
    if backend == "onnx" and bf16:
        raise InputError("--bf16 is for the torch backend; ONNX Runtime runs fp32 (or --quantize int8)")
    if quantize != "none" and bf16:  # int8 Linears refuse bfloat16 inputs: one of the two, not both
        raise InputError(f"--bf16 and --quantize {quantize} are two precisions; choose one")
    if (backend == "onnx" or quantize != "none") and device.type != "cpu":
        what = "--backend onnx" if backend == "onnx" else f"--quantize {quantize}"
        raise InputError(f"{what} runs on the CPU; use --device cpu (GPUs: --bf16)")
    if backend == "onnx":
        require_onnxruntime()


def inference_encoder(encoder, backend: str, quantize: str, device, bf16: bool = False, model=None):
    """The encoder to run inference with: torch fp32/bf16, torch int8, or ONNX Runtime (fp32 or
    int8), after :func:`check_inference`."""
    from dpr_xrisk.errors import InputError
    from dpr_xrisk.runtime.onnx_backend import default_cache_root, onnx_encoder
    from dpr_xrisk.runtime.quantize import quantized

    check_inference(backend, quantize, device, bf16)
    if quantize == "int8":
        from dpr_xrisk.runtime.device import warn_int8_without_vnni

        warn_int8_without_vnni()
    if backend == "onnx":
        from dpr_xrisk.retrieval.encoder import resolve_model_path

        try:
            model_dir = resolve_model_path(model) if model is not None else None
        except InputError:
            model_dir = None
        return onnx_encoder(encoder, quantize, default_cache_root(model_dir))[0]
    return quantized(encoder, quantize)
