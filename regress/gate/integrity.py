"""Whether a run can be trusted: fit to be stored as a result, and consistent record by record.

A run in which the model failed on too many examples, evaluated nothing, or produced NaN or
infinite scores is not a result: `baseline create` and `eval` refuse it (exit 3, or 2 when the
input selected no examples) instead of storing a baseline later checks would pass against.
`baseline verify` uses `record_problems` to find records whose answer, target and verdict
contradict each other (a hand-edited `correct`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from regress.core.errors import BadInput, RunFailed
from regress.core.manifest import Run, TaskInfo
from regress.core.records import Record
from regress.gate.margins import margin_cuts, margin_units, record_margin
from regress.gate.policy import Policy
from regress.tasks.multiple_choice import ChoiceScores, argmax_choices

DEFAULT_MAX_ERROR_RATE = Policy().max_error_rate
"""The policy's default: a run failing on more of a task's examples than this is no result."""


def as_baseline(run: Run, name: str) -> Run:
    """A stored run made baseline `name` (`baseline promote`): a sequential check's run only
    once it took its last look. One that stopped early holds the examples its looks ran, and
    promoting it would shrink the pool every later check draws from; BadInput (exit 2)."""
    state = run.manifest.sequential
    if state is not None and state.get("taken", 0) < len(state.get("looks", ())):
        held = sum(len(records) for records in run.records.values())
        raise BadInput(
            f"run {run.manifest.name!r} comes from a sequential check that stopped at look "
            f"{state.get('taken')} of {len(state['looks'])}: it holds {held:,} examples, not the "
            "baseline's whole pool; make the new baseline with `regress baseline create`"
        )
    return replace(run, manifest=replace(run.manifest, name=name, sequential=None))


def check_fit_to_store(run: Run, max_error_rate: float = DEFAULT_MAX_ERROR_RATE) -> None:
    """Refuse a fresh run that must not be stored or reported as a model's scores.

    BadInput when the suite selected no examples (or a task none, outside a shard); RunFailed
    when a record holds a non-finite number or a task's failed examples exceed
    `max_error_rate`, naming the task and the first failure.
    """
    total = sum(len(records) for records in run.records.values())
    if total == 0:
        raise BadInput("the run has no examples (empty data, or `docs:`/--limit selected none)")
    for task, records in sorted(run.records.items()):
        if not records and run.manifest.shard is None:
            raise BadInput(f"task {task} has no examples (empty data or `docs:` out of range)")
        for record in records:
            if not _finite(record.metrics.values()) or not _finite(
                x for values in record.scores.values() for x in values
            ):
                raise RunFailed(
                    f"task {task} doc {record.doc_id}: non-finite score (NaN or inf): the "
                    "model's outputs are broken; not stored"
                )
        # A prompt too long to generate from is stored as `truncated` with an error: no answer.
        failed = [r for r in records if not r.ok or r.error is not None]
        if records and len(failed) / len(records) > max_error_rate:
            first = failed[0]
            raise RunFailed(
                f"task {task}: {len(failed)} of {len(records)} examples failed "
                f"(> max_error_rate {max_error_rate:g}), first: doc {first.doc_id} "
                f"{first.status}: {(first.error or '')[:200]}; not stored"
            )


def _finite(values: Iterable[Any]) -> bool:
    return all(
        math.isfinite(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool)
    )


def record_problems(record: Record, info: TaskInfo) -> list[str]:
    """What contradicts itself in one record of task `info` (empty when consistent).

    A failed example has no answer; a scored one's `correct` is its primary metric; for
    multiple choice, `pred` is the argmax of its stored log-likelihoods (per character for
    acc_norm) and `correct` says whether it equals `target`.
    """
    where = f"{record.task} doc {record.doc_id}"
    if not record.ok:
        if record.correct is not None or record.pred is not None:
            return [f"{where}: failed ({record.status}) but has an answer"]
        return []
    if record.correct is None:
        return []
    problems = []
    metric = record.metrics.get(info.metric)
    if metric is not None and float(record.correct) != metric:
        problems.append(f"{where}: correct={record.correct} but {info.metric}={metric:g}")
    if info.output_type == "loglikelihood" and _is_index(record.pred, record.target):
        if record.correct != int(record.pred == record.target):
            problems.append(
                f"{where}: correct={record.correct} but pred {record.pred} vs target "
                f"{record.target}"
            )
        best = _argmax(record.scores, info.metric)
        if best is not None and best != record.pred:
            problems.append(f"{where}: pred {record.pred} is not the best-scored choice {best}")
    return problems


def _is_index(*values: Any) -> bool:
    return all(isinstance(v, int) and not isinstance(v, bool) for v in values)


def _argmax(scores: dict[str, list[Any]], metric: str) -> int | None:
    loglik, chars = scores.get("loglik"), scores.get("chars")
    if not loglik or not chars or len(loglik) != len(chars) or metric not in ("acc", "acc_norm"):
        return None
    best, best_norm = argmax_choices(ChoiceScores(list(loglik), [], list(chars)))
    return best if metric == "acc" else best_norm


def proxy_problems(run: Run) -> list[str]:
    """What in a stored proxy contradicts its sampling design, whose populations and inclusion
    probabilities weigh every estimate the gate makes from it (an edited population moves a
    verdict): a unit's strata that do not hold exactly the parent's examples, a sampled
    example missing from the records or outside its stratum's margin range, records the
    design did not sample. Empty for a plain baseline."""
    design = run.manifest.proxy
    if design is None:
        return []
    problems = []
    units: dict[str, list[str]] = {}
    for name, info in sorted(run.manifest.tasks.items()):
        units.setdefault(info.group or name, []).append(name)
    for unit in sorted({s.unit for s in design.strata} - set(units)):
        problems.append(f"stratum unit {unit} is not a unit of the proxy's tasks")
    by_doc = {(r.task, r.doc_id): r for records in run.records.values() for r in records}
    sampled = set()
    for unit, tasks in units.items():
        strata = design.unit_strata(unit)
        held = sum(s.population for s in strata)
        parent = sum(design.parent_n.get(task, 0) for task in tasks)
        if held != parent:
            problems.append(f"unit {unit}: its strata hold {held} examples, the parent {parent}")
        for h, task, doc in design.members(unit):
            sampled.add((task, doc))
            record = by_doc.get((task, doc))
            if record is None or task not in tasks:
                problems.append(f"{task} doc {doc}: sampled for {unit} but not in its records")
                continue
            margin = record_margin(record, run.manifest.tasks[task].metric)
            value = -math.inf if margin is None else margin
            if not strata[h].margin_low <= value <= strata[h].margin_high:
                problems.append(
                    f"{task} doc {doc}: margin {value:.6g} outside its stratum's "
                    f"[{strata[h].margin_low:.6g}, {strata[h].margin_high:.6g}]"
                )
    problems += [
        f"{task} doc {doc}: not sampled by the design" for task, doc in by_doc.keys() - sampled
    ]
    return problems


def check_proxy(run: Run) -> None:
    """BadInput when a stored proxy contradicts its design (see `proxy_problems`)."""
    problems = proxy_problems(run)
    if problems:
        raise BadInput(
            f"proxy {run.manifest.name}: {problems[0]} ({len(problems)} problem(s); "
            f"`regress baseline verify {run.manifest.name}` lists them)"
        )


def proxy_parent_problems(proxy: Run, parent: Run) -> list[str]:
    """What a proxy's records and design contradict in its parent baseline: the parent's
    records changed since the proxy was drawn, or a sampled record is not the parent's."""
    design = proxy.manifest.proxy
    if design is None:
        return []
    problems = []
    if design.parent_records_sha256 != parent.manifest.records_sha256:
        problems.append(f"parent {parent.manifest.name}: its records changed since the proxy")
    theirs = {(r.task, r.doc_id): r for records in parent.records.values() for r in records}
    for records in proxy.records.values():
        for record in records:
            if theirs.get((record.task, record.doc_id)) != record:
                problems.append(
                    f"{record.task} doc {record.doc_id}: not the parent's record of that example"
                )
    return problems


