"""What every experiment shares: paths, environment capture, the ``dpr-xrisk`` runner, experiment
files and the resolution of a system's training config, and run folders.

This module owns *how* a benchmark runs (where, with which recorded settings, whether a run folder
may be reused); it does not own what a protocol measures (eval/squad.py, eval/nq.py, eval/speed.py)
nor how results are shown (eval/report.py).

Run folders. Every run lives in ``<work>/runs/<name>/`` with ``settings.json`` (the fully resolved
settings the run's numbers depend on, written when the folder is made) and, once finished,
``bench.json`` (its record, holding the same settings). ``open_run`` reuses a finished run whose
settings equal the requested ones, resumes an unfinished one whose ``settings.json`` equals them,
and refuses every mismatch with the keys that differ -- a folder is never emptied behind the
user's back (move it away, or run under another ``--work``).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import platform
import subprocess
import sys
import time
import tomllib
from pathlib import Path

EVAL = Path(__file__).resolve().parent
ROOT = EVAL.parent
RESULTS = EVAL / "results"  # committed: the stored JSON every report is made from
WORK = EVAL / "work"  # git-ignored: anything derived from ../shared/data goes here
EXPERIMENTS = EVAL / "experiments"
SHARED = Path(os.environ.get("DPR_XRISK_SHARED_DATA", ROOT.parent / "shared" / "data"))
WIKI = SHARED / "wikipedia-100k" / "psgs.tsv"
CLI = str(Path(sys.executable).parent / "dpr-xrisk")


class RunMismatch(SystemExit):
    """A run folder holds a run of other settings: refused, never overwritten (exit 2)."""

    def __init__(self, msg: str):
        super().__init__(2)
        self.msg = msg

    def __str__(self) -> str:
        return self.msg


# ---- environment ---------------------------------------------------------------------------
# the instruction sets that change this toolkit's speeds (bf16 autocast, int8 kernels) by large factors
CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "avx_vnni", "amx_bf16", "amx_int8")


def cpu_kind() -> dict:
    """The CPU's model name and which of CPU_FLAGS it has: machines of one name vary (some are
    AVX2-only), and times measured on two kinds must never be compared."""
    from dpr_xrisk.runtime.device import cpu_info

    model, flags = cpu_info() or ("", frozenset())
    return {"cpu_model": model or platform.processor(), "cpu_flags": [f for f in CPU_FLAGS if f in flags]}


def machine() -> dict:
    """The environment a result was measured in, recorded with every result."""
    import torch

    mem = 0
    try:
        with open("/proc/meminfo") as f:
            mem = int(f.readline().split()[1]) // 1024 ** 2  # KiB -> GiB
    except OSError:
        pass
    return {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "cpus": os.cpu_count(), "mem_gib": mem, "python": platform.python_version(),
            "torch": torch.__version__, "platform": platform.platform(), **cpu_kind(),
            "git": git_commit()}


def git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        return out.stdout.strip() or None
    except OSError:
        return None


# ---- the dpr-xrisk runner --------------------------------------------------------------------
# what a protocol sets over env()'s values for every subprocess (squad with 2 threads: the
# tokenizer's own threads, as a user's `dpr-xrisk train` has them)
EXTRA_ENV: dict[str, str] = {}


def env() -> dict:
    one = "1"
    return {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": one, "MKL_NUM_THREADS": one,
            "OPENBLAS_NUM_THREADS": one, "TOKENIZERS_PARALLELISM": "false", **EXTRA_ENV}


def cli(args: list, log: Path) -> float:
    """Run ``dpr-xrisk <args>`` with its output appended to ``log``; return the wall seconds. A
    failure raises with the log's last lines."""
    cmd = [CLI, *map(str, args)]
    print(f"  $ {' '.join(cmd)}", flush=True)
    t0 = time.perf_counter()
    with open(log, "a", encoding="utf-8") as f:
        f.write(f"$ {' '.join(cmd)}\n")
        f.flush()
        code = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env()).returncode
    if code:
        tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-15:]
        raise RuntimeError(f"exit {code}: {' '.join(cmd)}\n" + "\n".join(tail))
    return round(time.perf_counter() - t0, 1)


