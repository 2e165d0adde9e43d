"""The benchmark harness (eval/): experiments are complete data, the benchmarked recipe is the
shipped one, run folders are compared on resume and a mismatch refused, and the report is made
from the stored JSON."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from dpr_xrisk.train.config import TrainConfig
from eval import harness, nq, report, squad

ROOT = Path(__file__).resolve().parent.parent


def _resolved(values: dict, tmp_path: Path, recipe: str | None = None, name: str = "config.toml") -> dict:
    """A config as the toolkit resolves it (dpr_xrisk/train/config.py): the file the harness
    passes to `dpr-xrisk train --config`, or the CLI's `--recipe` with the same data flags."""
    if recipe is None:
        path = tmp_path / name
        path.write_text(harness.config_toml(values))
        return dataclasses.asdict(TrainConfig.load(path))
    return dataclasses.asdict(TrainConfig.load(None, overrides=values, recipe=recipe))


def _without_plumbing(cfg: dict) -> dict:
    return {k: v for k, v in cfg.items() if k not in harness.PLUMBING}


def _same_model(cfg: dict) -> dict:
    """What decides the trained model: the config less its plumbing and the keys that only measure."""
    return {k: v for k, v in cfg.items() if k not in harness.PLUMBING | harness.MEASURING}


def test_plumbing_is_data_paths_seed_threads_and_run_mechanics():
    """What the comparisons below leave out: data paths, seed, threads, and how a run is carried
    out (precision, device, dev cadence, checkpoints, logging) -- nothing that defines a system."""
    data = {"train", "train_weights", "dev", "corpus", "dev_corpus", "bm25_index", "negatives_file", "corpus_size"}
    mechanics = {"precision", "bf16", "device", "eval_every", "save_every", "keep_checkpoints", "log_every"}
    assert harness.PLUMBING == data | {"seed", "threads"} | mechanics


def test_shipped_squad_system_trains_the_cli_recipe(tmp_path):
    """`shipped-shared` (the recipe's published SQuAD numbers) is `dpr-xrisk train --recipe
    recommended`: the same resolved training config, epochs included, apart from data paths, seed
    and threads; `shipped` (the two-tower recipe measured before) differs in `shared` and the guard."""
    exp = harness.load_experiment("squad")
    params = harness.params_of(exp, {}, tiny=False)
    data = {"train": "t.json", "train_corpus": "c.tsv", "dev": "d.tsv", "dev_corpus": "dc.tsv", "bm25": "b"}
    cli = _resolved({"train": ["t.json"], "corpus": "c.tsv", "seed": 7, "threads": 1}, tmp_path, recipe="recommended")
    bench = _resolved(squad.train_file(tmp_path, params, data, harness.train_config(exp, "shipped-shared"), 0, None),
                      tmp_path)
    assert _without_plumbing(bench) == _without_plumbing(cli)
    assert cli["shared"] is True and cli["epochs"] == 2.0 and cli["passage_max_length"] == 256
    # and the harness stated every one of those values itself: no toolkit default entered
    assert set(_without_plumbing(bench)) == set(harness.train_config(exp, "shipped-shared"))
    two = _resolved(squad.train_file(tmp_path, params, data, harness.train_config(exp, "shipped"), 0, None), tmp_path,
                    name="two.toml")
    assert {k for k in _without_plumbing(cli) if two[k] != cli[k]} == {"shared", "refresh_guard"}


def test_nq_recommended_system_trains_the_cli_recipe(tmp_path):
    """nq-1's `recommended-shared` is the shipped recipe, run with the int8 guard on (it only
    measures: the same model); `recommended` is the two-tower recipe measured before. A recipe
    change makes nq-1's systems other systems -- a new protocol, never a silent change."""
    exp = harness.load_experiment("nq")
    params = harness.params_of(exp, {}, tiny=False)
    data = {"train": "t.json", "train_corpus": "c.tsv", "stats": {"corpus_passages": 100}}
    cli = _resolved({"train": ["t.json"], "corpus": "c.tsv", "seed": 7, "threads": 1}, tmp_path, recipe="recommended")
    shared = _resolved(nq.train_file(exp, params, data, "recommended-shared", 0), tmp_path)
    assert _same_model(shared) == _same_model(cli)
    assert {k for k in _without_plumbing(cli) if shared[k] != cli[k]} == {"refresh_guard"}
    two = _resolved(nq.train_file(exp, params, data, "recommended", 0), tmp_path, name="two.toml")
    assert {k for k in _without_plumbing(cli) if two[k] != cli[k]} == {"shared", "refresh_guard"}