def strata_problems(proxy: Run, parent: Run) -> list[str]:
    """What in a proxy's strata contradicts its parent, stratum by stratum: each stratum must
    hold its cut of the unit's examples ranked by the parent's margins (that population, that
    margin range) and sample only from it. Needs the parent the proxy was drawn from
    (`proxy_parent_problems` checks that it is); empty for a plain
    baseline."""
    design = proxy.manifest.proxy
    if design is None:
        return []
    problems = []
    for unit, tasks in margin_units(parent).items():
        strata = design.unit_strata(unit)
        if not strata:
            problems.append(f"unit {unit}: in the parent, but the design has no strata for it")
            continue
        for stratum, cut in zip(strata, margin_cuts(parent, tasks, len(strata)), strict=True):
            where = f"stratum {unit}/{stratum.index}"
            margins = [margin for margin, _, _ in cut] or [math.nan]
            ours = (stratum.population, stratum.margin_low, stratum.margin_high)
            if ours != (len(cut), min(margins), max(margins)):
                problems.append(
                    f"{where}: holds {stratum.population} examples in margins "
                    f"[{stratum.margin_low:.6g}, {stratum.margin_high:.6g}]; the parent's cut "
                    f"holds {len(cut)} in [{min(margins):.6g}, {max(margins):.6g}]"
                )
            members = {(task, doc) for _, task, doc in cut}
            strays = [
                (t, d) for t, ids in stratum.docs.items() for d in ids if (t, d) not in members
            ]
            problems += [
                f"{where}: {task} doc {doc} is sampled there but is not the parent's example "
                "of that stratum"
                for task, doc in strays
            ]
    return problems
