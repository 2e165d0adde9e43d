"""Read the inputs of a report: evaluation JSON (``dpr-xrisk evaluate --out``), DPR retrieval
JSON runs (``dpr-xrisk search --out-json``) and training folders (``dpr-xrisk train --out``).

Every reader checks the format it expects and raises :class:`~dpr_xrisk.errors.InputError`
with a message naming the file and what to pass instead. Values are kept exactly as stored;
nothing here recomputes a number that a file already holds.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from dpr_xrisk.errors import InputError

TOPK = re.compile(r"^top(\d+)$")
CUTOFF = re.compile(r"^(recall|mrr|ndcg)@(\d+)$")


@dataclass
class EvalResult:
    """One entry of an evaluation JSON's ``results`` list."""

    name: str  # file name of the run (as ``dpr-xrisk evaluate`` prints it), made unique
    run: str  # the run path as stored
    num_questions: int
    metrics: dict  # as stored, never recomputed
    source: Path  # the evaluation JSON it came from
    per_question: dict | None = None
    command: str | None = None

    def topk(self) -> dict[int, float]:
        """{k: top-k accuracy} of the DPR metrics stored, in k order."""
        out = {int(m.group(1)): v for key, v in self.metrics.items() if (m := TOPK.match(key))}
        return dict(sorted(out.items()))

    def cutoff_metrics(self) -> list[str]:
        return [k for k in self.metrics if CUTOFF.match(k)]


@dataclass
class DprRun:
    """A DPR retrieval JSON run: records and per-question has_answer flags in rank order."""

    name: str
    path: Path
    records: dict
    hits: dict  # qid -> [bool]

    @property
    def depth(self) -> int:
        return max((len(f) for f in self.hits.values()), default=0)


@dataclass
class TrainingRun:
    """A training folder's config and log, split by event (steps deduplicated, last wins)."""

    name: str
    path: Path
    config: dict | None
    steps: list[dict]
    evals: list[dict] = field(default_factory=list)
    refreshes: list[dict] = field(default_factory=list)
    probes: list[dict] = field(default_factory=list)  # lines with probe_tau_v and probe_exact_loss
    start: dict | None = None
    end: dict | None = None
    command: str | None = None

    @property
    def refresh_steps(self) -> list[int]:
        return [int(r["step"]) for r in self.refreshes]

    @property
    def has_fcco(self) -> bool:
        return any("gamma" in s or any(k.startswith("fcco_") for k in s) for s in self.steps)


def split_label(spec: str) -> tuple[str | None, Path]:
    """``LABEL=PATH`` -> (label, path); a plain path (or one that exists as given) -> (None, path)."""
    if "=" in spec and not Path(spec).exists():
        label, _, path = spec.partition("=")
        if label.strip() and path:
            return label.strip(), Path(path)
    return None, Path(spec)


def _command_of(obj) -> str | None:
    """A recorded command line (``command`` string or ``argv`` list), if the object holds one."""
    if not isinstance(obj, dict):
        return None
    if isinstance(obj.get("command"), str):
        return obj["command"]
    if isinstance(obj.get("argv"), list):
        import shlex

        return shlex.join(str(a) for a in obj["argv"])
    return None


def _looks_like_trec_run(text: str) -> bool:
    lines = [ln for ln in text.splitlines() if ln.strip()][:5]
    return bool(lines) and all(len(ln.split()) == 6 for ln in lines)


def _read_json(path: Path, what: str, hint: str):
    from dpr_xrisk.io.common import check_file

    check_file(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"not valid UTF-8 ({e.reason}); expected {what}", path) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        if _looks_like_trec_run(text):
            raise InputError(f"this is a TREC run, not {what}; {hint}", path) from None
        raise InputError(f"not JSON ({e.msg}, line {e.lineno}); expected {what}", path) from None


def _is_dpr_records(data) -> bool:
    return isinstance(data, dict) and bool(data) and all(
        isinstance(r, dict) and "contexts" in r for r in list(data.values())[:5])


def load_eval(path: str | Path) -> list[EvalResult]:
    """The results of an evaluation JSON written by ``dpr-xrisk evaluate --out``."""
    path = Path(path)
    what = "an evaluation JSON ({\"results\": [...]}, written by dpr-xrisk evaluate --out)"
    data = _read_json(path, what, "evaluate it with `dpr-xrisk evaluate --run RUN --out eval.json` and pass that with --eval")
    if _is_dpr_records(data):
        raise InputError(f"this is a DPR retrieval run, not {what}; pass it with --run", path)
    if not isinstance(data, dict) or not isinstance(data.get("results"), list):
        raise InputError(f"no 'results' list: not {what}", path)
    if not data["results"]:
        raise InputError("the evaluation JSON has an empty 'results' list", path)
    top_command = _command_of(data)
    out = []
    for i, r in enumerate(data["results"]):
        where = f"results[{i}]"
        if not isinstance(r, dict) or not isinstance(r.get("run"), str) or not isinstance(r.get("metrics"), dict):
            raise InputError(f"{where} needs 'run' (string) and 'metrics' (object): not {what}", path)
        if not r["metrics"]:
            raise InputError(f"{where} ({r['run']}) has no metrics", path)
        for k, v in r["metrics"].items():
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
                raise InputError(f"{where} ({r['run']}): metric {k!r} is not a finite number: {v!r}", path)
        n = r.get("num_questions")
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise InputError(f"{where} ({r['run']}): 'num_questions' must be a non-negative integer", path)
        pq = r.get("per_question")
        if pq is not None and not isinstance(pq, dict):
            raise InputError(f"{where} ({r['run']}): 'per_question' must be an object", path)
        out.append(EvalResult(name=Path(r["run"]).name, run=r["run"], num_questions=n, metrics=dict(r["metrics"]),
                              source=path, per_question=pq, command=_command_of(r) or top_command))
    return out