def test_systems_that_ran_at_128_word_pieces_say_so():
    """The toolkit default passage_max_length moved 128 -> 256: the systems whose stored runs
    trained at 128 state it, so the default never changes what their results mean."""
    exp = harness.load_experiment("squad")
    for system in ("dpr", "shipped-p128", "shipped-r025", "shipped-nomargin", "shipped-softmax", "shipped-e3",
                   "shipped-b64", "shipped-t03", "shipped-nodropout"):
        assert harness.train_config(exp, system)["passage_max_length"] == 128, system
    for system in ("shipped", "shipped-h3", "dpr-eqwall-p256", "dpr-eqwall-h3"):
        assert harness.train_config(exp, system)["passage_max_length"] == 256, system


def test_every_experiment_loads_and_every_trained_system_is_complete():
    names = harness.experiments()
    assert {"squad", "nq", "encode", "train-speed", "gpu", "fuzz"} <= set(names)
    for name in names:
        exp = harness.load_experiment(name)
        assert exp.current()
        for system in exp.current():
            spec = exp.systems[system]
            if "base" in spec or "train" in spec:
                cfg = harness.train_config(exp, system)
                assert set(cfg) == set(TrainConfig.keys()) - harness.PLUMBING


def test_a_system_that_leaves_a_setting_to_the_toolkit_is_refused():
    exp = harness.load_experiment("squad")
    del exp.raw["train"]["dropout"]
    with pytest.raises(SystemExit, match=r"does not state \['dropout'\]"):
        harness.train_config(exp, "dpr")
    exp = harness.load_experiment("squad")
    exp.systems["dpr"] = {**exp.systems["dpr"], "train": {"sed": 1}}
    with pytest.raises(SystemExit, match="unknown keys"):
        harness.train_config(exp, "dpr")
    exp.systems["dpr"] = {**exp.systems["dpr"], "train": {"seed": 1}}
    with pytest.raises(SystemExit, match="plumbing"):
        harness.train_config(exp, "dpr")


def test_a_reference_to_no_system_fails_when_the_experiment_loads():
    """pair_with, the recipe, the paired table's reference and the lists of systems must name
    systems of the file: a typo stops the run before any training, in one line."""
    for name in harness.experiments():
        harness.check_references(harness.load_experiment(name))  # the committed files are clean
    exp = harness.load_experiment("nq")
    exp.systems["recommended-fp32"] = {**exp.systems["recommended-fp32"], "pair_with": "recomended"}
    with pytest.raises(SystemExit, match=r"nq.toml: system 'recommended-fp32': pair_with = 'recomended'"):
        harness.check_references(exp)
    exp = harness.load_experiment("nq")
    exp.systems["recommended-h3"] = {**exp.systems["recommended-h3"], "pair_with": "recommended-h3"}
    with pytest.raises(SystemExit, match="pair_with = 'recommended-h3'"):  # not with itself
        harness.check_references(exp)
    exp = harness.load_experiment("squad")
    exp.raw["reference"] = "shiped"
    exp.raw["figure_systems"] = ["zero-shot", "dpr2"]
    with pytest.raises(SystemExit, match=r"reference = 'shiped'; figure_systems names 'dpr2'") as e:
        harness.check_references(exp)
    assert "\n" not in str(e.value)


def test_parameters_and_their_overrides():
    exp = harness.load_experiment("squad")
    p = harness.params_of(exp, harness.parse_sets(["wiki=300", "device=cuda", "carried_bm25=true"]), tiny=False)
    assert (p["wiki"], p["device"], p["carried_bm25"], p["tiny"]) == (300, "cuda", True, False)
    assert harness.params_of(exp, {}, tiny=True)["train_questions"] == 64
    with pytest.raises(SystemExit, match="not a parameter of squad"):
        harness.params_of(exp, {"wikii": 3}, tiny=False)
    # a value of another type than the file's is refused in one line (\"maybe\" would read as true)
    for key, value, kind in (("bf16", "maybe", "bool"), ("wiki", "300k", "int"), ("wiki", True, "int"), ("device", 0, "str")):
        with pytest.raises(SystemExit, match=rf"--set {key}={value!r}: squad's {key} is a {kind}"):
            harness.params_of(exp, {key: value}, tiny=False)
    speed = harness.load_experiment("train-speed")  # a float parameter takes an integer
    assert harness.params_of(speed, harness.parse_sets(["recipe_dropout=0"]), tiny=False)["recipe_dropout"] == 0
    with pytest.raises(SystemExit, match="unknown experiment"):
        harness.load_experiment("nope")


