"""The Markdown report: a PR comment and $GITHUB_STEP_SUMMARY, verdict on the first line.

A pure function of a Comparison. When the text would exceed `max_bytes` (GitHub caps a
comment at 65,536 characters), the flips and then the subjects are cut first, each with a
"(truncated: N more)" note; only if that is not enough is the tail cut.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from regress.gate.golden_rules import FRAGILE_MARGIN
from regress.gate.results import (
    Comparison,
    Flip,
    HardwareAction,
    UnitKind,
    UnitResult,
    Verdict,
)
from regress.gate.rules import PassRequires, Rule

MARKER = "<!-- regress-report -->"
"""Last line of every report: lets a CI step find and update its own earlier comment."""
FLIPS_SHOWN = 25
SUBJECTS_SHOWN = 10
CELL_CHARS = 40
"""Longest prediction or target shown in a table cell (generated answers can be long)."""

ICONS = {
    Verdict.PASS: "✅",
    Verdict.REGRESSION: "❌",
    Verdict.INCONCLUSIVE: "⚠️",
    Verdict.ERROR: "🛑",
}
OUTCOMES = {
    Verdict.PASS: "passed",
    Verdict.REGRESSION: "regressed",
    Verdict.INCONCLUSIVE: "inconclusive",
    Verdict.ERROR: "errored",
}


def render_markdown(
    comparison: Comparison, max_bytes: int = 64_000, docs_url: str | None = None
) -> str:
    """The report as Markdown, at most `max_bytes` UTF-8 bytes, ending with MARKER.

    `docs_url` is where regress's docs/ folder is published (the Action passes its own
    version's); the report then links the pages that explain it, else it names them.
    """
    flips, subjects = FLIPS_SHOWN, SUBJECTS_SHOWN
    docs = _Docs(docs_url)
    text = _render(comparison, flips, subjects, docs)
    while _size(text) > max_bytes and (flips or subjects):
        if flips:
            flips //= 2
        else:
            subjects //= 2
        text = _render(comparison, flips, subjects, docs)
    if _size(text) <= max_bytes:
        return text
    return _cut(text, max_bytes)


def _size(text: str) -> int:
    return len(text.encode("utf-8"))


def _cut(text: str, max_bytes: int) -> str:
    """Keep whole lines from the top, then say so and end with the marker."""
    tail = f"\n_(truncated: the report exceeded {max_bytes:,} bytes)_\n\n{MARKER}\n"
    budget = max_bytes - _size(tail)
    kept: list[str] = []
    for line in text.splitlines(keepends=True):
        budget -= _size(line)
        if budget < 0:
            break
        kept.append(line)
    return "".join(kept) + tail


@dataclass(frozen=True)
class _Docs:
    """Cites a docs page: a link when the docs' URL is known, the page's path otherwise."""

    url: str | None

    def cite(self, page: str, anchor: str, title: str) -> str:
        if self.url:
            return f"[{title}]({self.url.rstrip('/')}/{page}#{anchor})"
        return f'docs/{page}, "{title}"'


def _render(comparison: Comparison, flips: int, subjects: int, docs: _Docs) -> str:
    evidence = comparison.policy.pass_requires is PassRequires.EVIDENCE
    sections = [
        _headline(comparison),
        _unit_table(comparison.units, UnitKind.ACCURACY, evidence),
        _unit_table(comparison.units, UnitKind.PERPLEXITY, evidence),
        _legend(comparison, docs),
        _proxy(comparison.units),
        _notes(comparison),
        _answer_shift(comparison.units),
        _subjects(comparison.units, subjects),
        _golden(comparison),
        _calibration(comparison),
        _flips(comparison, flips),
        _failures(comparison.units),
        _generation_failures(comparison, docs),
        _models(comparison),
        _policy(comparison),
        _warnings(comparison),
        _reproduce(comparison.command),
    ]
    return "\n\n".join(s for s in sections if s) + f"\n\n{MARKER}\n"


def _headline(comparison: Comparison) -> str:
    gated = [u for u in comparison.units if u.gated]
    total = f"{len(gated)} unit{'s' if len(gated) != 1 else ''}"
    verdict = comparison.verdict
    evidence = comparison.policy.pass_requires is PassRequires.EVIDENCE
    if verdict is Verdict.PASS:
        shown = "every drop shown within its threshold" if evidence else "no drop shown beyond"
        first = f"## regress: {ICONS[verdict]} PASS ({total}: {shown})"
    else:
        count = sum(u.verdict is verdict for u in gated)
        first = f"## regress: {ICONS[verdict]} {verdict} in {count} of {total}"
        which = [u for u in gated if u.verdict is verdict]
        if verdict in (Verdict.REGRESSION, Verdict.INCONCLUSIVE) and which:
            first += ": " + _why(which)
        golden = ", ".join(g.task for g in comparison.golden if g.failed)
        if golden and verdict is Verdict.REGRESSION:
            # A golden set fails by its own rules, whatever its unit's statistics said.
            units = f" and in {count} of {total}" if count else ""
            first = f"## regress: {ICONS[verdict]} REGRESSION in golden set {golden}{units}"
        risen = sorted({f"{f.unit} ({f.failure})" for f in comparison.failures if f.regressed})
        if risen and verdict is Verdict.REGRESSION and not count:
            first = f"## regress: {ICONS[verdict]} REGRESSION in failure rates: {', '.join(risen)}"
    counts = ", ".join(
        f"{sum(u.verdict is v for u in gated)} {OUTCOMES[v]}"
        for v in Verdict
        if any(u.verdict is v for u in gated)
    )
    paired = sum(u.n for u in comparison.units)
    summary = (
        f"Candidate **{comparison.candidate.run}** vs baseline **{comparison.baseline.run}**, "
        f"suite `{comparison.suite}`: {counts or 'no gated unit'} "
        f"({paired:,} paired examples). Exit code {int(comparison.exit_code)}."
    )
    return f"{first}\n\n{summary}"


HEADLINE_UNITS = 2
"""Units the first line explains; the rest are counted."""


def _why(units: Sequence[UnitResult]) -> str:
    """What the first line says of the units that set the verdict: the drop, and what the
    one-sided bound showed or left open."""
    parts = [_unit_why(u) for u in units[:HEADLINE_UNITS]]
    more = len(units) - HEADLINE_UNITS
    return "; ".join(parts) + (f"; {more} more" if more > 0 else "")


def _unit_why(unit: UnitResult) -> str:
    if unit.delta is None or unit.bounds is None:
        return f"{unit.name} ({unit.reason})"
    perplexity = unit.kind is UnitKind.PERPLEXITY
    change = f"{unit.delta:+.2%}" if perplexity else f"{unit.delta * 100:+.1f} pts"
    limit = _effect(unit, unit.threshold)
    bounds = unit.bounds
    if unit.verdict is Verdict.REGRESSION:
        if bounds.at_least is None:
            return f"{unit.name} {change}, beyond {limit}"
        return f"{unit.name} {change}, a {_noun(unit)} of at least {_effect(unit, bounds.at_least)}"
    if unit.n_to_pass:
        tail = f"; about {unit.n_to_pass:,} examples would show it within {limit}"
    elif unit.n < 1:
        tail = ""
    else:
        tail = f", not shown within {limit}"
    return f"{unit.name} {change}, may be up to {_effect(unit, bounds.at_most)}{tail}"


def _noun(unit: UnitResult) -> str:
    return "increase" if unit.kind is UnitKind.PERPLEXITY else "drop"


def _bound(unit: UnitResult, evidence: bool) -> str:
    """The one-sided bound the verdict rests on, and its confidence (docs/gate.md)."""
    bounds = unit.bounds
    if bounds is None:
        return "–"
    if unit.verdict is Verdict.REGRESSION or not evidence:
        if bounds.at_least is None:
            return "–"
        value, level, sign = bounds.at_least, bounds.at_least_level, "≥"
    else:
        value, level, sign = bounds.at_most, bounds.at_most_level, "≤"
    amount = f"{value:+.2%}" if unit.kind is UnitKind.PERPLEXITY else f"{value * 100:.1f}"
    return f"{sign} {amount} ({(1 - level) * 100:.4g}%)"


def _unit_table(units: Sequence[UnitResult], kind: UnitKind, evidence: bool = True) -> str:
    """One table for accuracy and score units (kind ACCURACY), one for perplexity units."""
    rows = [u for u in units if (u.kind is UnitKind.PERPLEXITY) == (kind is UnitKind.PERPLEXITY)]
    if not rows:
        return ""
    if kind is UnitKind.ACCURACY:
        header = [
            *("unit", "n", "baseline", "candidate", "Δ pts [95% CI]", "drop bound", "b / c"),
            *("p", "adj. p", "MDE pts"),
        ]
        align = ["---", *["---:"] * 9, "---"]
        body = [
            [
                u.name,
                f"{u.n:,}" if u.proxy is None else f"{u.n:,} of {u.proxy.population:,}",
                _percent(u.baseline),
                _percent(u.candidate),
                _delta(u),
                _bound(u, evidence),
                f"{u.b} / {u.c}",
                _pvalue(u.pvalue),
                _pvalue(u.adjusted_pvalue),
                "–" if u.mde is None else f"{u.mde * 100:.1f}",
                _verdict(u),
            ]
            for u in rows
        ]
    else:
        header = [
            *("unit", "documents", "metric", "baseline", "candidate", "change [95% CI]"),
            *("increase bound", "p", "adj. p", "MDE"),
        ]
        align = ["---", "---:", "---", *["---:"] * 7, "---"]
        body = [
            [
                u.name,
                f"{u.n:,}",
                u.metric,
                _number(u.baseline),
                _number(u.candidate),
                _relative(u),
                _bound(u, evidence),
                _pvalue(u.pvalue),
                _pvalue(u.adjusted_pvalue),
                "–" if u.mde is None else f"+{u.mde:.2%}",
                _verdict(u),
            ]
            for u in rows
        ]
    return _table([*header, "verdict"], body, align)


def _proxy(units: Sequence[UnitResult]) -> str:
    """What a proxy's figures estimate, and what the subset cost against running everything."""
    rows = [u for u in units if u.proxy is not None]
    if not rows:
        return ""
    parent = rows[0].proxy.parent if rows[0].proxy else ""
    body = [
        [
            u.name,
            f"{u.n:,} of {u.proxy.population:,}",
            str(u.proxy.strata),
            f"{(u.delta or 0.0) * 100:+.1f} [{u.proxy.ci_design[0] * 100:+.1f}, "
            f"{u.proxy.ci_design[1] * 100:+.1f}]",
            "–" if u.proxy.width_ratio is None else f"×{u.proxy.width_ratio:.2f}",
        ]
        for u in rows
        if u.proxy is not None
    ]
    table = _table(
        ["unit", "sampled", "strata", "Δ pts of the full suite [95% CI]", "CI width vs all"],
        body,
        ["---", "---:", "---:", "---:", "---:"],
    )
    return (
        f"### Proxy of `{parent}`\n\nThis baseline holds a margin-stratified sample of "
        f"`{parent}`: baseline, candidate, Δ, its CI and p above are stratified estimates and "
        "tests of the full suite (b / c count sampled examples). The CI here is the full "
        "suite's own Δ (what running every example would show); the gate's CI above adds the "
        "suite's sampling, and its width against running everything is the last column.\n\n" + table
    )


