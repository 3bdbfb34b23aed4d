"""The HTML report's charts: pure functions from typed inputs to plotly figures.

Each chart has a stable id (CHARTS) so a test can find it in the page. A chart without the
data it needs is not drawn: its function returns `Needs`, naming the input that would add
it, and the page says so in one line instead of showing an empty grid.
"""

from __future__ import annotations

import datetime as dt
import html
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from regress.bench.summaries import AccuracyRun, BenchModel
from regress.gate.choice_calibration import BINS, reliability_diagram
from regress.gate.margins import record_margin
from regress.gate.pairing import pair_runs
from regress.report.history_chart import PERCENT, history_figure
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

TITLES = {
    "accuracy_by_task": "Accuracy by task",
    "gate_units": "Gate units",
    "flips_by_margin": "Flips by margin",
    "reliability": "Reliability",
    "latency_distributions": "Latency distributions",
    "accuracy_vs_latency": "Accuracy vs latency",
    "accuracy_vs_memory": "Accuracy vs memory",
    "resources_over_time": "Resource use over time",
    "radar": "Models compared",
    "history": "History",
}
"""Each chart's short name, as the page lists the charts it left out."""

MIB = 1 << 20
TIMELINE_POINTS = 1000
"""Most points per resource-use line; each stands for a window of 10 ms samples (the CPU line
is a 0.2 s mean, so a window of up to 0.2 s loses nothing drawn)."""
POINTS = 100
"""Accuracy changes are shown in percentage points, as the Markdown report writes them."""

ADD_RUN = "add a stored run folder (a baseline, or `regress check --save-run DIR`)"
ADD_GATE = "add a gate JSON report (`regress check --report-json gate.json`)"
ADD_BENCH = "add a bench file (`regress bench -o bench.json`)"


@dataclass(frozen=True)
class Needs:
    """A chart left out for want of data, and the input that would add it."""

    what: str


@dataclass(frozen=True)
class Charts:
    """The charts drawn for some inputs, and those left out with what would add them."""

    figures: dict[str, go.Figure]
    """Drawn charts by id, in CHARTS order."""
    missing: dict[str, str]
    """Chart id -> the input that would add it, in CHARTS order."""


def distinct(parts: Sequence[Sequence[str]]) -> list[str]:
    """One legend label per item: its first part, and its further parts only while its label
    is shared with another item's (so two candidates never read the same); numbered last."""
    options = [[p for p in item if p] or ["?"] for item in parts]
    labels = [item[0] for item in options]
    for depth in range(1, max(map(len, options), default=1)):
        counts = Counter(labels)
        shared = [i for i, label in enumerate(labels) if counts[label] > 1]
        if not shared:
            return labels
        for i in shared:
            if depth < len(options[i]):
                labels[i] = f"{labels[i]} · {options[i][depth]}"
    counts, seen = Counter(labels), Counter[str]()
    numbered = []
    for label in labels:
        seen[label] += 1
        numbered.append(f"{label} #{seen[label]}" if counts[label] > 1 else label)
    return numbered


def run_labels(runs: Sequence[AccuracyRun]) -> list[str]:
    """Distinct labels of accuracy runs: run name and model, then short sha256, then time."""
    return distinct([(f"{r.name} ({r.model})", r.sha256[:8], r.created) for r in runs])


def bench_labels(models: Sequence[BenchModel]) -> list[str]:
    """Distinct labels of bench models: model, then quantization, short sha256, then time."""
    return distinct([(m.model, m.quantization, m.sha256[:8], m.created) for m in models])


def comparison_labels(comparisons: Sequence[dict[str, Any]]) -> list[str]:
    """Distinct labels of gate reports: candidate vs baseline, then the candidate's short
    sha256, then its time."""
    return distinct(
        [
            (
                f"{c['candidate']['run']} ({c['candidate']['model']}) vs {c['baseline']['run']}",
                c["candidate"]["sha256"][:8],
                c["candidate"]["created"],
            )
            for c in comparisons
        ]
    )


