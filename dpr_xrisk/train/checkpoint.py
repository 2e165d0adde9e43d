"""Checkpoints: both towers (HF safetensors folders), optimiser and scheduler state, RNG state,
the data-order position, the loss state and the resolved config -- no pickle anywhere.

Layout of ``<out>/checkpoints/step-<N>/``::

    model/               the encoder (dpr_xrisk.json + towers), usable by encode/search
    optimizer.safetensors  AdamW tensors, keyed "<param index>.<name>"
    state.json           step, data positions, best metric, optimiser param groups, scheduler
    rng.safetensors      torch's CPU RNG state
    loss.safetensors     registered buffers of the loss (e.g. moving-average estimators)
    config.json          the resolved TrainConfig

A checkpoint folder is built under a temp name and renamed into place, so a killed run never
leaves a half-written checkpoint; ``latest`` is simply the highest complete step.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from dpr_xrisk.io.common import atomic_dir


def save_checkpoint(path: Path, encoder, optimizer, scheduler, loss_fn, state: dict, config_json: str) -> None:
    with atomic_dir(path, overwrite=True) as tmp:
        encoder.save(tmp / "model")
        opt = optimizer.state_dict()
        tensors = {f"{i}.{k}": v.detach().clone().contiguous() for i, s in opt["state"].items() for k, v in s.items()
                   if torch.is_tensor(v)}
        save_file(tensors, str(tmp / "optimizer.safetensors"))
        save_file({"torch_cpu": torch.get_rng_state()}, str(tmp / "rng.safetensors"))
        buffers = {k: v.detach().clone().contiguous() for k, v in loss_fn.state_dict().items()}
        if buffers:
            save_file(buffers, str(tmp / "loss.safetensors"))
        full = dict(state, optimizer_param_groups=opt["param_groups"], scheduler=scheduler.state_dict())
        (tmp / "state.json").write_text(json.dumps(full, indent=2))
        (tmp / "config.json").write_text(config_json)


def load_checkpoint(path: Path, encoder, optimizer, scheduler, loss_fn) -> dict:
    """Restore everything in place (the encoder's weights included); return the state dict."""
    from dpr_xrisk.retrieval.encoder import DualEncoder

    saved = DualEncoder.load(path / "model")
    encoder.query_model.load_state_dict(saved.query_model.state_dict())
    if encoder.passage_model is not encoder.query_model:
        encoder.passage_model.load_state_dict(saved.passage_model.state_dict())
    state = json.loads((path / "state.json").read_text())
    tensors = load_file(str(path / "optimizer.safetensors"))
    opt_state: dict = {}
    for key, value in tensors.items():
        idx, name = key.split(".", 1)
        opt_state.setdefault(int(idx), {})[name] = value
    optimizer.load_state_dict({"state": opt_state, "param_groups": state["optimizer_param_groups"]})
    scheduler.load_state_dict(state["scheduler"])
    torch.set_rng_state(load_file(str(path / "rng.safetensors"))["torch_cpu"])
    if (path / "loss.safetensors").exists():
        loss_fn.load_state_dict(load_file(str(path / "loss.safetensors")))
    return state


def list_checkpoints(out_dir: Path) -> list[Path]:
    d = out_dir / "checkpoints"
    if not d.is_dir():
        return []
    ckpts = [p for p in d.iterdir() if p.is_dir() and p.name.startswith("step-") and (p / "state.json").exists()]
    return sorted(ckpts, key=lambda p: int(p.name.split("-")[1]))


def prune_checkpoints(out_dir: Path, keep: int) -> None:
    for old in list_checkpoints(out_dir)[:-keep] if keep > 0 else []:
        shutil.rmtree(old, ignore_errors=True)
