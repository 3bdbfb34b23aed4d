"""The sequential gate against the fixed one on real candidates: same verdicts, wall time of each.

SmolLM2-135M's packaged Q4_1 is the baseline (made here, so the CPU kernels match); each
candidate is a real requantization of it. Every candidate is gated one job at a time and
without the result cache: by the fixed gate (every example), then by the sequential gate under
each design asked (looks at 25/50/100% by default; `--spending`, the gate's default obf-early
unless told: the tables in docs/results/sequential-gate.md were measured with `--spending obf`,
the default before issue 50). Prints a Markdown table and the CPU flags.

    .venv/bin/python experiments/sequential_gate.py --tasks builtin --limit 100 \
        --looks "0.25,0.5,1;0.25,0.5,0.75,1"
    .venv/bin/python experiments/sequential_gate.py --tasks mmlu --limit 20 --num-fewshot 0
    .venv/bin/python experiments/sequential_gate.py --suite suites/proxy.yaml
    .venv/bin/python experiments/sequential_gate.py --model gemma3-270m --tasks arc_easy \
        --limit 2000 --looks 0.2,0.5,1 --sequential-only

`--sequential-only` skips the fixed gate (issue 50's pool table: verdict, look, examples used).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from statistics import median

import llama_cpp

from regress.backends.models import resolve_model_path
from regress.checks import CandidateModel, CheckOptions, check
from regress.core.manifest import Run
from regress.core.store import Store
from regress.gate.policy import Policy
from regress.gate.results import Comparison
from regress.report.markdown import render_markdown
from regress.run.engine import TaskSpec
from regress.run.runner import RunPlan, execute, suite_specs
from regress.run.suite import load_suite
from regress.stats import SPENDING, SequentialDesign
from regress.sweep.quantize import quantize_file
from regress.tasks import get_tasks, resolve_source
from regress.tasks.base import DataSource

DATA = Path(os.environ.get("REGRESS_DATA_DIR", Path(__file__).resolve().parents[2] / "shared/data"))


def main() -> None:
    """Gate each candidate fixed and under each design; print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="builtin", help="tasks or groups, comma-separated")
    parser.add_argument("--suite", type=Path, default=None, help="a suite file (over --tasks)")
    parser.add_argument("--limit", type=int, default=None, help="documents per task")
    parser.add_argument("--num-fewshot", type=int, default=None)
    parser.add_argument("--model", default="smollm2-135m", help="the reference: a packaged name")
    parser.add_argument("--types", default="Q8_0,Q4_0,Q2_K,IQ3_S", help="candidate types")
    parser.add_argument(
        "--sequential-only", action="store_true", help="skip the fixed gate (a pool's table)"
    )
    parser.add_argument(
        "--looks",
        default="0.25,0.5,1",
        help="designs to compare, ';' between them (e.g. '0.25,0.5,1;0.25,0.5,0.75,1')",
    )
    parser.add_argument(
        "--spending", choices=list(SPENDING), default=next(iter(SPENDING)), help="alpha spending"
    )
    parser.add_argument(
        "--keep",
        type=Path,
        default=None,
        help="keep the baseline (for `regress selftest`) and each report here",
    )
    args = parser.parse_args()
    designs = [
        SequentialDesign(tuple(float(t) for t in looks.split(",")), args.spending)
        for looks in args.looks.split(";")
    ]
    source = resolve_source(DATA)
    reference = resolve_model_path(args.model)
    specs = (
        tuple(suite_specs(load_suite(args.suite)))
        if args.suite
        else tuple(
            TaskSpec(task, args.num_fewshot, args.limit)
            for task in get_tasks(args.tasks.split(","))
        )
    )
    rows: list[str] = []
    shares: dict[SequentialDesign, list[float]] = {d: [] for d in designs}
    with tempfile.TemporaryDirectory(prefix="sequential-") as scratch:
        root = Path(scratch)
        start = time.perf_counter()
        base_run = execute(RunPlan(specs, str(reference), name="base", source=source)).run
        base_s = time.perf_counter() - start
        store = Store(args.keep or root / "store")
        store.save(base_run)
        print(f"baseline run {base_s:.0f} s", flush=True)
        baseline = store.load("base")
        for kind in args.types.split(","):
            model = CandidateModel(str(quantize_file(reference, kind, root / f"{kind}.gguf")))
            fixed, fixed_s = (
                (None, None) if args.sequential_only else _timed(baseline, model, Policy(), source)
            )
            for design in designs:
                seq, seq_s = _timed(baseline, model, Policy(sequential=design), source)
                run = seq.sequential
                assert run is not None
                if args.keep:
                    report = args.keep / f"{kind}-{_looks(design).replace('/', '-')}.md"
                    report.write_text(render_markdown(seq), encoding="utf-8")
                if fixed_s:
                    shares[design].append(seq_s / fixed_s)
                units = " ".join(
                    f"{u.name}:{u.verdict.value}@{run.decided_at.get(u.name, '-')}"
                    for u in seq.units
                    if u.gated
                )
                same = "–" if fixed is None else "yes" if fixed.verdict is seq.verdict else "**no**"
                rows.append(
                    f"| {kind} | {_looks(design)} | {fixed.verdict.value if fixed else '–'} | "
                    f"{seq.verdict.value} | {same} | {units} | "
                    f"{run.examples_run:,} / {run.examples_total:,} | "
                    f"{f'{fixed_s:.0f} s' if fixed_s else '–'} | {seq_s:.0f} s | "
                    f"{f'{seq_s / fixed_s:.0%}' if fixed_s else '–'} |"
                )
                print(rows[-1], flush=True)
    print(
        f"{args.model}, {f'suite {args.suite}' if args.suite else f'tasks {args.tasks}'}, "
        f"limit {args.limit}, "
        f"shots {args.num_fewshot}; baseline run "
        f"{base_s:.0f} s\n"
    )
    print(
        "| candidate | looks | fixed verdict | sequential verdict | same | units (verdict@look) "
        "| examples run | fixed wall | sequential wall | sequential / fixed |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    for design, found in shares.items():
        if found:
            print(f"\nlooks {_looks(design)}: median sequential / fixed wall {median(found):.0%}")
    print(f"\nllama.cpp system info: {llama_cpp.llama_print_system_info().decode().strip()}")


def _looks(design: SequentialDesign) -> str:
    return "/".join(f"{t:.0%}" for t in design.looks)


def _timed(
    baseline: Run, model: CandidateModel, policy: Policy, source: DataSource
) -> tuple[Comparison, float]:
    """The gate's comparison, and its wall time without the result cache."""
    start = time.perf_counter()
    found = check(baseline, model, CheckOptions(policy=policy, source=source)).comparison
    return found, time.perf_counter() - start


if __name__ == "__main__":
    main()