VERDICTS_ANCHOR = "what-the-verdicts-mean"
RULE_NULLS = {Rule.MARGIN: "H0: drop within the threshold", Rule.CHANGE: "H0: no drop"}


def _legend(comparison: Comparison, docs: _Docs) -> str:
    """What p and MDE mean for these units, and the page that explains the verdicts."""
    units = comparison.units
    if not units:
        return ""
    by_rule = {rule: [u.name for u in units if u.rule is rule] for rule in Rule}
    used = [rule for rule in Rule if by_rule[rule]]
    if len(used) == 1:
        tests = f"rule `{used[0]}` ({RULE_NULLS[used[0]]})"
    else:
        tests = "; ".join(
            f"rule `{rule}` ({RULE_NULLS[rule]}) for {', '.join(by_rule[rule])}" for rule in used
        )
    power = f"{comparison.policy.power:.0%}"
    if comparison.policy.pass_requires is PassRequires.EVIDENCE:
        bound = (
            "Bound: the one-sided bound the verdict rests on, at the confidence the family's "
            "correction set (≥: the drop is at least this, shown for a REGRESSION; ≤: at most "
            "this, which must lie within the threshold for a PASS). "
        )
    else:
        bound = "Bound: the drop is at least this (one-sided, the confidence the correction set). "
    return (
        f"{bound}95% CI: two-sided and unadjusted, a description, not the decision. "
        f"p: one-sided, {tests}. MDE: the smallest true drop (perplexity: increase) a unit "
        f"flags as a regression with {power} power at its n and observed spread. What each "
        f"verdict means: {docs.cite('gate.md', VERDICTS_ANCHOR, 'What the verdicts mean')}."
    )


