"""The NQ protocol's input checks (eval/nq.py; the benchmark itself trains MiniLM: not a test), its
run settings (those eval/bench_nq.py recorded, so its run folders are adopted) and the seed filter
of eval/paired.py that it relies on."""

from __future__ import annotations

import json
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from eval import harness, nq, paired
from eval.__main__ import main as eval_main


def _ctx(pid, text="some text"):
    return {"title": "T", "text": text, "passage_id": pid}


def _files(tmp_path: Path, corpus_ids=("p1", "p2", "p3", "d1", "d2", "d3", "d4"), positives=("p1", "p2", "p3"),
           test_answers=('["x"]', '["y"]')) -> list[str]:
    train = [{"question": f"question {i}", "answers": ["a"], "positive_ctxs": [_ctx(p)], "negative_ctxs": [],
              "hard_negative_ctxs": []} for i, p in enumerate(positives)]
    train.append({"question": "no positive here", "answers": ["a"], "positive_ctxs": []})
    (tmp_path / "train.json").write_text(json.dumps(train))
    (tmp_path / "test.qa.tsv").write_text("".join(f"test question {i}\t{a}\n" for i, a in enumerate(test_answers))
                                          + "Question 0\t[\"z\"]\n")
    (tmp_path / "psgs.tsv").write_text("id\ttext\ttitle\n" + "".join(f"{c}\ttext of {c}\tTitle {c}\n" for c in corpus_ids))
    return ["--set", f"train={tmp_path / 'train.json'}", "--set", f"test={tmp_path / 'test.qa.tsv'}",
            "--set", f"corpus={tmp_path / 'psgs.tsv'}", "--work", str(tmp_path / "work")]


def _path(argv: list[str], key: str) -> Path:
    return Path(next(a.split("=", 1)[1] for a in argv if a.startswith(f"{key}=")))


def _prepare(argv: list[str], **extra):
    import argparse

    ns = dict(train_questions=10 ** 9, refresh_sample=2, batch_size=2)
    ns.update(extra)
    args = argparse.Namespace(train=_path(argv, "train"), test=_path(argv, "test"), corpus=_path(argv, "corpus"),
                              work=Path(argv[-1]), **ns)
    return nq.prepare(args)


def test_prepare_counts_and_training_corpus(tmp_path):
    data = _prepare(_files(tmp_path))
    st = data["stats"]
    assert (st["train_records"], st["dropped_no_positive"], st["train_questions"]) == (4, 1, 3)
    assert (st["corpus_passages"], st["train_positives"], st["train_positives_in_corpus"]) == (7, 3, 3)
    assert st["test_questions"] == 3 and st["test_questions_also_in_train"] == 1  # "Question 0", case-insensitive
    ids = [line.split("\t")[0] for line in Path(data["train_corpus"]).read_text().splitlines()[1:]]
    assert {"p1", "p2", "p3"} <= set(ids) and len(set(ids)) == len(ids)
    assert 3 <= len(ids) <= 5 and st["train_corpus_passages"] == len(ids)  # positives + a sample of 2
    train = json.loads(Path(data["train"]).read_text())
    assert [r["positive_ctxs"][0]["passage_id"] for r in train] == ["p1", "p2", "p3"]
    assert set(train[0]) == {"question", "answers", "positive_ctxs"}  # the file's negatives are not carried


def test_subset_of_training_questions(tmp_path):
    data = _prepare(_files(tmp_path), train_questions=2)
    assert data["stats"]["train_questions"] == 2 and len(json.loads(Path(data["train"]).read_text())) == 2


def _main_error(argv, capsys) -> str:
    with pytest.raises(SystemExit) as e:
        eval_main(["run", "nq", "--systems", "zero-shot", "recommended", *argv])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ")
    return err[0]


def test_corpus_without_the_training_positives_is_refused(tmp_path, capsys):
    err = _main_error(_files(tmp_path, corpus_ids=("wiki:1", "wiki:2")), capsys)
    assert "none of the 3 training positives' passage_ids is in the corpus" in err
    assert "'p1'" in err and "'wiki:1'" in err


