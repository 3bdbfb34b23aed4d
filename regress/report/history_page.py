"""`regress history`: the history file drawn as one offline page.

One panel per unit: the candidate's accuracy at each gate run with its 95% band, markers
coloured by the unit's verdict. A change of fingerprint (runtime or scoring), baseline or
suite starts a new segment: points on either side are not joined, and a dashed line says
what changed. A table lists every run.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from regress.report.history import HistoryEntry
from regress.report.history_chart import changed, history_figure
from regress.report.html import document, figure_section

CHART = "history"


def history_page(entries: Sequence[HistoryEntry], title: str = "regress history") -> str:
    """The page: the chart (when there is a run) and the table of runs."""
    if not entries:
        return document(title, "<p>The history has no runs yet.</p>", "")
    rows = "".join(_row(i, e) for i, e in enumerate(entries, 1))
    table = (
        "<table><tr><th>#</th><th>commit</th><th>date</th><th>baseline</th><th>candidate</th>"
        f"<th>runtime</th><th>verdict</th><th>tokens</th></tr>{rows}</table>"
    )
    changes = "".join(
        f"<li>run {i + 1}: {html.escape(', '.join(what))} changed</li>"
        for i, what in enumerate(changed(entries))
        if what
    )
    notes = f"<ul>{changes}</ul>" if changes else ""
    return document(title, "", figure_section(CHART, history_figure(entries)) + notes + table)


def _row(number: int, entry: HistoryEntry) -> str:
    cells = (
        number,
        entry.commit or "",
        entry.date,
        entry.baseline,
        entry.candidate,
        entry.runtime,
        entry.verdict,
        f"{entry.tokens:,}",
    )
    return "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>"
