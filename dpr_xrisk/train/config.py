"""The training configuration: one frozen dataclass, loaded from a recipe, a TOML or YAML file and
CLI flags (in that order of precedence, lowest first); the resolved config is saved with every
checkpoint (``config.json``).

Every key is declared once, with :func:`key`: its default, the ``train --help`` panel it is shown
in and its help text (field metadata, read by the CLI through :func:`key_docs`). Every value is
checked when a config is built (:data:`RANGES` and the checks below it), so a TOML file, a flag
and a recipe are refused alike, before anything loads."""

from __future__ import annotations

import dataclasses
import json
import math
import typing
from dataclasses import dataclass
from pathlib import Path

from dpr_xrisk.errors import InputError, unknown_name

NEGATIVE_SOURCES = ("file", "bm25", "negatives-file", "model", "none")  # model = mined with the initial encoder
IN_BATCH_Q = ("uniform", "one")
Q_RULES = ("joint", "separate")
REFRESH_QUANTIZE = ("none", "int8", "auto")  # auto: int8 on a CPU with VNNI (none for bf16 training with AMX), else none (resolved when training starts)
NO_POSITIVE = ("skip", "fail")
ESTIMATORS = ("minibatch", "fcco")


# the panels of `dpr-xrisk train --help`, in the order shown; each key names its own
DATA = "Data"
MODEL = "Model"
LOSS = "Loss"
ESTIMATOR = "Moving-average estimator (docs/method.md §4)"
BATCHES = "Batches and negatives"
REFRESH = "Index refresh (docs/method.md §5)"
OPTIMISATION = "Optimisation"
EVALUATION = "Evaluation, logging, checkpoints"


def key(default, panel: str, help: str):
    """A config key: its default, the ``train --help`` panel it is shown in, and its help text
    (the one place an option is described; read back by :func:`key_docs`)."""
    return dataclasses.field(default=default, metadata={"help": help, "panel": panel})