def record_train_wall(d: Path, t0: float, resumed: bool, **extra) -> None:
    """Keep the training command's wall seconds (since ``t0``) in ``d/train_wall.json``, so that a
    run killed after training (during its corpus encode) reports them when it resumes. A training
    resumed from a checkpoint ran only part of its loop in this command: its seconds are unknown
    (None; tables show "—"). ``extra`` (e.g. the machine) is stored beside them."""
    wall = None if resumed else round(time.perf_counter() - t0, 1)
    (d / "train_wall.json").write_text(json.dumps({"train_wall_s": wall, "resumed": resumed, **extra}))


def train_in(d: Path, cfg: dict, log: Path, **extra) -> None:
    """``dpr-xrisk train`` on ``cfg`` (written to ``d/config.toml``) into the run folder ``d``,
    resuming from its checkpoints where a killed run left some; its seconds go to ``record_train_wall``."""
    (d / "config.toml").write_text(config_toml(cfg))
    ckpt = d / "checkpoints"
    resume = ["--resume"] if ckpt.is_dir() and any(ckpt.iterdir()) else []
    t0 = time.perf_counter()
    cli(["train", "--config", d / "config.toml", *resume, "--out", d], log)
    record_train_wall(d, t0, resumed=bool(resume), **extra)


def train_wall(d: Path, **extra) -> dict:
    """What ``record_train_wall`` kept in ``d``; a run killed between the end of its training and
    that record counts as resumed (seconds unknown), with ``extra`` as the record would have held."""
    f = d / "train_wall.json"
    return json.loads(f.read_text()) if f.exists() else {"train_wall_s": None, "resumed": True, **extra}


# ---- files -----------------------------------------------------------------------------------
def replace_text(path: Path, text: str) -> None:
    """Write ``text`` through a temporary file and a rename: a reader (or a run killed mid-write)
    never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".partial")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_if_changed(path: Path, text: str) -> None:
    """Write unless the file already holds exactly ``text`` (a file a running job reads keeps its mtime)."""
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def passage_subset(lines: list[str], keep_ids: set[str], out: Path) -> int:
    """The header and the rows of a passages TSV (``lines``, with newlines) whose id is in
    ``keep_ids``, in corpus order, to ``out``; returns the number of rows."""
    keep = [lines[0]] + [x for x in lines[1:] if x.split("\t", 1)[0] in keep_ids]
    write_if_changed(out, "".join(keep))
    return len(keep) - 1


def load_results(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


# ---- experiments -------------------------------------------------------------------------------
# TrainConfig keys that are a run's plumbing, set by the protocol for every system (data paths,
# seed, threads, where checkpoints go), not what a system is; every other key is stated by the
# experiment file, so that no toolkit default decides what a stored result means
PLUMBING = frozenset({"train", "train_weights", "dev", "corpus", "dev_corpus", "bm25_index", "negatives_file",
                      "corpus_size", "seed", "threads", "device", "precision", "bf16", "eval_every", "save_every",
                      "keep_checkpoints", "log_every"})
# Keys that only measure: either value trains the same model bit for bit (the int8 refresh's guard:
# tests/test_quantize.py), so a stored system may differ from the CLI recipe in them, and only in time.
MEASURING = frozenset({"refresh_guard"})


@dataclasses.dataclass
class Experiment:
    """One experiment file: ``name`` (the file's stem), its ``protocol`` tag (stamped on every run
    and result: runs of two protocols are never mixed), the ``runner`` module that measures it, its
    parameters (``params``, overridden by ``--set`` and, with ``--tiny``, by ``tiny``), default
    seeds and its systems (``{name: table}``)."""

    name: str
    protocol: str
    runner: str
    title: str
    params: dict
    tiny: dict
    seeds: list
    systems: dict
    raw: dict

    def current(self) -> list[str]:
        """The systems the report's current table shows: every one not retired."""
        return [s for s, t in self.systems.items() if not t.get("retired")]

    def default(self) -> list[str]:
        """The systems a plain ``run`` runs: the file's ``default_systems``, else every current one."""
        return list(self.raw.get("default_systems", self.current()))


