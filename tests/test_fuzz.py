"""Fuzzed readers (issue #15 item 7), with hypothesis.

For every reader: generated valid files round-trip exactly (write -> read -> equal), and generated
corruptions (random bytes, truncation, bad UTF-8, stray separators, byte-order marks, CRLF,
duplicated lines, huge fields) end in an :class:`InputError` or an exact parse -- never another
exception, never a record count that differs from what was read. Bounded here (the ``default``
profile of conftest.py); ``pytest tests/test_fuzz.py --hypothesis-profile=long`` goes deeper
(``python -m eval run fuzz`` reports it).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from dpr_xrisk.errors import InputError
from dpr_xrisk.io.biencoder import read_biencoder, write_biencoder
from dpr_xrisk.io.common import load_json
from dpr_xrisk.io.passages import Passage, count_passages, read_passages, write_jsonl_collection, write_passages_tsv
from dpr_xrisk.io.questions import Question, read_questions, write_qa_tsv, write_queries_jsonl
from dpr_xrisk.io.retrieval_json import read_retrieval_json, write_retrieval_json
from dpr_xrisk.io.trec import read_qrels, read_run, write_qrels, write_run

pytestmark = pytest.mark.filterwarnings("ignore")
FUZZ = settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

# ---- valid records ---------------------------------------------------------------------------------
# no whitespace and no control/format characters: what an id or a word can hold in every format
_char = st.characters(codec="utf-8", exclude_categories=("Z", "C"))
ident = st.text(_char, min_size=1, max_size=10)
word = st.text(_char, min_size=1, max_size=8)
text = st.lists(word, min_size=1, max_size=8).map(" ".join)  # whitespace-normalised, never empty
title = st.one_of(st.just(""), text)


def unique_by(key):
    return lambda xs: len({key(x) for x in xs}) == len(xs)


passages = st.lists(st.builds(Passage, ident, text, title), min_size=1, max_size=8).filter(unique_by(lambda p: p.id))
answers = st.lists(text, max_size=3).map(tuple)
qa_questions = st.lists(st.builds(Question, st.just(""), text, answers), min_size=1, max_size=8)
qrels_st = st.dictionaries(ident, st.dictionaries(ident, st.integers(0, 3), min_size=1, max_size=4), min_size=1, max_size=5)
run_st = st.dictionaries(ident, st.lists(st.tuples(ident, st.integers(-10**6, 10**6).map(lambda x: x / 1000)),
                                          min_size=1, max_size=5).filter(unique_by(lambda h: h[0])),
                         min_size=1, max_size=5)


def tmpfile(name: str) -> Path:
    return Path(tempfile.mkdtemp(prefix="fuzz-")) / name


def as_tuples(ps):
    return [(p.id, p.text, p.title) for p in ps]


# ---- round trips -----------------------------------------------------------------------------------
def passages_round_trip(name: str, write, ps) -> None:
    f = tmpfile(name)
    write(f, ps)
    assert as_tuples(read_passages(f)) == as_tuples(ps) and count_passages(f) == len(ps)


@FUZZ
@given(passages)
def test_passages_tsv_round_trip(ps):
    passages_round_trip("p.tsv", write_passages_tsv, ps)


@FUZZ
@given(passages)
def test_passages_jsonl_round_trip(ps):
    # pyserini's contents = title + newline + text; a title in double quotes loses them (pyserini's own rule)
    assume(not any(len(p.title) >= 2 and p.title[0] == p.title[-1] == '"' for p in ps))
    passages_round_trip("p.jsonl", write_jsonl_collection, ps)


@FUZZ
@given(qa_questions)
def test_qa_tsv_and_jsonl_round_trip(qs):
    f = tmpfile("q.tsv")
    write_qa_tsv(f, qs)
    assert [(q.text, q.answers) for q in read_questions(f)] == [(q.text, q.answers) for q in qs]
    qs = [q._replace(qid=str(i)) for i, q in enumerate(qs)]
    g = tmpfile("q.jsonl")
    write_queries_jsonl(g, qs)
    assert read_questions(g) == qs


@FUZZ
@given(st.lists(st.fixed_dictionaries({"question": text, "answers": st.lists(text, max_size=3),
                                       "positive_ctxs": st.lists(st.builds(lambda t, x, i: {"title": t, "text": x, "passage_id": i},
                                                                           title, text, ident), max_size=2)}),
                min_size=1, max_size=5), st.booleans())
def test_biencoder_round_trip(recs, jsonl):
    f = tmpfile("b.jsonl" if jsonl else "b.json")
    write_biencoder(f, recs, jsonl=jsonl)
    back = read_biencoder(f)
    assert [(r["question"], r["answers"]) for r in back] == [(r["question"], r["answers"]) for r in recs]
    assert [[(c["title"], c["text"], c["passage_id"]) for c in r["positive_ctxs"]] for r in back] == \
        [[(c["title"], c["text"], c["passage_id"]) for c in r["positive_ctxs"]] for r in recs]


@FUZZ
@given(qrels_st)
def test_qrels_round_trip(qrels):
    f = tmpfile("q.qrels")
    write_qrels(f, qrels)
    assert read_qrels(f) == qrels


@FUZZ
@given(run_st)
def test_trec_run_round_trip(run):
    f = tmpfile("r.trec")
    write_run(f, run)
    assert read_run(f) == {q: [(d, s) for d, s in hits] for q, hits in run.items()}


@FUZZ
@given(st.dictionaries(ident, st.fixed_dictionaries({
    "question": text, "answers": st.lists(text, max_size=2),
    "contexts": st.lists(st.fixed_dictionaries({"docid": ident, "score": st.floats(-1e6, 1e6), "has_answer": st.booleans()}),
                         max_size=3)}), min_size=1, max_size=4))
def test_retrieval_json_round_trip(records):
    f = tmpfile("r.json")
    write_retrieval_json(f, records)
    assert read_retrieval_json(f) == records


@FUZZ
@given(st.fixed_dictionaries({"tau": st.floats(0.001, 10), "lr": st.floats(1e-7, 1e-2), "batch_size": st.integers(2, 512),
                              "shared": st.booleans(), "loss": st.sampled_from(["dpm", "listwise", "infonce"]),
                              "train": st.lists(text, min_size=1, max_size=2).map(tuple)}))
def test_config_toml_round_trip(values):
    from dpr_xrisk.train.config import TrainConfig

    cfg = TrainConfig.from_dict(values)
    f = tmpfile("c.toml")
    f.write_text(cfg.to_toml(), encoding="utf-8")
    assert TrainConfig.load(f) == cfg


# ---- corruptions -----------------------------------------------------------------------------------
def sample_files(ps, qs, qrels, run) -> dict[str, tuple[bytes, callable]]:
    """Valid files of every reader, as bytes, with the reader that parses them."""
    out = {}
    for name, write in (("p.tsv", lambda f: write_passages_tsv(f, ps)), ("p.jsonl", lambda f: write_jsonl_collection(f, ps)),
                        ("q.tsv", lambda f: write_qa_tsv(f, qs)), ("q.jsonl", lambda f: write_queries_jsonl(f, qs)),
                        ("q.qrels", lambda f: write_qrels(f, qrels)), ("r.trec", lambda f: write_run(f, run)),
                        ("b.json", lambda f: write_biencoder(f, [{"question": q.text, "answers": list(q.answers)} for q in qs]))):
        f = tmpfile(name)
        write(f)
        out[name] = f.read_bytes()
    return out


READERS = {"p.tsv": lambda f: list(read_passages(f)), "p.jsonl": lambda f: list(read_passages(f)),
           "q.tsv": read_questions, "q.jsonl": read_questions, "q.qrels": read_qrels, "r.trec": read_run,
           "b.json": read_biencoder}


def parse(name: str, data: bytes):
    """The reader's result, or None for an InputError; any other exception fails the test. A
    passages file that parses must also count as many passages as it yields."""
    f = tmpfile(name)
    f.write_bytes(data)
    try:
        got = READERS[name](f)
    except InputError:
        return None
    if name.startswith("p."):
        assert count_passages(f) == len(got)
    return got


def bad_utf8(data: bytes, at: int) -> bytes:
    return data[:at] + b"\xff\xfe" + data[at:]


CORRUPTIONS = {
    "truncate": lambda d, i: d[:i],
    "bad_utf8": bad_utf8,
    "stray_tab": lambda d, i: d[:i] + b"\t" + d[i:],
    "stray_cr": lambda d, i: d[:i] + b"\r" + d[i:],
    "stray_quote": lambda d, i: d[:i] + b'"' + d[i:],
    "stray_newline": lambda d, i: d[:i] + b"\n" + d[i:],
    "nul": lambda d, i: d[:i] + b"\x00" + d[i:],
    "huge_field": lambda d, i: d[:i] + b"x" * 200_000 + d[i:],
    "duplicate_line": lambda d, i: d + (d.splitlines(keepends=True) or [b""])[-1],
}


@FUZZ
@given(passages, qa_questions, qrels_st, run_st, st.sampled_from(sorted(READERS)), st.sampled_from(sorted(CORRUPTIONS)),
       st.integers(0, 10**6))
def test_corruptions_end_in_input_error_or_exact_parse(ps, qs, qrels, run, name, kind, pos):
    data = sample_files(ps, qs, qrels, run)[name]
    corrupt = CORRUPTIONS[kind](data, pos % (len(data) + 1))
    parse(name, corrupt)  # InputError or a parse; anything else fails
    if kind == "bad_utf8" and corrupt != data:
        assert parse(name, corrupt) is None  # never a silently replaced character


@FUZZ
@given(passages, qa_questions, qrels_st, run_st, st.sampled_from(sorted(READERS)))
def test_bom_and_crlf_parse_exactly_as_the_clean_file(ps, qs, qrels, run, name):
    data = sample_files(ps, qs, qrels, run)[name]
    clean = parse(name, data)
    assert clean is not None
    assert parse(name, b"\xef\xbb\xbf" + data) == clean
    if not name.endswith(".json"):
        assert parse(name, data.replace(b"\n", b"\r\n")) == clean


@FUZZ
@given(passages)
def test_duplicated_passage_is_an_error(ps):
    f = tmpfile("p.tsv")
    write_passages_tsv(f, ps)
    lines = f.read_bytes().splitlines(keepends=True)
    f.write_bytes(b"".join(lines) + lines[1])
    with pytest.raises(InputError, match="duplicate passage id"):
        list(read_passages(f))


@FUZZ
@given(st.binary(max_size=400), st.sampled_from(sorted(READERS)))
def test_random_bytes_end_in_input_error_or_a_parse(data, name):
    parse(name, data)


@FUZZ
@given(st.binary(max_size=300))
def test_random_bytes_as_json(data):
    f = tmpfile("x.json")
    f.write_bytes(data)
    try:
        load_json(f)
    except InputError:
        pass


@FUZZ
@given(st.recursive(st.none() | st.booleans() | st.integers() | text,
                    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.sampled_from(
                        ["data", "title", "paragraphs", "context", "qas", "question", "answers", "text"]), kids, max_size=4),
                    max_leaves=20))
def test_squad_converter_never_crashes(obj):
    from dpr_xrisk.io.convert import squad_to_dpr

    f = tmpfile("squad.json")
    f.write_text(json.dumps({"data": obj} if not isinstance(obj, dict) else obj))
    out = f.parent / "out"
    try:
        counts = squad_to_dpr(f, out)
    except InputError:
        assert not out.exists()
        return
    assert count_passages(out / "passages.tsv") == counts["passages"]
