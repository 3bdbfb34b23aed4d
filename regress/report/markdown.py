"""The Markdown report: a PR comment and $GITHUB_STEP_SUMMARY, verdict on the first line.

The first line says the verdict and, in words, the one reason that decided it; the first
screen (above the first `<details>` fold, FOLD_LINES for three units) speaks plain words: a
table per unit, a line per undecided or failing unit, the first flips with their question and
answers. The statistics and the fingerprints are folded below.

A pure function of a Comparison. When the text would exceed `max_bytes` (GitHub caps a
comment at 65,536 characters), the flips and then the subjects are cut first, each with a
"(truncated: N more)" note; only if that is not enough is the tail cut.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from regress.core.errors import ExitCode
from regress.gate.divergence import KL_CAP, DivergenceResult
from regress.gate.failure_rates import FailureRate
from regress.gate.format_spread import FormatSpread
from regress.gate.golden_rules import FRAGILE_MARGIN, GoldenResult
from regress.gate.policy import Policy
from regress.gate.recovery import RecoveryResult
from regress.gate.requirements import RequirementResult
from regress.gate.results import (
    Comparison,
    Fingerprint,
    Flip,
    HardwareAction,
    SequentialRun,
    UnitKind,
    UnitResult,
    Verdict,
)
from regress.gate.verdict import TESTS_TWICE, detect_words, rerun_words
from regress.report.tables import markdown_table
from regress.stats import SPENDING, PassRequires, Rule

MARKER = "<!-- regress-report -->"
"""Last line of every report: lets a CI step find and update its own earlier comment."""
FLIPS_SHOWN = 25
SUBJECTS_SHOWN = 10
CELL_CHARS = 40
"""Longest prediction or target shown in a table cell (generated answers can be long)."""
QUESTION_CHARS = 80
"""Longest question shown beside a flip."""

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
    top, shown = _above_the_fold(comparison, min(flips, FLIPS_ABOVE), docs)
    statistics = [
        _unit_table(comparison.units, UnitKind.ACCURACY, evidence),
        _unit_table(comparison.units, UnitKind.PERPLEXITY, evidence),
        _legend(comparison, docs),
        _proxy(comparison.units),
        _looks(comparison),
        _notes(comparison),
        _answer_shift(comparison.units),
        _subjects(comparison.units, subjects),
        _calibration(comparison),
        _generation_failures(comparison, docs),
        _turns(comparison, docs),
        _formats(comparison, docs),
        _judged(comparison, docs),
    ]
    sections = [
        top,
        _fold(STATISTICS, statistics),
        _more_flips(comparison, shown, flips),
        _golden(comparison),
        _recovery(comparison),
        _divergence(comparison),
        _failures(comparison.units),
        _fold("Models, runtime and policy", [_models(comparison), _policy(comparison)]),
        _warnings(comparison),
        _reproduce(comparison.command),
    ]
    return "\n\n".join(s for s in sections if s) + f"\n\n{MARKER}\n"


FOLD_LINES = 30
"""Lines a three-unit report shows above its first `<details>`: the part a reviewer reads."""
FLIPS_ABOVE = 5
"""Flipped examples shown above the fold; the rest are folded."""
WARNINGS_ABOVE = 2
"""Warnings listed above the fold; all of them are in the Warnings section when there are more."""
STATISTICS = (
    "Statistics: bounds, p-values, detectable drops (MDE), how the answers moved (KL), "
    "calibration (ECE, Brier)"
)


def _above_the_fold(comparison: Comparison, flips: int, docs: _Docs) -> tuple[str, int]:
    """The verdict and its reason, the units in plain words, the first flips: cut to FOLD_LINES
    by showing fewer flips when a long list of units or warnings needs the room; and how many
    flips it shows."""
    while True:
        parts = [
            _headline(comparison),
            _plain_table(comparison.units),
            _plain_notes(comparison),
            _top_flips(comparison, flips),
            _glossary(docs, comparison.units),
        ]
        text = "\n\n".join(p for p in parts if p)
        if flips == 0 or text.count("\n") + 2 <= FOLD_LINES:
            return text, min(flips, len(comparison.flips))
        flips -= 1


def _fold(summary: str, sections: Sequence[str]) -> str:
    """Sections behind a `<details>` fold (blank lines around them, so GitHub renders them)."""
    body = "\n\n".join(s for s in sections if s)
    if not body:
        return ""
    return f"<details><summary>{summary}</summary>\n\n{body}\n\n</details>"


def _headline(comparison: Comparison) -> str:
    """The first line (the verdict and, in words, what decided it) and who was compared."""
    gated = [u for u in comparison.units if u.gated]
    counts = [
        f"{sum(u.verdict is v for u in gated)} {OUTCOMES[v]}"
        for v in Verdict
        if any(u.verdict is v for u in gated)
    ]
    golden = [g.task for g in comparison.golden if g.failed]
    if golden:
        counts.insert(0, f"golden set {', '.join(golden)} failed")
    paired = sum(u.n for u in comparison.units)
    # A baseline made from tasks alone (no suite file) has no suite name to show.
    suite = f", suite `{comparison.suite}`" if comparison.suite else ""
    summary = (
        f"**{_name(comparison.candidate)}** vs baseline **{_name(comparison.baseline)}**{suite}: "
        f"{', '.join(counts) or 'no gated unit'} ({paired:,} paired "
        f"examples). Exit code {int(comparison.exit_code)}.{_aa_words(comparison)}"
    )
    return f"{_first_line(comparison)}\n\n{summary}"


def _aa_words(comparison: Comparison) -> str:
    """On a batch-dependent server, the A/A flip rate the verdict is read beside: how many
    of the baseline model's answers its rerun there changed from the stored records."""
    hardware = comparison.hardware
    rate = hardware.aa_flip_rate if hardware is not None else None
    if hardware is None or rate is None:
        return ""
    return (
        f" A/A flip rate {rate:.1%} ({hardware.flips:,} of {hardware.n:,}): the server answers "
        "differently by batch, so the baseline's model was rerun on it interleaved with the "
        "candidate (A B A B) and the gate compares the candidate with that rerun."
    )


