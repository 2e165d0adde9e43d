"""Matplotlib charts of a report, rendered headless to PNG bytes.

Figures are built on :class:`matplotlib.figure.Figure` with the Agg canvas directly (no pyplot,
no global backend switch), at a fixed size: every chart kind has its size in :data:`SIZES`
(inches, at :data:`DPI`), so a PNG's pixel size is known in advance. matplotlib is imported
inside the functions so that importing this module (and ``dpr-xrisk --help``) stays fast.
"""

from __future__ import annotations

import io
import math
from typing import Mapping, Sequence

DPI = 100
SIZES = {  # inches (width, height); pixels = inches * DPI
    "topk": (9.0, 5.5),
    "metrics": (9.0, 5.5),
    "training": (9.0, 9.5),
    "refresh": (9.0, 9.5),
    "fcco": (9.0, 9.5),
    "compare": (11.0, 5.0),
    "fusion": (9.0, 5.5),
}
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
          "#bcbd22", "#17becf")
LINESTYLES = ("-", "--", "-.", ":")
MARKERS = ("o", "s", "^", "D", "v", "P")
REFRESH_STYLE = {"color": "0.45", "linestyle": ":", "linewidth": 1.2}


def pixel_size(kind: str) -> tuple[int, int]:
    w, h = SIZES[kind]
    return round(w * DPI), round(h * DPI)


def color_map(names: Sequence[str]) -> dict[str, str]:
    """One colour per name, stable across the charts of a report."""
    return {n: COLORS[i % len(COLORS)] for i, n in enumerate(dict.fromkeys(names))}


def _figure(kind: str, nrows: int = 1, ncols: int = 1, **kw):
    from matplotlib.figure import Figure

    fig = Figure(figsize=SIZES[kind], dpi=DPI, layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False, **kw)
    return fig, axes


def _png(fig) -> bytes:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)  # no bbox_inches="tight": the pixel size stays SIZES * DPI
    return buf.getvalue()


def _empty(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="0.4")
    ax.set_xticks([])
    ax.set_yticks([])


def _refresh_lines(ax, refresh_steps: Sequence[int], label: bool) -> None:
    for i, s in enumerate(refresh_steps):
        ax.axvline(s, **REFRESH_STYLE, label="index refresh" if (label and i == 0) else None)


def topk_chart(series: Sequence[tuple[str, Sequence[int], Sequence[float]]], title: str = "DPR top-k accuracy",
               colors: Mapping[str, str] | None = None) -> bytes:
    """Top-k accuracy vs k (log x), one line per run. ``series``: (name, ks, accuracies); a run
    with few ks (from an evaluation JSON) is drawn with markers at its ks."""
    fig, axes = _figure("topk")
    ax = axes[0][0]
    colors = colors or color_map([s[0] for s in series])
    kmax, vmin = 1, 1.0
    for i, (name, ks, vals) in enumerate(series):
        ks, vals = list(ks), list(vals)
        kmax = max(kmax, max(ks, default=1))
        vmin = min(vmin, min(vals, default=1.0))
        dense = len(ks) > 10
        same = next((n for n, k2, v2 in series[:i] if list(k2) == ks and list(v2) == vals), None)
        label = f"{name} (same curve as {same})" if same else name
        # top-k accuracy is a step function of k; line styles keep identical runs visible
        ax.plot(ks, vals, label=label, color=colors.get(name), linewidth=2.4 - 0.3 * (i % 4),
                linestyle=LINESTYLES[i % len(LINESTYLES)], drawstyle="steps-post" if dense else "default",
                marker=None if dense else MARKERS[i % len(MARKERS)], markersize=6)
    if not series:
        _empty(ax, "no runs")
    ax.set_xscale("log")
    ticks = [k for k in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000) if k <= max(kmax, 1)]
    ax.set_xticks(ticks, [str(k) for k in ticks])
    ax.set_xlim(1, max(kmax, 2))
    ax.set_ylim(max(0.0, math.floor((vmin - 0.05) * 10) / 10), 1.02)
    ax.set_xlabel("k (passages retrieved, log scale)")
    ax.set_ylabel("top-k accuracy (answer in top k)")
    ax.set_title(title)
    ax.grid(True, which="major", alpha=0.3)
    if series:
        ax.legend(loc="lower right", fontsize=9)
    return _png(fig)


def metric_sort_key(name: str):
    family, _, k = name.partition("@")
    order = {"recall": 0, "mrr": 1, "ndcg": 2}
    return (order.get(family, 9), family, int(k) if k.isdigit() else 0)


