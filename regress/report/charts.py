"""The HTML report's charts: pure functions from typed inputs to plotly figures.

Each chart has a stable id (CHARTS) so a test can find it in the page; a chart without the
data it needs says so in its title rather than disappearing.
"""

from __future__ import annotations

import datetime as dt
import html
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from regress.bench.summaries import AccuracyRun, BenchModel
from regress.gate.choice_calibration import BINS, reliability_diagram
from regress.gate.margins import record_margin
from regress.gate.pairing import pair_runs
from regress.report.sources import Inputs

CHARTS = (
    "accuracy_by_task",
    "gate_units",
    "flips_by_margin",
    "reliability",
    "latency_distributions",
    "accuracy_vs_latency",
    "accuracy_vs_memory",
    "resources_over_time",
    "radar",
    "history",
)
"""Every chart of the report, in page order."""

MIB = 1 << 20


def _empty(title: str, why: str) -> go.Figure:
    fig = go.Figure()
    fig.update_layout(title=f"{title}: {why}")
    return fig


def accuracy_by_task(runs: Sequence[AccuracyRun]) -> go.Figure:
    """Accuracy per task, one bar group per run, 95% Wilson intervals as error bars."""
    if not runs:
        return _empty("Accuracy by task", "no accuracy run given")
    fig = go.Figure()
    for run in runs:
        fig.add_bar(
            name=f"{run.name} ({run.model})",
            x=[t.task for t in run.tasks],
            y=[t.accuracy for t in run.tasks],
            error_y={
                "type": "data",
                "symmetric": False,
                "array": [t.high - t.accuracy for t in run.tasks],
                "arrayminus": [t.accuracy - t.low for t in run.tasks],
            },
            customdata=[[t.n, t.low, t.high] for t in run.tasks],
            hovertemplate="%{x}: %{y:.3f} [%{customdata[1]:.3f}, %{customdata[2]:.3f}], "
            "n=%{customdata[0]}<extra>%{fullData.name}</extra>",
        )
    fig.update_layout(title="Accuracy by task (95% Wilson intervals)", barmode="group")
    fig.update_yaxes(title="accuracy", range=[0, 1])
    return fig


def gate_units(comparisons: Sequence[dict[str, Any]]) -> go.Figure:
    """Each gated unit's accuracy change with its 95% interval against -max_drop."""
    if not comparisons:
        return _empty("Gate units", "no gate JSON report given")
    fig = go.Figure()
    for comp in comparisons:
        units = [u for u in comp["units"] if u.get("delta") is not None and u.get("ci")]
        label = f"{comp['candidate']['run']} vs {comp['baseline']['run']} ({comp['verdict']})"
        fig.add_scatter(
            name=label,
            mode="markers",
            x=[u["delta"] for u in units],
            y=[u["name"] for u in units],
            error_x={
                "type": "data",
                "symmetric": False,
                "array": [u["ci"][1] - u["delta"] for u in units],
                "arrayminus": [u["delta"] - u["ci"][0] for u in units],
            },
            text=[f"{u['verdict']}: {u['reason']}" for u in units],
            hovertemplate="%{y}: %{x:+.3f}<br>%{text}<extra></extra>",
        )
        for u in units:
            fig.add_shape(
                type="line",
                x0=-u["threshold"],
                x1=-u["threshold"],
                y0=0,
                y1=1,
                yref="paper",
                line={"dash": "dot", "color": "firebrick"},
            )
    fig.update_layout(title="Gate: change per unit with 95% interval (dotted: -threshold)")
    fig.update_xaxes(title="candidate minus baseline")
    return fig


