"""The gate on a batch-dependent server: the baseline's model rerun on that server,
interleaved with the candidate (A B A B), and the candidate gated against that rerun.

A server whose log-probs move with the requests it computes together (found by
regress.backends.batch_probe) answers the same model differently under other load: the stored
baseline carries the batches of the day it was made, the candidate those of today, and part
of any difference between them is the server's, not the change under test. So when the
candidate's server is batch-dependent, the baseline's pinned model is run again on that
server at the same concurrency, in chunks of the suite that alternate with the candidate's
(the baseline's chunk, then the candidate's, as `bench --against` alternates its timings), so
both sides see the same server under the same load; the candidate is gated against that
rerun. How far the rerun moved from the stored records, the A/A flip rate, is the noise the
server adds to one unchanged model, and the reports print it beside the verdict.

The baseline's model on the server is the served model `--reference-model` names, else the
one the baseline recorded (`build.served_model`) when it was made through a server. A server
reports no sha256 of its weights, so naming the served model is the user's word that it holds
the pinned weights, and the rerun records the pinned sha256. What contradicts that word is
refused (BadInput, exit 2): a name the server does not list, a baseline pinned to no sha256,
the candidate's own served name declared with other weights. Gating against the stored records
instead would read the server's noise as the model's change; `--rebaseline never` does so
anyway, with a warning.

A candidate that is the baseline's own weights (declared by sha256, or served under the same
name) is not rerun beside itself: what changed is then the server (its dtype, version or
settings), which a rerun there would hide, as `check` does not rerun a baseline under a new
runtime (regress.checks.steps). It is gated against the stored records, with a warning.

Neither side goes through the result cache: a replayed chunk was not computed beside the
other side's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from regress.backends import Backend, load_backend
from regress.checks.steps import CheckOptions, Rebaseline, RunProgress, rerun_drift
from regress.core.errors import BadInput
from regress.core.fingerprint import hardware_differences
from regress.core.manifest import Run
from regress.core.merge import merge_runs
from regress.gate.results import HardwareAction, HardwareCheck
from regress.run.engine import Prepared, Shard
from regress.run.runner import Outcome, RunPlan, execute

CHUNK_EXAMPLES = 50
"""Examples per chunk: each side's chunk is a few full batches of a server's concurrency, and
a suite of thousands alternates dozens of times."""

STORED_ON_BATCHING = (
    "the candidate's server answers differently by batch (its log-probs moved inside a batch) "
    "and --rebaseline never gates against the stored records: part of any difference is the "
    "server's batching, not the model"
)

SERVER_UNDER_TEST = (
    "the candidate is the baseline's own weights on a server that answers differently by "
    "batch: what changed is the server, which a rerun there would hide, so the candidate is "
    "gated against the stored records and part of any difference is the server's batching"
)


@dataclass(frozen=True)
class Interleaved:
    """The two runs of an interleaved check and what the rerun says of the server's noise."""

    candidate: Outcome
    reference: Outcome
    """The baseline's model, rerun on the candidate's server."""
    hardware: HardwareCheck
    """Action INTERLEAVED; its flips over n are the A/A flip rate."""


def batch_dependent(plan: RunPlan) -> bool:
    """Whether the plan's server computes answers differently by batch (its probe, run when
    the backend is `openai` at a concurrency above 1 on a version-reporting server)."""
    if plan.backend != "openai":
        return False
    engine = load_backend(plan.backend, plan.model, dict(plan.model_args))
    try:
        return _dependent(engine)
    finally:
        engine.close()


def on_server(
    baseline: Run, plan: RunPlan, prepared: Prepared, options: CheckOptions, progress: RunProgress
) -> tuple[Interleaved | None, list[str]]:
    """Run the candidate's `plan` interleaved with the baseline's model on the same server
    when that server is batch-dependent; None (and a warning under `--rebaseline never`)
    when it is not, or the candidate does not run on a server.

    Raises BadInput when the server does not serve the baseline's pinned model (see the
    module's docstring)."""
    if plan.backend != "openai":
        return None, []
    engine = load_backend(plan.backend, plan.model, dict(plan.model_args))
    try:
        if not _dependent(engine):
            return None, []
        if options.rebaseline is Rebaseline.NEVER:
            return None, [STORED_ON_BATCHING]
        reference = reference_plan(baseline, plan, options.reference_model)
        # The candidate's backend read the server's list; a model it lacks would be a 404.
        _refuse_unserved(baseline, plan, reference, engine)
        if _same_weights(plan, reference):
            return None, [SERVER_UNDER_TEST]
        other = load_backend(reference.backend, reference.model, dict(reference.model_args))
        try:
            engines = {"A": other, "B": engine}
            return _interleave(baseline, reference, plan, engines, prepared, options, progress), []
        finally:
            other.close()
    finally:
        engine.close()


