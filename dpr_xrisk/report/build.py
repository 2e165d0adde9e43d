"""Assemble a report folder: load and check every input first (nothing is written when an input
is bad), then render the charts, the tables of the numbers behind them and ``report.html``.

Number policy: tables show values exactly as the evaluation JSON and the training logs store
them (metrics to 4 decimals). The top-k-vs-k curve of a DPR JSON run is computed from its
``has_answer`` flags (:func:`dpr_xrisk.evaluation.metrics.dpr_topk_accuracy`); where an evaluation JSON
holds top-k for the same run, the table shows the evaluation JSON's value, and a computed value
that would disagree with it is reported as a warning, never silently replaced.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from dpr_xrisk.errors import InputError
from dpr_xrisk.report.html import Cell, Chart, Section, Table, fmt, fmt_metric, pretty_json, render_page
from dpr_xrisk.report.load import (DprRun, EvalResult, TrainingRun, load_dpr_run, load_eval, load_training,
                                   split_label, unique_names)

CURVE_MAX_K = 100
TABLE_KS = (1, 5, 20, 100)
MAX_COMPARE_ROWS = 50
MAX_STEP_ROWS = 100
PASSAGE_CHARS = 200


@dataclass
class Report:
    out: Path
    html: Path
    charts: list[Path] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.") or "run"


def _spec(x) -> tuple[str | None, Path]:
    if isinstance(x, tuple):
        return x[0], Path(x[1])
    if isinstance(x, Path):
        return None, x
    return split_label(str(x))


def _subsample(rows: list, limit: int) -> list:
    """At most ``limit`` rows, evenly spaced, always keeping the first and the last."""
    if len(rows) <= limit:
        return rows
    idx = sorted({round(i * (len(rows) - 1) / (limit - 1)) for i in range(limit)})
    return [rows[i] for i in idx]


# --- loading and checks -------------------------------------------------------------------------

def _match_evals(dpr: list[DprRun], evals: list[EvalResult]) -> dict[int, DprRun]:
    """Evaluation result index -> the DPR run it scored (same resolved path, else the same file
    name when exactly one DPR run has it)."""
    out = {}
    for i, r in enumerate(evals):
        rp = Path(r.run)
        same = [d for d in dpr if rp.resolve() == d.path.resolve()]
        if not same:
            same = [d for d in dpr if d.path.name == rp.name]
        if len(same) == 1:
            out[i] = same[0]
    return out


def _question_sets(dpr: list[DprRun], evals: list[EvalResult], names: list[str]) -> list[str]:
    """Differences between the question sets of the runs shown side by side (empty: all agree)."""
    problems = []
    if dpr:
        ref = dpr[0]
        ref_q = set(ref.hits)
        for d in dpr[1:]:
            q = set(d.hits)
            if q != ref_q:
                only_a, only_b = sorted(ref_q - q), sorted(q - ref_q)
                eg = (only_a or only_b)[0]
                problems.append(f"{ref.name} has {len(ref_q)} questions and {d.name} {len(q)}: "
                                f"{len(only_a)} only in {ref.name}, {len(only_b)} only in {d.name} (e.g. id {eg!r})")
                continue
            for qid in ref.records:
                qa, qb = ref.records[qid].get("question"), d.records[qid].get("question")
                if qa is not None and qb is not None and qa != qb:
                    problems.append(f"question id {qid!r} is {qa!r} in {ref.name} but {qb!r} in {d.name}")
                    break
    counts = [(d.name, len(d.hits)) for d in dpr] + [(n, r.num_questions) for n, r in zip(names, evals)]
    if len({c for _, c in counts}) > 1:
        desc = ", ".join(f"{n}: {c}" for n, c in counts)
        problems.append(f"the runs score different numbers of questions ({desc})")
    if dpr:
        ref_q = set(dpr[0].hits)
        for n, r in zip(names, evals):
            if r.per_question is not None and set(r.per_question) != ref_q:
                problems.append(f"{n} (in {r.source}) was evaluated on other question ids than {dpr[0].name}")
    return problems


# --- sections -----------------------------------------------------------------------------------

def _topk_section(dpr, evals, eval_names, matched, colors, warnings) -> Chart | None:
    from dpr_xrisk.evaluation.metrics import dpr_topk_accuracy
    from dpr_xrisk.report.charts import topk_chart

    eval_of = {id(d): evals[i] for i, d in matched.items()}
    series, rows = [], []
    eval_ks = sorted({k for r in evals for k in r.topk()})
    ks = sorted(set(TABLE_KS) | set(eval_ks))
    curves = {}
    for d in dpr:
        depth = min(CURVE_MAX_K, d.depth)
        curve = dpr_topk_accuracy(d.hits, range(1, depth + 1)) if depth else {}
        curves[d.name] = curve
        series.append((d.name, list(curve), list(curve.values())))
        ev = eval_of.get(id(d))
        row = [d.name, str(ev.num_questions if ev else len(d.hits))]
        stored = ev.topk() if ev else {}
        extra = dpr_topk_accuracy(d.hits, [k for k in ks if k not in curve and k <= d.depth]) if d.depth else {}
        for k in ks:
            if k in stored:
                row.append(fmt_metric(stored[k]))
                computed = curve.get(k, extra.get(k))
                if computed is not None and abs(computed - stored[k]) > 1e-9:
                    warnings.append(f"{d.name}: top{k} computed from the run's has_answer flags is {computed:.4f}, "
                                    f"the evaluation JSON {ev.source} says {stored[k]:.4f} (other answers or --regex?); "
                                    "the table shows the evaluation JSON's value")
            elif k in curve or k in extra:
                row.append(Cell(fmt_metric(curve.get(k, extra.get(k))), "computed"))
            else:
                row.append("–")
        row.append(f"evaluation JSON ({ev.source.name}) + run" if ev else "run (has_answer flags)")
        rows.append(row)
    matched_ids = set(matched)
    for i, (r, name) in enumerate(zip(evals, eval_names)):
        tk = r.topk()
        if i in matched_ids or not tk:
            continue
        series.append((name, list(tk), list(tk.values())))
        rows.append([name, str(r.num_questions)] + [fmt_metric(tk[k]) if k in tk else "–" for k in ks]
                    + [f"evaluation JSON ({r.source.name})"])
    if not series:
        return None
    png = topk_chart(series, title="DPR top-k accuracy vs k", colors=colors)
    table = Table("table-topk", "Top-k accuracy (answer-bearing passage in the top k)",
                  ["run", "n"] + [f"top{k}" for k in ks] + ["source"], rows,
                  note="Upright values are the evaluation JSON's, as stored; italic values are computed from the "
                       "run's has_answer flags (dpr_xrisk.evaluation.metrics.dpr_topk_accuracy), the same function that "
                       "produces the curve.")
    return Chart("chart-topk", "Top-k accuracy vs k", "topk.png", png, [table])


def _metrics_section(evals, eval_names, colors) -> Chart | None:
    from dpr_xrisk.report.charts import metric_sort_key, metrics_chart

    metrics = sorted({m for r in evals for m in r.cutoff_metrics()}, key=metric_sort_key)
    if not metrics:
        return None
    have = [(n, r) for n, r in zip(eval_names, evals) if r.cutoff_metrics()]
    png = metrics_chart([n for n, _ in have], metrics, {n: r.metrics for n, r in have},
                        title="Recall@k, MRR@k, nDCG@k (qrels)", colors=colors)
    rows = [[n, str(r.num_questions)] + [fmt_metric(r.metrics[m]) if m in r.metrics else "–" for m in metrics]
            for n, r in have]
    table = Table("table-metrics", "Qrels metrics (evaluation JSON, as stored)", ["run", "n"] + metrics, rows)
    return Chart("chart-metrics", "Recall / MRR / nDCG at cut-offs", "metrics.png", png, [table])


def _eval_table(evals, eval_names) -> Table:
    cols = list(dict.fromkeys(m for r in evals for m in r.metrics))
    rows = [[n, r.source.name, str(r.num_questions)] + [fmt_metric(r.metrics[c]) if c in r.metrics else "–"
                                                       for c in cols] for n, r in zip(eval_names, evals)]
    return Table("table-eval", "All metrics of the evaluation JSON(s), as stored", ["run", "file", "n"] + cols, rows)


STEP_KEYS = ("step", "epoch", "dataset", "loss", "lr", "grad_norm", "seconds", "questions_per_s")
FCCO_KEYS = ("step", "gamma", "fcco_weight_mean", "fcco_weight_std", "fcco_seen_fraction", "fcco_v_mean")


def _log_table(tid, caption, records, keys, limit=None) -> Table:
    keys = [k for k in keys if any(k in r for r in records)]
    shown = _subsample(records, limit) if limit else records
    note = None
    if len(shown) < len(records):
        note = f"{len(shown)} of {len(records)} lines shown, evenly spaced (first and last included); all are in the log."
    rows = [[fmt(r.get(k)) if k != "lr" or r.get(k) is None else f"{r[k]:.4e}" for k in keys] for r in shown]
    return Table(tid, caption, list(keys), rows, note=note)


def _training_charts(t: TrainingRun, s: str) -> list[Chart]:
    from dpr_xrisk.report.charts import fcco_chart, refresh_chart, training_chart

    charts = []
    png = training_chart(t.steps, t.evals, t.refresh_steps, title=f"Training: {t.name}")
    eval_keys = ["step"] + sorted({k for e in t.evals for k in e if re.fullmatch(r"top\d+", k)},
                                  key=lambda k: int(k[3:])) + ["best", "best_step"]
    tables = [_log_table(f"table-train-{s}-eval", "Dev accuracy (eval lines of train_log.jsonl)", t.evals, eval_keys),
              _log_table(f"table-train-{s}-steps", "Step lines of train_log.jsonl", t.steps, STEP_KEYS, MAX_STEP_ROWS)]
    note = (f"Dotted vertical lines: index refreshes at steps {', '.join(map(str, t.refresh_steps))}."
            if t.refreshes else None)
    charts.append(Chart(f"chart-train-{s}", f"Training: {t.name} — loss, learning rate, dev accuracy",
                        f"training-{s}.png", png, tables, note))
    if t.refreshes:
        png = refresh_chart(t.refreshes, title=f"Index refreshes: {t.name}")
        rules = list(dict.fromkeys(k for r in t.refreshes for k in (r.get("removed") or {})))
        recall = sorted({k for r in t.refreshes for k in r if k.startswith("train_recall@")},
                        key=lambda k: int(k.split("@")[1]))
        headers = ["step", "mean_pool_size"] + [f"removed: {r}" for r in rules] + recall + \
                  ["encode_s", "index_s", "search_s", "filter_s", "seconds"]
        rows = []
        for r in t.refreshes:
            removed = r.get("removed") or {}
            rows.append([fmt(r.get("step")), fmt(r.get("mean_pool_size"))] + [fmt(removed.get(x)) for x in rules]
                        + [fmt(r.get(k)) for k in recall]
                        + [fmt(r.get(k)) for k in ("encode_s", "index_s", "search_s", "filter_s", "seconds")])
        charts.append(Chart(f"chart-refresh-{s}", f"Index refreshes: {t.name}", f"refresh-{s}.png", png,
                            [Table(f"table-refresh-{s}", "Refresh lines of the training log", headers, rows)]))
    if t.has_fcco:
        png = fcco_chart(t.steps, t.probes, t.refresh_steps, title=f"FCCO estimator: {t.name}")
        fsteps = [x for x in t.steps if "gamma" in x or any(k.startswith("fcco_") for k in x)]
        tables = [_log_table(f"table-fcco-{s}", "FCCO diagnostics (step lines)", fsteps, FCCO_KEYS, MAX_STEP_ROWS)]
        note = None
        if t.probes:
            tables.append(_log_table(f"table-probe-{s}", "Probe set: estimator τ·v vs the exact DPM loss", t.probes,
                                     ("step", "probe_tau_v", "probe_exact_loss", "probe_gap", "probe_abs_gap",
                                      "probe_seen")))
        else:
            note = "No probe lines (probe_tau_v, probe_exact_loss) in the log: the τ·v vs exact-loss panel is left out."
        charts.append(Chart(f"chart-fcco-{s}", f"FCCO estimator: {t.name}", f"fcco-{s}.png", png, tables, note))
    return charts


def _top_passage(rec: dict) -> str:
    ctx = rec.get("contexts") or []
    if not ctx:
        return "–"
    text = str(ctx[0].get("text", ""))
    title, sep, body = text.partition("\n")
    if not sep:
        title, body = "", title
    body = " ".join(body.split())
    snippet = body[:PASSAGE_CHARS] + ("…" if len(body) > PASSAGE_CHARS else "")
    return f"[{ctx[0].get('docid', '?')}] {title.strip()} — {snippet}" if title.strip() else f"[{ctx[0].get('docid', '?')}] {snippet}"


def _find_run(dpr: list[DprRun], name: str) -> DprRun:
    for key in (lambda d: d.name, lambda d: str(d.path), lambda d: d.path.name):
        found = [d for d in dpr if key(d) == name]
        if len(found) == 1:
            return found[0]
    valid = ", ".join(d.name for d in dpr) or "none (give the runs with --run)"
    raise InputError(f"--compare: no DPR JSON run named {name!r}; valid: {valid}")


def _compare_section(a: DprRun, b: DprRun, colors) -> Section:
    from dpr_xrisk.evaluation.metrics import dpr_first_hit_ranks
    from dpr_xrisk.report.charts import compare_chart

    ra, rb = dpr_first_hit_ranks(a.hits), dpr_first_hit_ranks(b.hits)
    shared = [q for q in a.records if q in b.records]
    inf = math.inf
    won = [q for q in shared if (ra[q] or inf) < (rb[q] or inf)]
    lost = [q for q in shared if (rb[q] or inf) < (ra[q] or inf)]
    tied = [q for q in shared if ra[q] is not None and ra[q] == rb[q]]
    neither = [q for q in shared if ra[q] is None and rb[q] is None]
    counts = {f"{a.name} better (won)": len(won), f"{b.name} better (lost)": len(lost),
              "same rank (tied)": len(tied), "no answer in either": len(neither)}
    depth = max(a.depth, b.depth)
    png = compare_chart(a.name, b.name, counts, [(ra[q], rb[q]) for q in shared], depth, colors)

    def gap(q, better, worse):
        miss = depth * 2 or 1
        return math.log((worse[q] or miss)) - math.log((better[q] or miss))

    won.sort(key=lambda q: -gap(q, ra, rb))
    lost.sort(key=lambda q: -gap(q, rb, ra))
    headers = ["qid", "question", "answers", f"rank in {a.name}", f"rank in {b.name}",
               f"top passage of {a.name}", f"top passage of {b.name}"]

    def rows(qs):
        return [[q, str(a.records[q].get("question", "")), " | ".join(map(str, a.records[q].get("answers", []))),
                 fmt(ra[q]) if ra[q] else "none", fmt(rb[q]) if rb[q] else "none",
                 _top_passage(a.records[q]), _top_passage(b.records[q])] for q in qs[:MAX_COMPARE_ROWS]]

    def note(qs):
        return (f"{MAX_COMPARE_ROWS} of {len(qs)} shown (largest rank differences first)."
                if len(qs) > MAX_COMPARE_ROWS else "Largest rank differences first.")

    counts_table = Table("table-compare-counts", "Questions by outcome (first answer-bearing rank)",
                         ["outcome", "questions"], [[k, str(v)] for k, v in counts.items()],
                         note=f"{len(shared)} shared questions; rank = 1-based position of the first passage with "
                              "has_answer = true; 'none' = no answer-bearing passage retrieved.")
    chart = Chart("chart-compare", f"{a.name} vs {b.name}", "compare.png", png, [counts_table])
    sec = Section("compare", f"Per question: {a.name} vs {b.name}", charts=[chart])
    sec.tables = [Table("table-won", f"Won: {a.name} finds an answer earlier than {b.name}", headers, rows(won),
                        note=note(won)),
                  Table("table-lost", f"Lost: {b.name} finds an answer earlier than {a.name}", headers, rows(lost),
                        note=note(lost))]
    only = len(set(a.records) ^ set(b.records))
    if only:
        sec.notes.append(f"{only} question(s) appear in only one of the two runs and are left out of this comparison.")
    return sec


# --- the report ---------------------------------------------------------------------------------

def _load_runs(runs: Sequence, trains: Sequence) -> tuple[list[DprRun], list[TrainingRun]]:
    """The DPR JSON runs and training folders, each under a name unique in the report."""
    dpr = []
    for spec in runs:
        label, path = _spec(spec)
        dpr.append(load_dpr_run(path, label))
    for d, n in zip(dpr, unique_names([d.name for d in dpr], [str(d.path) for d in dpr])):
        d.name = n
    trainings = []
    for spec in trains:
        label, path = _spec(spec)
        trainings.append(load_training(path, label))
    for t, n in zip(trainings, unique_names([t.name for t in trainings], [str(t.path) for t in trainings])):
        t.name = n
    return dpr, trainings


def _eval_names(dpr: list[DprRun], eval_results: list[EvalResult]) -> tuple[dict[int, DprRun], list[str]]:
    """Which evaluation result scores which DPR run, and each result's unique name (a matched
    result takes its run's name)."""
    matched = _match_evals(dpr, eval_results)
    raw_names = [matched[i].name if i in matched else r.name for i, r in enumerate(eval_results)]
    eval_names = unique_names(raw_names, [r.run for r in eval_results])
    for i in matched:  # a run scored twice keeps its DPR name on the first result only
        if raw_names[i] in raw_names[:i]:
            eval_names[i] = f"{raw_names[i]} [{eval_results[i].source.name}]"
        else:
            eval_names[i] = raw_names[i]
    return matched, unique_names(eval_names, [str(r.source) for r in eval_results])


