"""The three views of `regress report --view`: seed 002's reports for three readers, from the
same inputs as the page of every chart.

- **exec** (the buyer): the verdicts, the decision gates as rows with their intervals, the
  accuracy/latency frontier with the model the rule of `regress compare` chooses, cost per
  successful task, and the history trend.
- **dev** (the developer): the paired table of each gate report's units, a task x model
  heatmap of pass@1 (and pass^k where examples were sampled k times), failure classes, and
  the examples in four buckets (regressed, fixed, still failing, unchanged) with both
  models' answers; then the gate, accuracy, flip, calibration and latency charts.
- **efficiency** (the optimizer): generated tokens against success, seed 002's Token
  Efficiency Score per task, the over-thinkers (examples whose reasoning tokens dwarf their
  answer), and resource use over time.

`all` puts the three in one page as tabs (the address's `#exec`, `#dev` or `#efficiency`
picks one). A section the inputs cannot fill says which input would.
"""

from __future__ import annotations

import html
import math
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import plotly.graph_objects as go

from regress.bench.choose import Constraints, Contender, choose
from regress.bench.summaries import AccuracyRun, BenchModel
from regress.core.records import Record
from regress.report.charts import (
    ADD_BENCH,
    ADD_GATE,
    PERCENT,
    build_charts,
    joined_runs,
    run_labels,
    tidy,
)
from regress.report.example_buckets import Bucket, Buckets, quoted_flips, sort_examples
from regress.report.html import Page, cards, coded, document, figure_section
from regress.report.sources import Inputs
from regress.run.cost import Prices, TaskCost, task_cost


class View(StrEnum):
    """Which reader's report."""

    EXEC = "exec"
    DEV = "dev"
    EFFICIENCY = "efficiency"
    ALL = "all"


NAMES = {
    View.EXEC: "Executive summary",
    View.DEV: "Developer deep-dive",
    View.EFFICIENCY: "Efficiency audit",
}
CHARTS = {
    View.EXEC: ("accuracy_vs_memory", "radar", "history"),
    View.DEV: (
        "gate_units",
        "accuracy_by_task",
        "flips_by_margin",
        "reliability",
        "latency_distributions",
    ),
    View.EFFICIENCY: ("resources_over_time",),
}
"""The page's existing charts each view shows, after its own sections."""
EXAMPLES_SHOWN = 10
"""Examples listed per bucket; the rest are counted."""
OVERTHINKING = 10.0
"""Reasoning tokens per answer token from which an example is an over-thinker (seed 002's
example is 4,000 reasoning tokens for a 100-token answer, 40)."""
ADD_RUNS = "add stored runs (a baseline and a candidate's `--save-run` folder)"
ADD_GENERATIONS = "add a stored run with generation tasks"
ADD_HISTORY = "add a history file (`regress check --record-history history.jsonl`)"

_STYLE = """
nav.views { display: flex; gap: 0.5rem; border-bottom: 2px solid #888; margin: 1rem 0; }
nav.views a { padding: 0.4rem 1rem; border: 1px solid #ccc; border-bottom: none;
  border-radius: 6px 6px 0 0; text-decoration: none; color: #222; background: #eee; }
nav.views a.on { background: #fff; font-weight: 700; border-color: #888; }
.view.off { position: absolute; left: -100000px; top: 0; width: 1200px; }
td.PASS { background: #edf7ee; } td.REGRESSION { background: #fdecea; }
td.INCONCLUSIVE { background: #fff5e0; } td.ERROR { background: #f5eafa; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
details { margin: 0.5rem 0; } .note { color: #555; }
"""
# Views off screen rather than hidden: plotly then lays each chart out at its real width.
_TABS = """
(() => {
  const views = [...document.querySelectorAll('.view')];
  const show = () => {
    const wanted = location.hash.slice(1);
    const on = views.some((v) => v.dataset.view === wanted) ? wanted : views[0].dataset.view;
    for (const v of views) {
      v.classList.toggle('off', v.dataset.view !== on);
      v.setAttribute('aria-hidden', v.dataset.view !== on);
    }
    for (const a of document.querySelectorAll('nav.views a')) {
      a.classList.toggle('on', a.dataset.view === on);
    }
    document.body.dataset.view = on;
  };
  window.addEventListener('hashchange', show);
  show();
})();
"""