def _first_line(comparison: Comparison) -> str:
    """The report's first line: the verdict and, in words, the one reason that decided it."""
    verdict = comparison.verdict
    head = f"## regress: {ICONS[verdict]} {verdict}"
    gated = [u for u in comparison.units if u.gated]
    which = [u for u in gated if u.verdict is verdict]
    if verdict is Verdict.REGRESSION:
        golden = [g for g in comparison.golden if g.failed]
        if golden:
            # A golden set fails by its own rules, whatever its unit's statistics said.
            names = ", ".join(g.task for g in golden)
            return f"{head} in golden set {names}: {_golden_words(golden[0])}"
        if not which:
            risen = [f for f in comparison.failures if f.regressed]
            failing = [r for r in comparison.requirements if r.verdict is verdict]
            lost = [r for r in comparison.recovery if r.verdict is verdict]
            if lost and not risen:
                return f"{head} in {_recovery_words(lost[0])}"
            moved = [r for r in comparison.divergence if r.verdict is verdict]
            if moved and not risen and not failing:
                return f"{head} in {_divergence_words(moved[0])}"
            if failing and not risen:
                return f"{head} in decision gate {_requirement_words(failing[0])}"
            return f"{head} in failure rates: " + "; ".join(_rate_words(f) for f in risen)
        which.sort(key=lambda u: -_drop_shown(u))
        return f"{head}: {_named(which[0], comparison.policy)}" + _others(which)
    if verdict is Verdict.ERROR:
        return f"{head}: {_named(which[0], comparison.policy)}" + _others(which) if which else head
    if verdict is Verdict.INCONCLUSIVE:
        # Whether it blocks is the first thing a reviewer asks of an INCONCLUSIVE.
        blocks = comparison.exit_code != ExitCode.OK
        head += " (blocking: inconclusive: fail)" if blocks else " (not blocking)"
        open_gates = [r for r in comparison.requirements if r.verdict is verdict]
        if open_gates and not which:
            return f"{head} in decision gate {_requirement_words(open_gates[0])}"
        undecided = [r for r in comparison.recovery if r.verdict is verdict]
        if undecided and not which:
            return f"{head} in {_recovery_words(undecided[0])}"
        unsure = [r for r in comparison.divergence if r.verdict is verdict]
        if unsure and not which:
            return f"{head} in {_divergence_words(unsure[0])}"
        return f"{head}: {_undecided(which, gated, comparison.policy)}"
    return f"{head}: {_passed(gated, comparison.policy)}"


def _others(units: Sequence[UnitResult]) -> str:
    """The other units with the same verdict, counted."""
    rest = len(units) - 1
    return (
        f"; {rest} more unit{'s' if rest != 1 else ''} {OUTCOMES[units[0].verdict]}" if rest else ""
    )


def _drop_shown(unit: UnitResult) -> float:
    """How far a regressed unit's drop is shown (its bound, else its estimate), in thresholds:
    the worst one is named first."""
    bounds = unit.bounds
    shown = bounds.at_least if bounds is not None else None
    return _share(unit, _observed_drop(unit) or 0.0 if shown is None else shown)


def _observed_drop(unit: UnitResult) -> float | None:
    """The drop as measured (perplexity: the relative increase); negative for a gain."""
    if unit.delta is None:
        return None
    return unit.delta if unit.kind is UnitKind.PERPLEXITY else -unit.delta


