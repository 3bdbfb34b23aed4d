"""`regress judge ...`: a blind sample of a judgements file for people, then the judge's audit."""

from __future__ import annotations

import json
from pathlib import Path

import click

from regress.cli.common import handles_errors, write_report
from regress.gate.judge_audit import (
    audit,
    read_judgements,
    read_labels,
    sample,
    write_sample,
)
from regress.report.judge_audit import render_audit

judgements_option = click.option(
    "--judgements",
    "judgements_path",
    type=click.Path(path_type=Path, dir_okay=False),
    required=True,
    help="The judgements file `regress check` wrote with a judge: policy block.",
)


@click.group()
def judge() -> None:
    """Audit an LLM judge against people: a blind sample to label, then agreement and win rate.

    \b
    Example:
      regress judge sample --judgements judgements.jsonl -n 100 -o to_label.jsonl
      (people fill in each line's "preferred": "A", "B" or "tie")
      regress judge audit to_label.jsonl --judgements judgements.jsonl
    """


@judge.command("sample")
@judgements_option
@click.option("-n", "n", type=click.IntRange(1), required=True, help="Examples to label.")
@click.option(
    "--stratify",
    type=click.Choice(["outcome", "none"]),
    default="outcome",
    show_default=True,
    help="outcome: each judge outcome (win, tie, loss, judge_error) in proportion, at least "
    "one each; none: a simple random sample.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Sampling seed.")
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path, dir_okay=False),
    required=True,
    help="The forms to label (JSON Lines).",
)
@click.option("--force", is_flag=True, help="Replace an existing --output file.")
@handles_errors
def sample_command(
    judgements_path: Path, n: int, stratify: str, seed: int, output: Path, force: bool
) -> None:
    """Write a seeded, blind sample of a judgements file for people to label.

    Each line is a form: the question, the reference, answers A and B (the baseline's first
    or second by a seeded coin per line) and "preferred", to fill in with "A", "B" or "tie".
    """
    judgements = read_judgements(judgements_path)
    forms = sample(judgements, n, stratify="outcome" if stratify == "outcome" else None, seed=seed)
    write_sample(forms, output, force=force)
    if n > len(judgements):
        click.echo(f"note: {judgements_path} holds only {len(judgements)} judgements: all taken")
    click.echo(f"{len(forms)} forms to label written to {output} (seed {seed})")


@judge.command("audit")
@click.argument("labels_path", metavar="LABELS.jsonl", type=click.Path(path_type=Path))
@judgements_option
@click.option(
    "--json",
    "json_path",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Also write the audit as JSON here.",
)
@handles_errors
def audit_command(labels_path: Path, judgements_path: Path, json_path: Path | None) -> None:
    """Measure the judge against people's labels, and the win rate they imply.

    LABELS.jsonl is a filled-in sample, or lines of {"task", "doc_id", "label"} with label
    win, tie or loss for the candidate. Prints agreement, Cohen's kappa, the confusion
    matrix, swap consistency (over the whole judgements file), and the candidate's win rate
    by PPI++ beside the judge's alone and the labels' alone.
    """
    result = audit(read_judgements(judgements_path), read_labels(labels_path))
    click.echo(render_audit(result), nl=False)
    if json_path is not None:
        write_report(json_path, json.dumps(result.as_json(), indent=2, ensure_ascii=False) + "\n")
