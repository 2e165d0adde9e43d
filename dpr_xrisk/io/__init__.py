"""Readers and writers for the formats of our field (DPR, pyserini, BEIR, TREC).

This package owns parsing and writing files, and turning every malformed input into an
:class:`~dpr_xrisk.errors.InputError` naming the file and line. It owns no retrieval logic.
"""

from dpr_xrisk.io.common import atomic_write, atomic_dir
from dpr_xrisk.io.passages import Passage, read_passages, write_passages_tsv, write_jsonl_collection
from dpr_xrisk.io.questions import Question, read_questions, write_qa_tsv
from dpr_xrisk.io.biencoder import read_biencoder, write_biencoder
from dpr_xrisk.io.trec import read_qrels, write_qrels, read_run, write_run
from dpr_xrisk.io.retrieval_json import read_retrieval_json, write_retrieval_json

__all__ = [
    "atomic_write", "atomic_dir", "Passage", "read_passages", "write_passages_tsv",
    "write_jsonl_collection", "Question", "read_questions", "write_qa_tsv", "read_biencoder",
    "write_biencoder", "read_qrels", "write_qrels", "read_run", "write_run",
    "read_retrieval_json", "write_retrieval_json",
]