def accuracy_by_task(runs: Sequence[AccuracyRun]) -> go.Figure | Needs:
    """Accuracy per task, one bar group per run, 95% Wilson intervals as error bars."""
    if not runs:
        return Needs(ADD_RUN)
    fig = go.Figure()
    for run, label in zip(runs, run_labels(runs), strict=True):
        fig.add_bar(
            name=label,
            x=[t.task for t in run.tasks],
            y=[t.accuracy for t in run.tasks],
            error_y={
                "type": "data",
                "symmetric": False,
                "array": [t.high - t.accuracy for t in run.tasks],
                "arrayminus": [t.accuracy - t.low for t in run.tasks],
            },
            customdata=[[t.n, t.low, t.high] for t in run.tasks],
            hovertemplate="%{x}: %{y:.1%} [%{customdata[1]:.1%}, %{customdata[2]:.1%}], "
            "n=%{customdata[0]}<extra>%{fullData.name}</extra>",
        )
    fig.update_layout(title="Accuracy by task (95% Wilson intervals)", barmode="group")
    fig.update_yaxes(title="accuracy", range=[0, 1], tickformat=PERCENT)
    return fig


def _plotted(units: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The units of a gate report with a measured change and interval."""
    return [u for u in units if u.get("delta") is not None and u.get("ci")]


def _kind(unit: dict[str, Any]) -> str:
    """The panel a unit is drawn in: perplexity units change relatively, the rest in points."""
    return "perplexity" if unit.get("kind") == "perplexity" else "points"


_PANELS = {
    "points": ("accuracy and score units", "candidate minus baseline (points)"),
    "perplexity": ("perplexity units", "perplexity change (% of the baseline's)"),
}
"""Panel -> (subplot title, x axis title)."""


def gate_units(comparisons: Sequence[dict[str, Any]]) -> go.Figure | Needs:
    """Each gated unit's change with its 95% interval and its threshold, in the Markdown
    report's units: percentage points for accuracy and score units, percent for perplexity
    units (a relative change, whose bad side is an increase), each kind in its own panel."""
    if not comparisons:
        return Needs(ADD_GATE)
    kinds = {_kind(u) for c in comparisons for u in _plotted(c["units"])}
    if not kinds:
        return Needs("add a gate JSON report with a measured unit (the ones given have none)")
    panels = [k for k in ("points", "perplexity") if k in kinds]
    fig = make_subplots(
        rows=len(panels),
        cols=1,
        vertical_spacing=0.2,
        subplot_titles=[_PANELS[k][0] for k in panels] if len(panels) > 1 else None,
    )
    for i, (comp, label) in enumerate(
        zip(comparisons, comparison_labels(comparisons), strict=True)
    ):
        for row, kind in enumerate(panels, start=1):
            units = [u for u in _plotted(comp["units"]) if _kind(u) == kind]
            if units:
                _gate_traces(fig, units, f"{label}: {comp['verdict']}", kind, i, row)
    for row, kind in enumerate(panels, start=1):
        # Zero (no change) always in view, so a unit's distance from it reads at a glance.
        xs = [0.0, *(x for t in fig.data if t.xaxis == _axis("x", row) for x in _extent(t))]
        pad = 0.05 * (max(xs) - min(xs)) or 1.0
        fig.update_xaxes(
            title=_PANELS[kind][1],
            range=[min(xs) - pad, max(xs) + pad],
            zeroline=True,
            zerolinecolor="#444",
            row=row,
            col=1,
        )
    fig.update_layout(
        title="Gate: each unit's change with its 95% interval (red mark: its threshold)",
        # Each gate report on its own row within a unit's band, not drawn over the others.
        scattermode="group",
        scattergap=0.3,
    )
    return fig


def _axis(letter: str, row: int) -> str:
    """The id plotly gives a subplot row's axis in its traces: x, x2, ..."""
    return letter if row == 1 else f"{letter}{row}"


def _extent(trace: Any) -> list[float]:
    """A gate trace's x values with their error bars' ends."""
    error = trace.error_x
    plus = error.array if error and error.array is not None else [0.0] * len(trace.x)
    minus = error.arrayminus if error and error.arrayminus is not None else plus
    return [
        *(x + e for x, e in zip(trace.x, plus, strict=True)),
        *(x - e for x, e in zip(trace.x, minus, strict=True)),
    ]


def _gate_traces(
    fig: go.Figure, units: list[dict[str, Any]], label: str, kind: str, i: int, row: int
) -> None:
    """One comparison's units in one panel: the changes, then the thresholds they face."""
    unit = "pts" if kind == "points" else "%"
    # A drop is bad for accuracy (threshold below zero), an increase for perplexity.
    side = -1 if kind == "points" else 1
    fig.add_scatter(
        name=label,
        legendgroup=label,
        showlegend=row == 1,
        mode="markers",
        orientation="h",
        offsetgroup=str(i),
        marker={"size": 10, "color": _color(i)},
        x=[u["delta"] * POINTS for u in units],
        y=[u["name"] for u in units],
        error_x={
            "type": "data",
            "symmetric": False,
            "array": [(u["ci"][1] - u["delta"]) * POINTS for u in units],
            "arrayminus": [(u["delta"] - u["ci"][0]) * POINTS for u in units],
        },
        customdata=[[u["ci"][0] * POINTS, u["ci"][1] * POINTS] for u in units],
        text=[_literal(f"{u['verdict']}: {u['reason']}") for u in units],
        hovertemplate=f"%{{y}}: %{{x:+.1f}} {unit} [%{{customdata[0]:+.1f}}, "
        "%{customdata[1]:+.1f}]<br>%{text}<extra></extra>",
        row=row,
        col=1,
    )
    fig.add_scatter(
        name=f"{label}: threshold",
        legendgroup=label,
        showlegend=False,
        mode="markers",
        orientation="h",
        offsetgroup=str(i),
        marker={"symbol": "line-ns-open", "size": 22, "line": {"width": 2}, "color": "firebrick"},
        x=[side * u["threshold"] * POINTS for u in units],
        y=[u["name"] for u in units],
        hovertemplate=f"%{{y}}: threshold %{{x:+.1f}} {unit}<extra></extra>",
        row=row,
        col=1,
    )


def flips_by_margin(runs: Sequence[AccuracyRun], bins: int = 5) -> go.Figure | Needs:
    """Against the first run: the share of answers that flipped, by the baseline's margin
    (top-1 minus top-2 log-likelihood), in equal-count bins."""
    labels = run_labels(runs)
    baseline = runs[0] if runs else None
    others = [(i, r) for i, r in enumerate(runs) if i and r.sha256 != runs[0].sha256]
    if baseline is None or not others:
        return Needs("add stored runs of two model files (the first one given is the baseline)")
    fig = go.Figure()
    for i, other in others:
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
        groups = [rows[k : k + size] for k in range(0, len(rows), size)]
        x = [f"{g[0][0]:.2f}-{g[-1][0]:.2f}" for g in groups]
        for sign, outcome in ((1, "regressed"), (-1, "improved")):
            fig.add_bar(
                name=f"{labels[i]}: {outcome}",
                # the run's colour, as in the other charts; its improvements paler
                marker={"color": _color(i), "opacity": 1 if sign > 0 else 0.45},
                x=x,
                y=[sum(1 for _, d in g if d == sign) / len(g) for g in groups],
                customdata=[len(g) for g in groups],
                hovertemplate="margin %{x}: %{y:.1%} of %{customdata}<extra>%{fullData.name}"
                "</extra>",
            )
    if not fig.data:
        return Needs("add stored runs of two model files that share multiple-choice examples")
    fig.update_layout(title=f"Answers flipped vs {labels[0]}, by its margin", barmode="group")
    fig.update_xaxes(title="baseline margin (log-likelihood, equal-count bins)")
    fig.update_yaxes(title="share of examples", tickformat=PERCENT)
    return fig


def reliability(runs: Sequence[AccuracyRun], bins: int = BINS) -> go.Figure | Needs:
    """Reliability diagram of each run's multiple-choice answers: accuracy against confidence
    (the answer's probability over the choices) in equal-width bins, the diagonal as ideal."""
    if not runs:
        return Needs(ADD_RUN)
    fig = go.Figure()
    for i, (run, label) in enumerate(zip(runs, run_labels(runs), strict=True)):
        records = [r for recs in run.run.records.values() for r in recs]
        points = [b for b in reliability_diagram(records, bins) if b.n]
        if not points:
            continue
        fig.add_scatter(
            name=label,
            x=[b.confidence for b in points],
            y=[b.accuracy for b in points],
            mode="lines+markers",
            marker={"size": [6 + 14 * math.sqrt(b.n / max(p.n for p in points)) for b in points]},
            line={"color": _color(i)},
            cliponaxis=False,  # a bin of accuracy 0 or 1 sits on the axis' edge
            customdata=[[b.lower, b.upper, b.n] for b in points],
            hovertemplate="confidence %{customdata[0]:.1f}-%{customdata[1]:.1f}: mean %{x:.3f}, "
            "accuracy %{y:.3f}, n=%{customdata[2]}<extra>%{fullData.name}</extra>",
        )
    if not fig.data:
        return Needs("add a run with multiple-choice tasks (the runs given have none)")
    fig.add_scatter(
        x=[0, 1], y=[0, 1], mode="lines", name="calibrated", line={"dash": "dot", "color": "grey"}
    )
    fig.update_layout(title=f"Reliability ({bins} equal-width confidence bins; size ~ n)")
    fig.update_xaxes(title="confidence (probability of the chosen answer)", range=[0, 1])
    fig.update_yaxes(title="accuracy", range=[0, 1])
    return fig


def latency_distributions(models: Sequence[BenchModel]) -> go.Figure | Needs:
    """Per-request TTFT, TPOT and end-to-end latency, one box per model."""
    measured = [m for m in models if m.ttft_ms or m.tpot_ms or m.e2el_ms]
    if not measured:
        return Needs(ADD_BENCH if not models else "add a bench file with requests (`-n` > 0)")
    fig = make_subplots(rows=1, cols=3, subplot_titles=("TTFT", "TPOT", "E2E latency"))
    for i, (m, label) in enumerate(zip(measured, bench_labels(measured), strict=True)):
        for col, values in enumerate((m.ttft_ms, m.tpot_ms, m.e2el_ms), start=1):
            fig.add_box(
                y=list(values),
                name=label,
                legendgroup=label,
                showlegend=col == 1,
                marker_color=_color(i),
                boxpoints="all",
                jitter=0.4,
                pointpos=0,
                row=1,
                col=col,
            )
    fig.update_layout(title="Request latency (ms), per request")
    fig.update_xaxes(showticklabels=False)  # the legend names the boxes; long names overlap
    ms = [v for m in measured for vs in (m.ttft_ms, m.tpot_ms, m.e2el_ms) for v in vs if v > 0]
    fig.update_yaxes(title="ms", type="log", tickvals=log_ticks(ms), tickformat=",~r")
    return fig


def log_ticks(values: Sequence[float]) -> list[float]:
    """Ticks of a log axis over `values`: 1, 2 and 5 times each power of ten within their
    range (the decades alone beyond two decades), so no minor tick gets a label of its own
    (plotly's own labelled 4 3 2 1000 9 8 ...) and a range inside one decade still has two."""
    if not values:
        return []
    low, high = math.floor(math.log10(min(values))), math.ceil(math.log10(max(values)))
    steps = (1,) if high - low > 2 else (1, 2, 5)
    return [m * 10.0**e for e in range(low, high + 1) for m in steps]


def joined_runs(inputs: Inputs) -> list[tuple[AccuracyRun, BenchModel]]:
    """Accuracy runs and bench results of the same model file (by sha256), latest bench."""
    bench = {m.sha256: m for m in sorted(inputs.bench, key=lambda m: m.created)}
    return [(run, bench[run.sha256]) for run in inputs.accuracy if run.sha256 in bench]


def _tradeoff(inputs: Inputs, title: str, x_of: Any, x_title: str) -> go.Figure | Needs:
    joined = joined_runs(inputs)
    if not joined:
        if not inputs.bench:
            return Needs(ADD_BENCH)
        return Needs("add a stored run and a bench file of the same model file (same sha256)")
    fig = go.Figure()
    labels = run_labels([run for run, _ in joined])
    for i, ((run, bench), label) in enumerate(zip(joined, labels, strict=True)):
        fig.add_scatter(
            x=[x_of(bench)],
            y=[run.accuracy],
            mode="markers+text",
            name=label,
            text=[run.model],
            textposition="top center",
            cliponaxis=False,  # a point at the edge keeps its whole label
            marker={"size": 14, "color": _color(i)},
            # plotly reads a hovertemplate as markup and %{...} as fields: the names are data
            hovertemplate=_literal(f"{run.name} · {run.model} {run.quantization}")
            + f"<br>sha256 {_literal(run.sha256[:12])}<br>{x_title}: %{{x:.1f}}<br>"
            "accuracy: %{y:.1%}<extra></extra>",
        )
    fig.update_layout(title=title)
    fig.update_xaxes(title=x_title)
    fig.update_yaxes(title="accuracy (all scored examples)", tickformat=PERCENT)
    return fig


def accuracy_vs_latency(inputs: Inputs) -> go.Figure | Needs:
    """Accuracy against median end-to-end request latency."""
    return _tradeoff(
        inputs, "Accuracy vs latency", lambda b: b.e2el_p50 or math.nan, "E2E latency p50 (ms)"
    )


def accuracy_vs_memory(inputs: Inputs) -> go.Figure | Needs:
    """Accuracy against peak resident memory."""
    return _tradeoff(
        inputs, "Accuracy vs memory", lambda b: b.peak_rss_bytes / MIB, "peak RSS (MiB)"
    )


def resources_over_time(models: Sequence[BenchModel]) -> go.Figure | Needs:
    """RSS and CPU use over each model's bench, from the 10 ms sampler."""
    sampled = [m for m in models if m.timeline]
    if not sampled:
        return Needs(ADD_BENCH if not models else "add a bench file with resource samples")
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, subplot_titles=("RSS", "CPU"))
    for i, (m, label) in enumerate(zip(sampled, bench_labels(sampled), strict=True)):
        t, rss, cpu = _thinned(m.timeline)
        style = {"legendgroup": label, "line": {"color": _color(i)}, "mode": "lines"}
        fig.add_scatter(x=t, y=rss, name=label, row=1, col=1, **style)
        fig.add_scatter(x=t, y=cpu, name=label, showlegend=False, row=2, col=1, **style)
    fig.update_layout(title="Resource usage over time")
    fig.update_yaxes(title="MiB", row=1, col=1)
    fig.update_yaxes(title="% of one core (0.2 s mean)", row=2, col=1)
    fig.update_xaxes(title="seconds since the model started loading", row=2, col=1)
    return fig