@dataclass(frozen=True)
class Section:
    """Part of a view: its HTML (with figure placeholders drawn by the page's script)."""

    html: str
    figures: tuple[str, ...] = ()
    """Chart ids whose figures the HTML holds."""


def render_views(
    inputs: Inputs, view: View, title: str = "regress report", prices: Prices | None = None
) -> Page:
    """One page of `view` (three tabs for ALL); `prices` turns token costs into money."""
    charts = build_charts(inputs)
    shown = [View.EXEC, View.DEV, View.EFFICIENCY] if view is View.ALL else [view]
    builders: dict[View, Callable[[], list[Section]]] = {
        View.EXEC: lambda: _exec(inputs, charts.figures, prices),
        View.DEV: lambda: _dev(inputs, charts.figures),
        View.EFFICIENCY: lambda: _efficiency(inputs, charts.figures, prices),
    }
    bodies, drawn = [], []
    for v in shown:
        sections = builders[v]()
        drawn += [chart for s in sections for chart in s.figures]
        body = "".join(s.html for s in sections)
        bodies.append(
            f'<div class="view" id="view-{v}" data-view="{v}"><h2>{NAMES[v]}</h2>{body}</div>'
        )
    nav = ""
    if len(shown) > 1:
        links = "".join(f'<a href="#{v}" data-view="{v}">{NAMES[v]}</a>' for v in shown)
        nav = f'<nav class="views">{links}</nav>'
    text = document(title, nav, "".join(bodies) + f"<script>{_TABS}</script>", _STYLE)
    left_out = tuple(c for c in charts.missing if any(c in CHARTS[v] for v in shown))
    return Page(text, tuple(drawn), left_out)


# --- exec ---------------------------------------------------------------------------------


def _exec(inputs: Inputs, figures: dict[str, go.Figure], prices: Prices | None) -> list[Section]:
    sections = [Section(cards(inputs)), _gates(inputs)]
    frontier, choice = _frontier(inputs)
    sections.append(_figure("frontier", frontier, "Accuracy and latency"))
    if choice:
        sections.append(Section(f"<p>{coded(choice)}</p>"))
    sections.append(_costs(inputs, prices))
    if "history" not in figures:
        sections.append(_missing("Trend", ADD_HISTORY))
    return sections + _charts(View.EXEC, figures)


def _gates(inputs: Inputs) -> Section:
    """Each gate report's decision gates as rows: the measured value with its interval, the
    corrected p-values of both tests and the verdict."""
    rows = []
    for comp in inputs.comparisons:
        who = comp["candidate"].get("label") or comp["candidate"]["run"]
        for r in comp.get("requirements", ()):
            if not isinstance(r, dict):
                continue
            rows.append(
                _cells(
                    who,
                    r.get("requirement", ""),
                    _value(r, r.get("value")),
                    _interval(r),
                    r.get("n", ""),
                    _p(r.get("fail_adjusted_pvalue")),
                    _p(r.get("pass_adjusted_pvalue")),
                    verdict=str(r.get("verdict", "")),
                    reason=str(r.get("reason", "")),
                )
            )
    if not rows:
        need = ADD_GATE if not inputs.comparisons else "add `gates:` to the gate's policy"
        return _missing("Decision gates", need)
    head = _head(
        "candidate",
        "requirement",
        "measured",
        "95% interval",
        "n",
        "adj. p (failing)",
        "adj. p (met)",
        "verdict",
    )
    note = (
        '<p class="note">Each gate is two one-sided tests: failing corrected with the gate\'s '
        "units, met at the full alpha, as every test a PASS needs (docs/gate.md#one-alpha); "
        "the interval is uncorrected, for reading.</p>"
    )
    return Section(f"<section><h3>Decision gates</h3><table>{head}{''.join(rows)}</table>{note}")


def _value(r: dict[str, Any], value: Any) -> str:
    if not _number(value):
        return "not evaluated"
    return f"{value:,.0f} ms" if r.get("metric") == "ttft_ms" else f"{value:.1%}"