@dataclass(frozen=True)
class TrainConfig:
    # --- Data -------------------------------------------------------------------------------------
    train: tuple[str, ...] = key((), DATA, "DPR biencoder JSON/JSONL files; several = multi-dataset training")
    train_weights: tuple[float, ...] = key((), DATA, "λ_t per file (default: all 1); batches are homogeneous")
    dev: str | None = key(None, DATA, "biencoder/QA file with answers for periodic DPR-accuracy evaluation")
    corpus: str | None = key(None, DATA,
        "passages (TSV/JSONL): texts of BM25 negatives, refresh index, dev retrieval corpus")
    dev_corpus: str | None = key(None, DATA,
        "passages the dev questions are searched in; None = corpus (a small one keeps periodic dev evaluation cheap "
        "when corpus is large)")
    no_positive: str = key("skip", DATA, "a question without positives: skip it (counted in the log) or fail")

    # --- Model ------------------------------------------------------------------------------------
    model: str = key("minilm", MODEL, "'minilm', a local HF folder, or a dpr_xrisk model folder")
    shared: bool = key(False, MODEL, "one tower for questions and passages")
    pooling: str | None = key(None, MODEL, "override the model's pooling (cls | mean)")
    normalize: bool | None = key(None, MODEL, "override L2 normalisation")
    query_max_length: int = key(32, MODEL, "training-time lengths: short, as in DPR's NQ questions")
    passage_max_length: int = key(256, MODEL,
        "training length in word pieces (title joined); 256 keeps the tail of most 100-word Wikipedia passages "
        "(~145 word pieces) and SQuAD paragraphs, which 128 cut; the best length measured")
    inference_query_max_length: int | None = key(None, MODEL,
        "query length saved for encode/search; None = the starting model's own (MiniLM: 64)")
    inference_passage_max_length: int | None = key(None, MODEL,
        "passage length saved for encode/search; None = the starting model's own (MiniLM: 256), so long passages are "
        "not cut at the training length")

    # --- Loss -------------------------------------------------------------------------------------
    loss: str = key("dpm", LOSS, "dpm | listwise | infonce")
    tau: float | None = key(None, LOSS,
        "temperature; None = 0.05 for cosine (normalised) encoders, 1.0 for dot product")
    zeta_scale: float = key(1.0, LOSS, "α: 0 = unweighted, 1 = importance-weighted (docs/method.md §1-3)")
    zeta_normalize: bool = key(False, LOSS,
        "self-normalised weights: per question, 1/q rescaled to mean 1 over its negatives (ratios kept, the common "
        "N/n_b scale dropped; equal q on every negative = ζ 0)")
    pairwise_loss: str = key("linear", LOSS, "ℓ of the listwise loss: linear | squared_hinge | logistic")
    margin: float = key(1.0, LOSS, "c of squared_hinge")
    symmetric: bool = key(False, LOSS, "add the passage->question direction (dpm, infonce)")

    # --- Moving-average estimator (docs/method.md §4) ---------------------------------------------
    estimator: str = key("minibatch", ESTIMATOR, "minibatch | fcco (per-question moving average of the inner sum)")
    gamma: float = key(0.9, ESTIMATOR, "FCCO γ: SogCLR/LibAUC default; 1 = plain mini-batch gradient")
    gamma_schedule: str = key("constant", ESTIMATOR, "constant | cosine (from 1 down to gamma over gamma_decay_steps)")
    gamma_warmup_steps: int = key(-1, ESTIMATOR,
        "steps with γ = 1; -1 = one epoch (docs/method.md: γ = 1 for the first epoch)")
    gamma_decay_steps: int = key(0, ESTIMATOR, "cosine schedule length; 0 = the whole run")
    probe_every: int = key(0, ESTIMATOR,
        "steps between estimator probes (τ·v vs the exact full-corpus DPM loss); 0 = off")
    probe_size: int = key(64, ESTIMATOR, "training questions in the fixed probe set")

    # --- Batches and negatives --------------------------------------------------------------------
    batch_size: int = key(32, BATCHES, "questions per optimiser step (before accumulation)")
    hard_negatives: int = key(1, BATCHES, "h hard negatives per question (DPR: 1)")
    negatives: str = key("file", BATCHES,
        "initial pools: file (hard_negative_ctxs) | bm25 | negatives-file | model | none")
    negatives_file: str | None = key(None, BATCHES, "JSONL {\"question\": idx, \"negatives\": [passage ids]}")
    bm25_index: str | None = key(None, BATCHES, "folder from `dpr-xrisk bm25 index` (negatives = bm25)")
    bm25_depth: int = key(100, BATCHES, "BM25 candidates per question before filtering")
    max_positives: int = key(4, BATCHES, "listwise: positives per question per step (cap)")
    in_batch_q: str = key("uniform", BATCHES, "q of in-batch negatives: n_b / corpus_size, or one (certain)")
    corpus_size: int | None = key(None, BATCHES,
        "N for in-batch q; None = passages in `corpus`, else unknown (q_b = 1, logged)")
    q_rule: str = key("joint", BATCHES,
        "joint: q = inclusion probability under in-batch + pool sampling (docs/method.md §3); separate: own draws at "
        "the pool q, every other column at n_b/N (the rule before docs/method.md §3's update)")
    filter_answers: bool = key(True, BATCHES, "mask in-batch/hard negatives that contain the question's answer")
    pool_sampler: str = key("uniform", BATCHES, "uniform (q = h/L) | softmax over retrieval scores (q = 1-(1-p)^h)")
    pool_temperature: float = key(0.05, BATCHES, "softmax sampling temperature; cosine scores span ~0.2-0.9")

    # --- Index refresh (docs/method.md §5) --------------------------------------------------------
    refresh_every: int | None = key(None, REFRESH,
        "steps between re-mining from the current encoder's index; None = never")
    refresh_every_epochs: float | None = key(None, REFRESH,
        "the same in epochs: at the first step after each multiple of E epochs of questions (none at the last step); "
        "with both set, at the refresh steps of each (docs/method.md §5 \"and/or\")")
    refresh_k: int = key(100, REFRESH, "top-K retrieved per training question")
    refresh_factory: str = key("Flat", REFRESH, "FAISS factory of the refresh index (exact by default)")
    refresh_skip_ranks: int = key(0, REFRESH, "skip the first r ranks (often unlabelled positives)")
    refresh_margin: float | None = key(None, REFRESH, "drop candidates scoring above (1 - m) * s(positive)")
    refresh_quantize: str = key("none", REFRESH,
        "none | int8 | auto: encode the refresh corpus with an int8 copy of the current passage tower, made at each "
        "refresh (CPU only; faster where bfloat16 is slow); the first refresh also mines 256 questions in fp32 and "
        "logs how far the int8 pools differ (refresh_guard); auto = int8 when training runs on a CPU with AVX-512 "
        "VNNI, none on a GPU, on a CPU without VNNI (there int8 measured no faster than fp32, git show 3ee76c0:eval/RESULTS.md) and "
        "for bf16 training on a CPU with AMX (there the bf16 refresh measured 1.8x faster than int8, "
        "git show 3ee76c0:eval/RESULTS-refresh-amx.md); the run's config.json records which, and a resumed run keeps it")
    refresh_guard: bool = key(True, REFRESH,
        "with refresh_quantize = \"int8\": the first refresh's quality guard (the fp32 mining above; its pools are "
        "compared, never used: the same model bit for bit); off saves its one-time cost, an fp32 encoding of the "
        "whole corpus (225 s of a 1,085 s recipe loop on 24,043 NQ passages, docs/results.md#natural-questions); "
        "the recommended recipe turns it off")
    refresh_fraction: float | None = key(None, REFRESH,
        "re-encode only this share of the corpus per refresh, oldest first (the rest keeps embeddings from earlier "
        "refreshes; staleness is logged); None = all")
    refresh_backend: str = key("torch", REFRESH,
        "torch | onnx: encode the refresh corpus with the current towers exported to ONNX and run by ONNX Runtime "
        "(CPU; with refresh_quantize = \"int8\" its dynamic int8), exported at each refresh under OUT/refresh_onnx "
        "(export_s in refresh_log.jsonl); needs the 'fast' extra")
    refresh_max_length: int | None = key(None, REFRESH,
        "word pieces per passage when encoding the refresh corpus (shorter = faster mining, logged as max_length); "
        "None = passage_max_length")
    refresh_questions: str = key("all", REFRESH,
        "all | upcoming: re-mine the pools of every training question, or only of those the steps until the next "
        "refresh will draw (the data order is known in advance): the same pools where they are used, a quarter of the "
        "query encoding and filtering at refresh_every 16 with 1,024 questions of batch 16; refresh_log's recall and "
        "pool statistics then cover the mined questions")

    # --- Optimisation -----------------------------------------------------------------------------
    lr: float = key(2e-05, OPTIMISATION, "DPR's learning rate for BERT-base; fine for MiniLM too")
    weight_decay: float = key(0.0, OPTIMISATION, "AdamW's decoupled weight decay")
    adam_eps: float = key(1e-08, OPTIMISATION, "AdamW's epsilon (torch's default)")
    warmup_steps: int = key(0, OPTIMISATION, "linear warm-up steps; 0 = warmup_ratio of the run")
    warmup_ratio: float = key(0.1, OPTIMISATION, "used when warmup_steps = 0")
    max_steps: int = key(0, OPTIMISATION, "0 = derive from epochs")
    epochs: float = key(1.0, OPTIMISATION, "passes over the training questions (used when max_steps = 0)")
    grad_accum: int = key(1, OPTIMISATION,
        "micro-batches per optimiser step (each of batch_size / grad_accum questions)")
    grad_cache_chunk: int | None = key(None, OPTIMISATION,
        "cached gradients (GradCache): embed a micro-batch in chunks of this many rows without activations, then "
        "back-propagate chunk by chunk (same gradients, activation memory of one chunk: big batches in small memory); "
        "None = off")
    max_grad_norm: float = key(2.0, OPTIMISATION, "DPR's clipping; > 0 (inf: no clipping)")
    dropout: float | None = key(None, OPTIMISATION,
        "the towers' dropout while training (hidden and attention); None = the model's own (MiniLM, BERT: 0.1)")
    device: str = key("auto", OPTIMISATION,
        "auto (CUDA when present, under torchrun cuda:LOCAL_RANK; else CPU) | cpu | cuda | cuda:N")
    precision: str = key("auto", OPTIMISATION,
        "autocast of the towers: auto | fp32 | bf16 | fp16 (CUDA, with a gradient scaler); auto = bf16 where the device "
        "computes bfloat16 natively (a GPU from Ampere on, a CPU with AMX or AVX512-BF16: there it measured faster), "
        "fp32 elsewhere, printed when training starts; config.json records the resolved value, a resumed run keeps "
        "it; the loss arithmetic stays float32")
    bf16: bool = key(False, OPTIMISATION,
        "the old switch: --bf16 = precision \"bf16\", --fp32 = precision \"fp32\" (kept as aliases; an explicit "
        "--precision wins over --fp32)")
    seed: int = key(42, OPTIMISATION, "seed of everything random (data order, sampling, dropout)")
    threads: int = key(0, OPTIMISATION, "torch threads; 0 = torch's default")

    # --- Evaluation, logging, checkpoints ---------------------------------------------------------
    eval_every: int = key(0, EVALUATION, "steps; 0 = only at the end (when dev is set)")
    eval_ks: tuple[int, ...] = key((1, 5, 20), EVALUATION, "top-k accuracies of the dev evaluation")
    select_metric: str = key("top5", EVALUATION, "best checkpoint = highest dev value of this metric")
    save_every: int = key(0, EVALUATION, "steps; 0 = only at the end")
    keep_checkpoints: int = key(2, EVALUATION, "most recent step checkpoints kept on disk")
    log_every: int = key(1, EVALUATION, "steps between train_log.jsonl records")

    def __post_init__(self):
        """Every check of a key's value, so a TOML file, a flag and a recipe are refused alike."""
        _check_names(self)
        _check_ranges(self)
        _check_combinations(self)

    @property
    def refreshing(self) -> bool:
        """The run mines negatives with its own encoder: a step-0 mining and/or later refreshes."""
        return self.refresh_every is not None or self.refresh_every_epochs is not None or self.negatives == "model"

    # ---- construction -------------------------------------------------------------------
    @classmethod
    def keys(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def from_dict(cls, values: dict, source: str = "config") -> "TrainConfig":
        bad = sorted(set(values) - set(cls.keys()))
        if bad:
            raise InputError(f"unknown {source} key(s) {bad}; valid: {', '.join(cls.keys())}")
        hints = typing.get_type_hints(cls)
        fixed = {}
        for k, v in values.items():
            if k in ("train", "train_weights", "eval_ks") and v is not None:
                v = tuple(v) if isinstance(v, (list, tuple)) else (v,)
            fixed[k] = _typed(k, v, hints[k], source)
        try:
            return cls(**fixed)
        except TypeError as e:
            raise InputError(f"bad {source}: {e}") from None

    @classmethod
    def load(cls, path: str | Path | None, overrides: dict | None = None, recipe: str | None = None) -> "TrainConfig":
        """Start from a shipped recipe's values (``dpr_xrisk/recipes/NAME.toml``), if any, then a
        TOML (.toml) or YAML (.yaml/.yml) file's, then the non-None overrides."""
        values: dict = {}
        if recipe is not None:
            from dpr_xrisk import recipes

            values.update(recipes.load(recipe))
        if path is not None:
            p = Path(path)
            if not p.is_file():
                raise InputError("config file not found", p)
            text = p.read_text(encoding="utf-8")
            try:
                if p.suffix.lower() == ".toml":
                    import tomllib

                    loaded = tomllib.loads(text)
                elif p.suffix.lower() in (".yaml", ".yml"):
                    import yaml

                    loaded = yaml.safe_load(text) or {}
                else:
                    raise InputError("unknown config format; valid: .toml, .yaml, .yml", p)
            except InputError:
                raise
            except Exception as e:  # tomllib / yaml parse errors
                raise InputError(f"cannot parse config: {e}", p) from None
            if not isinstance(loaded, dict):
                raise InputError("config must be a table/mapping of options", p)
            values.update(loaded)
        values.update({k: v for k, v in (overrides or {}).items() if v is not None})
        source = f"config ({path})" if path else f"recipe {recipe!r}" if recipe else "option"
        return cls.from_dict(values, source=source)

    def to_toml(self) -> str:
        """The resolved config as TOML, readable back by ``--config`` (unset keys as comments)."""
        return toml_text(dataclasses.asdict(self))

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2)

    def resolved_tau(self, normalize: bool) -> float:
        return self.tau if self.tau is not None else (0.05 if normalize else 1.0)