def radar(inputs: Inputs) -> go.Figure | Needs:
    """Models on common axes, each scaled to the best model (1 = best on that axis)."""
    models = list({m.sha256: m for m in inputs.bench}.values())
    if not models:
        return Needs(ADD_BENCH)
    accuracy = {r.sha256: r.accuracy for r in inputs.accuracy}
    axes: list[tuple[str, Any, bool]] = [
        ("prompt t/s", lambda m: m.rate("pp"), True),
        ("generation t/s", lambda m: m.rate("tg"), True),
        ("fast first token", lambda m: m.ttft_p50, False),
        ("small memory", lambda m: m.peak_rss_bytes, False),
    ]
    if any(m.sha256 in accuracy for m in models):
        axes.insert(0, ("accuracy", lambda m: accuracy.get(m.sha256, math.nan), True))
    fig = go.Figure()
    for i, (m, label) in enumerate(zip(models, bench_labels(models), strict=True)):
        scaled, raw = [], []
        for _, value_of, higher in axes:
            values = [value_of(o) for o in models]
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
            name=label,
            fill="toself",
            customdata=[*raw, raw[0]],
            line={"color": _color(i)},
            hovertemplate="%{theta}: %{customdata:.4g} (%{r:.2f} of best)<extra></extra>",
        )
    fig.update_layout(title="Models compared (1 = best of these models)")
    fig.update_polars(radialaxis={"range": [0, 1]})
    return fig