def _interval(r: dict[str, Any]) -> str:
    ci = r.get("ci")
    if not (isinstance(ci, list) and len(ci) == 2 and all(map(_number, ci))):
        return ""
    return f"[{_value(r, ci[0])}, {_value(r, ci[1])}]"


def _frontier(inputs: Inputs) -> tuple[go.Figure | str, str]:
    """Accuracy against median end-to-end latency, the Pareto front joined, and the model
    `regress compare`'s rule chooses (no constraint) among the candidates the gate passed
    starred; and the choice in words, or why there is none."""
    joined = [(r, b) for r, b in joined_runs(inputs) if _number(b.e2el_p50) and _number(r.accuracy)]
    if not joined:
        same = "add a stored run and a bench file of the same model file"
        return (same if inputs.bench else ADD_BENCH), ""
    labels = run_labels([run for run, _ in joined])
    # Only a model the gate passed may be recommended: a faster model the gate did not pass
    # (a REGRESSION, or a drop it could not rule out) is not a choice, whatever its interval.
    passed = {c["candidate"]["sha256"] for c in inputs.comparisons if c["verdict"] == "PASS"}
    eligible = [_contender(r, b) for r, b in joined if r.sha256 in passed]
    choice = choose(eligible, Constraints()) if eligible else None
    points = [(b.e2el_p50 or 0.0, r.accuracy) for r, b in joined]
    front = sorted(
        (p for p in points if not any(_dominates(q, p) for q in points)), key=lambda p: p[0]
    )
    fig = go.Figure()
    fig.add_scatter(
        x=[p[0] for p in front],
        y=[p[1] for p in front],
        mode="lines",
        name="Pareto front",
        line={"dash": "dot", "color": "#888"},
        hoverinfo="skip",
    )
    for (run, b), label in zip(joined, labels, strict=True):
        chosen = (
            choice is not None and choice.chosen is not None and choice.chosen.sha256 == run.sha256
        )
        fig.add_scatter(
            x=[b.e2el_p50],
            y=[run.accuracy],
            error_y={
                "type": "data",
                "symmetric": False,
                "array": [run.high - run.accuracy],
                "arrayminus": [run.accuracy - run.low],
            },
            mode="markers+text",
            name=label + (" (chosen)" if chosen else ""),
            text=[run.model.rsplit("/", 1)[-1]],
            textposition="top center",
            cliponaxis=False,
            marker={"size": 20 if chosen else 12, "symbol": "star" if chosen else "circle"},
        )
    fig.update_layout(title="Accuracy against latency: the Pareto front, and the chosen model")
    fig.update_xaxes(title="E2E latency p50 (ms), lower is better")
    fig.update_yaxes(title="accuracy (95% interval)", tickformat=PERCENT)
    if choice is None:
        why = (
            "no candidate on this chart passed the gate"
            if inputs.comparisons
            else "no gate report was given (`regress check --report-json`)"
        )
        return tidy(fig), f"No model is chosen: {why}, and only a model it passed can be."
    pick = choice.chosen.model if choice.chosen else "none"
    return tidy(fig), (
        f"Chosen among the {len(eligible)} candidate{'s' if len(eligible) != 1 else ''} the gate "
        f"passed, by `regress compare`'s rule: {pick}, {choice.reason}."
    )


def _contender(run: AccuracyRun, bench: BenchModel) -> Contender:
    return Contender(
        model=run.model,
        sha256=run.sha256,
        quantization=run.quantization,
        accuracy=run.accuracy,
        accuracy_low=run.low,
        accuracy_high=run.high,
        accuracy_from=run.name,
        tg_tps=bench.rate("tg"),
        pp_tps=bench.rate("pp"),
        ttft_p50_ms=bench.ttft_p50,
        peak_rss_bytes=bench.peak_rss_bytes,
    )