def _notes(comparison: Comparison) -> str:
    lines = []
    for u in comparison.units:
        if u.verdict is Verdict.PASS and not _beyond(u):
            continue
        line = f"- {ICONS[u.verdict]} **{u.name}**: {u.reason}"
        if u.verdict is Verdict.PASS and u.mde is not None:
            line += f"; this unit detects only drops of {_effect(u, u.mde)} or more (MDE)"
        if u.verdict is Verdict.INCONCLUSIVE and u.n_needed is not None:
            line += f"; n≈{u.n_needed:,} {_plan(u, comparison.policy.power)}"
        lines.append(line + ("" if u.gated else " (not gated)"))
    return "### Notes\n\n" + "\n".join(lines) if lines else ""


def _beyond(unit: UnitResult) -> bool:
    """Whether the observed change is past the unit's threshold (worth a note even if PASS)."""
    if unit.delta is None:
        return False
    drop = unit.delta if unit.kind is UnitKind.PERPLEXITY else -unit.delta
    return drop > unit.threshold


def _effect(unit: UnitResult, value: float) -> str:
    if unit.kind is UnitKind.PERPLEXITY:
        return f"+{value:.2%}"
    return f"{value * 100:.1f} pts"


def _plan(unit: UnitResult, power: float) -> str:
    """What the n that would decide was planned for."""
    target = "" if unit.plan_drop is None else f" against a drop of {_effect(unit, unit.plan_drop)}"
    return f"would give {power:.0%} power{target} at the observed {_spread(unit)}"


