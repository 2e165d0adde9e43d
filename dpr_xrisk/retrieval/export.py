"""Exports that other tools load: a model as sentence-transformers folders, an index as the files
pyserini's ``FaissSearcher`` reads.

sentence-transformers: one folder per tower (``query_encoder/``, ``passage_encoder/``; one
``encoder/`` for a shared tower) in the layout all-MiniLM-L6-v2 ships (modules.json, pooling,
normalisation, max length, and the prefixes as prompts), so that
``SentenceTransformer(folder).encode(texts)`` equals ``dpr-xrisk encode`` of the same texts.
Passages are single texts there: a dpr_xrisk model that encodes (title, text) as a BERT sentence
pair gives the same vectors only for passages without a title.

pyserini: ``index`` (the FAISS index) and ``docid`` (one id per line, index order). Search it with
``FaissSearcher(folder, AutoQueryEncoder(<query_encoder export>, pooling=..., l2_norm=...))``;
pyserini's encoder does not cut a query at the model's query length (it reads up to 512 tokens)
and joins a prefix with a space, so longer or prefixed queries score slightly differently.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from dpr_xrisk.errors import InputError
from dpr_xrisk.io.common import atomic_dir, check_apart

FORMATS = ("sentence-transformers", "pyserini")


def _write_st_folder(folder: Path, model, tokenizer, pooling: str, normalize: bool, max_length: int,
                     prompts: dict[str, str], default_prompt: str | None) -> None:
    model.save_pretrained(str(folder), safe_serialization=True)
    tokenizer.save_pretrained(str(folder))
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"})
        (folder / "2_Normalize").mkdir()
    (folder / "modules.json").write_text(json.dumps(modules, indent=2) + "\n")
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": max_length, "do_lower_case": False},
                                                                 indent=2) + "\n")
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({
        "word_embedding_dimension": int(model.config.hidden_size), "pooling_mode_cls_token": pooling == "cls",
        "pooling_mode_mean_tokens": pooling == "mean", "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False}, indent=2) + "\n")
    cst: dict = {"similarity_fn_name": "cosine" if normalize else "dot"}
    prompts = {k: v for k, v in prompts.items() if v}
    if prompts:
        cst["prompts"] = prompts
        if default_prompt in prompts:
            cst["default_prompt_name"] = default_prompt
    (folder / "config_sentence_transformers.json").write_text(json.dumps(cst, indent=2) + "\n")


def export_sentence_transformers(model_dir, out, overwrite: bool = False) -> list[Path]:
    """Write ``out/query_encoder`` and ``out/passage_encoder`` (or ``out/encoder`` for a shared
    tower); returns the folders written. ``out`` may not be (or hold, or lie in) the model."""
    from dpr_xrisk.retrieval.encoder import DualEncoder, resolve_model_path

    check_apart(resolve_model_path(model_dir), out, "model")
    enc = DualEncoder.load(model_dir)
    s = enc.settings
    with atomic_dir(out, overwrite=overwrite) as tmp:
        if s.shared:
            names = ["encoder"]
            (tmp / "encoder").mkdir()
            _write_st_folder(tmp / "encoder", enc.query_model, enc.tokenizer, s.pooling, s.normalize,
                             s.passage_max_length, {"query": s.query_prefix, "document": s.passage_prefix}, None)
        else:
            names = ["query_encoder", "passage_encoder"]
            for name, model, length, prompt in (("query_encoder", enc.query_model, s.query_max_length, "query"),
                                                ("passage_encoder", enc.passage_model, s.passage_max_length, "document")):
                (tmp / name).mkdir()
                prefix = s.query_prefix if prompt == "query" else s.passage_prefix
                _write_st_folder(tmp / name, model, enc.tokenizer, s.pooling, s.normalize, length, {prompt: prefix}, prompt)
        (tmp / "README.md").write_text(
            f"sentence-transformers export of {model_dir} (dpr-xrisk export).\n\n"
            + ("One shared tower: `encode(queries, prompt_name='query')`, `encode(passages, prompt_name='document')`.\n"
               if s.shared else "`SentenceTransformer('query_encoder')` for questions, "
               "`SentenceTransformer('passage_encoder')` for passages.\n")
            + ("Passages with a title were encoded by dpr_xrisk as a (title, text) sentence pair; "
               "sentence-transformers encodes one text, so give it passages without titles (or expect other vectors).\n"
               if s.title == "pair" else ""))
    return [Path(out) / n for n in names]


def export_pyserini(index_dir, out, overwrite: bool = False) -> Path:
    """Copy an index folder's FAISS index and ids into pyserini's ``index`` + ``docid`` files."""
    from dpr_xrisk.retrieval.index import load_index

    index, ids, meta = load_index(index_dir)  # validates the folder (counts, damaged files)
    check_apart(index_dir, out, "index")
    if meta.get("normalize_queries"):
        raise InputError("this index normalises queries at search time (metric cosine over an unnormalised encoder); "
                         "pyserini would not: export an index built from normalised embeddings", index_dir)
    with atomic_dir(out, overwrite=overwrite) as tmp:
        shutil.copyfile(Path(index_dir) / "index.faiss", tmp / "index")
        (tmp / "docid").write_text("".join(i + "\n" for i in ids), encoding="utf-8")
        (tmp / "dpr_xrisk_meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    return Path(out)