def test_positive_without_passage_id_is_refused(tmp_path, capsys):
    argv = _files(tmp_path)
    train = json.loads(_path(argv, "train").read_text())
    del train[1]["positive_ctxs"][0]["passage_id"]
    _path(argv, "train").write_text(json.dumps(train))
    assert "1 positive passage(s) have no passage_id" in _main_error(argv, capsys)


def test_test_question_without_answers_is_refused(tmp_path, capsys):
    assert "1 of 3 test questions have no answers" in _main_error(_files(tmp_path, test_answers=('["x"]', "[]")), capsys)


def test_malformed_training_file_is_one_line(tmp_path, capsys):
    argv = _files(tmp_path)
    _path(argv, "train").write_text('{"question": "not a list"}')
    assert "expected a JSON list" in _main_error(argv, capsys)


def test_paired_seed_filter(tmp_path):
    """compare(seeds=...) leaves out finished runs of seeds not asked for (a stale seed of an
    earlier invocation must not enter the mean)."""
    ranks = {"zero-shot": [0, 3, 20, 1], "sys-s0": [0, 0, 20, 0], "sys-s5": [50, 50, 50, 50]}
    for name, r in ranks.items():
        d = tmp_path / name
        d.mkdir()
        np.save(d / "first_hit.npy", np.asarray(r))
        (d / "bench.json").write_text("{}")
    both = paired.compare("zero-shot", "sys", 100, tmp_path)
    only0 = paired.compare("zero-shot", "sys", 100, tmp_path, seeds=[0])
    assert both["seeds"] == [0, 5] and only0["seeds"] == [0]
    # seed 0 alone: top-1 gains questions 2 and 4 -> +0.5; rr@10: (0 + 0.75 + 0 + 0.5) / 4
    assert only0["top1"]["diff"] == pytest.approx(0.5)
    assert only0["rr@10"]["diff"] == pytest.approx((1 - 0.25 + 1 - 0.5) / 4)


def test_positives_outside_the_corpus_are_left_out_and_counted(tmp_path):
    data = _prepare(_files(tmp_path, corpus_ids=("p1", "p2", "d1", "d2")))
    st = data["stats"]
    assert (st["train_positives_in_corpus"], st["dropped_positive_not_in_corpus"], st["train_questions"]) == (2, 1, 2)
    assert [r["positive_ctxs"][0]["passage_id"] for r in json.loads(Path(data["train"]).read_text())] == ["p1", "p2"]
    assert data["train_positives"] == {"p1", "p2"}


def test_fewer_questions_than_the_batch_is_refused(tmp_path):
    with pytest.raises(SystemExit) as e:
        _prepare(_files(tmp_path), batch_size=32)
    assert e.value.code == 2 and "3 usable training questions, fewer than the batch size 32" in e.value.msg


def test_prepared_data_is_reused_only_for_the_same_inputs(tmp_path, capsys):
    argv = _files(tmp_path)
    first = _prepare(argv)
    again = _prepare(argv)
    assert "reusing" in capsys.readouterr().out and again["stats"] == first["stats"]
    assert again["train_positives"] == first["train_positives"]
    train = json.loads(_path(argv, "train").read_text())
    _path(argv, "train").write_text(json.dumps(train[1:]))  # other training data: prepared afresh
    assert _prepare(argv)["stats"]["train_questions"] == 2 and "reusing" not in capsys.readouterr().out


def test_test_questions_without_numeric_ids_are_refused(tmp_path, capsys):
    argv = _files(tmp_path)
    jsonl = tmp_path / "test.jsonl"  # ids of its own: paired.py aligns runs by numeric qid
    jsonl.write_text('{"id": "q1", "question": "who?", "answers": ["x"]}\n')
    argv[3] = f"test={jsonl}"
    assert "question ids must be numbers" in _main_error(argv, capsys)


