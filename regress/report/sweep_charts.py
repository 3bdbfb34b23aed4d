"""A sweep's three trade-off charts: accuracy vs latency, perplexity vs memory, KLD vs size.

One point per distinct configuration (the same tensors once), with its uncertainty as error
bars; the hover names the configuration, its llama.cpp settings and its Pareto standing over
the analysis's objectives. The non-dominated points of each chart's own two axes are drawn
as a line and larger markers (the front as that chart sees it).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import plotly.graph_objects as go

from regress.sweep.frontier import Frontier
from regress.sweep.pareto import Direction, non_dominated
from regress.sweep.results import ConfigResult, SweepResults

SWEEP_CHARTS = ("accuracy_vs_latency", "ppl_vs_memory", "kld_vs_size")
"""Chart ids of one sweep, in page order."""

Axis = tuple[str, Direction, Callable[[ConfigResult], float], Callable[[ConfigResult], float]]
"""(title, direction, value, error bar half-width)."""

_LATENCY: Axis = (
    "ms per generated token (1000 / tg t/s; ± 1 sd)",
    Direction.MIN,
    lambda r: r.speed.latency_ms,
    lambda r: 1000.0 * r.speed.tg_sd / r.speed.tg_ts**2,
)
_ACCURACY: Axis = (
    "accuracy (95% Wilson interval)",
    Direction.MAX,
    lambda r: r.overall.accuracy,
    lambda r: 0.0,  # asymmetric: drawn from low/high below
)
_PPL: Axis = (
    "WikiText-2 perplexity (± se)",
    Direction.MIN,
    lambda r: r.divergence.ppl,
    lambda r: r.divergence.ppl_se,
)
_MEMORY: Axis = (
    "peak RSS (MiB)",
    Direction.MIN,
    lambda r: r.speed.peak_rss_bytes / 2**20,
    lambda r: 0.0,
)
_KLD: Axis = (
    "mean KL divergence vs source (± se)",
    Direction.MIN,
    lambda r: r.divergence.kld_mean,
    lambda r: r.divergence.kld_se,
)
_SIZE: Axis = ("file size (MiB)", Direction.MIN, lambda r: r.size_bytes / 2**20, lambda r: 0.0)


def _hover(r: ConfigResult, frontier: Frontier) -> str:
    settings = r.settings
    parts = [f"<b>{r.name}</b> ({r.quantization})"]
    if settings is not None:
        parts.append(
            f"type {settings.type}, pure {settings.pure}, "
            f"output {settings.output_tensor_type or '-'}, "
            f"embedding {settings.token_embedding_type or '-'}"
        )
    else:
        parts.append("the source model")
    parts.append(
        f"Pareto ({', '.join(o.name for o in frontier.objectives)}): {frontier.status(r.name)}"
    )
    a = r.overall
    parts.append(f"accuracy {a.accuracy:.3f} [{a.low:.3f}, {a.high:.3f}], Δ {a.delta:+.3f}")
    parts.append(
        f"PPL {r.divergence.ppl:.2f}, KLD {r.divergence.kld_mean:.4f}, "
        f"{r.speed.latency_ms:.1f} ms/token, {r.size_bytes / 2**20:.0f} MiB file"
    )
    return "<br>".join(parts)


def _chart(sweep: SweepResults, frontier: Frontier, title: str, x: Axis, y: Axis) -> go.Figure:
    results = [r for r in sweep.results if r.identical_to is None]
    xs = np.array([x[2](r) for r in results])
    ys = np.array([y[2](r) for r in results])
    front = non_dominated(np.column_stack([xs, ys]), (x[1], y[1]))
    if y is _ACCURACY:
        error_y = {
            "type": "data",
            "symmetric": False,
            "array": [r.overall.high - r.overall.accuracy for r in results],
            "arrayminus": [r.overall.accuracy - r.overall.low for r in results],
        }
    else:
        error_y = {"type": "data", "array": [y[3](r) for r in results]}
    order = np.argsort(xs[front])
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=xs[front][order],
            y=ys[front][order],
            mode="lines",
            line={"color": "#d62728", "dash": "dot"},
            name="front (these two axes)",
            hoverinfo="skip",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=xs,
            y=ys,
            mode="markers+text",
            text=[r.name for r in results],
            textposition="top center",
            cliponaxis=False,  # a configuration at the edge keeps its whole name
            marker={
                "size": [14 if f else 8 for f in front],
                "color": ["#d62728" if f else "#1f77b4" for f in front],
                "symbol": ["star" if f else "circle" for f in front],
            },
            error_x={"type": "data", "array": [x[3](r) for r in results]},
            error_y=error_y,
            hovertext=[_hover(r, frontier) for r in results],
            hoverinfo="text",
            name="configurations",
        )
    )
    fig.update_layout(
        title=f"{sweep.model}: {title}", xaxis_title=x[0], yaxis_title=y[0], showlegend=True
    )
    return fig


def sweep_charts(sweep: SweepResults, frontier: Frontier) -> dict[str, go.Figure]:
    """The three charts of one sweep, by id."""
    return {
        "accuracy_vs_latency": _chart(sweep, frontier, "accuracy vs latency", _LATENCY, _ACCURACY),
        "ppl_vs_memory": _chart(sweep, frontier, "perplexity vs memory", _MEMORY, _PPL),
        "kld_vs_size": _chart(sweep, frontier, "KL divergence vs file size", _SIZE, _KLD),
    }
