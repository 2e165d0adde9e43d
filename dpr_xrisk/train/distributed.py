"""Data-parallel training with ``torchrun`` (``torch.distributed``: gloo on CPU, nccl on GPU).

The global batch is the unit of training: every rank collates the same global batch (the data
order and every random draw are seeded by step, so all ranks agree), embeds only its slice of
the questions and passages, and all-gathers the embeddings **with gradient flow to its own
slice** (unlike DPR's detached copies). Each rank then computes the identical global loss over
the global candidate set (masks and log q of the global batch), backpropagates into its slice,
and the parameter gradients are summed across ranks: that sum is exactly the gradient of the
global loss, so N processes train like one process with the same global batch. The estimator
state is updated identically on every rank from the global batch; refreshes run on rank 0 and
are broadcast; rank 0 alone writes logs and checkpoints.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass
class Dist:
    rank: int = 0
    world: int = 1

    @classmethod
    def from_env(cls, device_type: str = "cpu") -> "Dist":
        """The process group of ``torchrun`` (NCCL when training on CUDA, gloo on CPUs)."""
        world = int(os.environ.get("WORLD_SIZE", "1"))
        if world <= 1:
            return cls()
        if not dist.is_initialized():
            dist.init_process_group("nccl" if device_type == "cuda" else "gloo")
        return cls(dist.get_rank(), dist.get_world_size())

    @property
    def main(self) -> bool:
        return self.rank == 0

    @property
    def active(self) -> bool:
        return self.world > 1

    def bounds(self, n: int) -> tuple[int, int]:
        """This rank's contiguous slice of n items (balanced; may be empty)."""
        return n * self.rank // self.world, n * (self.rank + 1) // self.world

    def gather_rows(self, local: torch.Tensor, n: int) -> torch.Tensor:
        """All-gather row slices into the global (n, D) tensor; gradients flow to ``local``."""
        if not self.active:
            return local
        size = max(b - a for a, b in (self._bounds(n, r) for r in range(self.world)))
        padded = torch.zeros(size, local.shape[1], dtype=local.dtype, device=local.device)
        padded[: local.shape[0]] = local.detach()
        parts = [torch.empty_like(padded) for _ in range(self.world)]
        dist.all_gather(parts, padded)
        rows = []
        for r, part in enumerate(parts):
            a, b = self._bounds(n, r)
            rows.append(local if r == self.rank else part[: b - a])
        return torch.cat(rows)  # (n, D)

    def _bounds(self, n: int, r: int) -> tuple[int, int]:
        return n * r // self.world, n * (r + 1) // self.world

    def sum_grads(self, params) -> None:
        """Sum parameter gradients over ranks (each holds the gradient through its slice)."""
        if not self.active:
            return
        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)

    def broadcast(self, obj):
        """rank 0's Python object on every rank."""
        if not self.active:
            return obj
        box = [obj]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def barrier(self) -> None:
        if self.active:
            dist.barrier()

    def close(self) -> None:
        if self.active and dist.is_initialized():
            dist.destroy_process_group()
