"""Markdown tables, written one way for every report."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def table_row(cells: Sequence[str]) -> str:
    """One table row: `| a | b |`."""
    return "| " + " | ".join(cells) + " |"


def markdown_table(
    header: Sequence[str], rows: Iterable[Sequence[str]], align: Sequence[str]
) -> str:
    """A whole table: the header, the alignment row (`---:` right, `---` left), the rows."""
    return "\n".join([table_row(header), table_row(align), *(table_row(r) for r in rows)])
