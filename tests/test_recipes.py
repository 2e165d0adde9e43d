"""Shipped recipes (``train --recipe``) and ``train --print-config``: the resolved config printed
as TOML reads back to the same config; recipe < --config < flags; unknown names are clear errors."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from dpr_xrisk import recipes
from dpr_xrisk.cli import app
from dpr_xrisk.train.config import TrainConfig

runner = CliRunner()


def test_print_config_round_trips(tmp_path):
    r = runner.invoke(app, ["train", "--train", "a.json", "--loss", "listwise", "--lr", "3e-5", "--print-config"])
    assert r.exit_code == 0, r.output
    (tmp_path / "c.toml").write_text(r.output)
    cfg = TrainConfig.load(tmp_path / "c.toml")
    assert cfg == TrainConfig(train=("a.json",), loss="listwise", lr=3e-5)
    assert "# corpus = (unset)" in r.output


def test_every_shipped_recipe_loads_and_flags_override_it(tmp_path):
    assert recipes.names(), "no recipe shipped"
    for name in recipes.names():
        base = TrainConfig.load(None, {"train": ["a.json"], "corpus": "c.tsv"}, recipe=name)
        assert base.train == ("a.json",)
        (tmp_path / "c.toml").write_text("lr = 1e-4\nseed = 7\n")
        cfg = TrainConfig.load(tmp_path / "c.toml", {"train": ["a.json"], "corpus": "c.tsv", "seed": 3}, recipe=name)
        assert (cfg.lr, cfg.seed) == (1e-4, 3)  # --config over the recipe, flags over both
        assert {k: v for k, v in recipes.load(name).items()} == {k: getattr(base, k) if not isinstance(
            getattr(base, k), tuple) else list(getattr(base, k)) for k in recipes.load(name)}


def test_unknown_recipe_is_one_line_exit_2():
    r = runner.invoke(app, ["train", "--recipe", "nope", "--train", "a.json", "--out", "x"])
    assert r.exit_code == 2
    assert "unknown recipe 'nope'; valid: " in r.output


def test_train_without_out_is_a_clear_error():
    r = runner.invoke(app, ["train", "--train", "a.json"])
    assert r.exit_code == 2 and "--out" in r.output


def test_missing_dev_corpus_is_an_input_error_before_training(tiny_model_dir, tmp_path):
    from conftest import SAMPLE
    from dpr_xrisk.errors import InputError
    from dpr_xrisk.train.trainer import train

    import pytest

    cfg = TrainConfig(train=(str(SAMPLE / "biencoder-train.json"),), dev=str(SAMPLE / "dev.qa.tsv"),
                      dev_corpus=str(tmp_path / "missing.tsv"), model=str(tiny_model_dir), batch_size=8, max_steps=1)
    with pytest.raises(InputError, match="missing.tsv"):
        train(cfg, tmp_path / "o", progress=False)
    assert not (tmp_path / "o" / "train_log.jsonl").exists()


def test_recipe_with_an_unknown_key_names_the_recipe(monkeypatch, tmp_path):
    import pytest

    from dpr_xrisk.errors import InputError

    (tmp_path / "bad.toml").write_text("loss = \"dpm\"\nno_such_key = 1\n")
    monkeypatch.setattr(recipes, "HERE", tmp_path)
    with pytest.raises(InputError, match="unknown recipe 'bad' key\\(s\\) \\['no_such_key'\\]"):
        TrainConfig.load(None, {"train": ["a.json"]}, recipe="bad")


def test_every_config_key_is_a_documented_flag_with_its_default_shown():
    """Issue #14 item 4: the train command's options are generated from TrainConfig, so a new
    key is a new flag; its help is the field's metadata in config.py and --help shows its default."""
    from dpr_xrisk.cli.train import FLAGS
    from dpr_xrisk.train.config import key_docs

    docs = key_docs()
    assert set(docs) == set(TrainConfig.keys())
    assert all(text for text, _ in docs.values()), [k for k, (t, _) in docs.items() if not t]
    r = runner.invoke(app, ["train", "--help"], env={"COLUMNS": "400", "TERMINAL_WIDTH": "400"})
    assert r.exit_code == 0
    for key in TrainConfig.keys():
        flag = FLAGS.get(key, [f"--{key.replace('_', '-')}"])[0].split("/")[0]
        assert flag in r.output, flag
    for shown in ("[default: (32)]", "[default: (2e-05)]", "[default: (joint)]", "[default: (1 5 20)]"):
        assert shown in r.output, shown
    for panel in ("Data", "Loss", "Index refresh (docs/method.md §5)", "Optimisation"):
        assert panel in r.output


