"""eval/paired.py's kept per-question ranks: a run folder under eval/work may be gone (a new
checkout has none), and the ranks kept in eval/results/per-question must then give the same
paired comparison as the run itself."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from eval import harness, paired


def _run(d: Path, answer_ranks: list[int | None], k: int = 20) -> None:
    """A search run JSON whose question i has its first answer-bearing passage at answer_ranks[i]."""
    d.mkdir(parents=True)
    run = {str(q): {"contexts": [{"has_answer": r is not None and i >= r and i % 2 == r % 2} for i in range(k)]}
           for q, r in enumerate(answer_ranks)}
    (d / "run.json").write_text(json.dumps(run))
    (d / "bench.json").write_text("{}")


@pytest.fixture
def dirs(tmp_path, monkeypatch):
    work, kept = tmp_path / "work", tmp_path / "results" / "per-question"
    monkeypatch.setattr(paired, "WORK", work)
    monkeypatch.setattr(paired, "KEPT", kept)
    return work / "bench" / "runs", kept


def test_kept_ranks_stand_in_for_a_deleted_run(dirs):
    runs, kept = dirs
    _run(runs / "zero-shot", [0, 3, None, 1, 7])
    _run(runs / "sys-s0", [0, 0, 12, 0, None])
    _run(runs / "sys-s1", [1, 0, 2, 5, 9])
    before = paired.compare("zero-shot", "sys", 500, runs)
    for name in ("zero-shot", "sys-s0", "sys-s1"):
        out = paired.keep(runs / name / "run.json")
        assert out == kept / "bench" / "runs" / f"{name}.json"
        rec = json.loads(out.read_text())
        assert rec["questions"] == 5 and "contexts" not in out.read_text()
    assert json.loads((kept / "bench" / "runs" / "sys-s0.json").read_text())["first_hit"] == [0, 0, 12, 0, paired.NONE]
    shutil.rmtree(runs)
    after = paired.compare("zero-shot", "sys", 500, runs)
    assert after == before and after["seeds"] == [0, 1]


def test_kept_ranks_of_another_question_count_are_refused(dirs):
    runs, _ = dirs
    _run(runs / "zero-shot", [0, 3, 1])
    _run(runs / "sys-s0", [0, 0, 2, 4])
    for name in ("zero-shot", "sys-s0"):
        paired.keep(runs / name / "run.json")
    shutil.rmtree(runs)
    with pytest.raises(SystemExit, match="different question counts"):
        paired.compare("zero-shot", "sys", 100, runs)


def test_truncated_kept_file_is_refused(dirs):
    runs, kept = dirs
    _run(runs / "zero-shot", [0, 3, 1])
    out = paired.keep(runs / "zero-shot" / "run.json")
    rec = json.loads(out.read_text())
    rec["first_hit"] = rec["first_hit"][:2]
    out.write_text(json.dumps(rec))
    shutil.rmtree(runs)
    with pytest.raises(SystemExit, match="2 ranks for 3 questions"):
        paired.runs_of("zero-shot", runs)


def test_a_run_outside_the_work_folder_is_not_kept(tmp_path, dirs):
    _run(tmp_path / "elsewhere" / "sys-s0", [0])
    with pytest.raises(ValueError, match="not under"):
        paired.keep(tmp_path / "elsewhere" / "sys-s0" / "run.json")


def test_names_with_dots_and_a_local_folder_that_wins(dirs):
    """Run names hold dots (dpm-z0.5-s0): each keeps its own file. A run folder that is there,
    finished or not, is the newer run: its seed never comes from the kept file."""
    runs, kept = dirs
    _run(runs / "dpm-z0.5-s0", [0, 1])
    _run(runs / "dpm-z0-s0", [5, 5])
    (runs / "dpm-z0.5-s0" / "settings.json").write_text('{"protocol": "x"}')
    a, b = paired.keep(runs / "dpm-z0.5-s0" / "run.json"), paired.keep(runs / "dpm-z0-s0" / "run.json")
    assert (a.name, b.name) == ("dpm-z0.5-s0.json", "dpm-z0-s0.json")
    assert json.loads(a.read_text())["settings_sha256"] and json.loads(b.read_text())["settings_sha256"] is None
    shutil.rmtree(runs / "dpm-z0.5-s0")
    assert paired.runs_of("dpm-z0.5", runs)[0].tolist() == [0, 1]
    (runs / "dpm-z0.5-s0").mkdir()  # a rerun under way: no finished run for seed 0
    assert paired.runs_of("dpm-z0.5", runs) == {}
    assert paired.available(runs / "dpm-z0-s0" / "run.json") and not paired.available(runs / "dpm-z9-s0" / "run.json")


def test_keep_cli_writes_finished_runs_and_refuses_a_missing_folder(dirs, monkeypatch, capsys):
    runs, kept = dirs
    _run(runs / "sys-s0", [0, 2])
    (runs / "sys-s1").mkdir()  # unfinished: nothing to keep
    paired.main(["--keep", "--runs", str(runs)])
    assert sorted(p.name for p in (kept / "bench" / "runs").iterdir()) == ["sys-s0.json"]
    with pytest.raises(SystemExit) as e:
        paired.main(["--keep", "--runs", str(runs.parent / "nope")])
    assert e.value.code == 2 and "no such folder" in capsys.readouterr().err


def test_squad_refuses_a_negative_eqwall_step_count(monkeypatch, capsys):
    """eqwall_steps below 0 is refused before any data is touched (0 = size the runs from loop times)."""
    from eval import squad
    from eval.__main__ import main

    monkeypatch.setattr(squad, "prepare", lambda base, params: pytest.fail("prepare ran"))
    with pytest.raises(SystemExit) as e:
        main(["run", "squad", "--set", "eqwall_steps=-1"])
    assert "at least 1" in str(e.value)


def test_squad_sizes_equal_time_runs_from_a_dpr_run_at_their_own_settings():
    """An equal-wall-time DPR run is sized by the time per step of a DPR run at its own settings
    (a step at 256 word pieces without dropout costs other time than one at 128 with it): every
    eqwall timer trains with the settings of the runs it sizes, dpr-eqwall-h3 takes
    dpr-eqwall-p256's steps, and where no such run exists the sizing is refused, not guessed."""
    from eval import squad

    exp = harness.load_experiment("squad")
    for system, spec in exp.systems.items():
        if "eqwall" in spec:
            assert spec["eqwall"]["ref"] in exp.systems and not spec.get("retired")
            if spec["eqwall"].get("timer"):
                assert harness.train_config(exp, spec["eqwall"]["timer"]) == harness.train_config(exp, system), system
    rec = lambda steps, loop: {"steps": steps, "undisturbed_loop_s": loop}
    # the 128-word-piece dpr run (3.6 s a step) must not size it: only dpr-eqwall-p256 does
    recs = {"shipped-h3": {0: rec(442, 2789.2)}, "dpr": {0: rec(442, 1581.0)},
            "dpr-eqwall-p256": {0: rec(500, 1529.8)}}
    steps, why = squad.eqwall_steps(exp, "dpr-eqwall-h3", recs, 0, 0)
    assert steps == round(500 * 2789.2 / 1529.8) == 912 and "dpr-eqwall-p256" in why
    assert squad.eqwall_steps(exp, "dpr-eqwall-h3", {"shipped-h3": recs["shipped-h3"], "dpr": recs["dpr"]}, 0, 0) \
        == (None, "waits for shipped-h3 (seed 0) and dpr-eqwall-p256 (seed 0)")
    steps, why = squad.eqwall_steps(exp, "dpr-eqwall-p256", {**recs, "shipped": {0: rec(442, 1445.9)}}, 0, 0)
    assert steps is None and "eqwall_steps" in why
    # a timer of other settings is an error of the experiment file, never a silent sizing
    exp.systems["dpr-eqwall-h3"]["eqwall"] = {"ref": "shipped-h3", "timer": "dpr"}
    with pytest.raises(ValueError, match="does not size"):
        squad.eqwall_steps(exp, "dpr-eqwall-h3", recs, 0, 0)


