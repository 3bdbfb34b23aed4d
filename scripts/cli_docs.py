"""Write docs/cli.md from the commands' own `--help`; `--check` exits 1 when it is stale.

python scripts/cli_docs.py          # regenerate
python scripts/cli_docs.py --check  # what tests/test_docs.py runs
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from regress.cli import cli

OUT = Path(__file__).resolve().parents[1] / "docs" / "cli.md"
WIDTH = 100


def _help(command: click.Command, path: list[str], parent: click.Context | None) -> list[str]:
    ctx = click.Context(
        command, info_name=path[-1], parent=parent, terminal_width=WIDTH, max_content_width=WIDTH
    )
    title = " ".join(path)
    lines = [f"## `{title}`", "", "```text", command.get_help(ctx).rstrip(), "```", ""]
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None:
                lines += _help(sub, [*path, name], ctx)
    return lines


def render() -> str:
    """The whole page: every command and subcommand's help, in the order `--help` lists them."""
    head = [
        "# Command reference",
        "",
        "Generated from each command's `--help` by `python scripts/cli_docs.py`; a test fails",
        "when this page and the commands differ.",
        "",
    ]
    return "\n".join(head + _help(cli, ["regress"], None)).rstrip() + "\n"


def main() -> None:
    text = render()
    if sys.argv[1:] == ["--check"]:
        if not OUT.exists() or OUT.read_text(encoding="utf-8") != text:
            sys.exit(f"{OUT} is stale: run python scripts/cli_docs.py")
        return
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