def experiments() -> list[str]:
    return sorted(p.stem for p in EXPERIMENTS.glob("*.toml"))


def load_experiment(name: str) -> Experiment:
    path = EXPERIMENTS / f"{name}.toml"
    if not path.is_file():
        raise SystemExit(f"error: unknown experiment {name!r}; valid: {', '.join(experiments())}")
    raw = tomllib.loads(path.read_text(encoding="utf-8"))
    for key in ("protocol", "runner", "title"):
        if key not in raw:
            raise SystemExit(f"error: {path}: no {key!r}")
    exp = Experiment(name=name, protocol=raw["protocol"], runner=raw["runner"], title=raw["title"],
                     params=dict(raw.get("params", {})), tiny=dict(raw.get("tiny", {})),
                     seeds=list(raw.get("seeds", [0])), systems=dict(raw.get("systems", {})), raw=raw)
    check_references(exp)
    return exp


# the keys of an experiment file that name one of its systems (top level, then per system) or a list of them
REFERENCES = ("recipe", "reference")
LIST_REFERENCES = ("default_systems", "figure_systems")
SYSTEM_REFERENCES = ("pair_with",)


def check_references(exp: Experiment) -> None:
    """Every key that names a system names one of the file's systems: a typo fails when the file
    loads, before any training, not when the pairs are built at the end of a run."""
    bad = [f"{k} = {exp.raw[k]!r}" for k in REFERENCES if k in exp.raw and exp.raw[k] not in exp.systems]
    bad += [f"{k} names {x!r}" for k in LIST_REFERENCES for x in exp.raw.get(k, []) if x not in exp.systems]
    bad += [f"system {s!r}: {k} = {t[k]!r}" for s, t in exp.systems.items() for k in SYSTEM_REFERENCES
            if k in t and (t[k] not in exp.systems or t[k] == s)]
    if bad:
        raise SystemExit(f"error: {exp.name}.toml: {'; '.join(bad)} (no other system of the experiment)")


def parse_sets(pairs: list[str]) -> dict:
    """``--set key=value`` pairs, each value read as TOML (``3``, ``true``, ``"x"``) or else as text."""
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"error: --set {pair!r}: expected key=value")
        try:
            out[key] = tomllib.loads(f"v = {value}")["v"]
        except tomllib.TOMLDecodeError:
            out[key] = value
    return out


def params_of(exp: Experiment, sets: dict, tiny: bool) -> dict:
    """The experiment's parameters, then ``--tiny``'s, then ``--set``'s (unknown keys refused)."""
    params = {**exp.params, **(exp.tiny if tiny else {})}
    bad = sorted(set(sets) - set(params))
    if bad:
        raise SystemExit(f"error: --set {', '.join(bad)}: not a parameter of {exp.name}; valid: {', '.join(sorted(params))}")
    for key, value in sets.items():  # a value of the file's type (a float parameter takes an integer too)
        want = type(params[key])
        ok = type(value) is want or (want is float and type(value) is int)
        if not ok:
            raise SystemExit(f"error: --set {key}={value!r}: {exp.name}'s {key} is a {want.__name__} "
                             f"(the file has {params[key]!r})")
    return {**params, **sets, "tiny": tiny}


def _unset(value):
    """The experiment files' spelling of an unset value (TOML has no null): ``"none"``."""
    return None if isinstance(value, str) and value.lower() == "none" else value


