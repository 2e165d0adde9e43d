"""Reports: every chart kind rendered from small fixture files (no model), PNGs of the expected
pixel size, the HTML embedding each chart and table, the numbers in its tables equal to the
evaluation JSON and logs, clear errors on bad input, exit code 2 from the CLI."""

from __future__ import annotations

import base64
import json
import math
import struct
from html.parser import HTMLParser
from pathlib import Path

import matplotlib
import pytest
from typer.testing import CliRunner

matplotlib.use("Agg")

from dpr_xrisk.cli import app  # noqa: E402
from dpr_xrisk.errors import InputError  # noqa: E402
from dpr_xrisk.report.build import build_report  # noqa: E402
from dpr_xrisk.report.charts import SIZES, pixel_size, quick_eval_chart  # noqa: E402

runner = CliRunner()
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


# --- fixtures -----------------------------------------------------------------------------------

def dpr_run(first_hits: dict[str, int | None], depth: int = 30, question_prefix: str = "question") -> dict:
    """A DPR retrieval JSON run whose question q has its first answer-bearing passage at the
    given 1-based rank (None: no answer in the run)."""
    out = {}
    for qid, first in first_hits.items():
        ctx = [{"docid": f"{qid}-{r}", "score": float(depth - r),
                "text": f"Title {qid}-{r}\n" + ("passage text with the answer " if first == r + 1 else "filler ") * 30,
                "has_answer": first is not None and r + 1 >= first and (r + 1 - first) % 3 == 0}
               for r in range(depth)]
        out[qid] = {"question": f"{question_prefix} {qid}?", "answers": [f"answer {qid}"], "contexts": ctx}
    return out


RANKS_A = {"0": 1, "1": 1, "2": 3, "3": None, "4": 12, "5": 2, "6": 1, "7": 25}
RANKS_B = {"0": 2, "1": 1, "2": 1, "3": 4, "4": None, "5": 2, "6": 7, "7": 1}


def write_json(path: Path, obj) -> Path:
    path.write_text(json.dumps(obj, indent=2))
    return path


@pytest.fixture
def inputs(tmp_path):
    return make_inputs(tmp_path)


@pytest.fixture(scope="module")
def full(tmp_path_factory):
    """The fixture inputs and one report over all of them (rendered once for the module)."""
    tmp = tmp_path_factory.mktemp("full")
    ins = make_inputs(tmp)
    rep = build_report(tmp / "report", evals=[ins["eval"]], runs=[f"A={ins['a']}", ins["b"]], trains=[ins["train"]],
                       compare=("A", "bm25.json"), command="dpr-xrisk report ...")
    return ins, rep, rep.html.read_text()