_NAMES_OF = (("negatives", NEGATIVE_SOURCES), ("in_batch_q", IN_BATCH_Q), ("q_rule", Q_RULES),
             ("no_positive", NO_POSITIVE), ("estimator", ESTIMATORS), ("gamma_schedule", ("constant", "cosine")),
             ("refresh_backend", ("torch", "onnx")), ("refresh_questions", ("all", "upcoming")),
             ("refresh_quantize", REFRESH_QUANTIZE), ("precision", ("auto", "fp32", "bf16", "fp16")),
             ("pool_sampler", ("uniform", "softmax")))


def _check_names(cfg: TrainConfig) -> None:
    """Every key naming a choice holds a valid name."""
    for name, valid in _NAMES_OF:
        if getattr(cfg, name) not in valid:
            raise unknown_name(name, getattr(cfg, name), valid)
    from dpr_xrisk.losses import LOSSES, PAIRWISE

    if cfg.loss not in LOSSES:
        raise unknown_name("loss", cfg.loss, LOSSES)
    if cfg.pairwise_loss not in PAIRWISE:
        raise unknown_name("pairwise loss", cfg.pairwise_loss, PAIRWISE)


def _positive(v) -> bool:
    return 0 < v < math.inf  # NaN and inf fail


def _non_negative(v) -> bool:
    return 0 <= v < math.inf


