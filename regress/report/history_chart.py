"""The gate's history drawn: one panel per unit, the candidate's accuracy at each gate run with
its 95% band and markers coloured by the unit's verdict; a change of fingerprint (runtime or
scoring), baseline or suite starts a new segment, not joined to the one before, under a dashed
line. `regress history`'s page and `regress report`'s history chart both draw it."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from regress.report.history import HistoryEntry, UnitPoint

PERCENT = ".2~%"
"""Tick labels of a share: as many decimals as the ticks need, so a range of a few points
never labels two ticks alike (".0%" wrote 58%, 58%, 57%), and none to spare (20%, not 20.00%)."""

COLOURS = {
    "PASS": "#2e7d32",
    "REGRESSION": "#c62828",
    "INCONCLUSIVE": "#ef8f00",
    "ERROR": "#6a1b9a",
}


def changed(entries: Sequence[HistoryEntry]) -> list[list[str]]:
    """Per run, what differs from the run before: fingerprint, baseline, suite."""
    found: list[list[str]] = [[]]
    for before, after in zip(entries, entries[1:], strict=False):
        what = [
            name
            for name, a, b in (
                ("fingerprint", before.fingerprint, after.fingerprint),
                ("baseline", before.baseline_id, after.baseline_id),
                ("suite", before.suite, after.suite),
            )
            if a != b
        ]
        found.append(what)
    return found


def history_figure(entries: Sequence[HistoryEntry]) -> go.Figure:
    """One row per unit (creep-guard rows included), x the runs in order."""
    names = list(dict.fromkeys(u.name for e in entries for u in e.units))
    fig = make_subplots(rows=len(names), cols=1, shared_xaxes=True, subplot_titles=names)
    labels = [_label(i, e) for i, e in enumerate(entries)]
    starts = [i for i, what in enumerate(changed(entries)) if what]
    segments = list(zip([0, *starts], [*starts, len(entries)], strict=True))
    for row, name in enumerate(names, 1):
        for first, last in segments:
            points = [
                (labels[i], e, u)
                for i, e in enumerate(entries[first:last], first)
                for u in e.units
                if u.name == name
            ]
            if points:
                _segment(fig, row, points, show=row == 1 and first == 0)
        fig.update_yaxes(tickformat=PERCENT, row=row, col=1)
    for i in starts:
        fig.add_vline(x=labels[i], line_dash="dash", line_color="#888")
    fig.update_layout(
        title="Accuracy of each gate run (95% band); a dashed line: fingerprint, baseline or "
        "suite changed, and the points are not joined across it",
        showlegend=False,
    )
    fig.update_xaxes(type="category")
    return fig


def _segment(
    fig: go.Figure, row: int, points: list[tuple[str, HistoryEntry, UnitPoint]], show: bool
) -> None:
    x = [label for label, _, _ in points]
    y = [u.candidate for _, _, u in points]
    lows = [u.candidate_ci[0] if u.candidate_ci else u.candidate for _, _, u in points]
    highs = [u.candidate_ci[1] if u.candidate_ci else u.candidate for _, _, u in points]
    if len(points) > 1:  # one point has no band to fill: its error bar shows the interval
        fig.add_scatter(
            x=x + x[::-1],
            y=highs + lows[::-1],
            mode="lines",
            fill="toself",
            fillcolor="rgba(70,110,200,0.15)",
            line={"width": 0},
            hoverinfo="skip",
            row=row,
            col=1,
        )
    fig.add_scatter(
        x=x,
        y=y,
        error_y={
            "type": "data",
            "array": [
                h - v if h is not None and v is not None else 0
                for h, v in zip(highs, y, strict=True)
            ],
            "arrayminus": [
                v - lo if lo is not None and v is not None else 0
                for lo, v in zip(lows, y, strict=True)
            ],
            "color": "#9aa8c8",
        },
        mode="lines+markers",
        line={"color": "#466ec8"},
        marker={"size": 10, "color": [COLOURS.get(u.verdict, "#888") for _, _, u in points]},
        text=[f"{e.candidate}: {u.verdict} (gate {e.verdict})" for _, e, u in points],
        hovertemplate="%{x}<br>%{text}<br>accuracy %{y:.1%}<extra></extra>",
        showlegend=show,
        row=row,
        col=1,
    )


def _label(i: int, entry: HistoryEntry) -> str:
    commit = (entry.commit or "no commit")[:7]
    return f"{i + 1}. {commit} {entry.date[:10]}"
