"""The HTML report: one self-contained page that opens offline.

A verdict card heads the page (the gate reports' verdicts, or what the page holds when there
is none), then one line per chart the inputs cannot draw, saying what input would add it,
then the inputs and the charts drawn. Each chart's figure JSON sits in its own
`<script type="application/json" id="fig-<chart>">` block, drawn by a few lines of script,
so the data can be read back from the file. plotly.js is embedded once, gzip-compressed and
base64-encoded (its minified bundle is most of the page), and unpacked by the browser's
DecompressionStream.
"""

from __future__ import annotations

import base64
import gzip
import html
import json
import re
from collections import Counter
from dataclasses import dataclass
from functools import cache
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio
from plotly.offline import get_plotlyjs, get_plotlyjs_version

from regress import __version__
from regress.report.charts import ADD_GATE, TITLES, build_charts, tidy
from regress.report.sources import Inputs
from regress.report.sweep_charts import sweep_charts
from regress.report.sweep_markdown import sweep_table

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1200px; color: #222;
  padding: 0 1rem; }
section { margin: 2rem 0; } .chart { height: 480px; } .chart.tall { height: 640px; }
table { border-collapse: collapse; } td, th { border: 1px solid #ccc; padding: 4px 8px; }
.verdict-card { border: 2px solid #888; border-left-width: 12px; border-radius: 6px;
  padding: 0.6rem 1.2rem; margin: 1rem 0; background: #f7f7f7; }
.verdict-card .verdict { font-size: 1.8rem; font-weight: 700; margin: 0.2rem 0; }
.verdict-card.PASS { border-color: #2e7d32; background: #edf7ee; }
.verdict-card.REGRESSION { border-color: #c62828; background: #fdecea; }
.verdict-card.INCONCLUSIVE { border-color: #ef8f00; background: #fff5e0; }
.verdict-card.ERROR { border-color: #6a1b9a; background: #f5eafa; }
.left-out li { color: #555; } code { background: #eee; padding: 0 3px; border-radius: 3px; }
#plotly-error { color: #c62828; font-weight: 700; }
"""

_OUTCOMES = {
    "PASS": "passed",
    "REGRESSION": "regressed",
    "INCONCLUSIVE": "inconclusive",
    "ERROR": "errored",
}
_NOTHING_DRAWN = ' data-drawn="0"'
"""A page without charts says so as a drawn one does (tests and tools read it)."""
DECIDING_SHOWN = 3
"""Deciding units a verdict card lists; the rest are counted."""

# Unpack plotly.js, then draw every figure; any failure is written on the page, not hidden.
_DRAW = """
(async () => {
  try {
    const packed = document.getElementById('plotly-js').textContent;
    const bytes = Uint8Array.from(atob(packed), (c) => c.charCodeAt(0));
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
    const plotly = document.createElement('script');
    plotly.textContent = await new Response(stream).text();
    document.head.appendChild(plotly);
    let drawn = 0;
    for (const data of document.querySelectorAll('script[type="application/json"]')) {
      const fig = JSON.parse(data.textContent);
      await Plotly.newPlot(data.id.replace('fig-', 'chart-'), fig.data, fig.layout,
        {responsive: true});
      drawn += 1;
    }
    document.body.dataset.drawn = drawn;
  } catch (error) {
    const note = document.getElementById('plotly-error');
    note.textContent = 'The charts could not be drawn (this browser needs DecompressionStream:'
      + ' Chrome 80, Firefox 113, Safari 16.4 or later): ' + error;
    note.hidden = false;
  }
})();
"""


@dataclass(frozen=True)
class Page:
    """A rendered report: the HTML, and which charts it drew and left out."""

    text: str
    drawn: tuple[str, ...]
    """Ids of the chart blocks on the page (fig-<id>), in page order."""
    left_out: tuple[str, ...]
    """Ids of the charts the inputs could not draw."""


def render_page(inputs: Inputs, title: str = "regress report") -> Page:
    """The whole page, with the charts it drew and those it left out."""
    charts = build_charts(inputs)
    figures = dict(charts.figures)
    for i, (sweep, frontier) in enumerate(inputs.sweeps):
        for chart, figure in sweep_charts(sweep, frontier).items():
            figures[f"sweep{i}-{chart}"] = tidy(figure)
    sections = [figure_section(chart, figures[chart]) for chart in charts.figures]
    sections += _sweep_sections(inputs, figures)
    text = document(
        title,
        f"{cards(inputs)}{_left_out(charts.missing)}",
        f"<p>regress {__version__}. Inputs:</p>{_inputs_table(inputs)}{''.join(sections)}",
    )
    return Page(text, tuple(figures), tuple(charts.missing))


def document(title: str, head: str, body: str, style: str = "") -> str:
    """A self-contained page: the title, `head` (before the note a failed drawing writes),
    `body` (figure sections among it are drawn), and plotly.js embedded when there are any;
    `style` adds CSS."""
    # plotly.js (2 MB) only on a page with a chart to draw.
    drawing = (
        '<script type="application/gzip" id="plotly-js" '
        f'data-plotly-js="{get_plotlyjs_version()}">{_packed_plotly()}</script>'
        f"<script>{_DRAW}</script>"
        if 'type="application/json" id="fig-' in body
        else ""
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{_STYLE}{style}</style></head>"
        f"<body{'' if drawing else _NOTHING_DRAWN}>"
        f"<h1>{html.escape(title)}</h1>{head}"
        '<p id="plotly-error" hidden></p>'
        f"{body}{drawing}</body></html>\n"
    )


def render_html(inputs: Inputs, title: str = "regress report") -> str:
    """The whole page as a string."""
    return render_page(inputs, title).text


@cache
def _packed_plotly() -> str:
    """plotly.js minified, gzip-compressed and base64-encoded: 4.8 MB becomes 2 MB.
    mtime=0 keeps the bytes, and so the page, the same from run to run."""
    return base64.b64encode(gzip.compress(get_plotlyjs().encode(), 9, mtime=0)).decode()


def _row(*cells: object) -> str:
    """One table row; every cell escaped, whatever file it came from."""
    return "<tr>" + "".join(f"<td>{html.escape(str(cell))}</td>" for cell in cells) + "</tr>"


def _inputs_table(inputs: Inputs) -> str:
    rows = [
        *(_row("accuracy run", r.name, r.model, r.sha256[:12], r.created) for r in inputs.accuracy),
        *(
            _row(
                "gate comparison",
                c["verdict"],
                c["candidate"]["model"],
                c["candidate"]["sha256"][:12],
                c["candidate"]["created"],
            )
            for c in inputs.comparisons
        ),
        *(_row("bench", "", m.model, m.sha256[:12], m.created) for m in inputs.bench),
        *(
            _row("sweep", f"{len(s.results)} configurations", s.model, s.source_sha256[:12], "")
            for s, _ in inputs.sweeps
        ),
    ]
    head = "<tr><th>input</th><th>name</th><th>model</th><th>sha256</th><th>created</th></tr>"
    return f"<table>{head}{''.join(rows)}</table>"


def coded(value: str) -> str:
    """Escaped text with `code` spans, as the hints write commands."""
    return re.sub(r"`([^`<]+)`", r"<code>\1</code>", html.escape(value))


def cards(inputs: Inputs) -> str:
    """One verdict card per gate report, or one card saying what the page holds."""
    if inputs.comparisons:
        return "".join(_verdict_card(c, i) for i, c in enumerate(inputs.comparisons))
    held = [
        _count(len(inputs.accuracy), "accuracy run"),
        _count(len(inputs.bench), "benchmarked model"),
        _count(len(inputs.sweeps), "quantization sweep"),
        _count(len(inputs.history), "recorded gate run"),
    ]
    holds = ", ".join(h for h in held if h)
    return (
        '<div class="verdict-card none" id="verdict">'
        '<p class="verdict">No gate verdict</p>'
        f"<p>This page holds {html.escape(holds)}. For a verdict, {coded(ADD_GATE)}.</p></div>"
    )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' if n != 1 else ''}" if n else ""


def _verdict_card(comp: dict[str, Any], i: int) -> str:
    """The `i`th gate report's verdict, who was compared, and the units (or rules) that
    decided it; the first card's id is `verdict`."""
    verdict = comp["verdict"]
    units = comp["units"]
    gated = [u for u in units if u.get("gated", True)]
    counts = Counter(u["verdict"] for u in gated)
    tally = ", ".join(f"{n} {_OUTCOMES.get(v, v)}" for v, n in counts.items())
    cand, base = comp["candidate"], comp["baseline"]
    suite = f", suite {comp['suite']}" if comp.get("suite") else ""
    # As the Markdown's second line: the candidate by its label (its model file), not the
    # run name every candidate shares ("candidate"); a report without a label by its file.
    who = (
        f"<b>{html.escape(cand.get('label') or cand['model'].rsplit('/', 1)[-1])}</b> vs baseline "
        f"<b>{html.escape(base['run'])}</b>{html.escape(suite)}: "
        f"{html.escape(tally or 'no gated unit')} of {len(gated)} gated "
        f"unit{'s' if len(gated) != 1 else ''}."
    )
    reasons = _deciding(comp, gated) if verdict != "PASS" else []
    items = "".join(f"<li>{html.escape(r)}</li>" for r in reasons)
    # The card's colour says the verdict: emoji need a font a headless or minimal system lacks.
    css = verdict if verdict in _OUTCOMES else "other"
    card_id = f"verdict-{i + 1}" if i else "verdict"
    return (
        f'<div class="verdict-card {css}" id="{card_id}" '
        f'data-verdict="{html.escape(verdict)}">'
        f'<p class="verdict">{html.escape(verdict)}</p>'
        f"<p>{who}</p>{f'<ul>{items}</ul>' if items else ''}</div>"
    )


def _deciding(comp: dict[str, Any], gated: list[dict[str, Any]]) -> list[str]:
    """What set a verdict other than PASS: golden sets and failure classes that failed,
    decision gates with the verdict, then the units with it (change in points, as the
    Markdown report; and the reason)."""
    lines = [
        f"golden set {g['task']}: {g.get('reason', 'failed')}"
        for g in comp.get("golden", ())
        if g.get("failed")
    ]
    lines += [
        f"failure rate of {f['failure']} in {f['unit']} rose"
        for f in comp.get("failures", ())
        if f.get("regressed")
    ]
    lines += [
        f"decision gate {r['requirement']}: {r['reason']}"
        for r in comp.get("requirements", ())
        if r.get("verdict") == comp["verdict"]
    ]
    which = [u for u in gated if u["verdict"] == comp["verdict"]]
    min_examples = comp.get("policy", {}).get("min_examples", 0)
    lines += [unit_words(u, min_examples) for u in which[:DECIDING_SHOWN]]
    if len(which) > DECIDING_SHOWN:
        lines.append(f"{len(which) - DECIDING_SHOWN} more unit(s) {comp['verdict']}")
    return lines


def unit_words(u: dict[str, Any], min_examples: int = 0) -> str:
    """A gate report unit's name and verdict in words, as the Markdown report says them: what
    changed, and what its one-sided bound showed or left open."""
    bounds = u.get("bounds") or {}
    if u["verdict"] == "ERROR" or u.get("delta") is None or not bounds:
        return f"{u['name']}: {u['reason']}"
    perplexity = u.get("kind") == "perplexity"
    noun = "increase" if perplexity else "drop"

    def amount(value: float) -> str:
        return f"+{value:.2%}" if perplexity else f"{value * 100:.1f} pts"

    delta = u["delta"]
    if perplexity:
        moved = "rose" if delta > 0 else "fell"
        text = f"{u['name']} {u.get('metric', 'perplexity')} {moved} {abs(delta):.2%}"
    else:
        change = f"{'dropped' if delta < 0 else 'rose'} {abs(delta) * 100:.1f} pts"
        text = f"{u['name']} {change if delta else 'unchanged'}"
        if u.get("b") is not None and u.get("c") is not None and u["verdict"] != "PASS":
            text += f" ({u['b']} broke, {u['c']} fixed)"
    threshold = u["threshold"]
    limit = f"the {f'+{threshold:.2%}' if perplexity else f'{threshold * 100:.1f}-pt'} limit"
    verdict = u["verdict"]
    if verdict == "REGRESSION":
        if bounds.get("at_least") is None:
            return f"{text}, beyond {limit}, and more than chance explains"
        return f"{text}; the {noun} is at least {amount(bounds['at_least'])}, beyond {limit}"
    if verdict == "PASS":
        return f"{text}; the {noun} is at most {amount(bounds['at_most'])}, within {limit}"
    if u.get("n", 0) < min_examples:
        return f"only {u['n']} examples in {u['name']}; {min_examples} needed"
    return f"{text}; the {noun} may be up to {amount(bounds['at_most'])}, more than {limit}"


def _left_out(missing: dict[str, str]) -> str:
    """One line per input that would add charts: the charts, then the input."""
    by_need: dict[str, list[str]] = {}
    for chart, need in missing.items():
        by_need.setdefault(need, []).append(TITLES[chart])
    if not by_need:
        return ""
    lines = "".join(
        f"<li>{html.escape(', '.join(charts))}: {coded(need)}</li>"
        for need, charts in by_need.items()
    )
    return f'<section class="left-out"><h2>Charts not drawn</h2><ul>{lines}</ul></section>'


def figure_section(chart_id: str, figure: go.Figure, height: int | None = None) -> str:
    """A chart's block: its div (`height` pixels tall, else by its rows) and its figure JSON,
    drawn by the page's script."""
    # `</script` would end the block early and `<!--` change how it ends: no `<` at all then.
    # It only occurs inside JSON strings, where `\\u003c` is the same character.
    data = pio.to_json(figure, validate=True).replace("<", "\\u003c")
    # Stacked subplots need more height than one panel, or their labels overlap.
    tall = " tall" if _rows(figure) > 1 else ""
    size = f' style="height: {height}px"' if height else ""
    return (
        f'<section><div class="chart{tall}" id="chart-{chart_id}"{size}></div>'
        f'<script type="application/json" id="fig-{chart_id}">{data}</script></section>'
    )


def _rows(figure: go.Figure) -> int:
    """A figure's subplot rows: its y axes' distinct vertical extents."""
    layout = figure.layout
    return len({tuple(layout[k].domain or (0, 1)) for k in layout if k.startswith("yaxis")})


def _sweep_sections(inputs: Inputs, figures: dict[str, go.Figure]) -> list[str]:
    """Each sweep's table and three charts (ids sweep<i>-<chart>), after the other charts."""
    sections = []
    for i, (sweep, frontier) in enumerate(inputs.sweeps):
        table = html.escape(sweep_table(sweep, frontier))
        sections.append(f"<section><h2>Sweep of {html.escape(sweep.model)}</h2><pre>{table}</pre>")
        prefix = f"sweep{i}-"
        sections += [figure_section(k, f) for k, f in figures.items() if k.startswith(prefix)]
        sections.append("</section>")
    return sections


def figure_json(page: str, chart: str) -> dict[str, object]:
    """Read a chart's figure back from a rendered page (for tests and tools)."""
    marker = f'<script type="application/json" id="fig-{chart}">'
    start = page.index(marker) + len(marker)
    return json.loads(page[start : page.index("</script>", start)])