def _spread(unit: UnitResult) -> str:
    """What the plan took from the data: the discordance, or the score differences' spread."""
    if unit.kind is UnitKind.SCORE:
        return "spread of the score differences"
    flipped = f" ({unit.discordance:.1%} flipped)" if unit.discordance else ""
    return f"discordance{flipped}"


def _answer_shift(units: Sequence[UnitResult]) -> str:
    rows = [u for u in units if u.kind is not UnitKind.PERPLEXITY and u.n]
    if not rows:
        return ""
    body = [
        [
            u.name,
            _percent(u.discordance),
            "–" if u.kl_divergence is None else f"{u.kl_divergence:.4f}",
            _percent(u.top1_agreement),
        ]
        for u in rows
    ]
    table = _table(
        ["unit", "outcomes changed", "mean KL over choices", "top-1 agreement"],
        body,
        ["---", "---:", "---:", "---:"],
    )
    return "### How the answers moved\n\n" + table


def _subjects(units: Sequence[UnitResult], limit: int) -> str:
    worst = sorted(
        ((u.name, s) for u in units for s in u.subjects if s.delta < 0),
        key=lambda pair: (pair[1].delta, pair[1].task),
    )
    if not worst:
        return ""
    if not limit:
        return "### Most-regressed subjects" + _more(len(worst))
    body = [
        [
            unit,
            s.task,
            f"{s.n:,}",
            _percent(s.baseline),
            _percent(s.candidate),
            f"{s.delta * 100:+.1f}",
            f"{s.b} / {s.c}",
        ]
        for unit, s in worst[:limit]
    ]
    table = _table(
        ["unit", "subject", "n", "baseline", "candidate", "Δ pts", "b / c"],
        body,
        ["---", "---", "---:", "---:", "---:", "---:", "---:"],
    )
    return "### Most-regressed subjects\n\n" + table + _more(len(worst) - len(body))


def _flips(comparison: Comparison, limit: int) -> str:
    if not comparison.n_flips:
        return ""
    shown: Sequence[Flip] = comparison.flips[:limit]
    if not shown:
        return f"### Flips ({comparison.n_flips:,})" + _more(comparison.n_flips)
    body = [
        [
            f.task,
            str(f.doc_id),
            _cell(f.baseline_pred),
            _cell(f.candidate_pred)
            + ("" if f.candidate_status == "ok" else f" ({f.candidate_status})"),
            _cell(f.target),
            "❌ regressed" if f.regressed else "✅ fixed",
        ]
        for f in shown
    ]
    title = f"### Flips (first {len(shown)} of {comparison.n_flips:,})"
    table = _table(
        ["task", "doc", "baseline", "candidate", "target", ""],
        body,
        ["---", "---:", "---", "---", "---", "---"],
    )
    return f"{title}\n\n{table}" + _more(comparison.n_flips - len(shown))