def _undecided(units: Sequence[UnitResult], gated: Sequence[UnitResult], policy: Policy) -> str:
    """Why the gate could not decide, and what would: too few examples first (the most common
    reason, and one no statistics fixes), else the unit that needs the most examples."""
    small = [u for u in units if _too_few(u, policy)]
    if small:
        sizes = sorted({u.n for u in small})
        size = f"{sizes[0]}" if len(sizes) == 1 else f"{sizes[0]}-{sizes[-1]}"
        where = (
            "per unit"
            if len(small) == len(gated) > 1
            else f"in {small[0].name}"
            if len(small) == 1
            else f"in {len(small)} units"
        )
        text = f"only {size} examples {where}; {policy.min_examples} needed"
        planned = max(small, key=lambda u: u.n_needed or 0)
        if planned.n_needed and planned.plan_drop:
            effect = f"{_sized(planned, planned.plan_drop)} {_noun(planned)}"
            text += f"; {detect_words(_about(planned.n_needed), effect)}"
        worst = max(small, key=lambda u: _observed_drop(u) or 0.0)
        if (_observed_drop(worst) or 0.0) > worst.threshold:
            text += f". Largest change: {worst.name} {_change_words(worst)}{_flipped(worst)}"
        return text
    if not units:
        return "no gated unit decided"
    unit = max(units, key=lambda u: max(u.n_needed or 0, u.n_to_pass or 0))
    return _named(unit, policy) + _others(units)


def _passed(gated: Sequence[UnitResult], policy: Policy) -> str:
    """A PASS in words: the unit closest to its limit, and how close."""
    bounded = [u for u in gated if u.bounds is not None and u.delta is not None]
    if not bounded:
        return "no gated unit"
    if policy.pass_requires is PassRequires.EVIDENCE:
        unit = max(bounded, key=lambda u: _share(u, u.bounds.at_most if u.bounds else 0.0))
        lead = "every unit within its limit; closest: "
    else:
        unit = max(bounded, key=lambda u: _share(u, _observed_drop(u) or 0.0))
        lead = "no drop shown beyond a limit; largest change: "
    return (lead if len(gated) > 1 else "") + _named(unit, policy)


def _share(unit: UnitResult, drop: float) -> float:
    """A drop in multiples of the unit's threshold, so units of different limits compare."""
    return drop / unit.threshold if unit.threshold > 0 else drop


def _too_few(unit: UnitResult, policy: Policy) -> bool:
    return 0 < unit.n < policy.min_examples and unit.kind is not UnitKind.PERPLEXITY


def _about(n: int) -> str:
    """A planned n as a reader needs it: two significant digits (3,812 -> 3,800)."""
    if n < 100:
        return f"{n:,}"
    step = 10 ** (len(str(n)) - 2)
    return f"{round(n / step) * step:,}"


def _named(unit: UnitResult, policy: Policy, bold: bool = False) -> str:
    """The unit's name followed by its verdict in words."""
    name = f"**{unit.name}**" if bold else unit.name
    text = _plain(unit, policy)
    return f"{name}{text}" if text.startswith(":") else f"{name} {text}"


def _plain(unit: UnitResult, policy: Policy) -> str:
    """One unit's verdict in words: what changed, what its bound showed or left open, and for
    an undecided unit what would decide it."""
    if unit.verdict is Verdict.ERROR or unit.delta is None or unit.bounds is None:
        return f": {unit.reason}"
    change, bounds = _change_words(unit), unit.bounds
    limit = f"the {_sized(unit, unit.threshold)} limit"
    noun = _noun(unit)
    if _too_few(unit, policy) and unit.verdict is Verdict.INCONCLUSIVE:
        text = (
            f"{change}{_flipped(unit)}, from only {unit.n} examples ({policy.min_examples} needed)"
        )
        if unit.n_needed and unit.plan_drop:
            effect = f"{_sized(unit, unit.plan_drop)} {noun}"
            text += f"; {detect_words(_about(unit.n_needed), effect)}; {TESTS_TWICE}"
        return text
    if unit.verdict is Verdict.REGRESSION:
        if bounds.at_least is None:
            return f"{change}{_flipped(unit)}, beyond {limit}, and more than chance explains"
        return (
            f"{change}{_flipped(unit)}; the {noun} is at least "
            f"{_effect(unit, bounds.at_least)}, beyond {limit}"
        )
    if unit.verdict is Verdict.PASS:
        if policy.pass_requires is PassRequires.EVIDENCE:
            return (
                f"{change}; the {noun} is at most {_effect(unit, bounds.at_most)}, within {limit}"
            )
        caught = (
            ""
            if unit.mde is None
            else f"; only {noun}s of {_effect(unit, unit.mde)} or more would be caught"
        )
        return f"{change}; no {noun} shown beyond {limit}{caught}"
    text = f"{change}{_flipped(unit)}; the {noun} may be up to {_effect(unit, bounds.at_most)}"
    text += f", more than {limit}"
    if (_observed_drop(unit) or 0.0) > unit.threshold and unit.n_needed and unit.plan_drop:
        effect = f"{_sized(unit, unit.plan_drop)} {noun}"
        text += f"; {detect_words(_about(unit.n_needed), effect)}; {TESTS_TWICE}"
    elif unit.n_to_pass:
        text += f"; {rerun_words(_about(unit.n_to_pass))}"
    return text