def _compare_pair(dpr: list[DprRun], compare: tuple[str, str] | None) -> tuple[DprRun, DprRun] | None:
    if compare is None:
        return None
    a, b = _find_run(dpr, compare[0]), _find_run(dpr, compare[1])
    if a is b:
        raise InputError(f"--compare needs two different runs, got {compare[0]!r} twice")
    return a, b


def _retrieval_section(dpr, eval_results, eval_names, matched, colors, warnings) -> Section | None:
    retrieval = Section("retrieval", "Retrieval")
    for chart in (_topk_section(dpr, eval_results, eval_names, matched, colors, warnings),
                  _metrics_section(eval_results, eval_names, colors)):
        if chart is not None:
            retrieval.charts.append(chart)
    if eval_results:
        retrieval.tables.append(_eval_table(eval_results, eval_names))
    return retrieval if retrieval.charts or retrieval.tables else None


def _training_section(t: TrainingRun) -> Section:
    s = slug(t.name)
    sec = Section(f"train-{s}", f"Training: {t.name}", charts=_training_charts(t, s))
    summary = []
    if t.start:
        summary += [[f"start: {k}", fmt(v) if not isinstance(v, (dict, list)) else pretty_json(v)]
                    for k, v in t.start.items() if k != "event"]
    if t.end:
        summary += [[f"end: {k}", fmt(v) if not isinstance(v, (dict, list)) else pretty_json(v)]
                    for k, v in t.end.items() if k != "event"]
    if summary:
        sec.tables.append(Table(f"table-train-{s}-summary", "Start and end lines of the training log",
                                ["field", "value"], summary))
    return sec