# key, test of its value where set, what the value must be: the plain ranges, one line each (the
# keys whose range depends on another key are checked in _check_ranges)
RANGES = (
    ("lr", _positive, "> 0 and finite"),
    ("max_grad_norm", lambda v: v > 0, "> 0 (inf: no clipping)"),  # -1 reached clip_grad_norm_ and flipped gradients
    ("threads", lambda v: v >= 0, ">= 1 (or 0: torch's default)"),
    ("epochs", _positive, "> 0 and finite"),
    ("max_steps", lambda v: v >= 0, ">= 0 (0: from epochs)"),
    ("tau", _positive, "> 0 and finite"),
    ("zeta_scale", _non_negative, ">= 0 and finite"),
    ("margin", _non_negative, ">= 0 and finite"),
    ("weight_decay", _non_negative, ">= 0 and finite"),
    ("adam_eps", _positive, "> 0 and finite"),
    ("warmup_steps", lambda v: v >= 0, ">= 0"),
    ("warmup_ratio", lambda v: 0 <= v <= 1, "in [0, 1]"),
    ("pool_temperature", _positive, "> 0 and finite"),
    ("gamma_warmup_steps", lambda v: v >= -1, ">= 0 (or -1: one epoch)"),
    ("gamma_decay_steps", lambda v: v >= 0, ">= 0"),
    ("probe_every", lambda v: v >= 0, ">= 0"),
    ("probe_size", lambda v: v >= 1, ">= 1"),
    ("hard_negatives", lambda v: v >= 0, ">= 0"),
    ("bm25_depth", lambda v: v >= 1, ">= 1"),
    ("max_positives", lambda v: v >= 1, ">= 1"),
    ("corpus_size", lambda v: v >= 1, ">= 1 passage (or unset)"),
    ("refresh_k", lambda v: v >= 1, ">= 1"),
    ("refresh_skip_ranks", lambda v: v >= 0, ">= 0"),
    ("refresh_every", lambda v: v >= 1, ">= 1 step (or unset for no refresh)"),
    ("refresh_every_epochs", _positive, "> 0 and finite"),
    ("refresh_max_length", lambda v: v >= 2, ">= 2 word pieces (or unset)"),
    ("refresh_fraction", lambda v: 0 < v <= 1, "in (0, 1]"),
    ("refresh_margin", lambda v: 0 <= v < 1, 'in [0, 1) (or "none" for no margin)'),
    ("dropout", lambda v: 0 <= v < 1, "in [0, 1)"),
    ("gamma", lambda v: 0 < v <= 1, "in (0, 1]"),
    ("query_max_length", lambda v: v >= 2, ">= 2 word pieces"),
    ("passage_max_length", lambda v: v >= 2, ">= 2 word pieces"),
    ("inference_query_max_length", lambda v: v >= 2, ">= 2 word pieces (or unset)"),
    ("inference_passage_max_length", lambda v: v >= 2, ">= 2 word pieces (or unset)"),
    ("seed", lambda v: v >= 0, ">= 0"),
    ("eval_every", lambda v: v >= 0, ">= 0"),
    ("save_every", lambda v: v >= 0, ">= 0"),
    ("keep_checkpoints", lambda v: v >= 0, ">= 0 (0: keep all)"),
    ("log_every", lambda v: v >= 1, ">= 1"),
)


