"""What `regress judge audit` prints: a judge's audit against people's labels in a few lines
(regress.gate.judge_audit measures it)."""

from __future__ import annotations

from regress.gate.judge_audit import CATEGORIES, Audit, Estimate


def render_audit(audit: Audit) -> str:
    """The audit as the few lines `regress judge audit` prints."""
    rate = audit.win_rate
    kappa = audit.kappa
    kappa_text = f"{kappa.value:.2f}" if kappa else "undefined"
    lines = [
        f"judge {audit.judge}: {audit.judged} judged examples, {audit.judge_errors} judge_error",
        f"labelled: {audit.labelled}"
        + (
            f" ({audit.labelled_errors} judge_error, counted as disagreements)"
            if audit.labelled_errors
            else ""
        ),
        f"agreement: {_percent(audit.agreement)} ({audit.agreed}/{audit.labelled}; Wilson)",
        f"Cohen's kappa: {kappa_text}, 95% CI {kappa.low:.2f} to {kappa.high:.2f} "
        "(BCa bootstrap over the labelled examples)"
        if kappa
        else "Cohen's kappa: undefined (judge and people used one and the same category)",
    ]
    if audit.warning:
        lines.append(
            f"warning: {audit.warning} (agreement {audit.agreement.value:.1%}, kappa {kappa_text})"
        )
    lines.append("confusion (rows: judge, columns: people):")
    lines.append("        " + "".join(f"{c:>6}" for c in CATEGORIES))
    for category, row in zip(CATEGORIES, audit.confusion, strict=True):
        lines.append(f"  {category:<6}" + "".join(f"{count:>6}" for count in row))
    lines.append(
        f"swap consistency: {audit.swap_consistency:.1%} ({audit.consistent}/{audit.asked} "
        "examples got the same verdict in both orders)"
        if audit.swap_consistency is not None
        else "swap consistency: none (no example got a verdict in both orders)"
    )
    lines += [
        "candidate's win rate as people judge it (a tie counts half):",
        f"  PPI++ ({rate.labelled} labels + {rate.unlabelled} judge verdicts, λ "
        f"{rate.lam:.2f}): {_percent(rate.ppi)}",
        f"  people only ({rate.labelled} labels): {_percent(rate.human_only)}",
        f"  judge only ({rate.labelled + rate.unlabelled} verdicts; its bias unknown): "
        f"{_percent(rate.judge_only)}",
    ]
    if audit.judge_errors:
        lines.append(f"  the {audit.judge_errors} judge_error examples are left out of all three")
    return "\n".join(lines) + "\n"


def _percent(estimate: Estimate) -> str:
    return f"{estimate.value:.1%}, 95% CI {estimate.low:.1%} to {estimate.high:.1%}"