def _provenance_section(eval_results, eval_names, dpr, trainings) -> Section:
    """Inputs, configs and commands, where recorded."""
    prov = Section("provenance", "Inputs, configs and commands")
    rows = []
    for r, n in zip(eval_results, eval_names):
        rows.append(["evaluation", n, f"{r.source} → {r.run}", r.command or "not recorded"])
    for d in dpr:
        rows.append(["DPR JSON run", d.name, str(d.path), "not recorded"])
    for t in trainings:
        rows.append(["training", t.name, str(t.path), t.command or "not recorded"])
    prov.tables.append(Table("table-inputs", "Inputs", ["kind", "name", "path", "command"], rows,
                             note="Commands are shown where a file records one (a 'command' or 'argv' field, or "
                                  "a command.txt in a training folder)."))
    for t in trainings:
        if t.config is not None:
            prov.blocks.append((f"{t.name}: config.json ({t.path / 'config.json'})", pretty_json(t.config)))
        else:
            prov.notes.append(f"{t.name}: no config.json in {t.path}.")
    return prov


def _write(out: Path, sections: list[Section], page: str) -> list[Path]:
    """The chart PNGs and report.html; the PNGs written."""
    from dpr_xrisk.io.common import atomic_write

    out.mkdir(parents=True, exist_ok=True)
    written = []
    for sec in sections:
        for c in sec.charts:
            with atomic_write(out / c.filename, "wb") as f:
                f.write(c.png)
            written.append(out / c.filename)
    with atomic_write(out / "report.html") as f:
        f.write(page)
    return written