def load_dpr_run(path: str | Path, label: str | None = None) -> DprRun:
    """A DPR retrieval JSON run (``dpr-xrisk search --out-json``, pyserini's format)."""
    from dpr_xrisk.evaluation.evaluate import answer_hits
    from dpr_xrisk.io.retrieval_json import read_retrieval_json

    path = Path(path)
    what = "a DPR retrieval JSON run ({qid: {question, answers, contexts}}, written by dpr-xrisk search --out-json)"
    try:
        records = read_retrieval_json(path)  # the happy path parses the file once
    except InputError as e:
        if not path.is_file():
            raise
        data = _read_json(path, what, "TREC runs carry no answers: evaluate them with "
                                      "`dpr-xrisk evaluate --answers ... --corpus ... --out eval.json` and pass --eval")
        if isinstance(data, dict) and isinstance(data.get("results"), list):
            raise InputError(f"this is an evaluation JSON, not {what}; pass it with --eval", path) from None
        raise InputError(f"{e.message}; expected {what}", path, e.line) from None
    if not records:
        raise InputError("the run has no questions", path)
    hits = answer_hits(None, records)
    return DprRun(name=label or path.name, path=path, records=records, hits=hits)


def _read_log(path: Path) -> list[tuple[int, dict]]:
    from dpr_xrisk.io.common import json_lines

    return list(json_lines(path))


def load_training(path: str | Path, label: str | None = None) -> TrainingRun:
    """A training folder: ``config.json`` (when present), ``train_log.jsonl`` (required) and
    ``refresh_log.jsonl`` (refresh events, used when the main log lacks them)."""
    path = Path(path)
    if not path.exists():
        raise InputError("training folder not found", path)
    if not path.is_dir():
        raise InputError("expected a training folder (written by dpr-xrisk train --out), got a file", path)
    log_path = path / "train_log.jsonl"
    if not log_path.exists():
        raise InputError("no train_log.jsonl here: not a training folder (written by dpr-xrisk train --out)", path)
    config = None
    if (path / "config.json").exists():
        from dpr_xrisk.io.common import load_json

        config = load_json(path / "config.json")
        if not isinstance(config, dict):
            raise InputError("config.json is not a JSON object", path / "config.json")
    lines = _read_log(log_path)
    steps: dict[int, dict] = {}
    evals: dict[int, dict] = {}
    refreshes: dict[int, dict] = {}
    probes: dict[int, dict] = {}
    start = end = None
    for lineno, obj in lines:
        event = obj.get("event")
        if event is None and "step" in obj and "loss" in obj:
            if not isinstance(obj["step"], int):
                raise InputError("'step' must be an integer", log_path, lineno)
            steps[obj["step"]] = obj  # a resumed run may log a step again: the last one wins
        elif event == "eval":
            evals[int(obj.get("step", 0))] = obj
        elif event == "refresh":
            refreshes[int(obj.get("step", 0))] = obj
        elif event == "start" and start is None:
            start = obj
        elif event == "end":
            end = obj
        if obj.get("probe_tau_v") is not None and obj.get("probe_exact_loss") is not None and "step" in obj:
            probes[int(obj["step"])] = obj
    if not steps:
        raise InputError("the training log has no step lines (did training run at all?)", log_path)
    if not refreshes and (path / "refresh_log.jsonl").exists():
        for _, obj in _read_log(path / "refresh_log.jsonl"):
            if "step" in obj:
                refreshes[int(obj["step"])] = obj
    command = _command_of(start) or _command_of(config)
    if command is None and (path / "command.txt").exists():
        command = (path / "command.txt").read_text(encoding="utf-8").strip() or None
    srt = lambda d: [d[k] for k in sorted(d)]  # noqa: E731
    return TrainingRun(name=label or path.name, path=path, config=config, steps=srt(steps), evals=srt(evals),
                       refreshes=srt(refreshes), probes=srt(probes), start=start, end=end, command=command)


def unique_names(names: list[str], paths: list[str]) -> list[str]:
    """Make display names unique: a clash gets its parent folder, then a counter."""
    out = list(names)
    for i, n in enumerate(names):
        if names.count(n) > 1:
            parent = Path(paths[i]).parent.name
            out[i] = f"{parent}/{n}" if parent else n
    seen: dict[str, int] = {}
    for i, n in enumerate(out):
        if out.count(n) > 1:
            seen[n] = seen.get(n, 0) + 1
            out[i] = f"{n} ({seen[n]})"
    return out