def test_two_runs_in_one_folder_keep_their_own_ranks(tmp_path):
    """A run folder holds the dense run.json and the hybrid runs beside it: each file's cached
    ranks are its own (one first_hit.npy per folder once returned the dense ranks for the
    hybrid file read after it)."""
    d = tmp_path / "sys-s0"
    _run(d, [0, 4, None])
    hybrid = {str(q): {"contexts": [{"has_answer": i == r} for i in range(20)]} for q, r in enumerate([2, 0, 1])}
    (d / "hybrid-rrf.json").write_text(json.dumps(hybrid))
    assert paired.first_hit(d / "run.json").tolist() == [0, 4, paired.NONE]
    assert paired.first_hit(d / "hybrid-rrf.json").tolist() == [2, 0, 1]
    assert (d / "first_hit.npy").exists() and (d / "hybrid-rrf.first_hit.npy").exists()
    # read again from the caches, in the other order
    assert paired.first_hit(d / "hybrid-rrf.json").tolist() == [2, 0, 1]
    assert paired.first_hit(d / "run.json").tolist() == [0, 4, paired.NONE]


def test_kept_ranks_are_not_git_ignored():
    """The kept ranks exist to be committed: a runs/ ignore rule once hid those of bench_full
    (eval/results/per-question/full/runs/), so a fresh checkout had none of them."""
    import subprocess

    root = Path(__file__).resolve().parent.parent
    if shutil.which("git") is None or not (root / ".git").exists():
        pytest.skip("not a git checkout")
    for rel in ("full/runs/recommended-fast-s0.json", "refresh/runs-amx/zero-shot.json", "nq/runs/x-s0.json"):
        path = (paired.KEPT / rel).relative_to(root)
        r = subprocess.run(["git", "check-ignore", "-q", str(path)], cwd=root)
        assert r.returncode == 1, f"{path} is git-ignored"