def metrics_chart(runs: Sequence[str], metrics: Sequence[str], values: Mapping[str, Mapping[str, float]],
                  title: str = "Retrieval metrics (qrels)", colors: Mapping[str, str] | None = None) -> bytes:
    """Grouped bars: one group per metric (recall@k, MRR@k, nDCG@k), one bar per run.
    ``values[run][metric]``; a run without a metric gets no bar."""
    fig, axes = _figure("metrics")
    ax = axes[0][0]
    colors = colors or color_map(runs)
    n = max(1, len(runs))
    width = 0.8 / n
    for i, run in enumerate(runs):
        xs = [j + (i - (n - 1) / 2) * width for j, m in enumerate(metrics) if m in values.get(run, {})]
        ys = [values[run][m] for m in metrics if m in values.get(run, {})]
        ax.bar(xs, ys, width=width * 0.95, label=run, color=colors.get(run))
    ax.set_xticks(range(len(metrics)), [m.replace("mrr", "MRR").replace("ndcg", "nDCG") for m in metrics])
    ax.set_ylim(0, 1.1)
    ax.set_ylabel("score")
    ax.set_xlabel("metric @ cut-off")
    ax.set_title(title)
    ax.grid(True, axis="y", alpha=0.3)
    if runs:
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=min(4, n), fontsize=9, frameon=False)
    return _png(fig)


def _smooth(ys: Sequence[float], window: int) -> list[float]:
    out, acc = [], 0.0
    for i, y in enumerate(ys):
        acc += y
        if i >= window:
            acc -= ys[i - window]
        out.append(acc / min(i + 1, window))
    return out


def training_chart(steps: Sequence[dict], evals: Sequence[dict], refresh_steps: Sequence[int] = (),
                   title: str = "Training") -> bytes:
    """Loss, learning rate and dev top-k accuracy vs step (shared x); dotted lines at refreshes."""
    fig, axes = _figure("training", 3, 1, sharex=True)
    ax_loss, ax_lr, ax_dev = axes[0][0], axes[1][0], axes[2][0]
    datasets = list(dict.fromkeys(s.get("dataset", "") for s in steps))
    for ds in datasets:
        pts = [(s["step"], s["loss"]) for s in steps if s.get("dataset", "") == ds and s.get("loss") is not None]
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        label = f"loss ({ds})" if len(datasets) > 1 else "loss"
        line = ax_loss.plot(xs, ys, linewidth=1, alpha=0.45 if len(xs) > 30 else 1.0,
                            marker="o" if len(xs) <= 30 else None, markersize=3, label=label)[0]
        if len(xs) > 30:
            w = max(5, len(xs) // 30)
            ax_loss.plot(xs, _smooth(ys, w), color=line.get_color(), linewidth=2, label=f"{label}, mean of {w}")
    ax_loss.set_ylabel("training loss")
    ax_loss.set_title(title)
    lr = [(s["step"], s["lr"]) for s in steps if s.get("lr") is not None]
    ax_lr.plot([p[0] for p in lr], [p[1] for p in lr], color="#2ca02c", label="learning rate")
    ax_lr.set_ylabel("learning rate")
    ax_lr.ticklabel_format(axis="y", style="sci", scilimits=(-2, 3))
    keys = sorted({k for e in evals for k in e if k.startswith("top") and k[3:].isdigit()}, key=lambda k: int(k[3:]))
    for i, k in enumerate(keys):
        pts = [(e["step"], e[k]) for e in evals if e.get(k) is not None]
        ax_dev.plot([p[0] for p in pts], [p[1] for p in pts], marker=MARKERS[i % len(MARKERS)], markersize=7 - i,
                    linestyle=LINESTYLES[i % len(LINESTYLES)], label=f"dev {k}")
    if not keys:
        ax_dev.text(0.5, 0.5, "no dev evaluation logged", ha="center", va="center", transform=ax_dev.transAxes,
                    color="0.4")
    ax_dev.set_ylabel("dev top-k accuracy")
    ax_dev.set_ylim(0, 1.05)
    ax_dev.set_xlabel("step")
    for i, ax in enumerate((ax_loss, ax_lr, ax_dev)):
        _refresh_lines(ax, refresh_steps, label=i == 0)
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="best", fontsize=8)
    return _png(fig)