def test_generated_flags_reach_the_config(tmp_path):
    r = runner.invoke(app, ["train", "--train", "a.json", "--train", "b.json", "--train-weight", "2", "--train-weight", "1",
                            "--refresh-skip-ranks", "3", "--eval-ks", "1", "--eval-ks", "10", "--no-filter-answers",
                            "--bf16", "--corpus-size", "1000", "--print-config"])
    assert r.exit_code == 0, r.output
    assert "old spelling of --precision bf16" in r.stderr
    (tmp_path / "c.toml").write_text(r.stdout)
    cfg = TrainConfig.load(tmp_path / "c.toml")
    assert cfg == TrainConfig(train=("a.json", "b.json"), train_weights=(2.0, 1.0), refresh_skip_ranks=3, eval_ks=(1, 10),
                              filter_answers=False, bf16=True, corpus_size=1000)


def test_training_says_what_it_is_doing(tiny_model_dir, tmp_path):
    """Issue #14 item 5: the step-0 mining, refreshes and dev evaluations show progress, and a
    run whose best dev point is the starting model says so."""
    from conftest import SAMPLE

    r = runner.invoke(app, ["train", "--model", str(tiny_model_dir), "--train", str(SAMPLE / "biencoder-train.json"),
                            "--corpus", str(SAMPLE / "passages.tsv"), "--dev", str(SAMPLE / "dev.qa.tsv"),
                            "--negatives", "model", "--refresh-every", "2", "--refresh-k", "20", "--batch-size", "8",
                            "--max-steps", "3", "--eval-every", "2", "--save-every", "2", "--lr", "1e-9",
                            "--out", str(tmp_path / "m")])
    assert r.exit_code == 0, r.output
    for line in ("mining the first negative pools", "refresh: encode", "dev at step 0:", "dev at step 2:",
                 "checkpoint step-2 saved"):
        assert line in r.output, line
    if "at step 0 in" in r.output:
        assert "the starting model: no trained step beat it" in r.output


def test_java_info_lines_are_hidden_unless_verbose(tmp_path):
    import subprocess
    import sys

    from conftest import SAMPLE

    subprocess.run([sys.executable, "-m", "dpr_xrisk", "bm25", "index", "--corpus", str(SAMPLE / "passages.tsv"),
                    "--out", str(tmp_path / "b")], check=True, capture_output=True)
    args = ["search", "--index", str(tmp_path / "b"), "--queries", str(SAMPLE / "test.qa.tsv"), "--out-run", str(tmp_path / "r")]
    quiet = subprocess.run([sys.executable, "-m", "dpr_xrisk", "bm25", *args], capture_output=True, text=True)
    loud = subprocess.run([sys.executable, "-m", "dpr_xrisk", "bm25", "--verbose", *args], capture_output=True, text=True)
    assert quiet.returncode == loud.returncode == 0
    assert "INFO" not in quiet.stderr and "SLF4J" not in quiet.stderr and "INFO" in loud.stderr


def test_none_unsets_a_number_the_recipe_sets(tmp_path):
    """The recipe sets refresh_margin 0.05; TOML has no null, so refresh_margin = "none" in
    --config (or --refresh-margin none) turns the filter off, and --print-config writes an unset
    number as "none" so that the printed config reads back the same even over the recipe."""
    base = {"train": ["a.json"], "corpus": "c.tsv"}
    assert TrainConfig.load(None, base, recipe="recommended").refresh_margin == 0.05
    (tmp_path / "off.toml").write_text('refresh_margin = "none"\n')
    assert TrainConfig.load(tmp_path / "off.toml", base, recipe="recommended").refresh_margin is None
    r = runner.invoke(app, ["train", "--recipe", "recommended", "--train", "a.json", "--corpus", "c.tsv",
                            "--refresh-margin", "none", "--print-config"])
    assert r.exit_code == 0, r.output
    assert 'refresh_margin = "none"' in r.output
    (tmp_path / "printed.toml").write_text(r.output)
    again = TrainConfig.load(tmp_path / "printed.toml", None, recipe="recommended")
    assert again == TrainConfig.load(tmp_path / "off.toml", base, recipe="recommended")
    r = runner.invoke(app, ["train", "--train", "a.json", "--refresh-margin", "lots", "--print-config"])
    assert r.exit_code == 2 and "not a number or 'none'" in r.output


@pytest.mark.parametrize("value", [-0.1, 1.0, 2])
def test_refresh_margin_out_of_range_is_a_clear_error(value):
    from dpr_xrisk.errors import InputError

    with pytest.raises(InputError, match=r"refresh_margin must be in \[0, 1\)"):
        TrainConfig(train=("a.json",), refresh_margin=value)


def test_a_word_for_a_number_names_the_unset_spelling(tmp_path):
    from dpr_xrisk.errors import InputError

    (tmp_path / "c.toml").write_text('refresh_margin = "off"\n')
    with pytest.raises(InputError, match=r"'refresh_margin' must be a number \(or \"none\" to unset it\), got 'off'"):
        TrainConfig.load(tmp_path / "c.toml", {"train": ["a.json"]})