def build_report(out: str | Path, evals: Sequence = (), runs: Sequence = (), trains: Sequence = (),
                 compare: tuple[str, str] | None = None, allow_different_questions: bool = False,
                 command: str | None = None, title: str = "dpr_xrisk report") -> Report:
    """Write ``out/report.html`` and one PNG per chart. ``runs``/``trains`` take paths,
    ``"LABEL=PATH"`` strings or (label, path) tuples. Raises InputError on bad input, before
    writing anything."""
    from dpr_xrisk.report.charts import color_map

    out = Path(out)
    if not (evals or runs or trains):
        raise InputError("nothing to report: give --eval, --run and/or --train")
    if out.exists() and not out.is_dir():
        raise InputError("--out must be a folder, and this is a file", out)
    eval_results = [r for p in evals for r in load_eval(p)]
    dpr, trainings = _load_runs(runs, trains)
    matched, eval_names = _eval_names(dpr, eval_results)

    warnings: list[str] = []
    problems = _question_sets(dpr, eval_results, eval_names)
    if problems and not allow_different_questions:
        raise InputError("runs over different question sets cannot be compared side by side: " + problems[0]
                         + (f" (and {len(problems) - 1} more difference(s))" if len(problems) > 1 else "")
                         + "; pass --allow-different-questions to report them anyway")
    warnings += [f"Different question sets (allowed by --allow-different-questions): {p}" for p in problems]
    pair = _compare_pair(dpr, compare)

    colors = color_map([d.name for d in dpr] + eval_names)
    retrieval = _retrieval_section(dpr, eval_results, eval_names, matched, colors, warnings)
    sections = [retrieval] if retrieval is not None else []
    if pair:
        sections.append(_compare_section(*pair, colors))
    sections += [_training_section(t) for t in trainings]
    sections.append(_provenance_section(eval_results, eval_names, dpr, trainings))

    header = [("generated", _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"))]
    if command:
        header.append(("command", command))
    header.append(("inputs", f"{len(eval_results)} evaluation result(s), {len(dpr)} DPR JSON run(s), "
                             f"{len(trainings)} training run(s)"))
    page = render_page(title, sections, header, warnings)
    return Report(out=out, html=out / "report.html", charts=_write(out, sections, page), warnings=warnings)