def _legacy_data():
    """The prepared data of the live nq-1 run (eval/bench_nq.py, 20k distractors, seeds 0-2)."""
    fps = {"train": "1176119-5dd81c60b97324c1-c9a26e539080317d", "test": "32044-90a4e07a38a4714e-90a4e07a38a4714e",
           "corpus": "16111389-564da962bb3b3c69-4985003d0397bbad"}
    return {"inputs": {k: {"path": f"/x/{k}", "fingerprint": v} for k, v in fps.items()},
            "stats": {"train_questions": 1624, "corpus_passages": 24043}}


def test_settings_are_those_bench_nq_recorded():
    """The run folders of eval/bench_nq.py are adopted unchanged: the settings of zero-shot,
    recommended and st-mnrl have its keys and values (the zero-shot dict is the one its live run
    stamped; the trained ones as its settings_of built them)."""
    import dpr_xrisk

    exp = harness.load_experiment("nq")
    params = harness.params_of(exp, {}, tiny=False)
    data, fp = _legacy_data(), {k: v["fingerprint"] for k, v in _legacy_data()["inputs"].items()}
    assert nq.settings_of(exp, params, data, "zero-shot", 0) == {
        "system": "zero-shot", "protocol": "nq-1", "test": fp["test"], "corpus": fp["corpus"], "bf16": True}
    trained = {"protocol": "nq-1", "test": fp["test"], "corpus": fp["corpus"], "bf16": True, "train": fp["train"],
               "train_questions": 1624, "seed": 2, "epochs": 2.0, "refresh_sample": 0, "corpus_size": 24043,
               "version": dpr_xrisk.__version__}
    # code: the recipe file's SHA-256 at 19d287b, and eval/_st_mnrl.py's (an edit makes its runs other runs)
    assert nq.settings_of(exp, params, data, "recommended", 2) == {**trained, "system": "recommended",
                                                                     "code": "eb89bce2461db26e"}
    assert nq.settings_of(exp, params, data, "st-mnrl", 2) == {**trained, "system": "st-mnrl",
                                                                 "code": "1357358d3c516f95", "max_length": 256}
    # a system added since says what sets it apart
    assert nq.settings_of(exp, params, data, "recommended-z0", 0)["spec"] == {"shared": True, "zeta_scale": 0.0}


def test_the_fp32_twin_differs_from_the_recipe_in_precision_alone():
    """recommended-fp32 (issue #53's quality guard) is the recipe's run with bf16 off: its settings
    say so, its training config pins fp32, everything else is the recipe's."""
    exp = harness.load_experiment("nq")
    params, data = harness.params_of(exp, {}, tiny=False), {**_legacy_data(), "train": "t.json", "train_corpus": "c.tsv"}
    rec, f32 = (nq.settings_of(exp, params, data, s, 1) for s in ("recommended", "recommended-fp32"))
    assert (rec["bf16"], f32["bf16"]) == (True, False)
    assert {k: v for k, v in f32.items() if k not in ("system", "bf16")} == \
        {k: v for k, v in rec.items() if k not in ("system", "bf16")}
    a, b = (nq.train_file(exp, params, data, s, 1) for s in ("recommended", "recommended-fp32"))
    assert (a.pop("precision"), b.pop("precision")) == ("bf16", "fp32") and a == b


def test_the_guard_parameter_turns_the_measuring_guard_off_and_says_so():
    """--set guard=false trains every toolkit system without the int8 refresh guard, which only
    measures: the run settings record it (a run with the guard is another run), the config turns it
    off, and nothing else changes. With the default the settings are those stored."""
    exp = harness.load_experiment("nq")
    data = {**_legacy_data(), "train": "t.json", "train_corpus": "c.tsv"}
    on, off = harness.params_of(exp, {}, tiny=False), harness.params_of(exp, {"guard": False}, tiny=False)
    a, b = (nq.settings_of(exp, p, data, "recommended-shared", 0) for p in (on, off))
    assert "refresh_guard" not in a and b == {**a, "refresh_guard": False}
    ca, cb = (nq.train_file(exp, p, data, "recommended-shared", 0) for p in (on, off))
    assert (ca["refresh_guard"], cb["refresh_guard"]) == (True, False)
    assert {k: v for k, v in ca.items() if k != "refresh_guard"} == {k: v for k, v in cb.items() if k != "refresh_guard"}
    assert nq.settings_of(exp, off, data, "st-mnrl", 0) == nq.settings_of(exp, on, data, "st-mnrl", 0)
    with pytest.raises(SystemExit, match="guard='no': must be true or false"):
        nq.settings_of(exp, {**on, "guard": "no"}, data, "recommended-shared", 0)


