"""The HTML report: one self-contained page (plotly's JavaScript inlined, opens offline).

Each chart's figure JSON sits in its own `<script type="application/json" id="fig-<chart>">`
block and is drawn by a few lines of script, so the data can be read back from the file.
"""

from __future__ import annotations

import html
import json

import plotly.io as pio
from plotly.offline import get_plotlyjs

from regress import __version__
from regress.report.charts import CHARTS, build_charts
from regress.report.sources import Inputs
from regress.report.sweep_charts import sweep_charts
from regress.report.sweep_markdown import sweep_table

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1200px; color: #222; }
section { margin: 2rem 0; } .chart { height: 480px; }
table { border-collapse: collapse; } td, th { border: 1px solid #ccc; padding: 4px 8px; }
"""

_DRAW = """
for (const data of document.querySelectorAll('script[type="application/json"]')) {
  const fig = JSON.parse(data.textContent);
  Plotly.newPlot(data.id.replace('fig-', 'chart-'), fig.data, fig.layout, {responsive: true});
}
"""


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


def render_html(inputs: Inputs, title: str = "regress report") -> str:
    """The whole page as a string."""
    charts = build_charts(inputs)
    sections = [_figure_section(chart, charts[chart]) for chart in CHARTS]
    sections += _sweep_sections(inputs)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style>"
        f"<script>{get_plotlyjs()}</script></head><body>"
        f"<h1>{html.escape(title)}</h1><p>regress {__version__}. Inputs:</p>"
        f"{_inputs_table(inputs)}{''.join(sections)}<script>{_DRAW}</script></body></html>\n"
    )


def _figure_section(chart_id: str, figure: object) -> str:
    # `</script` would end the block early and `<!--` change how it ends: no `<` at all then.
    # It only occurs inside JSON strings, where `\\u003c` is the same character.
    data = pio.to_json(figure, validate=True).replace("<", "\\u003c")
    return (
        f'<section><div class="chart" id="chart-{chart_id}"></div>'
        f'<script type="application/json" id="fig-{chart_id}">{data}</script></section>'
    )


def _sweep_sections(inputs: Inputs) -> list[str]:
    """Each sweep's table and three charts (ids sweep<i>-<chart>), after the other charts."""
    sections = []
    for i, (sweep, frontier) in enumerate(inputs.sweeps):
        table = html.escape(sweep_table(sweep, frontier))
        sections.append(f"<section><h2>Sweep of {html.escape(sweep.model)}</h2><pre>{table}</pre>")
        for chart, figure in sweep_charts(sweep, frontier).items():
            sections.append(_figure_section(f"sweep{i}-{chart}", figure))
    return sections


def figure_json(page: str, chart: str) -> dict[str, object]:
    """Read a chart's figure back from a rendered page (for tests and tools)."""
    marker = f'<script type="application/json" id="fig-{chart}">'
    start = page.index(marker) + len(marker)
    return json.loads(page[start : page.index("</script>", start)])