def flips_by_margin(runs: Sequence[AccuracyRun], bins: int = 5) -> go.Figure:
    """Against the first run: the share of answers that flipped, by the baseline's margin
    (top-1 minus top-2 log-likelihood), in equal-count bins."""
    baseline = runs[0] if runs else None
    others = [r for r in runs[1:] if baseline and r.sha256 != baseline.sha256]
    if baseline is None or not others:
        return _empty("Flips by margin", "needs a baseline run and a run of another model")
    fig = go.Figure()
    for other in others:
        shared = [t for name, t in baseline.run.manifest.tasks.items() if name in other.run.records]
        pairing = pair_runs(baseline.run, other.run, shared)
        rows = []
        for name, pairs in pairing.pairs.items():
            metric = baseline.run.manifest.tasks[name].metric
            for ours, theirs in pairs:
                margin = record_margin(ours, metric)
                if margin is not None:
                    rows.append((margin, (ours.correct or 0) - (theirs.correct or 0)))
        rows.sort()
        if not rows:
            continue
        size = math.ceil(len(rows) / bins)
        groups = [rows[i : i + size] for i in range(0, len(rows), size)]
        x = [f"{g[0][0]:.2f}-{g[-1][0]:.2f}" for g in groups]
        for sign, label in ((1, "regressed"), (-1, "improved")):
            fig.add_bar(
                name=f"{other.name} ({other.model}): {label}",
                x=x,
                y=[sum(1 for _, d in g if d == sign) / len(g) for g in groups],
                customdata=[len(g) for g in groups],
                hovertemplate="margin %{x}: %{y:.1%} of %{customdata}<extra>%{fullData.name}"
                "</extra>",
            )
    fig.update_layout(title=f"Answers flipped vs {baseline.name}, by its margin", barmode="group")
    fig.update_xaxes(title="baseline margin (log-likelihood, equal-count bins)")
    fig.update_yaxes(title="share of examples", tickformat=".0%")
    return fig


def reliability(runs: Sequence[AccuracyRun], bins: int = BINS) -> go.Figure:
    """Reliability diagram of each run's multiple-choice answers: accuracy against confidence
    (the answer's probability over the choices) in equal-width bins, the diagonal as ideal."""
    fig = go.Figure()
    for i, run in enumerate(runs):
        records = [r for recs in run.run.records.values() for r in recs]
        points = [b for b in reliability_diagram(records, bins) if b.n]
        if not points:
            continue
        fig.add_scatter(
            name=f"{run.name} ({run.model})",
            x=[b.confidence for b in points],
            y=[b.accuracy for b in points],
            mode="lines+markers",
            marker={"size": [6 + 14 * math.sqrt(b.n / max(p.n for p in points)) for b in points]},
            line={"color": _color(i)},
            customdata=[[b.lower, b.upper, b.n] for b in points],
            hovertemplate="confidence %{customdata[0]:.1f}-%{customdata[1]:.1f}: mean %{x:.3f}, "
            "accuracy %{y:.3f}, n=%{customdata[2]}<extra>%{fullData.name}</extra>",
        )
    if not fig.data:
        return _empty("Reliability", "no multiple-choice records in the runs given")
    fig.add_scatter(
        x=[0, 1], y=[0, 1], mode="lines", name="calibrated", line={"dash": "dot", "color": "grey"}
    )
    fig.update_layout(title=f"Reliability ({bins} equal-width confidence bins; size ~ n)")
    fig.update_xaxes(title="confidence (probability of the chosen answer)", range=[0, 1])
    fig.update_yaxes(title="accuracy", range=[0, 1])
    return fig


def latency_distributions(models: Sequence[BenchModel]) -> go.Figure:
    """Per-request TTFT, TPOT and end-to-end latency, one box per model."""
    if not models:
        return _empty("Latency distributions", "no bench run given")
    fig = make_subplots(rows=1, cols=3, subplot_titles=("TTFT", "TPOT", "E2E latency"))
    for i, m in enumerate(models):
        color = _color(i)
        for col, values in enumerate((m.ttft_ms, m.tpot_ms, m.e2el_ms), start=1):
            fig.add_box(
                y=list(values),
                name=m.model,
                legendgroup=m.model,
                showlegend=col == 1,
                marker_color=color,
                boxpoints="all",
                jitter=0.4,
                pointpos=0,
                row=1,
                col=col,
            )
    fig.update_layout(title="Request latency (ms), per request")
    fig.update_yaxes(title="ms", type="log")
    return fig