def test_retired_systems_are_refused_by_run(capsys):
    from eval.__main__ import main

    with pytest.raises(SystemExit, match="retired"):
        main(["run", "squad", "--systems", "recommended-fast"])


def test_run_folder_resumes_only_with_the_same_settings_and_refuses_a_mismatch(tmp_path):
    """A run folder records its resolved settings; on resume they are compared and a mismatch is
    refused with the keys that differ -- the folder and its files are never touched."""
    d = tmp_path / "runs" / "shipped-s0"
    a = {"system": "shipped", "seed": 0, "train": {"lr": 2e-5, "eval_ks": (1, 5, 20)}}
    b = {"system": "shipped", "seed": 0, "train": {"lr": 4e-5, "eval_ks": (1, 5, 20)}}
    assert harness.open_run(d, a, "shipped-s0") is None  # new: made and stamped
    assert json.loads((d / "settings.json").read_text()) == json.loads(json.dumps(a))
    (d / "checkpoints").mkdir()
    (d / "checkpoints" / "step-50").write_text("x")  # an interrupted run
    assert harness.open_run(d, a, "shipped-s0") is None  # same settings: resumed in place
    assert (d / "checkpoints" / "step-50").exists()
    with pytest.raises(harness.RunMismatch) as e:
        harness.open_run(d, b, "shipped-s0")
    assert e.value.code == 2 and "train.lr: 2e-05 here, 4e-05 requested" in e.value.msg
    assert (d / "checkpoints" / "step-50").exists() and json.loads((d / "settings.json").read_text())["train"]["lr"] == 2e-5
    # finished: reused with the same settings, refused with others
    harness.finish_run(d, {"settings": json.loads(json.dumps(a)), "metrics": {"top1": 0.5}})
    assert harness.open_run(d, a, "shipped-s0")["metrics"] == {"top1": 0.5}
    with pytest.raises(harness.RunMismatch, match="a finished run of other settings"):
        harness.open_run(d, b, "shipped-s0")
    # a folder with files but no record of its settings is not guessed at
    odd = tmp_path / "runs" / "odd"
    odd.mkdir()
    (odd / "run.json").write_text("{}")
    with pytest.raises(harness.RunMismatch, match="no settings.json"):
        harness.open_run(odd, a, "odd")
    assert (odd / "run.json").exists()


def test_the_harness_is_one_package_without_path_hacks():
    files = sorted((ROOT / "eval").rglob("*.py"))
    files = [f for f in files if "work" not in f.relative_to(ROOT / "eval").parts]
    tools = {"bench_serve.py", "page_shot.py"}  # the server load test and its headless-browser page check
    assert len(files) <= 9 + len(tools), files  # the harness's 9 and those two
    assert len([f for f in files if f.name not in tools]) <= 9
    for f in files:
        assert "sys.path.insert" not in f.read_text(encoding="utf-8"), f
    assert (ROOT / "eval" / "__init__.py").exists() and (ROOT / "eval" / "__main__.py").exists()


def test_report_is_made_from_the_stored_json():
    text = report.render()
    for heading in ("## SQuAD full length", "## Natural Questions", "## Encoding throughput", "## Training throughput",
                    "## On a GPU", "## Fuzzed readers", "## Retired benchmarks"):
        assert heading in text
    squad_part = report.section("squad")
    assert "python -m eval run squad" in squad_part and "| shipped | 0,1 |" in squad_part
    stored = json.loads((harness.RESULTS / "bench_full.json").read_text())
    top1 = sum(stored["runs"]["shipped"][s]["metrics"]["dense"]["top1"] for s in ("0", "1")) / 2
    assert f"| shipped | 0,1 | {top1:.4f} |" in squad_part
    assert "<details>" in squad_part and "| recommended-fast |" in squad_part.split("<details>", 2)[2]
    assert "python -m eval run nq" in report.section("nq")


def test_tiny_gpu_experiment_runs_on_the_cpu(tmp_path):
    """The GPU check's every step (encode and one training step, ours vs sentence-transformers) on
    the CPU with a tiny random model; its results stay in the work folder."""
    pytest.importorskip("sentence_transformers")
    from eval.__main__ import main

    main(["run", "gpu", "--tiny", "--work", str(tmp_path)])
    rec = json.loads((tmp_path / "bench_gpu.json").read_text())[-1]
    assert rec["protocol"] == "gpu-1" and rec["device"] == "cpu"
    assert [t["batch"] for t in rec["train"]] == [8, 16] and rec["encode"][0]["passages"] == 64
    assert all(isinstance(t["ours_q_per_s"], float) and isinstance(t["st_mnrl_q_per_s"], float) for t in rec["train"])