def train_config(exp: Experiment, system: str) -> dict:
    """The training settings of ``system``: the experiment's ``[train]`` table, then the base the
    system names (``base = "recipe"`` -> ``[bases.recipe]``), then its own ``train`` table; every
    TrainConfig key but the PLUMBING must be stated, so a change of a toolkit default never changes
    what a stored result means. Values are checked by TrainConfig itself."""
    from dpr_xrisk.train.config import TrainConfig

    spec = exp.systems[system]
    if "train" not in spec and "base" not in spec:
        raise ValueError(f"{exp.name}: system {system!r} does not train")
    values = dict(exp.raw.get("train", {}))
    if "base" in spec:
        bases = exp.raw.get("bases", {})
        if spec["base"] not in bases:
            raise SystemExit(f"error: {exp.name}: system {system!r} names base {spec['base']!r}; "
                             f"valid: {', '.join(sorted(bases))}")
        values.update(bases[spec["base"]])
    values.update(spec.get("train", {}))
    values = {k: _unset(v) for k, v in values.items()}
    unknown = sorted(set(values) - set(TrainConfig.keys()))
    plumbing = sorted(set(values) & PLUMBING)
    missing = sorted(set(TrainConfig.keys()) - PLUMBING - set(values))
    if unknown or plumbing or missing:
        raise SystemExit(f"error: {exp.name}: system {system!r}: " + "; ".join(
            x for x in (f"unknown keys {unknown}" if unknown else "",
                        f"run plumbing set by the protocol, not a system: {plumbing}" if plumbing else "",
                        f"does not state {missing} (a toolkit default would decide it)" if missing else "") if x))
    # checked with stand-ins for the protocol's data (a refresh or BM25 negatives need a corpus)
    stand_in = {"train": ["train.json"], "corpus": "corpus.tsv", "bm25_index": "bm25", "negatives_file": "negatives.jsonl"}
    TrainConfig.from_dict({**stand_in, **{k: v for k, v in values.items() if v is not None}},
                          source=f"{exp.name} system {system}")
    return dict(sorted(values.items()))


def config_toml(values: dict) -> str:
    """A ``dpr-xrisk train --config`` file of resolved values (an unset value stays unset)."""
    from dpr_xrisk.train.config import toml_text

    return toml_text(values)


# ---- run folders -------------------------------------------------------------------------------
def differing(a: dict, b: dict, prefix: str = "") -> list[str]:
    """The keys (dotted for nested tables) whose values differ between two settings dicts."""
    out = []
    for k in sorted(set(a) | set(b)):
        x, y = a.get(k, "<absent>"), b.get(k, "<absent>")
        if isinstance(x, dict) and isinstance(y, dict):
            out += differing(x, y, f"{prefix}{k}.")
        elif x != y:
            out.append(f"{prefix}{k}: {x!r} here, {y!r} requested")
    return out


def open_run(d: Path, settings: dict, name: str) -> dict | None:
    """The run folder ``d`` for ``settings``: its finished record (``bench.json``) when that run was
    made with exactly these settings; else None with the folder ready -- made and stamped
    (``settings.json``) when new, kept as it is when its stamp equals ``settings`` (an interrupted
    run resumes in it). A folder whose record or stamp holds other settings is refused
    (RunMismatch), never emptied."""
    settings = json.loads(json.dumps(settings))  # as stored: tuples as lists, keys as strings
    done, stamp = d / "bench.json", d / "settings.json"
    if done.exists():
        rec = json.loads(done.read_text(encoding="utf-8"))
        if rec.get("settings") == settings:
            print(f"[{name}] reusing {done}", flush=True)
            return rec
        raise RunMismatch(f"{d}: a finished run of other settings ({'; '.join(differing(rec.get('settings') or {}, settings))}); "
                          "move the folder away or run under another --work")
    if stamp.exists():
        old = json.loads(stamp.read_text(encoding="utf-8"))
        if old != settings:
            raise RunMismatch(f"{d}: an unfinished run of other settings ({'; '.join(differing(old, settings))}); "
                              "move the folder away or run under another --work")
        print(f"[{name}] resuming in {d}", flush=True)
        return None
    if d.exists() and any(d.iterdir()):
        raise RunMismatch(f"{d}: holds files but no settings.json; move the folder away or run under another --work")
    d.mkdir(parents=True, exist_ok=True)
    stamp.write_text(json.dumps(settings), encoding="utf-8")
    return None


def finish_run(d: Path, rec: dict) -> None:
    """Write a run's record (the last step: its existence says the run is finished)."""
    replace_text(d / "bench.json", json.dumps(rec, indent=2))