def _joined(inputs: Inputs) -> list[tuple[AccuracyRun, BenchModel]]:
    """Accuracy runs and bench results of the same model file (by sha256), latest bench."""
    bench = {m.sha256: m for m in sorted(inputs.bench, key=lambda m: m.created)}
    return [(run, bench[run.sha256]) for run in inputs.accuracy if run.sha256 in bench]


def _tradeoff(inputs: Inputs, title: str, x_of: Any, x_title: str) -> go.Figure:
    joined = _joined(inputs)
    if not joined:
        return _empty(title, "needs an accuracy run and a bench run of the same model file")
    fig = go.Figure()
    for i, (run, bench) in enumerate(joined):
        fig.add_scatter(
            x=[x_of(bench)],
            y=[run.accuracy],
            mode="markers+text",
            name=f"{run.name} ({run.model})",
            text=[run.model],
            textposition="top center",
            marker={"size": 14, "color": _color(i)},
            # plotly reads a hovertemplate as markup and %{...} as fields: the names are data
            hovertemplate=_literal(f"{run.name} · {run.model} {run.quantization}")
            + f"<br>sha256 {_literal(run.sha256[:12])}<br>{x_title}: %{{x:.1f}}<br>"
            "accuracy: %{y:.3f}<extra></extra>",
        )
    fig.update_layout(title=title)
    fig.update_xaxes(title=x_title)
    fig.update_yaxes(title="accuracy (all scored examples)")
    return fig


def accuracy_vs_latency(inputs: Inputs) -> go.Figure:
    """Accuracy against median end-to-end request latency."""
    return _tradeoff(
        inputs, "Accuracy vs latency", lambda b: b.e2el_p50 or math.nan, "E2E latency p50 (ms)"
    )


def accuracy_vs_memory(inputs: Inputs) -> go.Figure:
    """Accuracy against peak resident memory."""
    return _tradeoff(
        inputs, "Accuracy vs memory", lambda b: b.peak_rss_bytes / MIB, "peak RSS (MiB)"
    )


def resources_over_time(models: Sequence[BenchModel]) -> go.Figure:
    """RSS and CPU use over each model's bench, from the 10 ms sampler."""
    if not models:
        return _empty("Resource usage over time", "no bench run given")
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, subplot_titles=("RSS", "CPU"))
    for i, m in enumerate(models):
        t = [s[0] for s in m.timeline]
        style = {"legendgroup": m.model, "line": {"color": _color(i)}}
        fig.add_scatter(
            x=t, y=[s[1] / MIB for s in m.timeline], name=m.model, row=1, col=1, **style
        )
        fig.add_scatter(
            x=t, y=_smoothed([s[2] for s in m.timeline]), name=m.model, showlegend=False,
            row=2, col=1, **style,
        )  # fmt: skip
    fig.update_layout(title="Resource usage over time")
    fig.update_yaxes(title="MiB", row=1, col=1)
    fig.update_yaxes(title="% of one core (0.2 s mean)", row=2, col=1)
    fig.update_xaxes(title="seconds since the model started loading", row=2, col=1)
    return fig