def reference_plan(baseline: Run, plan: RunPlan, named: str | None) -> RunPlan:
    """The candidate's `plan` with the baseline's model on the same server: the served model
    `named` (else the one the baseline recorded), pinned to the baseline's sha256."""
    pinned = baseline.manifest.model.sha256
    name = baseline.manifest.name
    if not pinned:
        raise BadInput(
            f"the candidate's server answers differently by batch, and baseline {name!r} "
            "names no sha256 of its weights to rerun there (pass --rebaseline never to gate "
            "against its stored records)"
        )
    served = named or _served_by(baseline)
    if not served:
        raise BadInput(
            f"the candidate's server answers differently by batch, and baseline {name!r} was "
            f"made on {baseline.manifest.backend.name}: pass --reference-model with the "
            f"served model that holds its weights (sha256 {pinned[:12]}), or --rebaseline "
            "never to gate against its stored records"
        )
    args = {**plan.model_args, "model_name": served, "model_sha256": pinned}
    return replace(
        plan,
        model=served,
        model_args=args,
        name=f"{name} (rerun on the server)",
        cache_dir=None,
    )


def _served_by(baseline: Run) -> str:
    """The served model a baseline made through a server recorded ('' for any other)."""
    backend = baseline.manifest.backend
    if backend.name != "openai":
        return ""
    return str(backend.build.get("served_model") or backend.params.get("model_name") or "")


def _refuse_unserved(
    baseline: Run, candidate: RunPlan, reference: RunPlan, engine: Backend
) -> None:
    """BadInput when the server lists no model of the reference's name, or when that name is
    the candidate's own, declared with weights other than the baseline's."""
    served, pinned = reference.model, str(reference.model_args["model_sha256"])
    listed: tuple[str, ...] = getattr(engine, "listed", ())
    if served not in listed:
        url = reference.model_args.get("base_url", "the server")
        raise BadInput(
            f"the server at {url} serves no model {served!r} (it lists: "
            f"{', '.join(listed[:5]) or 'none'}) to rerun baseline {baseline.manifest.name!r} "
            "on: pass --reference-model with the served model that holds its weights, or "
            "--rebaseline never"
        )
    ours = candidate.model_args.get("model_name") or candidate.model
    declared = str(candidate.model_args.get("model_sha256") or "")
    if ours == served and declared and declared != pinned:
        raise BadInput(
            f"the candidate declares served model {served!r} as weights {declared[:12]}, not "
            f"baseline {baseline.manifest.name!r}'s pinned {pinned[:12]}: pass "
            "--reference-model with the served model that holds the baseline's weights"
        )


def _same_weights(candidate: RunPlan, reference: RunPlan) -> bool:
    """Whether the candidate is the baseline's pinned weights (declared so, or served under
    the same name): then the change under test is the server's dtype, version or settings."""
    declared = str(candidate.model_args.get("model_sha256") or "")
    if declared:
        return declared == str(reference.model_args["model_sha256"])
    return str(candidate.model_args.get("model_name") or candidate.model) == reference.model


def chunk_count(total: int) -> int:
    """How many chunks `total` examples run in: about CHUNK_EXAMPLES each, and at least two
    (A B A B) when there are two examples to split."""
    return max(1, min(2, total), math.ceil(total / CHUNK_EXAMPLES))


def _interleave(
    baseline: Run,
    reference: RunPlan,
    candidate: RunPlan,
    engines: dict[str, Backend],
    prepared: Prepared,
    options: CheckOptions,
    progress: RunProgress,
) -> Interleaved:
    plans = {"A": reference, "B": replace(candidate, cache_dir=None)}
    labels = {"A": f"rerun baseline {baseline.manifest.name}", "B": f"check {candidate.model}"}
    count = chunk_count(sum(len(examples) for _, examples in prepared))
    done: dict[str, list[Outcome]] = {"A": [], "B": []}
    for i in range(count):
        shard = Shard(i, count)
        part = shard.keep(prepared)
        for side in "AB":
            with progress(f"{labels[side]} (chunk {i + 1}/{count}, A B A B)") as tick:
                outcome = execute(replace(plans[side], shard=shard), tick, part, engines[side])
            done[side].append(outcome)
    rerun, ran = _joined(done["A"], reference), _joined(done["B"], candidate)
    differences = hardware_differences(baseline.manifest.backend, ran.run.manifest.backend)
    check = HardwareCheck(tuple(differences), HardwareAction.INTERLEAVED, chunks=count)
    hardware = rerun_drift(baseline, rerun.run, options.policy, check)
    return Interleaved(ran, rerun, hardware)


def _joined(chunks: list[Outcome], plan: RunPlan) -> Outcome:
    """One side's chunks as one run, as `regress merge` joins shards (it refuses chunks
    whose compute paths differ)."""
    run = merge_runs([o.run for o in chunks], name=plan.name, command=plan.command)
    if plan.shard is not None:  # the chunks were of one `--shard i/n`: the run still is
        shard = f"{plan.shard.index}/{plan.shard.count}"
        run = replace(run, manifest=replace(run.manifest, shard=shard))
    return Outcome(
        run=run,
        task_runs=[task for o in chunks for task in o.task_runs],
        elapsed_s=sum(o.elapsed_s for o in chunks),
    )


def _dependent(engine: Backend) -> bool:
    server = engine.fingerprint().build.get("server")
    return isinstance(server, dict) and server.get("batch_dependent") is True