def _change_words(unit: UnitResult) -> str:
    """The observed change as a verb: `dropped 12.5 pts`, `rose +0.91%`."""
    delta = unit.delta or 0.0
    if unit.kind is UnitKind.PERPLEXITY:
        return (
            f"{unit.metric} {'rose' if delta > 0 else 'fell'} {abs(delta):.2%}"
            if delta
            else f"{unit.metric} unchanged"
        )
    if not delta:
        return "unchanged"
    return f"{'dropped' if delta < 0 else 'rose'} {abs(delta) * 100:.1f} pts"


def _flipped(unit: UnitResult) -> str:
    """How many examples broke and were fixed (score units: scored lower and higher)."""
    if unit.b is None or unit.c is None or unit.kind is UnitKind.PERPLEXITY:
        return ""
    if unit.kind is UnitKind.SCORE:
        return f" ({unit.b} scored lower, {unit.c} higher)"
    return f" ({unit.b} broke, {unit.c} fixed)"


def _golden_words(golden: GoldenResult) -> str:
    """Why a golden set failed, in words."""
    if golden.regressed:
        names = [i.name for i in golden.regressed]
        shown = ", ".join(names[:HEADLINE_ITEMS])
        more = f" and {len(names) - HEADLINE_ITEMS} more" if len(names) > HEADLINE_ITEMS else ""
        return f"must-pass item{'s' if len(names) > 1 else ''} {shown}{more} regressed"
    return (
        f"its pass rate fell {golden.relative_drop:.1%} of the baseline's "
        f"({golden.baseline_rate:.1%} to {golden.candidate_rate:.1%}), beyond "
        f"{golden.max_relative_drop:.0%}"
    )


HEADLINE_ITEMS = 3
"""Must-pass items the first line names; the rest are counted."""


def _rate_words(rate: FailureRate) -> str:
    limit = "" if rate.threshold is None else f", beyond the {rate.threshold * 100:.1f}-pt limit"
    return f"{rate.unit} ({rate.failure}) rose {rate.increase * 100:.1f} pts{limit}"


def _requirement_words(result: RequirementResult) -> str:
    """`**pass_at_1 of core >= 85.0%**: 80.2% on 500 examples: shown failing (...)`."""
    return f"**{result.requirement}**: {result.reason}"


def _recovery_words(result: RecoveryResult) -> str:
    """`**recovery of arc_easy**: recovery 93.1%, at most 94.2% < 95.0% of ...`."""
    return f"**recovery of {result.unit}**: {result.reason}"


def _name(side: Fingerprint) -> str:
    return side.label or side.run


def _named_metric(unit: UnitResult) -> bool:
    return unit.kind is UnitKind.PERPLEXITY or unit.metric == "p_gold"


def _plain_table(units: Sequence[UnitResult]) -> str:
    """Every unit without statistics: examples, both sides, the change, what flipped."""
    if not units:
        return ""
    body = [
        [
            # A unit not paired on right/wrong answers says what it pairs.
            f"{u.name} ({u.metric})" if _named_metric(u) else u.name,
            f"{u.n:,}" if u.proxy is None else f"{u.n:,} of {u.proxy.population:,}",
            *(
                (_number(u.baseline), _number(u.candidate), _relative_change(u))
                if u.kind is UnitKind.PERPLEXITY
                else (_percent(u.baseline), _percent(u.candidate), _points(u))
            ),
            "–" if u.b is None or u.c is None else f"{u.b} / {u.c}",
            _verdict(u),
        ]
        for u in units
    ]
    header = ["unit", "examples", "baseline", "candidate", "change", "broke / fixed", "verdict"]
    return markdown_table(header, body, ["---", *["---:"] * 5, "---"])


def _points(unit: UnitResult) -> str:
    return "–" if unit.delta is None else f"{unit.delta * 100:+.1f} pts"


def _relative_change(unit: UnitResult) -> str:
    return "–" if unit.delta is None else f"{unit.delta:+.2%}"