def _check_ranges(cfg: TrainConfig) -> None:
    """Every number in its range: :data:`RANGES`, then the ranges that depend on other keys."""
    for name, ok, what in RANGES:
        value = getattr(cfg, name)
        if value is not None and not ok(value):
            raise InputError(f"{name} must be {what}, got {value}")
    if cfg.batch_size < 1 or cfg.grad_accum < 1 or cfg.batch_size % cfg.grad_accum:
        raise InputError("batch_size must be >= 1 and a multiple of grad_accum")
    micro = cfg.batch_size // cfg.grad_accum
    if micro < 2:
        raise InputError("each micro-batch needs at least 2 questions (in-batch negatives)")
    if cfg.grad_cache_chunk is not None and not 1 <= cfg.grad_cache_chunk <= micro:
        raise InputError(f"grad_cache_chunk must be between 1 and the micro-batch size ({micro}), "
                         f"got {cfg.grad_cache_chunk}")
    if any(not _positive(w) for w in cfg.train_weights):
        raise InputError("train_weights must be > 0")
    if any(k < 1 for k in cfg.eval_ks):
        raise InputError(f"eval_ks must be >= 1, got {list(cfg.eval_ks)}")


def _check_combinations(cfg: TrainConfig) -> None:
    """Keys that need or exclude other keys."""
    if cfg.train_weights and len(cfg.train_weights) != len(cfg.train):
        raise InputError(f"{len(cfg.train_weights)} train_weights for {len(cfg.train)} train files")
    if cfg.negatives == "bm25" and not (cfg.bm25_index and cfg.corpus):
        raise InputError("negatives = 'bm25' needs bm25_index and corpus")
    if cfg.refreshing and not cfg.corpus:
        raise InputError("index refresh (refresh_every, negatives = 'model') needs a corpus")
    if cfg.negatives == "negatives-file" and not cfg.negatives_file:
        raise InputError("negatives = 'negatives-file' needs negatives_file")
    if cfg.estimator == "fcco" and cfg.loss == "infonce":
        raise InputError("estimator = 'fcco' applies to the dpm and listwise losses")