def test_nq_section_shows_stored_results(tmp_path, monkeypatch):
    """Pending until an nq-*.json is stored; then one table per corpus, with the paired rows."""
    assert "Pending" in "\n".join(report.nq_section()) or list(harness.RESULTS.glob("nq-*.json"))
    monkeypatch.setattr(report, "RESULTS", tmp_path)
    m = {"top1": 0.4, "top5": 0.6, "top20": 0.7, "top100": 0.8, "mrr@10": 0.5}
    ci = {"diff": 0.02, "ci95": [0.01, 0.03]}
    res = {"machine": {"date": "2026-12-05T01:00:00+00:00", "cpu_model": "X"},
           "data": {"stats": {"train_questions": 1624, "test_questions": 400, "corpus_passages": 24043}},
           "runs": {"zero-shot": {"-1": {"metrics": m, "hub_rate": 0.01}},
                    "recommended": {"0": {"metrics": m, "hub_rate": 0.02, "hybrid-rrf": m},
                                    "1": {"metrics": {**m, "top1": 0.5}, "hub_rate": 0.02, "hybrid-rrf": m}}},
           "paired": [{"base": "zero-shot", "other": "recommended", "seeds": [0, 1],
                       **{k: ci for k in ("top1", "top5", "top20", "rr@10")}}]}
    (tmp_path / "nq-20k.json").write_text(json.dumps(res))
    text = "\n".join(report.nq_section())
    assert "### 20k distractors" in text and "| zero-shot | — | 0.4000 |" in text
    assert "| recommended | 0,1 | 0.4500 | 0.6000 |" in text and "| 2.00 % |" in text
    assert "| recommended − zero-shot | 0,1 | +2.0 [+1.0, +3.0] |" in text


def test_nq_train_seconds_are_averaged_only_over_one_cpu_kind(tmp_path, monkeypatch):
    """A system whose seeds recorded two CPU kinds shows "mixed", not a mean of both, and no ratio
    to st-mnrl; seeds of one kind (or without a record) are averaged, the ratio on one kind only."""
    monkeypatch.setattr(report, "RESULTS", tmp_path)
    m = {"top1": 0.4, "top5": 0.6, "top20": 0.7, "top100": 0.8, "mrr@10": 0.5}
    a, b = {"cpu_model": "EPYC", "cpu_flags": ["avx512_bf16"]}, {"cpu_model": "EPYC", "cpu_flags": ["avx2"]}
    run = lambda s, cpu=None: {"metrics": m, "hub_rate": 0.0, "train_wall_s": s, **({"cpu": cpu} if cpu else {})}
    res = {"machine": {"date": "2026-12-07T01:00:00+00:00", "cpu_model": "EPYC"},
           "data": {"stats": {"train_questions": 1624, "test_questions": 400, "corpus_passages": 24043}},
           "runs": {"st-mnrl": {"0": run(400.0), "1": run(500.0, a)},
                    "recommended": {"0": run(1000.0, a), "1": run(800.0, a)},
                    "recommended-fp32": {"0": run(1300.0, a), "1": run(2000.0, b)}}}
    (tmp_path / "nq-20k.json").write_text(json.dumps(res))
    rows = {r.split(" | ")[0].lstrip("| "): r for r in report.nq_section() if r.startswith("| ")}
    assert rows["st-mnrl"].endswith("| 450 | 1.0 |") and rows["recommended"].endswith("| 900 | 2.0 |")
    assert rows["recommended-fp32"].endswith("| mixed | — |")


def test_tiny_encode_experiment(tmp_path):
    """The encode comparison's every step on a tiny random model: interleaved repetitions, both
    precisions, the same embeddings on both sides."""
    pytest.importorskip("sentence_transformers")
    from eval.__main__ import main

    main(["run", "encode", "--tiny", "--work", str(tmp_path)])
    rec = json.loads((tmp_path / "bench_encode.json").read_text())[-1]
    assert rec["protocol"] == "encode-1" and set(rec["summary"]) == {"fp32", "bf16"}
    assert rec["summary"]["fp32"]["passages"] == 32 and rec["summary"]["fp32"]["max_abs_diff"] < 1e-4
    assert len(rec["raw_seconds"]["ours_fp32"]) == 1
