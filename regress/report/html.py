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


def _inputs_table(inputs: Inputs) -> str:
    rows = [
        *(
            f"<tr><td>accuracy run</td><td>{html.escape(r.name)}</td><td>{html.escape(r.model)}"
            f"</td><td>{r.sha256[:12]}</td><td>{html.escape(r.created)}</td></tr>"
            for r in inputs.accuracy
        ),
        *(
            f"<tr><td>gate comparison</td><td>{html.escape(str(c['verdict']))}</td>"
            f"<td>{html.escape(c['candidate']['model'])}</td><td>{c['candidate']['sha256'][:12]}"
            f"</td><td>{html.escape(c['candidate']['created'])}</td></tr>"
            for c in inputs.comparisons
        ),
        *(
            f"<tr><td>bench</td><td></td><td>{html.escape(m.model)}</td><td>{m.sha256[:12]}"
            f"</td><td>{html.escape(m.created)}</td></tr>"
            for m in inputs.bench
        ),
    ]
    head = "<tr><th>input</th><th>name</th><th>model</th><th>sha256</th><th>created</th></tr>"
    return f"<table>{head}{''.join(rows)}</table>"


def render_html(inputs: Inputs, title: str = "regress report") -> str:
    """The whole page as a string."""
    charts = build_charts(inputs)
    sections = []
    for chart in CHARTS:
        # `</` inside a script block would end it early; JSON allows the escaped form.
        figure = pio.to_json(charts[chart], validate=True).replace("</", "<\\/")
        sections.append(
            f'<section><div class="chart" id="chart-{chart}"></div>'
            f'<script type="application/json" id="fig-{chart}">{figure}</script></section>'
        )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style>"
        f"<script>{get_plotlyjs()}</script></head><body>"
        f"<h1>{html.escape(title)}</h1><p>regress {__version__}. Inputs:</p>"
        f"{_inputs_table(inputs)}{''.join(sections)}<script>{_DRAW}</script></body></html>\n"
    )


def figure_json(page: str, chart: str) -> dict[str, object]:
    """Read a chart's figure back from a rendered page (for tests and tools)."""
    marker = f'<script type="application/json" id="fig-{chart}">'
    start = page.index(marker) + len(marker)
    return json.loads(page[start : page.index("</script>", start)])