def test_a_system_bf16_that_is_not_a_boolean_is_refused():
    exp = harness.load_experiment("nq")
    exp.systems["recommended-fp32"]["bf16"] = "no"  # would read as true
    with pytest.raises(SystemExit, match="bf16 must be true or false"):
        nq.settings_of(exp, harness.params_of(exp, {}, tiny=False), _legacy_data(), "recommended-fp32", 0)


def test_a_changed_recipe_base_is_refused_under_the_old_code_label():
    exp = harness.load_experiment("nq")
    exp.raw["bases"]["recipe"] = {**exp.raw["bases"]["recipe"], "lr": 3e-5}
    with pytest.raises(SystemExit, match="not the one its code label"):
        nq.settings_of(exp, harness.params_of(exp, {}, tiny=False), _legacy_data(), "recommended", 0)


def test_corpus_choice_is_a_parameter():
    exp = harness.load_experiment("nq")
    assert nq.results_path(harness.params_of(exp, {}, tiny=False)).name == "nq-20k.json"
    p = harness.params_of(exp, harness.parse_sets(["distractors=100000"]), tiny=False)
    assert nq.inputs.__doc__ and nq.corpus_name(p["distractors"]) == "corpus-100k.tsv"
    assert nq.results_path(p).name == "nq-100k.json"


def test_every_trained_system_is_paired_against_mnrl():
    """The issue's goal reads recipe − MNRL: every trained system is compared with zero-shot and
    with st-mnrl (st-mnrl's own variants too), the toolkit's variants also with the recipe; none
    twice, none with itself."""
    exp = harness.load_experiment("nq")
    done = ["bm25", "zero-shot", "recommended", "st-mnrl", "st-mnrl-e4", "recommended-shared"]
    pairs = nq.pairs_of(exp, done)
    assert pairs == [("zero-shot", "recommended"), ("zero-shot", "st-mnrl"), ("zero-shot", "st-mnrl-e4"),
                     ("zero-shot", "recommended-shared"),
                     ("st-mnrl", "recommended"), ("st-mnrl", "st-mnrl-e4"), ("st-mnrl", "recommended-shared"),
                     ("st-mnrl-e4", "recommended-shared"), ("recommended-shared", "recommended")]
    assert exp.raw["recipe"] == "recommended-shared"  # the system `train --recipe recommended` is
    # the fp32 twin is measured against the bf16 runs it twins (issue #53's guard), not the recipe
    assert ("recommended", "recommended-fp32") in nq.pairs_of(exp, [*done, "recommended-fp32"])
    assert nq.pairs_of(exp, ["bm25", "recommended"]) == []  # nothing to compare with


