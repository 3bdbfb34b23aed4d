"""`regress init`: a starting policy and the gate's workflows, written into a repository."""

from __future__ import annotations

from pathlib import Path

import click

from regress.checks import InitOptions, init_repository
from regress.cli.common import handles_errors


@click.command()
@click.argument(
    "path", type=click.Path(path_type=Path, file_okay=False), default=Path("."), required=False
)
@click.option("--force", is_flag=True, help="Replace policy.yaml and the workflows if they exist.")
@handles_errors
def init(path: Path, force: bool) -> None:
    """Write a starting policy and the gate's workflows into the git repository at PATH.

    \b
    policy.yaml, and .github/workflows/accuracy-gate.yml (the PR gate), comment.yml (its PR
    comment) and drift.yml (weekly drift), at the repository's root. Nothing is asked: the
    model (a committed .gguf, else the packaged smollm2-135m), the baseline store and name
    (an existing baselines/ folder, else baselines/main), and the regress the workflows pin
    (where pip installed this one from) are read from the repository and the install. Files
    that exist are refused (exit 2) unless --force. Then follow docs/ci.md.

    \b
    Example:
      regress init && regress baseline create --name main -m smollm2-135m -t arc_easy
    """
    result = init_repository(InitOptions(path=path, force=force))
    layout = result.layout
    for written in result.written:
        click.echo(f"wrote {written.relative_to(layout.root)}")
    click.echo(f"model: {layout.model}; baseline: {layout.store}/{layout.baseline}")
    click.echo(f"workflows use {result.source.action}")
    if result.source.is_placeholder:
        click.echo(
            "  (regress was not installed from a GitHub URL: replace YOUR-ORG/regress in "
            ".github/workflows/ with where it is hosted)"
        )
    if not (layout.root / layout.store / layout.baseline / "manifest.json").exists():
        click.echo(
            f"next: regress baseline create --name {layout.baseline} --store {layout.store} "
            f"-m {layout.model} -t TASKS"
        )
    click.echo(f"then commit, push to {layout.default_branch}, and open a pull request")