def _dominates(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """a is no slower and no less accurate than b, and better in one."""
    return a[0] <= b[0] and a[1] >= b[1] and a != b


def _costs(inputs: Inputs, prices: Prices | None) -> Section:
    """Per run: tokens and (with a price table) money per successful example; per gate
    report with judged units, what the judge's calls took."""
    judge = _judge_costs(inputs.comparisons, prices)
    if not inputs.accuracy and not judge:
        return _missing("Cost per successful task", ADD_RUNS)
    rows = []
    for run, label in zip(inputs.accuracy, run_labels(inputs.accuracy), strict=True):
        costs = _task_costs(run, prices or Prices())
        samples = sum(c.samples for c in costs)
        successes = sum(c.successes for c in costs)
        tokens = sum(c.input_tokens + c.output_tokens for c in costs)
        money = sum(c.cost for c in costs)
        rows.append(
            _cells(
                label,
                f"{samples:,}",
                f"{successes / samples:.1%}" if samples else "",
                f"{tokens:,}",
                f"{tokens / successes:,.0f}" if successes else "no success",
                f"{money / successes:.6f} {prices.currency}" if prices and successes else "",
            )
        )
    head = _head(
        "run",
        "samples",
        "success",
        "tokens (prompt + generated)",
        "tokens per success",
        "cost per success",
    )
    note = (
        "Tokens come from the stored records. Cost needs a price table (`regress report "
        "--prices prices.yaml`); per-second prices need a run's wall time, which stored runs "
        "do not hold, and are left out."
        if prices is None or prices.per_second
        else f"Prices: {prices.input_per_1k:g} per 1,000 prompt tokens, "
        f"{prices.output_per_1k:g} per 1,000 generated tokens ({prices.currency})."
    )
    table = f"<table>{head}{''.join(rows)}</table>" if rows else ""
    return Section(
        f"<section><h3>Cost per successful task</h3>{table}"
        f'<p class="note">{coded(note)}</p>{judge}</section>'
    )


def _judge_costs(comparisons: Sequence[dict[str, Any]], prices: Prices | None) -> str:
    """A table of the judge's calls in each gate report that judged units ('' if none)."""
    rows = []
    for report in comparisons:
        judged = [u["judged"] for u in report.get("units", ()) if u.get("judged")]
        if not judged:
            continue
        examples = sum(j["wins"] + j["losses"] + j["ties"] + j["judge_errors"] for j in judged)
        prompt = sum(j["tokens"].get("prompt", 0) for j in judged)
        completion = sum(j["tokens"].get("completion", 0) for j in judged)
        priced = prices.judge if prices is not None else None
        money = priced.tokens(prompt, completion) if priced is not None else None
        rows.append(
            _cells(
                report.get("candidate", {}).get("label", ""),
                ", ".join(sorted({j["judge"] for j in judged})),
                f"{examples:,}",
                f"{sum(j['calls'] for j in judged):,}",
                f"{prompt:,} + {completion:,}",
                f"{money:.6f} {prices.currency}" if money is not None and prices else "",
                f"{money / examples:.6f} {prices.currency}"
                if money is not None and prices and examples
                else "",
            )
        )
    if not rows:
        return ""
    head = _head(
        "gate report (candidate)",
        "judge",
        "examples judged",
        "calls",
        "tokens (prompt + generated)",
        "cost",
        "cost per judged example",
    )
    note = (
        "Judge calls and tokens come from the gate reports (`units[].judged`). Their cost "
        "needs the price table's `judge:` block (`input_per_1k`, `output_per_1k`): a hosted "
        "judge seldom costs what the model under test does. A check that replayed verdicts from "
        "the cache reports the calls and tokens that first made them."
    )
    return (
        f'<h3>Judge calls</h3><table>{head}{"".join(rows)}</table><p class="note">{coded(note)}</p>'
    )


def _task_costs(run: AccuracyRun, prices: Prices) -> list[TaskCost]:
    # No wall time in records: per-second prices are left out (the note says so).
    return [
        task_cost(task, records, prices, 0.0)
        for task, records in sorted(run.run.records.items())
        if any(map(_scored, records))
    ]


def _scored(record: Record) -> bool:
    """An example with 0/1 outcomes: scored right or wrong, sampled, or failed (wrong); a
    perplexity document has none."""
    return (
        record.correct is not None
        or not record.ok
        or isinstance(record.scores.get("correct"), list)
    )


# --- dev ----------------------------------------------------------------------------------


def _dev(inputs: Inputs, figures: dict[str, go.Figure]) -> list[Section]:
    sections = [_paired(inputs)]
    sections += _heatmaps(inputs)
    sections.append(_failures(inputs))
    sections += _buckets(inputs)
    sections += _charts(View.DEV, figures)
    return sections


def _paired(inputs: Inputs) -> Section:
    """Each gate report's units: n, both accuracies, the change with its interval, broke /
    fixed and the verdict with its reason."""
    if not inputs.comparisons:
        return _missing("Paired units", ADD_GATE)
    rows = []
    for comp in inputs.comparisons:
        who = comp["candidate"].get("label") or comp["candidate"]["run"]
        for u in comp["units"]:
            ci = u.get("ci")
            rows.append(
                _cells(
                    who,
                    u["name"],
                    u.get("n", ""),
                    _share(u.get("baseline")),
                    _share(u.get("candidate")),
                    _points(u.get("delta")),
                    f"[{_points(ci[0])}, {_points(ci[1])}]" if ci else "",
                    f"{u.get('b', '')} / {u.get('c', '')}",
                    verdict=u["verdict"],
                    reason=u["reason"],
                )
            )
    head = _head(
        "candidate",
        "unit",
        "n",
        "baseline",
        "candidate",
        "change (pts)",
        "95% interval",
        "broke / fixed",
        "verdict",
    )
    return Section(f"<section><h3>Paired units</h3><table>{head}{''.join(rows)}</table></section>")


def _heatmaps(inputs: Inputs) -> list[Section]:
    """Accuracy (pass@1 for a generation task) by task and run, and pass^k (every sample
    right) where examples were sampled."""
    runs = inputs.accuracy
    if not runs:
        return [_missing("Reliability by task", ADD_RUNS)]
    labels = run_labels(runs)
    tasks = sorted({t for run in runs for t in run.run.records})
    pass1 = [[_pass1(run, t) for run in runs] for t in tasks]
    height = max(480, 28 * len(tasks) + 160)  # a readable row per task
    # pass@1 is a generation's measure; a multiple-choice task's share right is its accuracy.
    generated = {t for run in runs for t in tasks if _generates(run, t)}
    if not generated:
        measure = "accuracy"
    elif generated == set(tasks):
        measure = "pass@1"
    else:
        measure = "accuracy: pass@1 for the generation tasks"
    heatmap = _heatmap(pass1, tasks, labels, measure)
    sections = [_figure("heatmap-pass1", heatmap, "Reliability", height)]
    sampled = [t for t in tasks if any(_k(run, t) > 1 for run in runs)]
    if sampled:
        passk = [[_pass_all(run, t) for run in runs] for t in sampled]
        ks = "/".join(map(str, sorted({_k(run, t) for run in runs for t in sampled} - {0})))
        title = f"pass^k: every one of an example's k samples right (k = {ks})"
        tall = max(480, 28 * len(sampled) + 160)
        sections.append(_figure("heatmap-passk", _heatmap(passk, sampled, labels, title), "", tall))
    else:
        need = "add runs sampled several times per example (`--repeats 3`)"
        sections.append(_missing("pass^k", need))
    return sections


def _pass1(run: AccuracyRun, task: str) -> float:
    outcomes = [
        sum(r.outcomes) / len(r.outcomes) for r in run.run.records.get(task, ()) if _scored(r)
    ]
    return statistics.fmean(outcomes) if outcomes else math.nan


def _k(run: AccuracyRun, task: str) -> int:
    return max((len(r.outcomes) for r in run.run.records.get(task, ())), default=0)


def _pass_all(run: AccuracyRun, task: str) -> float:
    records = [r for r in run.run.records.get(task, ()) if len(r.outcomes) > 1]
    return statistics.fmean(all(r.outcomes) for r in records) if records else math.nan


def _heatmap(z: list[list[float]], tasks: list[str], labels: list[str], title: str) -> go.Figure:
    text = [["" if math.isnan(v) else f"{v:.0%}" for v in row] for row in z]
    fig = go.Figure(
        go.Heatmap(
            z=[[None if math.isnan(v) else v for v in row] for row in z],
            x=labels,
            y=tasks,
            text=text,
            texttemplate="%{text}",
            zmin=0,
            zmax=1,
            colorscale="RdYlGn",
            colorbar={"title": title.split(":")[0], "tickformat": PERCENT},
            hovertemplate="%{y} · %{x}: %{z:.1%}<extra></extra>",
        )
    )
    fig.update_layout(title=title)
    fig.update_yaxes(autorange="reversed")
    return tidy(fig)


def _failures(inputs: Inputs) -> Section:
    """Failed examples by status and generations by failure class, per run and task; then
    the gate reports' failure-rate tests."""
    rows = []
    for run, label in zip(inputs.accuracy, run_labels(inputs.accuracy), strict=True):
        for task, records in sorted(run.run.records.items()):
            status = Counter(str(r.status) for r in records if not r.ok)
            classes = Counter(
                c for r in records for c in r.scores.get("failure", ()) if c != "answered"
            )
            for what, n in [*status.items(), *classes.items()]:
                rows.append(_cells(label, task, what, n, len(records)))
    tested = [
        _cells(
            comp["candidate"].get("label") or comp["candidate"]["run"],
            f["unit"],
            f["failure"],
            _share(f.get("baseline")),
            _share(f.get("candidate")),
            "rose" if f.get("regressed") else "not shown to rise",
        )
        for comp in inputs.comparisons
        for f in comp.get("failures", ())
    ]
    if not inputs.accuracy and not tested:
        return _missing("Failure modes", ADD_RUNS)
    body = (
        f"<table>{_head('run', 'task', 'failure', 'count', 'examples')}{''.join(rows)}</table>"
        if rows
        else '<p class="note">No example failed and no generation fell in a failure class.</p>'
    )
    if tested:
        head = _head("candidate", "unit", "failure", "baseline", "candidate", "gate")
        body += f"<h4>Failure rates the gate tested</h4><table>{head}{''.join(tested)}</table>"
    return Section(f"<section><h3>Failure modes</h3>{body}</section>")


def _buckets(inputs: Inputs) -> list[Section]:
    """Every later run against the first: counts per bucket, then the first examples of each
    bucket with both answers (regressed open, the others folded)."""
    runs = inputs.accuracy
    if len(runs) < 2:
        return [_missing("Examples by outcome", ADD_RUNS)]
    sections = []
    base = runs[0].run
    labels = run_labels(runs)
    for cand, label in zip(runs[1:], labels[1:], strict=True):
        quoted = quoted_flips(inputs.comparisons, base, cand.run)
        buckets = sort_examples(base, cand.run, quoted)
        sections.append(Section(_bucket_section(buckets, labels[0], label)))
    return sections


def _bucket_section(buckets: Buckets, baseline: str, candidate: str) -> str:
    counts = ", ".join(f"{buckets.count(b):,} {b}" for b in Bucket)
    unpaired = f"; {buckets.unpaired:,} not paired" if buckets.unpaired else ""
    parts = [
        f"<section><h3>Examples: {html.escape(candidate)} against "
        f"{html.escape(baseline)}</h3><p>{counts}{unpaired}.</p>"
    ]
    for bucket in Bucket:
        examples = buckets.of(bucket)
        if not examples:
            continue
        listed = examples[:EXAMPLES_SHOWN]
        # Records hold no benchmark text: a question column only where a gate report quoted.
        asked = any(e.question for e in listed)
        rows = "".join(
            _cells(
                e.task,
                e.doc_id,
                *([_short(e.question, 120)] if asked else []),
                _short(e.baseline_answer, 80),
                _short(e.candidate_answer, 80),
                _short(e.target, 80),
            )
            for e in listed
        )
        more = len(examples) - EXAMPLES_SHOWN
        rest = f'<p class="note">and {more:,} more</p>' if more > 0 else ""
        question = ["question"] if asked else []
        head = _head(
            "task", "doc", *question, "baseline answered", "candidate answered", "expected"
        )
        opened = " open" if bucket is Bucket.REGRESSED else ""
        parts.append(
            f"<details{opened}><summary>{bucket} ({len(examples):,})</summary>"
            f"<table>{head}{rows}</table>{rest}</details>"
        )
    parts.append("</section>")
    return "".join(parts)


# --- efficiency ---------------------------------------------------------------------------


def _efficiency(
    inputs: Inputs, figures: dict[str, go.Figure], prices: Prices | None
) -> list[Section]:
    generating = [
        (run, label, [c for c in _task_costs(run, prices or Prices()) if _generates(run, c.task)])
        for run, label in zip(inputs.accuracy, run_labels(inputs.accuracy), strict=True)
    ]
    generating = [g for g in generating if g[2]]
    if not generating:
        sections = [_scored_only(inputs) if inputs.accuracy else _missing("Tokens", ADD_RUNS)]
    else:
        sections = [
            _figure("tokens-vs-quality", _density(generating), "Tokens and quality"),
            _tes(generating),
            _overthinkers(generating),
        ]
    return sections + _charts(View.EFFICIENCY, figures)


def _scored_only(inputs: Inputs) -> Section:
    """Runs without a generation task: why generation's measures do not apply, and the
    prompt tokens they read per example and per right answer instead."""
    rows = []
    for run, label in zip(inputs.accuracy, run_labels(inputs.accuracy), strict=True):
        costs = _task_costs(run, Prices())
        examples = sum(c.samples for c in costs)
        right = sum(c.successes for c in costs)
        tokens = sum(c.input_tokens for c in costs)
        rows.append(
            _cells(
                label,
                f"{len(costs):,}",
                f"{examples:,}",
                f"{tokens:,}",
                f"{tokens / examples:,.0f}" if examples else "",
                f"{tokens / right:,.0f}" if right else "no right answer",
            )
        )
    head = _head("run", "tasks", "examples", "prompt tokens", "per example", "per right answer")
    return Section(
        "<section><h3>Tokens read</h3><p>These runs hold no generation task: a "
        "multiple-choice or perplexity task scores the given choices by their likelihood and "
        "generates nothing, so generated tokens, the token efficiency score and over-thinking "
        f"do not apply ({coded(ADD_GENERATIONS)} to audit them). What each run read:</p>"
        f"<table>{head}{''.join(rows)}</table></section>"
    )


def _generates(run: AccuracyRun, task: str) -> bool:
    """A generation task (a multiple-choice task's scored continuations are not generated)."""
    info = run.run.manifest.tasks.get(task)
    return info is not None and info.output_type == "generate_until"


def _density(generating: list[tuple[AccuracyRun, str, list[TaskCost]]]) -> go.Figure:
    """Each run's generation tasks: generated tokens per sample against success rate."""
    fig = go.Figure()
    for _, label, costs in generating:
        fig.add_scatter(
            x=[c.output_tokens / c.samples for c in costs],
            y=[c.successes / c.samples for c in costs],
            text=[c.task for c in costs],
            mode="markers+text",
            textposition="top center",
            cliponaxis=False,
            name=label,
            marker={"size": 12},
            hovertemplate="%{text}: %{x:.0f} tokens per sample, %{y:.0%} right<extra></extra>",
        )
    fig.update_layout(title="Generated tokens per sample against success (one point per task)")
    fig.update_xaxes(title="generated tokens per sample (reasoning included)")
    fig.update_yaxes(title="success rate (pass@1)", tickformat=PERCENT)
    return tidy(fig)


def _tes(generating: list[tuple[AccuracyRun, str, list[TaskCost]]]) -> Section:
    rows = [
        _cells(
            label,
            c.task,
            f"{c.samples:,}",
            f"{c.successes / c.samples:.1%}",
            f"{c.output_tokens / c.samples:,.1f}",
            "" if c.reasoning_tokens is None else f"{c.reasoning_tokens:,}",
            "" if c.reasoning_overhead is None else f"{c.reasoning_overhead:.2f}",
            "" if c.tes is None else f"{c.tes:.2f}",
        )
        for _, label, costs in generating
        for c in costs
    ]
    head = _head(
        "run",
        "task",
        "samples",
        "success",
        "tokens per sample",
        "reasoning tokens",
        "reasoning overhead",
        "TES",
    )
    note = (
        "TES (seed 002's Token Efficiency Score): success rate per 1,000 generated tokens per "
        "sample; higher is better. Reasoning overhead: reasoning tokens per final token."
    )
    return Section(
        f"<section><h3>Token efficiency</h3><table>{head}{''.join(rows)}</table>"
        f'<p class="note">{note}</p></section>'
    )


def _overthinkers(generating: list[tuple[AccuracyRun, str, list[TaskCost]]]) -> Section:
    """Examples with at least OVERTHINKING reasoning tokens per answer token, worst first."""
    found, counted = [], False
    for run, label, costs in generating:
        for c in costs:
            for r in run.run.records[c.task]:
                reasoning = r.tokens.get("reasoning")
                if reasoning is None:
                    continue
                counted = True
                final = r.tokens.get("completion", 0) - reasoning
                ratio = reasoning / max(final, 1)
                if ratio >= OVERTHINKING:
                    found.append((ratio, label, r.task, r.doc_id, reasoning, final, r.right))
    if not counted:
        return _missing(
            "Over-thinkers",
            "add a run of a reasoning model with `--think-end-token` (its reasoning tokens are "
            "then counted apart); these runs count none",
        )
    found.sort(key=lambda f: -f[0])
    rows = "".join(
        _cells(
            label, task, doc, f"{reasoning:,}", f"{final:,}", f"{ratio:.0f}", "yes" if ok else "no"
        )
        for ratio, label, task, doc, reasoning, final, ok in found[:EXAMPLES_SHOWN]
    )
    head = _head("run", "task", "doc", "reasoning tokens", "answer tokens", "ratio", "right")
    summary = (
        f"{len(found):,} example(s) spent {OVERTHINKING:g} or more reasoning tokens per answer "
        "token."
    )
    return Section(
        f"<section><h3>Over-thinkers</h3><p>{summary}</p>"
        + (f"<table>{head}{rows}</table>" if found else "")
        + "</section>"
    )


# --- pieces -------------------------------------------------------------------------------


def _charts(view: View, figures: dict[str, go.Figure]) -> list[Section]:
    """The page's existing charts this view shows, those the inputs drew."""
    return [
        Section(figure_section(chart, figures[chart]), (chart,))
        for chart in CHARTS[view]
        if chart in figures
    ]


def _figure(
    chart: str, figure: go.Figure | str, heading: str, height: int | None = None
) -> Section:
    """A chart of this module (`height` pixels tall, else the page's default), or the line
    saying which input would draw it."""
    if isinstance(figure, str):
        return _missing(heading, figure)
    title = f"<h3>{html.escape(heading)}</h3>" if heading else ""
    return Section(f"{title}{figure_section(chart, figure, height)}", (chart,))


def _missing(heading: str, need: str) -> Section:
    return Section(
        f'<section class="left-out"><h3>{html.escape(heading)}</h3>'
        f'<p class="note">Not drawn: {coded(need)}.</p></section>'
    )


def _head(*names: str) -> str:
    return "<tr>" + "".join(f"<th>{html.escape(n)}</th>" for n in names) + "</tr>"


def _cells(*cells: object, verdict: str = "", reason: str = "") -> str:
    """A table row, every cell escaped; a verdict cell coloured, its reason on hover."""
    row = "".join(
        f'<td class="num">{html.escape(str(c))}</td>'
        if _number(c)
        else f"<td>{html.escape(str(c))}</td>"
        for c in cells
    )
    if verdict:
        css = verdict if verdict in ("PASS", "REGRESSION", "INCONCLUSIVE", "ERROR") else ""
        row += f'<td class="{css}" title="{html.escape(reason)}">{html.escape(verdict)}</td>'
    return f"<tr>{row}</tr>"


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _share(value: Any) -> str:
    return f"{value:.1%}" if _number(value) else ""


def _points(value: Any) -> str:
    return f"{value * 100:+.1f}" if _number(value) else ""


def _p(value: Any) -> str:
    return f"{value:.3g}" if _number(value) else ""


def _short(text: str, limit: int) -> str:
    """Whitespace folded, cut to `limit` characters."""
    folded = " ".join(text.split())
    return folded if len(folded) <= limit else folded[: limit - 1] + "…"