def test_training_curve_is_read_from_the_run_folder(tmp_path):
    """The report's training curve: a DPM run's loss / τ per step (a resumed step counts once, its
    last attempt), its training recall@1 per refresh, and the MNRL script's logged loss as it is."""
    d = tmp_path / "recommended-s0"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"loss": "dpm", "tau": 0.02}))
    rows = [{"step": 1, "loss": 0.002, "epoch": 0}, {"step": 2, "loss": 0.004, "epoch": 0},
            {"event": "resume", "step": 1}, {"step": 2, "loss": 0.001, "epoch": 0},
            {"event": "end", "steps": 2, "seconds": 9.0, "loss": 0.001}]
    (d / "train_log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (d / "refresh_log.jsonl").write_text(json.dumps({"event": "refresh", "step": 0, "train_recall@1": 0.8}) + "\n")
    c = nq.curve(d)
    assert c["step"] == [1, 2] and c["loss"] == pytest.approx([0.1, 0.05])
    assert c["refresh_step"] == [0] and c["train_recall1"] == [0.8]
    m = tmp_path / "st-mnrl-s0"
    m.mkdir()
    (m / "bench.log").write_text('  $ python eval/_st_mnrl.py ...\n{"step": 1, "loss": 0.5}\n{"step": 2, "loss": 0.25}\n')
    assert nq.curve(m) == {"step": [1, 2], "loss": [0.5, 0.25]}
    assert nq.curve(tmp_path) is None  # no log: no curve


def test_curve_chart_is_drawn_only_from_runs_with_curves(tmp_path):
    from eval import report

    assert report.curve_chart(tmp_path / "none.png", {"zero-shot": {"-1": {"metrics": {}}}}, "t") is False
    runs = {"recommended": {"0": {"curve": {"step": list(range(1, 21)), "loss": [0.1] * 20, "refresh_step": [0, 10],
                                            "train_recall1": [0.8, 0.82]}}},
            "st-mnrl": {"0": {"curve": {"step": list(range(1, 21)), "loss": [0.0] * 20}}}}  # bf16 zeros: floored
    png = tmp_path / "c.png"
    assert report.curve_chart(png, runs, "t") and png.read_bytes()[:4] == b"\x89PNG"
    with warnings.catch_warnings():  # only a system without refreshes: its recall panel has no legend to draw
        warnings.simplefilter("error")
        assert report.curve_chart(tmp_path / "mnrl.png", {"st-mnrl": runs["st-mnrl"]}, "t")


def test_training_seconds_survive_a_kill_and_a_resumed_training_has_none(tmp_path, monkeypatch):
    """train s is the training command's wall time: kept beside the run, so a run killed during
    its corpus encode reports it when resumed (not the ~0 s of an invocation that trained nothing),
    and unknown (None, "—" in the table) when training itself resumed from a checkpoint."""
    exp = harness.load_experiment("nq")
    params = harness.params_of(exp, {}, tiny=False)
    data = {"train": "t.json", "train_corpus": "c.tsv", "stats": {"corpus_passages": 100}}
    calls = []
    monkeypatch.setattr(harness, "cli", lambda args, log: calls.append([str(a) for a in args]) or 0.0)
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    nq.train(exp, params, data, "recommended-shared", 0, fresh, fresh / "bench.log")
    wall = harness.train_wall(fresh)
    assert wall["resumed"] is False and isinstance(wall["train_wall_s"], float) and "--resume" not in calls[0]
    (fresh / "dpr_xrisk.json").write_text("{}")  # trained, then killed during the encode: the rerun trains nothing
    nq.train(exp, params, data, "recommended-shared", 0, fresh, fresh / "bench.log")
    assert len(calls) == 1 and harness.train_wall(fresh) == wall
    resumed = tmp_path / "resumed"
    (resumed / "checkpoints" / "step-50").mkdir(parents=True)
    nq.train(exp, params, data, "recommended-shared", 0, resumed, resumed / "bench.log")
    assert "--resume" in calls[-1] and harness.train_wall(resumed) == {"train_wall_s": None, "resumed": True}
    assert harness.train_wall(tmp_path / "killed-before-the-record") == {"train_wall_s": None, "resumed": True}


def test_the_squad_and_nq_harnesses_keep_training_seconds_one_way(tmp_path):
    """One record for both benchmarks: a resumed training's partial seconds are not its training
    seconds (None), and what a benchmark stores beside them (the machine) survives a missing record."""
    harness.record_train_wall(tmp_path, time.perf_counter() - 2.0, resumed=False, machine={"cpu": "x"})
    kept = harness.train_wall(tmp_path, machine={"cpu": "y"})
    assert kept["train_wall_s"] >= 2.0 and kept["resumed"] is False and kept["machine"] == {"cpu": "x"}
    harness.record_train_wall(tmp_path, time.perf_counter() - 2.0, resumed=True, machine={"cpu": "x"})
    assert harness.train_wall(tmp_path) == {"train_wall_s": None, "resumed": True, "machine": {"cpu": "x"}}
    assert harness.train_wall(tmp_path / "none", machine={"cpu": "y"}) == \
        {"train_wall_s": None, "resumed": True, "machine": {"cpu": "y"}}