def key_docs() -> dict[str, tuple[str, str]]:
    """key -> (help, panel) of every TrainConfig key, from its field metadata."""
    return {f.name: (f.metadata["help"], f.metadata["panel"]) for f in dataclasses.fields(TrainConfig)}


# the optional numbers (X | None for int, float, bool): "none" unsets them in TOML
_OPTIONAL_NUMBERS = frozenset(k for k, h in typing.get_type_hints(TrainConfig).items()
                              if type(None) in typing.get_args(h)
                              and set(typing.get_args(h)) - {type(None)} <= {int, float, bool})
_NAMES = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
UNSET = "none"  # the TOML spelling of an unset optional number (refresh_margin = "none")


def is_unset(value) -> bool:
    """``value`` spells "unset" (``"none"``, any case; in a config file or on a flag)."""
    return isinstance(value, str) and value.lower() == UNSET


def _typed(key: str, value, hint, source: str):
    """``value`` checked against the field's type (``shared = "no"`` is an error, not a truthy
    string); ints are accepted where a float is expected."""
    args = typing.get_args(hint)
    optional = type(None) in args
    if optional:  # X | None
        if value is None:
            return None
        hint = next(a for a in args if a is not type(None))
        args = typing.get_args(hint)
        if hint is not str and is_unset(value):
            return None  # TOML has no null: "none" unsets a number a recipe sets
    if typing.get_origin(hint) is tuple:
        inner = args[0]
        return tuple(_typed(key, v, inner, source) for v in value)
    ok = (isinstance(value, bool) if hint is bool else
          isinstance(value, int) and not isinstance(value, bool) if hint is int else
          isinstance(value, (int, float)) and not isinstance(value, bool) if hint is float else
          isinstance(value, hint))
    if not ok:
        unset = f' (or "{UNSET}" to unset it)' if optional and hint is not str else ""
        raise InputError(f"{source}: {key!r} must be {_NAMES.get(hint, hint.__name__)}{unset}, got {value!r}")
    return float(value) if hint is float else value