def refresh_chart(refreshes: Sequence[dict], title: str = "Index refreshes") -> bytes:
    """Mean pool size, false negatives removed per rule, and the training questions' recall of
    their own positives, vs step."""
    fig, axes = _figure("refresh", 3, 1, sharex=True)
    ax_pool, ax_rm, ax_rec = axes[0][0], axes[1][0], axes[2][0]
    xs = [r["step"] for r in refreshes]
    ax_pool.plot(xs, [r.get("mean_pool_size", math.nan) for r in refreshes], marker="o", color="#1f77b4",
                 label="mean pool size")
    ax_pool.set_ylabel("negatives per question")
    ax_pool.set_title(title)
    rules = list(dict.fromkeys(k for r in refreshes for k in (r.get("removed") or {})))
    for rule in rules:
        ax_rm.plot(xs, [(r.get("removed") or {}).get(rule, 0) for r in refreshes], marker="o", label=rule)
    ax_rm.set_ylabel("candidates removed")
    recall = sorted({k for r in refreshes for k in r if k.startswith("train_recall@")},
                    key=lambda k: int(k.split("@")[1]))
    for k in recall:
        ax_rec.plot(xs, [r.get(k, math.nan) for r in refreshes], marker="o", label=k.replace("train_", ""))
    ax_rec.set_ylabel("train positives' recall")
    ax_rec.set_ylim(0, 1.05)
    ax_rec.set_xlabel("step")
    for ax in (ax_pool, ax_rm, ax_rec):
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="best", fontsize=8, title="removed by rule" if ax is ax_rm else None, title_fontsize=8)
    return _png(fig)


def fcco_chart(steps: Sequence[dict], probes: Sequence[dict] = (), refresh_steps: Sequence[int] = (),
               title: str = "FCCO estimator") -> bytes:
    """gamma, per-question weight mean ± std and seen fraction vs step; τ·v vs the exact loss on
    the probe set when probe lines were logged (otherwise that panel is left out)."""
    rows = 4 if probes else 3
    fig, axes = _figure("fcco", rows, 1, sharex=True)
    axs = [a[0] for a in axes]
    st = [s for s in steps if "gamma" in s or any(k.startswith("fcco_") for k in s)]
    xs = [s["step"] for s in st]

    def col(key):
        return [s.get(key, math.nan) if s.get(key) is not None else math.nan for s in st]

    axs[0].plot(xs, col("gamma"), color="#9467bd", label="γ")
    axs[0].set_ylabel("γ (moving-average rate)")
    axs[0].set_ylim(-0.02, 1.05)
    axs[0].set_title(title)
    mean, std = col("fcco_weight_mean"), col("fcco_weight_std")
    axs[1].plot(xs, mean, color="#1f77b4", label="weight mean")
    axs[1].fill_between(xs, [m - s for m, s in zip(mean, std)], [m + s for m, s in zip(mean, std)],
                        color="#1f77b4", alpha=0.2, label="± std")
    axs[1].set_ylabel("negative weights")
    axs[2].plot(xs, col("fcco_seen_fraction"), color="#2ca02c", label="seen fraction")
    axs[2].set_ylabel("questions with state")
    axs[2].set_ylim(-0.02, 1.05)
    if probes:
        px = [p["step"] for p in probes]
        axs[3].plot(px, [p["probe_tau_v"] for p in probes], marker="o", label="τ·v (estimator)")
        axs[3].plot(px, [p["probe_exact_loss"] for p in probes], marker="s", label="exact DPM loss")
        axs[3].set_ylabel("probe-set loss")
    axs[-1].set_xlabel("step")
    for i, ax in enumerate(axs):
        _refresh_lines(ax, refresh_steps, label=i == 0)
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="best", fontsize=8)
    return _png(fig)


