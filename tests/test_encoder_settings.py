"""A sentence-transformers folder's inference settings are read, never guessed: the classic
layout (pooling_mode_* flags, sentence_bert_config.json max_seq_length) and the one
sentence-transformers >= 6 writes (``pooling_mode`` string, max length as the tokenizer's
model_max_length)."""

from __future__ import annotations

import json
import shutil

import pytest

from dpr_xrisk.retrieval.encoder import DualEncoder
from dpr_xrisk.errors import InputError


def _st_folder(tiny_model_dir, tmp_path, pooling: dict, max_len: int, classic: bool):
    d = tmp_path / "st"
    shutil.copytree(tiny_model_dir, d)
    (d / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.base.modules.transformer.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.sentence_transformer.modules.pooling.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.base.modules.normalize.Normalize"}]))
    (d / "1_Pooling").mkdir()
    (d / "1_Pooling" / "config.json").write_text(json.dumps({"embedding_dimension": 32, **pooling}))
    (d / "2_Normalize").mkdir()
    if classic:
        (d / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": max_len}))
    else:
        tc = json.loads((d / "tokenizer_config.json").read_text())
        (d / "tokenizer_config.json").write_text(json.dumps({**tc, "model_max_length": max_len}))
    return d


@pytest.mark.parametrize("classic", [True, False])
def test_sentence_transformers_settings_both_layouts(tiny_model_dir, tmp_path, classic):
    pooling = {"pooling_mode_mean_tokens": True} if classic else {"pooling_mode": "mean"}
    enc = DualEncoder.load(_st_folder(tiny_model_dir, tmp_path, pooling, 48, classic))
    s = enc.settings
    assert (s.pooling, s.normalize, s.passage_max_length, s.query_max_length, s.title) == ("mean", True, 48, 48, "join")


def test_unsupported_pooling_string_is_a_clear_error(tiny_model_dir, tmp_path):
    with pytest.raises(InputError, match="pooling 'lasttoken' is not supported"):
        DualEncoder.load(_st_folder(tiny_model_dir, tmp_path, {"pooling_mode": "lasttoken"}, 48, False))