def make_inputs(tmp_path: Path) -> dict:
    """Two DPR runs, their evaluation JSON (rounded-looking top-k from the same flags, plus
    qrels metrics), and a training folder with refreshes, FCCO lines and probe lines."""
    from dpr_xrisk.evaluation.evaluate import answer_hits
    from dpr_xrisk.evaluation.metrics import dpr_topk_accuracy

    a = write_json(tmp_path / "dense.json", dpr_run(RANKS_A))
    b = write_json(tmp_path / "bm25.json", dpr_run(RANKS_B))
    results = []
    for i, p in enumerate((a, b)):
        acc = dpr_topk_accuracy(answer_hits(None, json.loads(p.read_text())), (1, 5, 20, 100))
        metrics = {f"top{k}": v for k, v in acc.items()}
        metrics.update({"recall@10": 0.8 - 0.1 * i, "recall@100": 1.0, "mrr@10": 2 / 3 - i / 7,
                        "ndcg@10": 0.712345678 - i / 11})
        results.append({"run": str(p), "num_questions": len(RANKS_A), "metrics": metrics})
    ev = write_json(tmp_path / "eval.json", {"results": results})

    train = tmp_path / "model"
    train.mkdir()
    write_json(train / "config.json", {"loss": "dpm", "lr": 2e-5, "estimator": "fcco", "gamma": 0.9,
                                       "refresh_every": 20})
    lines = [{"event": "start", "step": 0, "steps": 60, "tau": 0.05, "questions": 80}]
    lines.append({"event": "eval", "step": 0, "top1": 0.5, "top5": 0.75, "top20": 0.9, "best": 0.75, "best_step": 0})
    for s in range(1, 61):
        lines.append({"step": s, "loss": 1.0 / math.sqrt(s) + 0.05 * math.sin(s), "lr": 2e-5 * (1 - s / 60),
                      "grad_norm": 0.5, "dataset": "train", "epoch": s // 30, "seconds": 0.2, "questions_per_s": 80.0,
                      "gamma": 1.0 if s <= 30 else 0.9, "fcco_weight_mean": 1.0 + 0.01 * s,
                      "fcco_weight_std": 0.2, "fcco_seen_fraction": min(1.0, s / 30), "fcco_v_mean": -0.5})
        if s % 20 == 0:
            lines.append({"event": "refresh", "step": s, "encode_s": 1.0, "index_s": 0.1, "search_s": 0.2,
                          "filter_s": 0.05, "seconds": 1.35, "mean_pool_size": 95.0 - s / 10,
                          "removed": {"positive": 80, "answer": 10 + s, "rank": 0, "margin": s // 10},
                          "train_recall@1": 0.3 + s / 200, "train_recall@10": 0.7 + s / 400,
                          "train_recall@100": 0.95})
            lines.append({"event": "eval", "step": s, "top1": 0.5 + s / 300, "top5": 0.75 + s / 600,
                          "top20": 0.9, "best": 0.8, "best_step": s})
        if s % 15 == 0:
            lines.append({"event": "probe", "step": s, "probe_tau_v": 2.0 - s / 100, "probe_exact_loss": 2.1 - s / 90,
                          "probe_gap": -0.1, "probe_abs_gap": 0.1, "probe_seen": 8})
    lines.append({"event": "end", "steps": 60, "seconds": 30.0, "best": 0.8, "best_step": 60})
    (train / "train_log.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return {"a": a, "b": b, "eval": ev, "train": train, "results": results, "tmp": tmp_path}


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) from the IHDR chunk, which follows the 8-byte signature."""
    assert data[:8] == PNG_MAGIC, "not a PNG"
    length, kind = struct.unpack(">I4s", data[8:16])
    assert kind == b"IHDR" and length == 13
    return struct.unpack(">II", data[16:24])


class Tables(HTMLParser):
    """Collects every <table id=...> as {id: [[cell text, ...], ...]} (header row first) and
    every <img src=...>."""

    def __init__(self):
        super().__init__()
        self.tables, self.images, self._id, self._row, self._cell = {}, [], None, None, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table" and a.get("id"):
            self._id = a["id"]
            self.tables[self._id] = []
        elif tag == "tr" and self._id:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = ""
        elif tag == "img":
            self.images.append(a)

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self._row.append(self._cell)
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.tables[self._id].append(self._row)
            self._row = None
        elif tag == "table":
            self._id = None


def parse(html: str) -> Tables:
    p = Tables()
    p.feed(html)
    return p


def as_dicts(rows: list[list[str]]) -> list[dict]:
    head = rows[0]
    return [dict(zip(head, r)) for r in rows[1:]]


# --- the full report ----------------------------------------------------------------------------

def test_every_chart_is_a_png_of_the_expected_size_and_in_the_html(full):
    _, rep, html = full
    names = {p.name for p in rep.charts}
    assert names == {"topk.png", "metrics.png", "compare.png", "training-model.png", "refresh-model.png",
                     "fcco-model.png"}
    kinds = {"topk.png": "topk", "metrics.png": "metrics", "compare.png": "compare", "training-model.png": "training",
             "refresh-model.png": "refresh", "fcco-model.png": "fcco"}
    page = parse(html)
    uris = {img["src"] for img in page.images}
    for p in rep.charts:
        data = p.read_bytes()
        assert png_size(data) == pixel_size(kinds[p.name])
        # each chart is embedded byte for byte as a data URI
        assert "data:image/png;base64," + base64.b64encode(data).decode() in uris
    assert len(page.images) == len(rep.charts)
    assert not any(img["src"].startswith(("http", "file", "/")) for img in page.images)  # self-contained
    for tid in ("table-topk", "table-metrics", "table-eval", "table-compare-counts", "table-won", "table-lost",
                "table-train-model-eval", "table-train-model-steps", "table-refresh-model", "table-fcco-model",
                "table-probe-model", "table-train-model-summary", "table-inputs"):
        assert tid in page.tables, tid
        assert len(page.tables[tid]) >= 2, f"{tid} has no rows"
    assert '"estimator": "fcco"' in html  # the config is shown
    assert "dpr-xrisk report ..." in html  # and the command that made the report
    assert not rep.warnings


def test_pngs_with_pillow_too(full):
    from PIL import Image

    for p in full[1].charts:
        with Image.open(p) as im:
            assert im.format == "PNG"
            assert im.size == png_size(p.read_bytes())


def test_table_numbers_equal_the_evaluation_json(full, inputs, tmp_path):
    ins, _, html = full
    page = parse(html)
    # the labelled run "A" is matched to its evaluation result by path
    by_name = {{"dense.json": "A"}.get(Path(r["run"]).name, Path(r["run"]).name): r for r in ins["results"]}
    for tid in ("table-eval", "table-metrics", "table-topk"):
        rows = as_dicts(page.tables[tid])
        assert {r["run"] for r in rows} == set(by_name)
        checked = 0
        for row in rows:
            res = by_name[row["run"]]
            assert row["n"] == str(res["num_questions"])
            for key, value in res["metrics"].items():
                if key in row:
                    assert row[key] == f"{value:.4f}", (tid, row["run"], key)
                    checked += 1
        assert checked >= 2 * (4 if tid == "table-topk" else 4)
    # the top-k table takes the stored values even where a computed one differs
    res = json.loads(inputs["eval"].read_text())
    res["results"][0]["metrics"]["top5"] = 0.123456
    write_json(inputs["eval"], res)
    rep = build_report(tmp_path / "r2", evals=[inputs["eval"]], runs=[inputs["a"], inputs["b"]])
    rows = {r["run"]: r for r in as_dicts(parse(rep.html.read_text()).tables["table-topk"])}
    assert rows["dense.json"]["top5"] == "0.1235"
    assert any("top5" in w and "dense.json" in w for w in rep.warnings)


def test_training_tables_equal_the_log(full):
    ins, _, html = full
    page = parse(html)
    log = [json.loads(x) for x in (ins["train"] / "train_log.jsonl").read_text().splitlines()]
    refreshes = [x for x in log if x.get("event") == "refresh"]
    rows = as_dicts(page.tables["table-refresh-model"])
    assert [r["step"] for r in rows] == [str(x["step"]) for x in refreshes]
    for row, x in zip(rows, refreshes):
        assert row["mean_pool_size"] == f"{x['mean_pool_size']:.4f}"
        assert row["removed: answer"] == str(x["removed"]["answer"])
        assert row["train_recall@10"] == f"{x['train_recall@10']:.4f}"
    evals = [x for x in log if x.get("event") == "eval"]
    rows = as_dicts(page.tables["table-train-model-eval"])
    assert [r["top1"] for r in rows] == [f"{x['top1']:.4f}" for x in evals]
    steps = {x["step"]: x for x in log if "loss" in x}
    for row in as_dicts(page.tables["table-train-model-steps"]):
        x = steps[int(row["step"])]
        assert row["loss"] == f"{x['loss']:.4f}"
        assert row["lr"] == f"{x['lr']:.4e}"
    probes = as_dicts(page.tables["table-probe-model"])
    assert [r["probe_tau_v"] for r in probes] == [f"{x['probe_tau_v']:.4f}" for x in log if x.get("event") == "probe"]


def test_compare_won_and_lost(full):
    page = parse(full[2])
    won = as_dicts(page.tables["table-won"])
    lost = as_dicts(page.tables["table-lost"])
    inf = math.inf
    exp_won = {q for q in RANKS_A if (RANKS_A[q] or inf) < (RANKS_B[q] or inf)}
    exp_lost = {q for q in RANKS_A if (RANKS_B[q] or inf) < (RANKS_A[q] or inf)}
    assert {r["qid"] for r in won} == exp_won == {"0", "4", "6"}
    assert {r["qid"] for r in lost} == exp_lost == {"2", "3", "7"}
    row = next(r for r in won if r["qid"] == "4")
    assert row["rank in A"] == "12" and row["rank in bm25.json"] == "none"
    assert row["question"] == "question 4?" and row["answers"] == "answer 4"
    assert row["top passage of A"].startswith("[4-0] Title 4-0 — filler")
    assert len(row["top passage of A"]) < 260  # title + the first 200 characters
    counts = dict(page.tables["table-compare-counts"][1:])
    assert counts["A better (won)"] == "3" and counts["bm25.json better (lost)"] == "3"
    assert counts["same rank (tied)"] == "2" and counts["no answer in either"] == "0"


def test_report_from_eval_only_and_quick_plot(inputs, tmp_path):
    rep = build_report(tmp_path / "r", evals=[inputs["eval"]])
    assert {p.name for p in rep.charts} == {"topk.png", "metrics.png"}
    png = quick_eval_chart(inputs["results"])
    assert png_size(png) == pixel_size("topk")
    qrels_only = [{"run": r["run"], "num_questions": 8,
                   "metrics": {k: v for k, v in r["metrics"].items() if "@" in k}} for r in inputs["results"]]
    assert png_size(quick_eval_chart(qrels_only)) == pixel_size("metrics")


def test_fcco_without_probe_lines_skips_that_panel(inputs, tmp_path):
    log = inputs["train"] / "train_log.jsonl"
    log.write_text("".join(x + "\n" for x in log.read_text().splitlines() if '"probe"' not in x))
    rep = build_report(tmp_path / "r", trains=[inputs["train"]])
    page = parse(rep.html.read_text())
    assert "table-probe-model" not in page.tables and "table-fcco-model" in page.tables
    assert "panel is left out" in rep.html.read_text()


def test_refresh_log_file_is_used_when_the_main_log_has_no_refresh_lines(inputs, tmp_path):
    log = inputs["train"] / "train_log.jsonl"
    lines = log.read_text().splitlines()
    (inputs["train"] / "refresh_log.jsonl").write_text("".join(x + "\n" for x in lines if '"refresh"' in x))
    log.write_text("".join(x + "\n" for x in lines if '"refresh"' not in x))
    rep = build_report(tmp_path / "r", trains=[inputs["train"]])
    assert "refresh-model.png" in {p.name for p in rep.charts}


# --- bad input ----------------------------------------------------------------------------------

def test_bad_inputs_raise_clear_errors(inputs, tmp_path):
    out = tmp_path / "r"
    trec = tmp_path / "run.trec"
    trec.write_text("0 Q0 d1 1 12.5 bm25\n0 Q0 d2 2 11.0 bm25\n")
    with pytest.raises(InputError, match="TREC run"):
        build_report(out, evals=[trec])
    with pytest.raises(InputError, match="no 'results' list"):
        build_report(out, evals=[write_json(tmp_path / "x.json", {"runs": []})])
    with pytest.raises(InputError, match="DPR retrieval run.*--run"):
        build_report(out, evals=[inputs["a"]])
    with pytest.raises(InputError, match="evaluation JSON.*--eval"):
        build_report(out, runs=[inputs["eval"]])
    with pytest.raises(InputError, match="TREC run"):
        build_report(out, runs=[trec])
    with pytest.raises(InputError, match="file not found"):
        build_report(out, evals=[tmp_path / "missing.json"])
    with pytest.raises(InputError, match="training folder not found"):
        build_report(out, trains=[tmp_path / "nope"])
    with pytest.raises(InputError, match="no train_log.jsonl"):
        build_report(out, trains=[tmp_path])
    empty = tmp_path / "empty-run"
    empty.mkdir()
    (empty / "train_log.jsonl").write_text('{"event": "start", "step": 0}\n')
    with pytest.raises(InputError, match="no step lines"):
        build_report(out, trains=[empty])
    with pytest.raises(InputError, match="nothing to report"):
        build_report(out)
    with pytest.raises(InputError, match="no DPR JSON run named 'x'; valid: dense.json, bm25.json"):
        build_report(out, runs=[inputs["a"], inputs["b"]], compare=("dense.json", "x"))
    assert not out.exists()  # nothing written on bad input


def test_different_question_sets_refused_unless_allowed(inputs, tmp_path):
    other = write_json(tmp_path / "other.json", dpr_run({"0": 1, "1": 2, "9": 1}))
    with pytest.raises(InputError, match="different question sets.*--allow-different-questions"):
        build_report(tmp_path / "r", runs=[inputs["a"], other], compare=("dense.json", "other.json"))
    renamed = write_json(tmp_path / "renamed.json", dpr_run(RANKS_B, question_prefix="another"))
    with pytest.raises(InputError, match="different question sets.*question id '0' is"):
        build_report(tmp_path / "r", runs=[inputs["a"], renamed])
    with pytest.raises(InputError, match="different numbers of questions"):
        build_report(tmp_path / "r", evals=[inputs["eval"]], runs=[other])
    rep = build_report(tmp_path / "r", runs=[inputs["a"], other], compare=("dense.json", "other.json"),
                       allow_different_questions=True)
    assert rep.warnings and "different question sets" in rep.html.read_text().lower()
    counts = dict(parse(rep.html.read_text()).tables["table-compare-counts"][1:])
    assert sum(int(v) for v in counts.values()) == 2  # only the shared questions


# --- CLI ----------------------------------------------------------------------------------------

def test_cli_report_and_evaluate_plot(inputs, tmp_path):
    out = tmp_path / "cli-report"
    res = runner.invoke(app, ["report", "--eval", str(inputs["eval"]), "--run", str(inputs["a"]),
                              "--run", str(inputs["b"]), "--compare", "dense.json", "bm25.json", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert (out / "report.html").exists() and (out / "compare.png").exists()
    plot = tmp_path / "quick.png"
    res = runner.invoke(app, ["evaluate", "--run", str(inputs["a"]), "--run", str(inputs["b"]), "--plot", str(plot)])
    assert res.exit_code == 0, res.output
    assert png_size(plot.read_bytes()) == pixel_size("topk")


@pytest.mark.parametrize("case", ["trec-as-eval", "no-results", "missing", "empty-log", "different-questions",
                                  "plot-not-png"])
def test_cli_bad_input_exits_2(inputs, tmp_path, case):
    trec = tmp_path / "run.trec"
    trec.write_text("0 Q0 d1 1 12.5 bm25\n")
    empty = tmp_path / "empty-run"
    empty.mkdir()
    (empty / "train_log.jsonl").write_text("")
    other = write_json(tmp_path / "other.json", dpr_run({"0": 1}))
    out = ["--out", str(tmp_path / "r")]
    args = {"trec-as-eval": ["report", "--eval", str(trec), *out],
            "no-results": ["report", "--eval", str(write_json(tmp_path / "x.json", {"a": 1})), *out],
            "missing": ["report", "--run", str(tmp_path / "missing.json"), *out],
            "empty-log": ["report", "--train", str(empty), *out],
            "different-questions": ["report", "--run", str(inputs["a"]), "--run", str(other), *out],
            "plot-not-png": ["evaluate", "--run", str(inputs["a"]), "--plot", str(tmp_path / "x.jpg")]}[case]
    res = runner.invoke(app, args)
    assert res.exit_code == 2, res.output
    assert "error:" in res.output and "Traceback" not in res.output


def test_sizes_are_whole_pixels():
    for kind in SIZES:
        w, h = pixel_size(kind)
        assert w > 400 and h > 300