def _plain_notes(comparison: Comparison) -> str:
    """One line in words per unit that did not simply pass, per failed golden set and risen
    failure class, and the first warnings."""
    lines = [
        f"- {ICONS[u.verdict]} {_named(u, comparison.policy, bold=True)}"
        + ("" if u.gated else " (not gated)")
        for u in comparison.units
        if u.verdict is not Verdict.PASS or _beyond(u)
    ]
    lines += [
        f"- ❌ **golden set {g.task}**: {_golden_words(g)}" for g in comparison.golden if g.failed
    ]
    lines += [
        f"- ❌ **failure rate**: {_rate_words(f)}" for f in comparison.failures if f.regressed
    ]
    lines += [f"- {ICONS[r.verdict]} {_requirement_words(r)}" for r in comparison.requirements]
    lines += [f"- {ICONS[r.verdict]} {_recovery_words(r)}" for r in comparison.recovery]
    lines += [f"- {ICONS[r.verdict]} {_divergence_words(r)}" for r in comparison.divergence]
    if comparison.sequential is not None:
        lines.append(f"- ⏱️ {_stopped_words(comparison.sequential)}")
    warnings = comparison.warnings
    lines += [f"- ⚠️ {w}" for w in warnings[:WARNINGS_ABOVE]]
    if len(warnings) > WARNINGS_ABOVE:
        lines.append(f"- ⚠️ {len(warnings) - WARNINGS_ABOVE} more warnings: see Warnings below")
    return "\n".join(lines)


GLOSSARY_ANCHOR = "glossary"


def _stopped_words(run: SequentialRun) -> str:
    share = run.examples_run / run.examples_total if run.examples_total else 1.0
    return (
        f"sequential gate: stopped at look {len(run.taken)} of {len(run.looks)} "
        f"({run.stopped}); {run.examples_run:,} of {run.examples_total:,} examples run "
        f"({share:.0%})"
    )


def _looks(comparison: Comparison) -> str:
    """The sequential design and each look taken: what it had seen and what it settled."""
    run = comparison.sequential
    if run is None:
        return ""
    units = {u.name: u.delta for u in comparison.units if u.delta is not None}
    rows = [
        f"| {k} | {look.fraction:.0%} | {look.examples:,} | {', '.join(look.decided) or '-'} |"
        for k, look in enumerate(run.taken, start=1)
    ]
    return (
        "### Sequential looks\n\n"
        f"{_sentence(SPENDING[run.spending])} alpha spending over looks at "
        f"{', '.join(f'{t:.0%}' for t in run.looks)} of each unit's examples, run in a random "
        f"order (seed {run.seed}). p-values are repeated p-values and bounds repeated "
        "confidence bounds: valid whenever the gate stops. A unit's Δ is the naive estimate at "
        "the look that settled it.\n\n"
        "| look | share | paired examples | decided |\n|---|---|---|---|\n"
        + "\n".join(rows)
        + "".join(
            f"\n\n{name} stopped early with Δ {units[name] * 100:+.1f} pts; median-unbiased "
            f"Δ {delta * 100:+.1f} pts (stage-wise ordering)."
            for name, delta in sorted(run.adjusted_delta.items())
            if name in units
        )
    )


def _glossary(docs: _Docs, units: Sequence[UnitResult]) -> str:
    # A score unit (a mean score, p_gold) counts and measures something other than answers.
    score = any(u.kind is UnitKind.SCORE for u in units)
    return (
        "_Broke / fixed: examples the baseline got right and the candidate wrong, and the "
        "reverse"
        + ("; in a score unit, examples whose score fell and rose" if score else "")
        + ". pts: accuracy points"
        + (" (a score unit's: points of its mean score)" if score else "")
        + f". Limit: the policy's max_drop. Every term: "
        f"{docs.cite('gate.md', GLOSSARY_ANCHOR, 'Glossary')}._"
    )