def history(inputs: Inputs) -> go.Figure | Needs:
    """The gate's history when a history file is given (its own chart, as `regress history`
    draws it); else accuracy over time of the stored runs of one suite, one line per model
    file (runs of different models are not one series), and generation speed over time, one
    line per model; only suites and models with two or more points (one point is no history)."""
    if inputs.history:
        return history_figure(inputs.history)
    accuracy = []
    for suite in sorted({r.run.manifest.suite_name for r in inputs.accuracy}):
        runs = sorted(
            (r for r in inputs.accuracy if r.run.manifest.suite_name == suite),
            key=lambda r: _utc(r.created),
        )
        if len(runs) > 1:
            for sha in dict.fromkeys(r.sha256 for r in runs):
                same = [r for r in runs if r.sha256 == sha]
                accuracy.append((f"suite {suite}: {same[0].model} {sha[:8]}", same))
    speed = []
    for model in sorted({m.model for m in inputs.bench}):
        benches = sorted((m for m in inputs.bench if m.model == model), key=lambda m: m.created)
        if len(benches) > 1:
            speed.append((f"{model} (bench)", benches))
    if not (accuracy or speed):
        return Needs(
            "add a history file (`regress check --record-history`), two or more runs of one "
            "suite, or bench files of one model over time"
        )
    panels = [t for t, series in (("accuracy", accuracy), ("generation tokens/s", speed)) if series]
    fig = make_subplots(rows=len(panels), cols=1, shared_xaxes=True, subplot_titles=panels)
    for name, runs in accuracy:
        fig.add_scatter(
            x=[_utc(r.created) for r in runs],
            y=[r.accuracy for r in runs],
            text=run_labels(runs),
            mode="lines+markers",
            name=name,
            hovertemplate="%{text}<br>%{x}: %{y:.1%}<extra></extra>",
            row=1,
            col=1,
        )
    if accuracy:
        fig.update_yaxes(tickformat=PERCENT, row=1, col=1)
    for name, benches in speed:
        fig.add_scatter(
            x=[_utc(m.created) for m in benches],
            y=[m.rate("tg") for m in benches],
            text=bench_labels(benches),
            mode="lines+markers",
            name=name,
            hovertemplate="%{text}<br>%{x}: %{y:.1f} t/s<extra></extra>",
            row=len(panels),
            col=1,
        )
    fig.update_layout(title="History across stored runs")
    return fig