def toml_text(values: dict) -> str:
    """Flat ``key = value`` TOML for config values (bool, int, float, str, lists of them); a None
    value, which TOML cannot hold, is written as ``key = "none"`` for an optional number (read back
    as unset, even where a recipe sets the key) and as a comment ``# key = (unset)`` otherwise."""
    def val(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)):
            return repr(v)
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(val(x) for x in v) + "]"
        # a TOML basic string: JSON's escapes, but non-BMP characters kept as they are (JSON's
        # surrogate-pair escapes are not valid TOML) and DEL escaped (TOML forbids it raw)
        return json.dumps(str(v), ensure_ascii=False).replace("\x7f", "\\u007f")

    def line(k, v):
        if v is None:  # an unset number reads back as unset even over a recipe that sets it
            return f'{k} = "{UNSET}"\n' if k in _OPTIONAL_NUMBERS else f"# {k} = (unset)\n"
        return f"{k} = {val(v)}\n"

    return "".join(line(k, v) for k, v in values.items())


# keys that must agree between a checkpoint and the config resuming it (the rest may change,
# e.g. eval_every or save_every)
STRUCTURAL = ("train", "train_weights", "model", "shared", "pooling", "normalize", "loss", "tau", "zeta_scale", "zeta_normalize",
              "pairwise_loss", "margin", "symmetric", "batch_size", "hard_negatives", "negatives",
              "max_positives", "in_batch_q", "q_rule", "corpus", "corpus_size", "filter_answers",
              "bm25_depth", "negatives_file", "pool_sampler", "pool_temperature", "refresh_every", "refresh_every_epochs", "refresh_k",
              "refresh_factory", "refresh_skip_ranks", "refresh_margin", "refresh_fraction", "refresh_max_length", "refresh_backend", "estimator", "gamma", "gamma_schedule", "gamma_warmup_steps",
              "gamma_decay_steps", "lr", "weight_decay", "adam_eps", "warmup_steps", "warmup_ratio", "max_steps",
              "epochs", "grad_accum", "seed", "query_max_length", "passage_max_length", "bf16", "precision", "dropout")


def incompatible_keys(saved: dict, current: TrainConfig) -> list[str]:
    cur = json.loads(current.to_json())
    return [k for k in STRUCTURAL if saved.get(k) != cur.get(k)]
