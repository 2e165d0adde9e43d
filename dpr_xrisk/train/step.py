"""One optimiser step's forward and backward passes: a micro-batch's loss, plain or with cached
gradients (GradCache), each under the towers' autocast; under torchrun each rank embeds its slice.

This module owns the arithmetic of a step; it does not own which questions a step draws
(``train/order.py``, ``train/batch.py``), the optimiser, nor the loop (``train/trainer.py``).
"""

from __future__ import annotations

import torch


def _amp(encoder, precision):
    """The towers' autocast: ``precision`` is fp32 | bf16 | fp16 (or the old bool for bf16)."""
    from dpr_xrisk.runtime.device import autocast

    if isinstance(precision, bool):
        precision = "bf16" if precision else "fp32"
    return autocast(encoder.device, precision)


def batch_to(b, device: torch.device):
    """A collated batch on ``device`` (tokenisation stays on the CPU; pinned, non-blocking copies
    to a GPU; nothing moves on the CPU)."""
    import dataclasses

    if device.type == "cpu":
        return b

    def move(t):
        return t.pin_memory().to(device, non_blocking=True)

    return dataclasses.replace(b, q_inputs={k: move(v) for k, v in b.q_inputs.items()},
                               p_inputs={k: move(v) for k, v in b.p_inputs.items()},
                               pos_mask=move(b.pos_mask), neg_mask=move(b.neg_mask), log_q=move(b.log_q),
                               rows=move(b.rows), slot_ids=move(b.slot_ids))


def _rng_state(device: torch.device):
    return torch.get_rng_state(), (torch.cuda.get_rng_state(device) if device.type == "cuda" else None)


def _set_rng_state(state, device: torch.device) -> None:
    torch.set_rng_state(state[0])
    if state[1] is not None:
        torch.cuda.set_rng_state(state[1], device)


def step_loss(encoder, loss_fn, b, bf16: bool | str, step: int = 0, row_offset: int = 0, ddp=None):
    """Forward one micro-batch: (tensor to backpropagate, loss value to log). Under torchrun
    each rank embeds its slice of questions and passages and all-gathers the rest."""
    B, N = b.pos_mask.shape
    with _amp(encoder, bf16):
        if ddp is not None and ddp.active:
            qa, qz = ddp.bounds(B)
            pa, pz = ddp.bounds(N)
            q = ddp.gather_rows(encoder.embed_queries(slice_rows(b.q_inputs, qa, qz)).float(), B)  # (B, H)
            p = ddp.gather_rows(encoder.embed_passages(slice_rows(b.p_inputs, pa, pz)).float(), N)  # (N, H)
        else:
            q = encoder.embed_queries(b.q_inputs)  # (B, H)
            p = encoder.embed_passages(b.p_inputs)  # (N, H)
    return _loss_on(loss_fn, q.float(), p.float(), b, step, row_offset)


def slice_rows(inputs: dict, a: int, z: int) -> dict:
    """Rows a..z of every tensor of a tokenised batch."""
    return {k: v[a:z] for k, v in inputs.items()}


def _loss_on(loss_fn, q: torch.Tensor, p: torch.Tensor, b, step: int, row_offset: int):
    """(tensor to backpropagate, loss value to log) of a micro-batch's (B, H) question and (N, H)
    passage embeddings; an FCCO loss updates the rows of this micro-batch here."""
    from dpr_xrisk.losses import CandidateBatch, FCCOLoss

    batch = CandidateBatch.from_embeddings(q, p, b.pos_mask, b.neg_mask, b.log_q)
    if isinstance(loss_fn, FCCOLoss):
        out = loss_fn(batch, b.rows + row_offset, b.slot_ids, step=step)
        return out.surrogate, out.value
    loss = loss_fn(batch)
    return loss, loss.detach()


def cached_step_loss(encoder, loss_fn, b, bf16: bool | str, step: int, row_offset: int, ddp, chunk: int,
                     scale: float = 1.0, scaler=None) -> torch.Tensor:
    """One micro-batch with cached gradients (GradCache, Gao et al. 2021): back-propagates
    ``scale`` x the loss and returns its value.

    1. embed the questions and passages (this rank's slice under torchrun) in chunks of ``chunk``
       rows without keeping activations, remembering each chunk's RNG state;
    2. compute the loss on those embeddings (detached, requiring grad) once -- the FCCO state is
       updated here, exactly as in an uncached step -- and its gradient w.r.t. every embedding;
    3. re-embed each chunk with gradients under its remembered RNG state (same dropout masks) and
       back-propagate that chunk's slice of the embedding gradient.
    The parameter gradients equal the uncached step's; the activation memory is one chunk's."""
    B, N = b.pos_mask.shape
    active = ddp is not None and ddp.active
    qa, qz = ddp.bounds(B) if active else (0, B)
    pa, pz = ddp.bounds(N) if active else (0, N)
    plan = [("q", encoder.embed_queries, b.q_inputs, a, min(a + chunk, qz)) for a in range(qa, qz, chunk)]
    plan += [("p", encoder.embed_passages, b.p_inputs, a, min(a + chunk, pz)) for a in range(pa, pz, chunk)]
    states, parts = [], []
    device = encoder.device
    with torch.no_grad(), _amp(encoder, bf16):
        for _, embed, inputs, a, z in plan:
            states.append(_rng_state(device))
            parts.append(embed(slice_rows(inputs, a, z)).float())
    n_q = len(range(qa, qz, chunk))
    empty = torch.zeros(0, encoder.dim, device=device)
    q_local = torch.cat(parts[:n_q]) if n_q else empty
    p_local = torch.cat(parts[n_q:]) if len(parts) > n_q else empty
    q = (ddp.gather_rows(q_local, B) if active else q_local).detach().requires_grad_(True)  # (B, H)
    p = (ddp.gather_rows(p_local, N) if active else p_local).detach().requires_grad_(True)  # (N, H)
    loss, value = _loss_on(loss_fn, q, p, b, step, row_offset)
    (loss * scale if scaler is None else scaler.scale(loss * scale)).backward()
    grads = [(q if kind == "q" else p).grad[a:z] for kind, _, _, a, z in plan]  # global rows a..z
    after = _rng_state(device)
    for (_, embed, inputs, a, z), state, g in zip(plan, states, grads):
        _set_rng_state(state, device)  # the chunk's own dropout masks again
        with _amp(encoder, bf16):
            emb = embed(slice_rows(inputs, a, z)).float()
        emb.backward(g)
    _set_rng_state(after, device)
    return value


def backward_step(encoder, loss_fn, batches, n: int, precision, step: int, row_offset: int, ddp, scaler,
                  grad_cache_chunk: int | None = None) -> float:
    """Back-propagate the mean loss of one step's ``n`` micro-batches (``batches``: an iterable of
    collated batches on the device, made one at a time; gradients accumulate); returns the loss
    value to log."""
    total = 0.0
    for b in batches:
        if grad_cache_chunk:
            value = cached_step_loss(encoder, loss_fn, b, precision, step, row_offset, ddp, grad_cache_chunk,
                                     scale=1.0 / n, scaler=scaler)
        else:
            loss, value = step_loss(encoder, loss_fn, b, precision, step, row_offset, ddp)
            scaler.scale(loss / n).backward()
        total += float(value) / n
    return total
