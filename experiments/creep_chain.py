"""The creep guard on a real chain of requantizations: each gated against the last promoted
baseline, and against the anchor.

SmolLM2-135M's packaged Q4_1 is the anchor (run here, so the CPU kernels match). Each
candidate, a real requantization of it in decreasing precision, is checked once with the
anchor in the policy (both rows in one Holm family), and the same candidate run is gated
again against the last baseline alone (no model run). A team that promotes on the step
gate's PASS moves its baseline to the candidate; the guarded gate's verdict says whether it
would have let it. Prints a Markdown table and the CPU flags.

    flock /tmp/regress-model.lock .venv/bin/python experiments/creep_chain.py \
        --tasks arc_easy --limit 1000 [--pass-requires no_evidence_of_harm]

`--pass-requires no_evidence_of_harm` gates each step the permissive way (PASS unless shown
worse), under which small drops pass one by one: the slide the anchor is there to stop.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from dataclasses import replace
from pathlib import Path

import llama_cpp

from regress.backends.models import resolve_model_path
from regress.checks import CandidateModel, CheckOptions, check
from regress.core.manifest import Run
from regress.gate.policy import Policy
from regress.gate.results import UnitResult
from regress.run.engine import TaskSpec
from regress.run.runner import RunPlan, execute
from regress.stats import PassRequires
from regress.sweep.quantize import quantize_file
from regress.tasks import get_tasks, resolve_source

DATA = Path(os.environ.get("REGRESS_DATA_DIR", Path(__file__).resolve().parents[2] / "shared/data"))


def main() -> None:
    """Walk the chain; print one row per candidate."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="arc_easy", help="tasks or groups, comma-separated")
    parser.add_argument("--limit", type=int, default=None, help="documents per task")
    parser.add_argument("--num-fewshot", type=int, default=None)
    parser.add_argument("--types", default="Q8_0,Q6_K,Q5_0,Q4_0,Q3_K_M,Q2_K")
    parser.add_argument("--max-cumulative-drop", type=float, default=0.03)
    parser.add_argument(
        "--pass-requires",
        default="evidence",
        help="the step gate's PASS: evidence, or no_evidence_of_harm (PASS unless shown worse)",
    )
    args = parser.parse_args()
    source = resolve_source(DATA)
    reference = resolve_model_path("smollm2-135m")
    specs = tuple(
        TaskSpec(task, args.num_fewshot, args.limit) for task in get_tasks(args.tasks.split(","))
    )
    anchor = execute(RunPlan(specs, str(reference), name="anchor", source=source)).run
    step_policy = Policy(pass_requires=PassRequires(args.pass_requires))
    guarded = replace(step_policy, anchor="anchor", max_cumulative_drop=args.max_cumulative_drop)
    current, current_name = anchor, "anchor (Q4_1)"
    print(
        "| candidate | gated against | step Δ | step verdict | Δ since anchor | anchor row "
        "| guarded verdict | promoted on the step's PASS |\n|---|---|---|---|---|---|---|---|",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="creep-") as scratch:
        for kind in args.types.split(","):
            model = CandidateModel(
                str(quantize_file(reference, kind, Path(scratch) / f"{kind}.gguf"))
            )
            options = CheckOptions(policy=guarded, source=source, anchor=anchor)
            result = check(current, model, options)
            step, since = _rows(result.comparison.units)
            alone = check(current, result.candidate, CheckOptions(step_policy, source)).comparison
            promoted = alone.verdict.value == "PASS"
            print(
                f"| {kind} | {current_name} | {_delta(step)} | {alone.verdict.value} | "
                f"{_delta(since)} | {since.verdict.value} | {result.comparison.verdict.value} | "
                f"{'yes' if promoted else 'no'} |",
                flush=True,
            )
            if promoted:
                current, current_name = _named(result.candidate, kind), kind
    print(f"\ntasks {args.tasks}, limit {args.limit}, shots {args.num_fewshot}; max_drop 2 pts,")
    print(
        f"max_cumulative_drop {args.max_cumulative_drop * 100:g} pts, alpha 0.05, "
        f"pass_requires {args.pass_requires}"
    )
    print(f"llama.cpp system info: {llama_cpp.llama_print_system_info().decode().strip()}")


def _rows(units: tuple[UnitResult, ...]) -> tuple[UnitResult, UnitResult]:
    """The one unit's row against the baseline and its row against the anchor."""
    [step] = [u for u in units if u.since is None]
    [since] = [u for u in units if u.since is not None]
    return step, since


def _delta(unit: UnitResult) -> str:
    low, high = unit.ci or (float("nan"), float("nan"))
    return f"{(unit.delta or 0) * 100:+.1f} [{low * 100:+.1f}, {high * 100:+.1f}]"


def _named(run: Run, name: str) -> Run:
    """The candidate run as the next baseline (named for the reports)."""
    return replace(run, manifest=replace(run.manifest, name=name))


if __name__ == "__main__":
    main()
