"""Test helper run under torchrun: trains like ``dpr-xrisk train`` and SIGKILLs rank 1 right after
step ``sys.argv[3]`` (a killed rank, as when a machine dies). Not a test module itself."""

import os
import signal
import sys

from dpr_xrisk.train.config import TrainConfig
from dpr_xrisk.train.trainer import train

model, out, kill_at, train_file = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]


def on_step(step: int) -> None:
    if step == kill_at and os.environ.get("RANK") == "1":
        os.kill(os.getpid(), signal.SIGKILL)


cfg = TrainConfig(train=(train_file,), model=model, batch_size=8, max_steps=4, hard_negatives=1, seed=3, save_every=2,
                  threads=1, precision="fp32")
train(cfg, out, progress=False, on_step=on_step)