def _golden(comparison: Comparison) -> str:
    """Golden sets: the must-pass and relative-drop rules, failing items by name."""
    if not comparison.golden:
        return ""
    body = [
        [
            g.task,
            str(g.n),
            str(g.must_pass),
            f"{g.baseline_rate:.1%}",
            f"{g.candidate_rate:.1%}",
            f"{-g.relative_drop:+.1%}",
            str(len(g.regressed)),
            "❌ FAIL" if g.failed else "✅ pass",
        ]
        for g in comparison.golden
    ]
    header = ["golden set", "n", "must-pass", "baseline", "candidate", "relative change"]
    table = _table([*header, "must-pass regressed", ""], body, ["---", *["---:"] * 6, "---"])
    lines = [f"### Golden sets\n\n{table}"]
    items = [(i, True) for g in comparison.golden for i in g.regressed]
    items += [(i, False) for g in comparison.golden for i in g.still_failing]
    if items:
        rows = [
            [
                i.task,
                _cell(i.name),
                _cell(i.target),
                _cell(i.baseline_pred),
                _cell(i.candidate_pred)
                + ("" if i.candidate_status == "ok" else f" ({i.candidate_status})"),
                _margin(i.baseline_margin),
                "❌ regressed" if regressed else "⚠️ fails on both",
            ]
            for i, regressed in items[:FLIPS_SHOWN]
        ]
        header = ["golden set", "must-pass item", "expected", "baseline", "candidate"]
        lines.append(
            _table(
                [*header, "baseline margin", ""],
                rows,
                ["---"] * 5 + ["---:", "---"],
            )
            + _more(len(items) - FLIPS_SHOWN)
        )
    rule = comparison.golden[0].max_relative_drop
    lines.append(
        f"_A must-pass item that regressed fails the gate, whatever the statistics; so does a "
        f"pass rate shown to drop by more than {rule:.0%} of the baseline's. A baseline margin "
        f"(top-1 minus top-2 log-likelihood) below {FRAGILE_MARGIN} nats (⚠️) may flip on "
        f"another CPU with no model change: make such an item less ambiguous._"
    )
    return "\n\n".join(lines)


def _margin(margin: float | None) -> str:
    if margin is None:
        return "–"
    return f"{margin:.2f}" + (" ⚠️" if margin < FRAGILE_MARGIN else "")


def _calibration(comparison: Comparison) -> str:
    """ECE and Brier score of the multiple-choice units (reported, not gated)."""
    if not comparison.calibration:
        return ""
    body = [
        [
            c.unit,
            str(c.n),
            f"{c.baseline_ece:.3f} → {c.candidate_ece:.3f}",
            f"{c.delta_ece:+.3f} [{c.delta_ece_ci[0]:+.3f}, {c.delta_ece_ci[1]:+.3f}]",
            f"{c.baseline_ece_mass:.3f} → {c.candidate_ece_mass:.3f}",
            f"{c.delta_ece_mass:+.3f} [{c.delta_ece_mass_ci[0]:+.3f}, "
            f"{c.delta_ece_mass_ci[1]:+.3f}]",
            f"{c.baseline_brier:.3f} → {c.candidate_brier:.3f}",
        ]
        for c in comparison.calibration
    ]
    bins = comparison.calibration[0].bins
    table = _table(
        [
            "unit",
            "n",
            f"ECE ({bins} equal-width bins)",
            "Δ ECE [95% CI]",
            f"ECE ({bins} equal-mass bins)",
            "Δ ECE [95% CI]",
            "Brier",
        ],
        body,
        ["---", *["---:"] * 6],
    )
    note = (
        "_Confidence: the softmax of the choices' summed log-likelihoods at the predicted "
        "choice; intervals: paired bootstrap over examples "
        f"({comparison.calibration[0].resamples:,} resamples). Reported, not gated._"
    )
    return f"### Calibration (multiple choice)\n\n{table}\n\n{note}"


