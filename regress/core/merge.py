"""Join the runs of shards into one run, as if the suite had run on one machine."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from regress.core.errors import BadInput
from regress.core.fingerprint import result_params
from regress.core.hashes import task_hashes
from regress.core.manifest import Manifest, Run
from regress.core.records import Record


def _identity(m: Manifest) -> dict[str, Any]:
    """What shards must share, by name: the model, the suite and the compute path (backend,
    version, result settings, the CPU build's kernels, its build description, a server's
    fingerprint and the libraries that compute). Speed settings, the CPU's model and the
    thread count may differ: they do not move floats."""
    tasks = {
        k: (t.group, t.num_fewshot, t.metric, t.output_type, t.limit) for k, t in m.tasks.items()
    }
    build = dict(m.backend.build)
    return {
        "model": m.model.sha256,
        "backend": m.backend.name,
        "version": m.backend.version,
        "params": result_params(m.backend.params),
        "kernels": m.backend.hardware.kernels,
        # Named apart, so a refusal says which of the server's facts differ.
        "server": build.pop("server", {}),
        "build": build,
        "libraries": m.backend.libraries,
        "suite": m.suite_name,
        "tasks": tasks,
    }


def _differences(first: Manifest, other: Manifest) -> str:
    """The fields two shards disagree on, each with both values (cut to keep one line)."""
    ours, theirs = _identity(first), _identity(other)
    return "; ".join(
        f"{key} {_short(ours[key])!r} vs {_short(theirs[key])!r}"
        for key in ours
        if ours[key] != theirs[key]
    )


def _short(value: object, limit: int = 80) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def merge_runs(runs: Sequence[Run], name: str = "merged", command: str = "") -> Run:
    """Merge shard runs of one suite and model; refuse shards that do not belong together."""
    if not runs:
        raise BadInput("merge: no runs given")
    first = runs[0].manifest
    shards = sorted(r.manifest.shard or "" for r in runs)
    counts = {s.split("/")[1] for s in shards if s}
    if "" in shards or len(counts) != 1 or len(shards) != int(counts.pop()):
        raise BadInput(f"merge: need every shard i/n exactly once, got {shards}")
    if len(set(shards)) != len(shards):
        raise BadInput(f"merge: duplicate shards {shards}")
    for run in runs[1:]:
        if _identity(run.manifest) != _identity(first):
            # Shards computed on other kernels, builds or libraries would not merge into
            # the records of one machine (docs/reproducibility.md), so they are refused too.
            raise BadInput(
                f"merge: shard {run.manifest.shard} was run with another model, suite or "
                f"compute path than shard {first.shard}: "
                f"{_differences(first, run.manifest)}"
            )
    records: dict[str, list[Record]] = {}
    for run in runs:
        for task, recs in run.records.items():
            records.setdefault(task, []).extend(recs)
    tasks = {}
    for task in sorted(records):
        recs = sorted(records[task], key=lambda r: r.doc_id)
        if len({r.doc_id for r in recs}) != len(recs):
            raise BadInput(f"merge: task {task} has the same document in two shards")
        records[task] = recs
        dataset_hash, prompt_hash = task_hashes(recs)
        tasks[task] = dataclasses.replace(
            first.tasks[task], n=len(recs), dataset_hash=dataset_hash, prompt_hash=prompt_hash
        )
    manifest = dataclasses.replace(first, name=name, tasks=tasks, shard=None, command=command)
    return Run(manifest=manifest, records=records)