def radar(inputs: Inputs) -> go.Figure:
    """Models on common axes, each scaled to the best model (1 = best on that axis)."""
    models = {m.sha256: m for m in inputs.bench}
    if not models:
        return _empty("Models compared", "no bench run given")
    accuracy = {r.sha256: r.accuracy for r in inputs.accuracy}
    axes: list[tuple[str, Any, bool]] = [
        ("prompt t/s", lambda m: m.rate("pp"), True),
        ("generation t/s", lambda m: m.rate("tg"), True),
        ("fast first token", lambda m: m.ttft_p50, False),
        ("small memory", lambda m: m.peak_rss_bytes, False),
    ]
    if any(sha in accuracy for sha in models):
        axes.insert(0, ("accuracy", lambda m: accuracy.get(m.sha256, math.nan), True))
    fig = go.Figure()
    for i, m in enumerate(models.values()):
        scaled, raw = [], []
        for _, value_of, higher in axes:
            values = [value_of(o) for o in models.values()]
            finite = [v for v in values if not math.isnan(v) and v > 0]
            value = value_of(m)
            best = (max(finite) if higher else min(finite)) if finite else math.nan
            ok = not math.isnan(value) and value > 0 and finite
            scaled.append((value / best if higher else best / value) if ok else 0.0)
            raw.append(value)
        names = [a[0] for a in axes]
        fig.add_scatterpolar(
            r=[*scaled, scaled[0]],
            theta=[*names, names[0]],
            name=m.model,
            fill="toself",
            customdata=[*raw, raw[0]],
            line={"color": _color(i)},
            hovertemplate="%{theta}: %{customdata:.4g} (%{r:.2f} of best)<extra></extra>",
        )
    fig.update_layout(title="Models compared (1 = best of these models)")
    fig.update_polars(radialaxis={"range": [0, 1]})
    return fig


def history(inputs: Inputs) -> go.Figure:
    """Accuracy of each model's runs and its generation speed over their creation dates."""
    if len(inputs.accuracy) + len(inputs.bench) < 2:
        return _empty("History", "needs at least two runs")
    fig = make_subplots(
        rows=2, cols=1, shared_xaxes=True, subplot_titles=("accuracy", "generation tokens/s")
    )
    for model in sorted({r.model for r in inputs.accuracy}):
        runs = sorted((r for r in inputs.accuracy if r.model == model), key=lambda r: r.created)
        fig.add_scatter(
            x=[_utc(r.created) for r in runs],
            y=[r.accuracy for r in runs],
            text=[r.name for r in runs],
            mode="lines+markers",
            name=model,
            row=1,
            col=1,
        )
    for model in sorted({m.model for m in inputs.bench}):
        runs = sorted((m for m in inputs.bench if m.model == model), key=lambda m: m.created)
        fig.add_scatter(
            x=[_utc(m.created) for m in runs],
            y=[m.rate("tg") for m in runs],
            mode="lines+markers",
            name=f"{model} (bench)",
            row=2,
            col=1,
        )
    fig.update_layout(title="History across stored runs")
    return fig


def _smoothed(values: Sequence[float], width: int = 20) -> list[float]:
    """A centred moving mean: CPU time moves in 10 ms kernel ticks, so a single 10 ms
    sample reads 0, 100 or 200% and the raw series is a blur."""
    kernel = np.ones(width) / width
    return list(np.convolve(np.asarray(values, dtype=float), kernel, mode="same"))


def _utc(created: str) -> str:
    """An ISO timestamp as plotly's date axis reads it (UTC, no zone suffix)."""
    when = dt.datetime.fromisoformat(created)
    if when.tzinfo is not None:
        when = when.astimezone(dt.UTC).replace(tzinfo=None)
    return when.isoformat(sep=" ")


def _literal(text: str) -> str:
    """`text` shown as itself inside a plotly hovertemplate (entities, `%` as `&#37;`)."""
    return html.escape(text).replace("%", "&#37;")


def _color(i: int) -> str:
    palette = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2")
    return palette[i % len(palette)]


def build_charts(inputs: Inputs) -> dict[str, go.Figure]:
    """Every chart of CHARTS for these inputs, by id."""
    return {
        "accuracy_by_task": accuracy_by_task(inputs.accuracy),
        "gate_units": gate_units(inputs.comparisons),
        "flips_by_margin": flips_by_margin(inputs.accuracy),
        "reliability": reliability(inputs.accuracy),
        "latency_distributions": latency_distributions(inputs.bench),
        "accuracy_vs_latency": accuracy_vs_latency(inputs),
        "accuracy_vs_memory": accuracy_vs_memory(inputs),
        "resources_over_time": resources_over_time(inputs.bench),
        "radar": radar(inputs),
        "history": history(inputs),
    }
