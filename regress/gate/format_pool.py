"""The opt-in pooled test across prompt formats (`formats: {pooled: true}` in the policy).

The gate tests each format as a unit (regress.tasks.formats). A candidate that loses a point
in every format may show in none of them, yet the formats together hold K times the answers.
They are not K independent samples, though: one example's formats share its difficulty, so
pooling the answers as if independent would understate the spread. The pooled unit
`UNIT@pooled` therefore has one value per example: its accuracy averaged over the formats
(a failed example counts as wrong in its format, as everywhere in the gate), paired
baseline against candidate and tested with the gate's test for score units, whose spread is
that of the per-example means: clustered on the example. It joins the one Holm family beside
the per-format units; the per-format units stay.

Only examples present in every format of the unit on both sides are pooled.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from regress.core.errors import BadInput
from regress.core.manifest import TaskInfo
from regress.core.records import Record, Status
from regress.gate.pairing import Pair, Paired
from regress.gate.policy import Policy
from regress.tasks.variants import variant_of

METRIC = "format_mean"
"""The pooled records' metric: an example's accuracy averaged over its formats."""
SUFFIX = "@pooled"


def pooled(
    tasks: Sequence[TaskInfo], pairs: dict[str, list[Pair]]
) -> tuple[list[TaskInfo], dict[str, list[Pair]]]:
    """One pooled task per task run in two or more formats or instructions
    (`mmlu_anatomy@pooled` in unit `mmlu@pooled`), with its pairs; nothing for tasks in one."""
    formats: dict[str, list[TaskInfo]] = {}
    for info in tasks:
        formats.setdefault(variant_of(info.name)[0], []).append(info)
    new_tasks, new_pairs = [], {}
    for base, infos in sorted(formats.items()):
        if len(infos) < 2:
            continue
        by_doc = [{b.doc_id: (b, c) for b, c in pairs[i.name]} for i in infos]
        common = sorted(set.intersection(*(set(d) for d in by_doc)))
        if not common:
            continue
        name = base + SUFFIX
        new_tasks.append(
            replace(
                infos[0],
                name=name,
                group=(variant_of(infos[0].group)[0] if infos[0].group else base) + SUFFIX,
                n=len(common),
                metric=METRIC,
                higher_is_better=True,
            )
        )
        new_pairs[name] = [
            (
                _mean(name, [d[doc][0] for d in by_doc]),
                _mean(name, [d[doc][1] for d in by_doc]),
            )
            for doc in common
        ]
    return new_tasks, new_pairs


def _mean(task: str, records: Sequence[Record]) -> Record:
    """One example's records in every format as one record of their mean accuracy."""
    first = records[0]
    rates = [sum(r.outcomes) / len(r.outcomes) for r in records]
    return Record(
        task=task,
        doc_id=first.doc_id,
        doc_hash=first.doc_hash,
        prompt_hash="",
        target=first.target,
        pred=None,
        correct=None,
        metrics={METRIC: sum(rates) / len(rates)},
        status=Status.OK,
    )


def with_pooled(paired: Paired, policy: Policy) -> Paired:
    """The pairing with a pooled unit for every unit in several prompt formats."""
    if policy.metric is not None:
        raise BadInput(
            "formats.pooled averages each example's primary outcome over its formats; it "
            f"cannot pair on metric {policy.metric!r}: drop one of the two policy keys"
        )
    tasks, pairs = pooled(paired.tasks, paired.pairs)
    every = sorted((*paired.tasks, *tasks), key=lambda t: t.name)
    return replace(paired, tasks=tuple(every), pairs={**paired.pairs, **pairs})