def _generation_failures(comparison: Comparison, docs: _Docs) -> str:
    """Each generation unit's failure classes, baseline beside candidate."""
    if not comparison.failures:
        return ""
    body = [
        [
            f.unit,
            f.failure,
            str(f.n),
            _percent(f.baseline),
            _percent(f.candidate),
            f"{f.increase * 100:+.1f} pts",
            _pvalue(f.pvalue) if f.threshold is not None else "not gated",
            "❌ risen" if f.regressed else "",
        ]
        for f in comparison.failures
    ]
    table = _table(
        ["unit", "failure class", "n", "baseline", "candidate", "change", "p", ""],
        body,
        ["---", "---", "---:", "---:", "---:", "---:", "---:", "---"],
    )
    limit = comparison.policy.max_failure_increase
    rule = (
        f"A class fails the gate when its rate rose by more than {limit * 100:.1f} points "
        "(one-sided bootstrap-t, Bonferroni over every class of every gated unit)."
        if limit is not None
        else "Reported, not gated (set `max_failure_increase` in the policy to gate)."
    )
    note = (
        "_Share of each side's generations per failure class "
        f"({docs.cite('generation.md', 'failures-as-data', 'Failures as data')}); a document's "
        f"rate is the share of its samples. {rule}_"
    )
    return f"### Generation failure classes\n\n{table}\n\n{note}"


def _failures(units: Sequence[UnitResult]) -> str:
    rows = [u for u in units if u.baseline_failures or u.candidate_failures]
    if not rows:
        return "### Failures\n\nNo failed example and no truncated prompt on either side."
    body = [
        [
            u.name,
            _statuses(u.baseline_failures),
            _statuses(u.candidate_failures),
            f"{u.error_rate:.1%}",
        ]
        for u in rows
    ]
    table = _table(
        ["unit", "baseline", "candidate", "candidate error rate"],
        body,
        ["---", "---", "---", "---:"],
    )
    return "### Failures\n\n" + table


def _models(comparison: Comparison) -> str:
    """Every side's model and runtime, side by side; the hardware path says why floats differ."""
    hardware = comparison.hardware
    named = [("baseline", comparison.baseline), ("candidate", comparison.candidate)]
    if hardware is not None and hardware.stored is not None:
        named = [("stored baseline", hardware.stored), ("baseline rerun here", named[0][1])]
        named.append(("candidate", comparison.candidate))
    sides = [side for _, side in named]
    rows = [
        ["run", *(s.run for s in sides)],
        ["model", *(f"`{s.model}`" for s in sides)],
        ["sha256", *(f"`{s.sha256[:12]}`" for s in sides)],
        ["quantization", *(s.quantization or "–" for s in sides)],
        ["backend", *(f"{s.backend} {s.backend_version}" for s in sides)],
        ["libraries", *(_params(s.libraries) or "–" for s in sides)],
        ["params", *(_params(s.params) for s in sides)],
        ["CPU build kernels", *(f"`{s.kernels}`" if s.kernels else "–" for s in sides)],
        ["CPU", *(f"{s.cpu}, {s.threads} threads" if s.threads else s.cpu or "–" for s in sides)],
        ["created", *(s.created for s in sides)],
    ]
    header = ["", *(name for name, _ in named)]
    table = _table(header, rows, ["---"] * len(header))
    parts = ("### Models\n\n" + table, _hardware(comparison), _cache(comparison))
    return "\n\n".join(p for p in parts if p)


def _cache(comparison: Comparison) -> str:
    """How many results each run of this check replayed from the result cache."""
    lines = []
    for use in comparison.cache:
        if not use.enabled:
            lines.append(f"- Result cache off for the {use.run}: every result computed here.")
            continue
        refused = (
            f"; {use.rejected:,} cached rows refused (corrupt or failing their digest) and "
            "computed again"
            if use.rejected
            else ""
        )
        lines.append(
            f"- Result cache, {use.run}: {use.replayed:,} results replayed, "
            f"{use.computed:,} computed{refused}."
        )
    return "\n".join(lines)


