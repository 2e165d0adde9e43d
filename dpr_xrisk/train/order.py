"""The order in which training draws questions: which set and which rows each step trains on.

This module owns the data order (per set, shuffled per epoch, drop-last) and the per-step draw of
the training set; both are pure functions of (seed, step) and a small JSON state, so a resumed
run and :func:`upcoming_rows`' replay see the very draws of an uninterrupted run. It does not own
batching (``train/batch.py``) nor the loop (``train/trainer.py``).
"""

from __future__ import annotations

import numpy as np


class DataOrder:
    """Per-set shuffled order with drop-last epochs; the position is plain JSON state."""

    def __init__(self, sizes: list[int], batch_size: int, seed: int, state: dict | None = None):
        self.sizes, self.batch_size, self.seed = sizes, batch_size, seed
        self.epoch = state["epoch"] if state else [0] * len(sizes)
        self.pos = state["pos"] if state else [0] * len(sizes)

    def next(self, t: int) -> list[int]:
        if self.pos[t] + self.batch_size > self.sizes[t]:
            self.epoch[t] += 1
            self.pos[t] = 0
        perm = np.random.default_rng([self.seed, t, self.epoch[t]]).permutation(self.sizes[t])
        rows = perm[self.pos[t] : self.pos[t] + self.batch_size].tolist()
        self.pos[t] += self.batch_size
        return rows

    def state(self) -> dict:
        return {"epoch": list(self.epoch), "pos": list(self.pos)}


def step_draw(seed: int, step: int, weights) -> tuple[np.random.Generator, int]:
    """Step ``step``'s random stream and the training set it trains on (the stream's first draw,
    by ``weights``): one rule for the training loop and :func:`upcoming_rows`' replay of it."""
    rng = np.random.default_rng([seed, step])
    return rng, int(rng.choice(len(weights), p=weights))


def upcoming_rows(order: DataOrder, n_sets: int, weights, seed: int, start: int, stop: int) -> list[list[int]]:
    """Per set, the question rows that steps ``start .. stop - 1`` will draw, found by replaying
    the training loop's draws (:func:`step_draw`, then ``order.next``) on a copy of ``order``:
    the questions a refresh at ``start`` must mine."""
    sim = DataOrder(order.sizes, order.batch_size, order.seed, order.state())  # state(): fresh lists
    rows: list[set[int]] = [set() for _ in range(n_sets)]
    for step in range(start, stop):
        t = step_draw(seed, step, weights)[1]
        rows[t].update(sim.next(t))
    return [sorted(r) for r in rows]