def _sized(unit: UnitResult, value: float) -> str:
    """An amount as an adjective: `a 2.0-pt limit`, `a +2.00% limit`."""
    if unit.kind is UnitKind.PERPLEXITY:
        return f"+{value:.2%}"
    return f"{value * 100:.1f}-pt"


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
    return markdown_table([*header, "verdict"], body, align)


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
    table = markdown_table(
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
            "Bound: the one-sided bound the verdict rests on (≥: the drop is at least this, "
            "shown for a REGRESSION, at the confidence the family's correction set; ≤: at most "
            "this, at the full alpha, which must lie within the threshold for a PASS: every "
            "unit must show it, so alpha bounds a false PASS of the gate uncorrected). "
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
    table = markdown_table(
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
    table = markdown_table(
        ["unit", "subject", "n", "baseline", "candidate", "Δ pts", "b / c"],
        body,
        ["---", "---", "---:", "---:", "---:", "---:", "---:"],
    )
    return "### Most-regressed subjects\n\n" + table + _more(len(worst) - len(body))


def _top_flips(comparison: Comparison, limit: int) -> str:
    """The first flipped examples (regressions first), above the fold."""
    shown = comparison.flips[:limit]
    if not shown:
        return ""
    return f"### Answers that changed (first {len(shown)} of {comparison.n_flips:,})\n\n" + (
        _flip_table(shown)
    )


def _more_flips(comparison: Comparison, start: int, limit: int) -> str:
    """The flips after the `start` shown above the fold, up to `limit` in all, folded."""
    rest: Sequence[Flip] = comparison.flips[start:limit] if limit > start else ()
    hidden = comparison.n_flips - start - len(rest)
    if rest:
        return _fold(f"{len(rest)} more answers that changed", [_flip_table(rest) + _more(hidden)])
    return f"_(truncated: {hidden:,} more answers that changed)_" if hidden > 0 else ""


def _flip_table(flips: Sequence[Flip]) -> str:
    """Flips with their question and both answers' texts when the check had the documents,
    else the recorded predictions (choice indices)."""
    questions = any(f.question is not None for f in flips)
    body = [
        [
            _cell(f.task),
            str(f.doc_id),
            *([_cell(f.question, QUESTION_CHARS)] if questions else []),
            _answer(f.baseline_answer, f.baseline_pred),
            _answer(f.candidate_answer, f.candidate_pred)
            + ("" if f.candidate_status == "ok" else f" ({_cell(f.candidate_status)})"),
            _answer(f.target_answer, f.target),
            "❌ broke" if f.regressed else "✅ fixed",
        ]
        for f in flips
    ]
    header = ["task", "doc", *(["question"] if questions else []), "baseline", "candidate"]
    align = ["---", "---:", *(["---"] if questions else []), "---", "---", "---", "---"]
    return markdown_table([*header, "expected", ""], body, align)


def _answer(text: str | None, pred: Any) -> str:
    return _cell(pred if text is None else text)


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
    table = markdown_table(
        [*header, "must-pass regressed", ""], body, ["---", *["---:"] * 6, "---"]
    )
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
            markdown_table(
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


def _recovery(comparison: Comparison) -> str:
    """Recovery: each unit's share of the baseline's accuracy, its bounds, its verdict."""
    if not comparison.recovery:
        return ""
    body = [
        [
            r.unit,
            f"{r.n:,}",
            f"{r.baseline:.1%}",
            f"{r.candidate:.1%}",
            _percent(r.recovery),
            _one_sided(r.at_least, r.at_least_level, "≥"),
            _one_sided(r.at_most, r.at_most_level, "≤"),
            f"{r.min_recovery:.1%}",
            _pvalue(r.fail_adjusted_pvalue),
            _pvalue(r.pass_adjusted_pvalue),
            f"{ICONS[r.verdict]} {r.verdict}",
        ]
        for r in comparison.recovery
    ]
    header = ["unit", "n", "baseline", "candidate", "recovery", "at least", "at most"]
    header += ["min", "adj. p (below)", "adj. p (above)", "verdict"]
    table = markdown_table(header, body, ["---", *["---:"] * 9, "---"])
    return (
        f"### Recovery\n\n{table}\n\n_Recovery is the candidate's accuracy over the "
        "baseline's on the same examples; a unit fails when it is shown below `min` (1 - its "
        "max_relative_drop) and, under `pass_requires: evidence`, passes when shown above it. "
        "Bounds are one-sided: below at the level the family's correction set, above at the "
        "full alpha (a PASS needs every such test: docs/gate.md#one-alpha; Fieller's interval "
        "of the paired ratio)._"
    )


def _divergence_words(result: DivergenceResult) -> str:
    """`**divergence of arc_easy**: mean KL 0.0042, at most 0.0061: within max_kl 0.02`."""
    return f"**divergence of {result.unit}**: {result.reason}"


def _divergence(comparison: Comparison) -> str:
    """Divergence: how far each unit's choice distributions moved, its bounds, its verdict."""
    if not comparison.divergence:
        return ""
    body = [
        [
            r.unit,
            f"{r.n:,}",
            f"{r.mean_kl:.4f}",
            _kl_bound(r.at_least, r.at_least_level, "≥"),
            _kl_bound(r.at_most, r.at_most_level, "≤"),
            f"{r.max_kl:g}",
            f"{r.uncapped_kl:.4f}",
            f"{r.at_cap:,}",
            _pvalue(r.fail_adjusted_pvalue),
            _pvalue(r.pass_adjusted_pvalue),
            f"{ICONS[r.verdict]} {r.verdict}",
        ]
        for r in comparison.divergence
    ]
    header = ["unit", "n", "mean KL", "at least", "at most", "max_kl", "uncapped", "at cap"]
    header += ["adj. p (above)", "adj. p (within)", "verdict"]
    table = markdown_table(header, body, ["---", *["---:"] * 9, "---"])
    return (
        f"### Divergence\n\n{table}\n\n_Mean KL: the candidate's distribution over each "
        f"question's choices against the baseline's, in nats, each example capped at "
        f"{KL_CAP:g} (`at cap` counts those, and the candidate's failures); `uncapped` is the "
        "plain mean, not tested. A unit fails when the capped mean is shown above `max_kl` and, "
        "under `pass_requires: evidence`, passes when shown within it, by a betting test of a "
        "bounded mean (docs/gate.md#estimands)._"
    )


def _kl_bound(value: float | None, level: float | None, sign: str) -> str:
    if value is None or level is None:
        return "–"
    return f"{sign} {value:.4f} ({(1 - level) * 100:.4g}%)"


def _one_sided(value: float | None, level: float | None, sign: str) -> str:
    if value is None or level is None:
        return "–"
    return f"{sign} {value:.1%} ({(1 - level) * 100:.4g}%)"


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
    table = markdown_table(
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
    table = markdown_table(
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


def _turns(comparison: Comparison, docs: _Docs) -> str:
    """Each conversation unit's pass rate per turn, baseline beside candidate."""
    if not comparison.turns:
        return ""
    body = [
        [
            t.unit,
            str(t.turn),
            str(t.n),
            _percent(t.baseline),
            _percent(t.candidate),
            f"{(t.candidate - t.baseline) * 100:+.1f} pts",
            str(t.broke),
            str(t.fixed),
        ]
        for t in comparison.turns
    ]
    table = markdown_table(
        ["unit", "turn", "n", "baseline", "candidate", "change", "broke", "fixed"],
        body,
        ["---", "---:", "---:", "---:", "---:", "---:", "---:", "---:"],
    )
    note = (
        "_Share of conversations whose check at that turn passed "
        f"({docs.cite('generation.md', 'conversations', 'Conversations')}). The gate's unit "
        "is the conversation; per-turn changes are reported, not gated._"
    )
    return f"### Conversations, turn by turn\n\n{table}\n\n{note}"


def _judged(comparison: Comparison, docs: _Docs) -> str:
    """Each judged unit's wins, losses and ties, win rate, swap consistency and length ratio."""
    judged = [(u, u.judged) for u in comparison.units if u.judged is not None]
    if not judged:
        return ""
    body = []
    for unit, j in judged:
        ci = f" [{j.win_rate_ci[0]:.1%}, {j.win_rate_ci[1]:.1%}]" if j.win_rate_ci else ""
        rate = f"{j.win_rate:.1%}{ci}" if j.win_rate is not None else "-"
        low = j.consistency is not None and not j.decides
        consistency = _percent(j.consistency) if j.consistency is not None else "-"
        score = "-"
        if j.scores is not None:
            band = f" [{j.quality_ci[0]:.2f}, {j.quality_ci[1]:.2f}]" if j.quality_ci else ""
            score = f"{j.scores[0]:.2f} → {j.scores[1]:.2f}{band}"
        body.append(
            [
                unit.name,
                j.mode,
                str(j.wins),
                str(j.losses),
                str(j.ties),
                str(j.judge_errors),
                rate,
                score,
                f"**{consistency}**" if low else consistency,
                f"{j.length_ratio:.2f}x" if j.length_ratio is not None else "-",
                f"`{j.judge}`",
            ]
        )
    table = markdown_table(
        [
            "unit",
            "mode",
            "wins",
            "losses",
            "ties",
            "judge errors",
            "win rate [95% CI]",
            "mean score [95% CI]",
            "consistency",
            "length",
            "judge",
        ],
        body,
        ["---", "---", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---"],
    )
    first = judged[0][1]
    # The identity names the model only when its weights' sha256 is unknown.
    model = first.identity.get("model") or f"sha256 {first.identity.get('model_sha256', '')[:12]}"
    turns = (
        " A conversation set with judged turns had each judged turn's reply graded; its unit "
        "tables show conversation pass."
        if any(j.per_turn for _, j in judged)
        else ""
    )
    note = (
        f"_The judge ({model}, template {first.identity.get('template')}, "
        f"verdicts read from {first.identity.get('read')}). Pairwise, it saw each pair in both "
        "orders: a win or a loss needs both; a tie counts half in the win rate. Consistency: "
        "pairs whose two orders named the same side (below the policy's min_consistency the "
        "unit is INCONCLUSIVE). Graded (single, rubric), it scored each answer alone: the mean "
        "scores, the candidate's with its interval (seed 002's quality score), and the "
        "candidate's higher score a win. Length: the candidate's answers over the baseline's; "
        "judges favour longer answers. In the unit tables a pairwise unit's baseline and "
        "candidate are the shares of examples each side's answer won, and broke / fixed count "
        f"its losses / wins; a graded unit's are the mean scores on a 0-1 scale.{turns} "
        f"({docs.cite('judge.md', 'reading-the-report', 'Judge')})._"
    )
    return f"### Judged units\n\n{table}\n\n{note}"


def _formats(comparison: Comparison, docs: _Docs) -> str:
    """Each unit's prompt formats on both sides: worst, median and best, and the spread."""
    if not comparison.formats:
        return ""

    def side(spread: FormatSpread) -> str:
        return " / ".join(_percent(x) for x in (spread.worst, spread.median, spread.best))

    body = [
        [
            f.unit,
            str(len(f.baseline.formats)),
            str(f.baseline.n),
            side(f.baseline),
            side(f.candidate),
            f"{f.baseline.spread * 100:.1f} → {f.candidate.spread * 100:.1f} pts",
            f"{f.change * 100:+.1f} [{f.low * 100:+.1f}, {f.high * 100:+.1f}]",
        ]
        for f in comparison.formats
    ]
    table = markdown_table(
        ["unit", "formats", "n", "baseline worst / median / best", "candidate", "spread",
         "change [95% CI]"],
        body,
        ["---", "---:", "---:", "---:", "---:", "---:", "---:"],
    )  # fmt: skip
    note = (
        "_Accuracy over the examples every format has on both sides "
        f"({docs.cite('tasks.md', 'prompt-formats', 'Prompt formats')}); the change in "
        "spread is resampled over the same examples on both sides. Each format is gated as a "
        "unit above; the worst format and the spread are reported, not gated (a minimum over "
        "formats is biased downwards)._"
    )
    return f"### Prompt formats\n\n{table}\n\n{note}"


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
    table = markdown_table(
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
        where = "on the server" if hardware.action is HardwareAction.INTERLEAVED else "here"
        named = [("stored baseline", hardware.stored), (f"baseline rerun {where}", named[0][1])]
        named.append(("candidate", comparison.candidate))
    sides = [side for _, side in named]
    rows = [
        ["run", *(_cell(_name(s)) for s in sides)],
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
    table = markdown_table(header, rows, ["---"] * len(header))
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
    if hardware is not None and hardware.action is HardwareAction.INTERLEAVED:
        kl = _number(hardware.kl_divergence)
        lines += [f"- {d}" for d in hardware.differences]
        lines.append(
            "- **The candidate's server answers differently by batch** (its log-probs moved "
            "inside a batch): the baseline's model was rerun on it at the same concurrency, "
            f"interleaved with the candidate in {hardware.chunks} chunks each (A B A B), and "
            f"the candidate gated against that rerun. A/A: {hardware.flips} of {hardware.n} "
            f"of the baseline model's answers changed from the stored records, mean KL over "
            f"the choices {kl}."
        )
    elif hardware is None or not hardware.differences:
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
    """Every warning, when more than the ones above the fold."""
    if len(comparison.warnings) <= WARNINGS_ABOVE:
        return ""
    return "### Warnings\n\n" + "\n".join(f"- {w}" for w in comparison.warnings)


def _reproduce(command: str) -> str:
    if not command:
        return ""
    return f"### Reproduce\n\n```sh\n{command}\n```"


def _more(hidden: int) -> str:
    return f"\n\n_(truncated: {hidden:,} more)_" if hidden > 0 else ""


_CELL_ESCAPES = {"\\": "\\\\", "|": "\\|", "<": "&lt;", "[": "\\["}
"""Escapes that keep a quoted text: a backslash or pipe cannot end its cell (`\\|` would close
it), a `<` cannot open an HTML tag, a `[` cannot open an image or link (a cut one, `![x](http…`,
would let the sanitizer's image pattern run on to a `)` in a later cell and eat the cells
between)."""


def _cell(value: Any, chars: int = CELL_CHARS) -> str:
    """A text (prediction, target, question) as a safe one-line table cell of at most `chars`
    characters; an empty answer shows as `(empty)`, a missing one as `–`.

    Whitespace (newlines too) folds to single spaces. Each character is escaped before the cut,
    and the cut falls between escapes: it never leaves half an escape (`&l…`) or an open tag.
    """
    text = "–" if value is None else " ".join(str(value).split()) or "(empty)"
    escaped = [_CELL_ESCAPES.get(char, char) for char in text]
    if len(escaped) > chars:
        escaped = [*escaped[: chars - 1], "…"]
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


def _sentence(text: str) -> str:
    """`text` opening a sentence: its first letter upper case, the rest as written."""
    return text[:1].upper() + text[1:]
