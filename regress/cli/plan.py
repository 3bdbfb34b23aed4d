"""`regress plan`: how many examples a gate needs to see a given drop."""

from __future__ import annotations

import click

from regress.cli.common import handles_errors
from regress.stats import connor_n


@click.command()
@click.option(
    "--discordance",
    type=click.FloatRange(0, 1, min_open=True),
    required=True,
    help="Expected share of examples whose answer changes (b+c)/n, e.g. 0.12.",
)
@click.option(
    "--drop",
    type=click.FloatRange(0, 1, min_open=True),
    required=True,
    help="Accuracy drop to detect, absolute (0.02 = two points).",
)
@click.option(
    "--alpha",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=0.05,
    show_default=True,
    help="False-alarm rate per gate run.",
)
@click.option(
    "--power",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=0.8,
    show_default=True,
    help="Chance of flagging a real drop of that size.",
)
@click.option(
    "--units",
    type=click.IntRange(1),
    default=1,
    show_default=True,
    help="Gated units sharing alpha (Bonferroni/Holm plan at alpha/units).",
)
@handles_errors
def plan(discordance: float, drop: float, alpha: float, power: float, units: int) -> None:
    """Print the n (Connor 1987) a one-sided McNemar test needs.

    \b
    Example: regress plan --discordance 0.12 --drop 0.03
    """
    if drop > discordance:
        raise click.BadParameter("a drop cannot exceed the discordance", param_hint="--drop")
    n = connor_n(discordance, drop, alpha=alpha / units, power=power)
    click.echo(
        f"n = {n} examples per unit to detect a {drop:.1%} drop at {discordance:.1%} discordance "
        f"(one-sided alpha {alpha / units:.4g}, power {power:.0%})"
    )
