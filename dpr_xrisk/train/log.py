"""The run's JSONL logs (``train_log.jsonl``, ``refresh_log.jsonl``): appending records, and
trimming what a killed session wrote past the checkpoint a resumed run starts from."""

from __future__ import annotations

import json
from pathlib import Path


class JsonlLog:
    def __init__(self, path: Path, enabled: bool = True):
        self.path, self.enabled = path, enabled

    def write(self, record: dict) -> None:
        if not self.enabled:
            return
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")


def trim_log(path: Path, step: int) -> None:
    """On resume from the checkpoint of ``step``: drop the records of the killed session that the
    resumed one writes again (steps, evaluations and probes after ``step``; refreshes at or after
    it, since the refresh of step S runs after the checkpoint of S), so every step is logged once."""
    if not path.exists():
        return
    from dpr_xrisk.io.common import atomic_write

    keep = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut by the kill
        s = rec.get("step", 0)
        if s > step or (rec.get("event") == "refresh" and s >= step and step > 0):
            continue
        keep.append(line + "\n")
    with atomic_write(path) as f:
        f.write("".join(keep))