def compare_chart(name_a: str, name_b: str, counts: Mapping[str, int],
                  pairs: Sequence[tuple[int | None, int | None]], depth: int,
                  colors: Mapping[str, str] | None = None) -> bytes:
    """Left: questions won / lost / tied / missed by both. Right: first answer-bearing rank of
    A vs B (log-log; marker area = number of questions; 'none' = no answer in the run)."""
    fig, axes = _figure("compare", 1, 2, width_ratios=[1, 1.25])
    ax_bar, ax_sc = axes[0][0], axes[0][1]
    colors = colors or color_map([name_a, name_b])
    labels = list(counts)
    bar_colors = [colors.get(name_a, "#1f77b4"), colors.get(name_b, "#ff7f0e"), "#7f7f7f", "#c7c7c7"]
    bars = ax_bar.barh(range(len(labels)), [counts[k] for k in labels], color=bar_colors[: len(labels)])
    ax_bar.set_yticks(range(len(labels)), labels)
    ax_bar.invert_yaxis()
    ax_bar.bar_label(bars, padding=3)
    ax_bar.set_xlabel("questions")
    ax_bar.set_title("Per question: first answer-bearing rank")
    ax_bar.set_xlim(0, max([1, *counts.values()]) * 1.15)
    miss = max(depth, 1) * 2
    agg: dict[tuple[int, int], int] = {}
    for ra, rb in pairs:
        key = (ra or miss, rb or miss)
        agg[key] = agg.get(key, 0) + 1
    if agg:
        xs, ys = zip(*agg)
        sizes = [20 + 30 * math.sqrt(c) for c in agg.values()]
        ax_sc.scatter(xs, ys, s=sizes, alpha=0.6, color="#1f77b4", edgecolor="k", linewidth=0.5)
        ax_sc.plot([1, miss], [1, miss], color="0.5", linewidth=1, linestyle="--", label="same rank")
        ax_sc.set_xscale("log")
        ax_sc.set_yscale("log")
        ax_sc.minorticks_off()
        ticks = [t for t in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000) if t <= depth] + [miss]
        ticklabels = [str(t) for t in ticks[:-1]] + ["none"]
        ax_sc.set_xticks(ticks, ticklabels)
        ax_sc.set_yticks(ticks, ticklabels)
        ax_sc.set_xlim(0.8, miss * 1.3)
        ax_sc.set_ylim(0.8, miss * 1.3)
        ax_sc.legend(loc="lower right", fontsize=8)
    else:
        _empty(ax_sc, "no shared questions")
    ax_sc.set_xlabel(f"rank in {name_a}")
    ax_sc.set_ylabel(f"rank in {name_b}")
    ax_sc.set_title(f"{name_a} vs {name_b} (below diagonal: {name_b} better)", fontsize=10)
    ax_sc.grid(True, alpha=0.3)
    return _png(fig)


def quick_eval_chart(results: Sequence[dict]) -> bytes:
    """One chart of ``evaluate_run`` results: top-k accuracy at the evaluated k's, or, when no
    DPR accuracy was computed, the recall/MRR/nDCG bars."""
    from pathlib import Path

    from dpr_xrisk.report.load import CUTOFF, TOPK, unique_names

    names = unique_names([Path(r["run"]).name for r in results], [r["run"] for r in results])
    series = []
    for name, r in zip(names, results):
        ks = sorted((int(m.group(1)), v) for key, v in r["metrics"].items() if (m := TOPK.match(key)))
        if ks:
            series.append((name, [k for k, _ in ks], [v for _, v in ks]))
    if series:
        return topk_chart(series, title="DPR top-k accuracy at the evaluated k")
    metrics = sorted({k for r in results for k in r["metrics"] if CUTOFF.match(k)}, key=metric_sort_key)
    return metrics_chart(names, metrics, {n: r["metrics"] for n, r in zip(names, results)})


def write_quick_eval_chart(results: Sequence[dict], path) -> None:
    """``dpr-xrisk evaluate --plot``: :func:`quick_eval_chart` written atomically as PNG."""
    from dpr_xrisk.io.common import atomic_write

    png = quick_eval_chart(results)
    with atomic_write(path, "wb") as f:
        f.write(png)


def fusion_chart(rows: Sequence[dict], metrics: Sequence[str], best_alpha: float, chosen_by: str) -> bytes:
    """``dpr-xrisk tune-fusion --plot``: each metric against the interpolation weight alpha (log
    axis), RRF as a dashed line of the same colour, the chosen alpha marked."""
    fig, axes = _figure("fusion")
    ax = axes[0][0]
    interp = [r for r in rows if r["fusion"] == "interpolation"]
    rrf = next((r for r in rows if r["fusion"] == "rrf"), None)
    positive = [r for r in interp if r["alpha"] > 0]
    for i, m in enumerate(metrics):
        c = COLORS[i % len(COLORS)]
        ax.plot([r["alpha"] for r in positive], [r["means"][m] for r in positive], marker=MARKERS[i % len(MARKERS)],
                color=c, label=f"{m} (interpolation)")
        if rrf is not None:
            ax.axhline(rrf["means"][m], color=c, linestyle="--", linewidth=1.0, label=f"{m} (RRF)")
    if best_alpha > 0:
        ax.axvline(best_alpha, **REFRESH_STYLE, label=f"chosen alpha {best_alpha:g} (best {chosen_by})")
    ax.set_xscale("log")
    ax.set_xlabel("alpha: weight of BM25 against dense (both min-max centred; 1 = equal)")
    ax.set_ylabel("score on the labelled questions")
    ax.set_title("Hybrid fusion: interpolation weight vs RRF")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    return _png(fig)