def _hardware(comparison: Comparison) -> str:
    """What the hardware difference is, what was done about it, and what it cost."""
    hardware, lines = comparison.hardware, []
    if hardware is None or not hardware.differences:
        if comparison.repeatability is None:
            return ""
    else:
        lines += [f"- {d}" for d in hardware.differences]
        if hardware.action is HardwareAction.RERAN:
            kl = _number(hardware.kl_divergence)
            lines.append(
                f"- **Gated against the baseline's model rerun on this machine.** Hardware "
                f"drift of that rerun from the stored baseline: {hardware.flips} of "
                f"{hardware.n} answers changed, mean KL over the choices {kl}."
            )
        elif hardware.action is HardwareAction.STORED:
            lines.append("- Gated against the stored records: part of any change is hardware.")
        else:
            lines.append(
                "- Same CPU build kernels as the baseline: its records are what this machine "
                "computes."
            )
        if hardware.typical:
            lines.append(f"- Typical cost of such a difference, {hardware.typical}.")
    repeat = comparison.repeatability
    if repeat is not None:
        lines.append(
            f"- Candidate A/A check: {repeat.n} examples sent again, {repeat.changed} answers "
            f"changed, largest |Δ log-likelihood| {repeat.max_abs_logprob_delta:.3g}."
        )
    return "### Hardware and repeatability\n\n" + "\n".join(lines)


def _policy(comparison: Comparison) -> str:
    items = " · ".join(
        f"`{key}: {_yaml(value)}`" for key, value in _flat(comparison.policy.to_dict())
    )
    return f"### Policy\n\n{items}"


def _warnings(comparison: Comparison) -> str:
    if not comparison.warnings:
        return ""
    return "### Warnings\n\n" + "\n".join(f"- {w}" for w in comparison.warnings)


def _reproduce(command: str) -> str:
    if not command:
        return ""
    return f"### Reproduce\n\n```sh\n{command}\n```"


def _table(header: Sequence[str], rows: Iterable[Sequence[str]], align: Sequence[str]) -> str:
    lines = [_row(header), _row(align), *(_row(r) for r in rows)]
    return "\n".join(lines)


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _more(hidden: int) -> str:
    return f"\n\n_(truncated: {hidden:,} more)_" if hidden > 0 else ""


_CELL_ESCAPES = {"\\": "\\\\", "|": "\\|", "<": "&lt;"}
"""Escapes that keep a quoted answer text: a backslash or pipe cannot end its cell (`\\|` would
close it), a `<` cannot open an HTML tag."""


def _cell(value: Any) -> str:
    """A prediction or target as a safe one-line table cell of at most CELL_CHARS characters.

    Whitespace (newlines too) folds to single spaces. Each character is escaped before the cut,
    and the cut falls between escapes: it never leaves half an escape (`&l…`) or an open tag.
    """
    text = "–" if value is None else " ".join(str(value).split())
    escaped = [_CELL_ESCAPES.get(char, char) for char in text]
    if len(escaped) > CELL_CHARS:
        escaped = [*escaped[: CELL_CHARS - 1], "…"]
    return "".join(escaped)


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{value:.1%}"


def _number(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def _pvalue(value: float | None) -> str:
    if value is None:
        return "–"
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def _delta(unit: UnitResult) -> str:
    if unit.delta is None or unit.ci is None:
        return "–"
    low, high = unit.ci
    return f"{unit.delta * 100:+.1f} [{low * 100:+.1f}, {high * 100:+.1f}]"


def _relative(unit: UnitResult) -> str:
    if unit.delta is None or unit.ci is None:
        return "–"
    low, high = unit.ci
    return f"{unit.delta:+.2%} [{low:+.2%}, {high:+.2%}]"


def _verdict(unit: UnitResult) -> str:
    text = f"{ICONS[unit.verdict]} {unit.verdict}"
    return text if unit.gated else f"{text} (not gated)"


def _statuses(counts: dict[str, int]) -> str:
    return ", ".join(f"{status} {k:,}" for status, k in counts.items()) or "–"


def _params(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={_cell(v)}" for k, v in sorted(params.items())) or "–"


def _flat(data: dict[str, Any], prefix: str = "") -> Iterable[tuple[str, Any]]:
    """Nested policy keys as dotted paths (`units.arc_easy.max_drop`), skipping empty ones."""
    for key, value in data.items():
        if isinstance(value, dict):
            yield from _flat(value, f"{prefix}{key}.")
        elif value is not None:
            yield f"{prefix}{key}", value


def _yaml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