def tidy(fig: go.Figure) -> go.Figure:
    """Room for every label: axes grow their margins to fit tick labels and titles, and the
    title sits in a margin of its own (plotly's fixed margins clip long labels)."""
    fig.update_xaxes(automargin=True)
    fig.update_yaxes(automargin=True)
    # The palette of the traces coloured by hand, so a run keeps its colour in every chart.
    fig.update_layout(
        margin={"t": 90, "l": 70, "r": 30, "b": 60}, title={"x": 0.01}, colorway=list(_PALETTE)
    )
    return fig


def _thinned(
    timeline: Sequence[tuple[float, int, float]],
) -> tuple[list[float], list[float], list[float]]:
    """Seconds, RSS (MiB) and smoothed CPU % of a resource timeline, at most TIMELINE_POINTS of
    each: the 10 ms sampler gives thousands, which would weigh more than the rest of the page.
    Each kept point stands for a window of samples and carries its peak RSS, so the peak stays."""
    step = max(1, math.ceil(len(timeline) / TIMELINE_POINTS))
    cpu = _smoothed([s[2] for s in timeline])
    return (
        [round(s[0], 3) for s in timeline[::step]],
        [
            round(max(s[1] for s in timeline[k : k + step]) / MIB, 2)
            for k in range(0, len(timeline), step)
        ],
        [round(c, 1) for c in cpu[::step]],
    )


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


_PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2")


def _color(i: int) -> str:
    return _PALETTE[i % len(_PALETTE)]


def build_charts(inputs: Inputs) -> Charts:
    """Every chart of CHARTS that these inputs can draw, and what would add the others."""
    made: dict[str, go.Figure | Needs] = {
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
    return Charts(
        figures={k: tidy(v) for k, v in made.items() if isinstance(v, go.Figure)},
        missing={k: v.what for k, v in made.items() if isinstance(v, Needs)},
    )