def test_a_system_is_not_read_from_a_longer_name_with_its_prefix(dirs):
    """``shipped-s*`` also matches shipped-softmax-s0: that run is another system's, whether its
    folder is there or only its kept ranks are (and whichever sorts last)."""
    runs, kept = dirs
    _run(runs / "shipped-s0", [0, 1])
    _run(runs / "shipped-softmax-s0", [5, 5])
    _run(runs / "shipped-softmax-s1", [6, 6])
    assert {s: r.tolist() for s, r in paired.runs_of("shipped", runs).items()} == {0: [0, 1]}
    assert sorted(paired.runs_of("shipped-softmax", runs)) == [0, 1]
    paired.keep(runs / "shipped-softmax-s1" / "run.json")
    shutil.rmtree(runs / "shipped-softmax-s1")
    assert sorted(paired.runs_of("shipped", runs)) == [0]  # not seed 1 from shipped-softmax-s1's kept file
    assert paired.runs_of("shipped-softmax", runs)[1].tolist() == [6, 6]


def test_seed_option_limits_the_comparison_to_that_seed(dirs, monkeypatch, capsys):
    """--seed compares one seed's runs alone; a seed one system lacks is refused, not averaged away."""
    runs, _ = dirs
    _run(runs / "a-s0", [0, 0, 0, 0])
    _run(runs / "a-s1", [0, 0, 0, 0])
    _run(runs / "b-s0", [0, 0, 0, 0])  # ties a on seed 0 ...
    _run(runs / "b-s1", [None, None, None, None])  # ... and loses every question on seed 1
    paired.main(["--runs", str(runs), "a", "b", "--seed", "1"])
    row = capsys.readouterr().out.strip().splitlines()[-1]
    assert row.startswith("| b | 1 | -1.0000 [-1.0000, -1.0000]"), row
    paired.main(["--runs", str(runs), "a", "b"])
    row = capsys.readouterr().out.strip().splitlines()[-1]
    assert row.startswith("| b | 0,1 | -0.5000 [-0.5000, -0.5000]"), row
    with pytest.raises(SystemExit, match="no common seed"):
        paired.main(["--runs", str(runs), "a", "b", "--seed", "2"])


def test_an_interval_does_not_depend_on_the_comparisons_before_it(dirs):
    """The bootstrap of a comparison is seeded by its two system names: adding a system to a
    results page (or reordering it) leaves every other interval as it was, digit for digit."""
    runs, _ = dirs
    _run(runs / "zero-shot", [0, 3, None, 1, 7, 0, 2])
    _run(runs / "a-s0", [0, 0, 12, 0, None, 1, 0])
    _run(runs / "b-s0", [1, 0, 2, 5, 9, 0, 0])
    alone = paired.compare("zero-shot", "b", 300, runs)
    paired.compare("zero-shot", "a", 300, runs)
    assert paired.compare("zero-shot", "b", 300, runs) == alone
    lo, hi = alone["top1"]["ci95"]
    assert lo < alone["top1"]["diff"] < hi
