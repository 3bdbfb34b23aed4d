"""Calibrate and check `regress plan --budget`'s flip profiles on real requantizations.

A flip profile (regress.checks.plan.flip_chance) says how likely each example of a baseline is
to change outcome when a candidate moves every choice's log-likelihood by independent normal
noise of scale s nats. This script runs a packaged model (the baseline, here, so the CPU
kernels match) and real requantizations of it (regress's quantize API) on the same documents,
fits s per candidate so that the model's expected flips on ARC-Easy equal the observed ones,
then checks the fit where it was not made: the flips by quartile of the baseline's margin on
ARC-Easy, and the flips the ARC-Easy s predicts on PIQA and the built-in suite against the
observed. The result cache makes a rerun cheap. It also gives the scales that reproduce the
flips docs/results/proxy-efficiency.md measured over the whole ARC-Easy test set.

    REGRESS_DATA_DIR=/work/shared/data flock /tmp/regress-model.lock env \\
      OMP_WAIT_POLICY=PASSIVE .venv/bin/python experiments/flip_profiles.py \\
      --write docs/results/flip-profiles.md

With `--reference RUN --candidate RUN ...` (run folders, `--save-run`) it reads stored records
instead and runs no model.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import numpy as np
from _common import REPO, cpu_flags
from scipy import optimize

from regress.backends.models import resolve_model_path
from regress.checks.plan import flip_chance, flip_share
from regress.core.manifest import Run
from regress.core.records import Record
from regress.core.store import read_run
from regress.gate.margins import record_margin
from regress.run.cache import default_cache_dir
from regress.run.engine import TaskSpec
from regress.run.runner import RunPlan, execute
from regress.sweep.quantize import quantize_file
from regress.tasks import get_tasks, resolve_source

DATA = Path(os.environ.get("REGRESS_DATA_DIR", REPO.parent / "shared/data"))
DOCUMENTED = (("Q8_0", 0.021), ("Q4_0", 0.157), ("Q2_K", 0.166), ("IQ3_S", 0.276))
"""Shares of all 2,376 ARC-Easy answers each requantization flipped
(docs/results/proxy-efficiency.md)."""


def main() -> None:
    """Run the baseline and each candidate, fit s on ARC-Easy, print (or write) the check."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m", help="the packaged baseline model")
    parser.add_argument("--limit", type=int, default=300, help="documents of ARC-Easy and PIQA")
    parser.add_argument("--types", default="Q8_0,Q4_0,Q2_K,IQ3_S", help="candidate types")
    parser.add_argument("--write", type=Path, default=None, help="write the Markdown page here")
    parser.add_argument("--reference", type=Path, default=None, help="a stored baseline run")
    parser.add_argument("--candidate", type=Path, action="append", help="a stored candidate run")
    args = parser.parse_args()
    rows, shapes = [], []
    if args.reference is not None:
        base = read_run(args.reference)
        origin = f"stored runs: `{args.reference}` against " + ", ".join(
            f"`{c}`" for c in args.candidate or []
        )
        for path in args.candidate or []:
            cand = read_run(path)
            kind = cand.manifest.model.quantization or cand.manifest.model.ref
            row, shape = _check(kind, base.records, cand.records)
            rows.append(row)
            shapes.append(shape)
    else:
        base, origin = _run_all(args, rows, shapes)
    arc = base.records["arc_easy"]
    documented = " ".join(
        f"{kind} {share:.1%}: s = {_fit(arc, share):.3f} nats;" for kind, share in DOCUMENTED
    )
    text = (
        f"# Flip profiles: choice noise calibrated on real requantizations of {args.model}\n\n"
        "Written by `experiments/flip_profiles.py` (its docstring has the command and the "
        "method). Zero-shot; n: the ARC-Easy documents paired. s: the noise scale (nats per "
        "choice log-likelihood) whose expected flips on ARC-Easy equal the candidate's observed "
        "flips. Predicted: the flips that s gives on the other tasks, from the baseline's own "
        "log-likelihoods. Records: "
        f"{origin}.\n\n"
        "| candidate | n | s (nats) | ARC-Easy flips | PIQA observed / predicted | built-in "
        "observed / predicted |\n| --- | ---: | ---: | ---: | ---: | ---: |\n"
        + "\n".join(rows)
        + "\n\nARC-Easy flips by quartile of the baseline's margin (least sure first), observed / "
        "predicted at the fitted s:\n\n| candidate | Q1 | Q2 | Q3 | Q4 |\n| --- | ---: | ---: | "
        "---: | ---: |\n"
        + "\n".join(shapes)
        + "\n\nThe scales that give this baseline's ARC-Easy records the flips "
        "docs/results/proxy-efficiency.md measured over the whole test set: "
        f"{documented}\n\nllama.cpp system info (CPU flags): `{cpu_flags()}`\n"
    )
    print(text)
    if args.write:
        args.write.write_text(text, encoding="utf-8")


def _run_all(args: argparse.Namespace, rows: list[str], shapes: list[str]) -> tuple[Run, str]:
    """Run the baseline model and each requantization; fill `rows` and `shapes`."""
    source = resolve_source(DATA)
    reference = resolve_model_path(args.model)
    specs = tuple(
        TaskSpec(task, None, args.limit) for task in get_tasks(["arc_easy", "piqa"])
    ) + tuple(TaskSpec(task, None, 100) for task in get_tasks(["builtin"]))  # the default's 500
    cache = default_cache_dir()
    base = execute(RunPlan(specs, str(reference), name="base", source=source, cache_dir=cache)).run
    with tempfile.TemporaryDirectory(prefix="flip-profiles-") as scratch:
        for kind in args.types.split(","):
            path = quantize_file(reference, kind, Path(scratch) / f"{kind}.gguf")
            plan = RunPlan(specs, str(path), name=kind, source=source, cache_dir=cache)
            cand = execute(plan).run
            row, shape = _check(kind, base.records, cand.records)
            rows.append(row)
            shapes.append(shape)
            print(row, shape, flush=True)
    return base, (
        f"{args.model} and its requantizations run here on the first {args.limit} ARC-Easy and "
        "PIQA test documents and the whole built-in suite (500)"
    )


def _fit(records: list[Record], share: float) -> float:
    """The noise scale whose expected flips over `records` equal `share`."""
    return float(optimize.brentq(lambda s: (flip_share(records, s) or 0.0) - share, 1e-3, 50.0))


def _check(
    kind: str, base: dict[str, list[Record]], cand: dict[str, list[Record]]
) -> tuple[str, str]:
    """One candidate's table row and its margin-quartile row."""
    arc = _pairs(base, cand, ["arc_easy"])
    observed = float(np.mean([b.right != c.right for b, c in arc]))
    refs = [b for b, _ in arc]
    s = _fit(refs, observed)
    builtin = [t for t in base if t.startswith("builtin_")]
    cells = []
    for tasks in (["piqa"], builtin):
        pairs = _pairs(base, cand, tasks)
        if not pairs:
            cells.append("–")
            continue
        seen = np.mean([b.right != c.right for b, c in pairs])
        predicted = flip_share([b for b, _ in pairs], s) or 0.0
        cells.append(f"{seen:.1%} / {predicted:.1%}")
    row = f"| {kind} | {len(arc)} | {s:.3f} | {observed:.1%} | {cells[0]} | {cells[1]} |"
    margins = np.array([record_margin(b) or 0.0 for b in refs])
    flips = np.array([b.right != c.right for b, c in arc], dtype=float)
    chances = np.array([flip_chance(b, s) or 0.0 for b in refs])
    quarters = np.array_split(np.argsort(margins, kind="stable"), 4)
    shape = " | ".join(f"{flips[q].mean():.1%} / {chances[q].mean():.1%}" for q in quarters)
    return row, f"| {kind} | {shape} |"


def _pairs(
    base: dict[str, list[Record]], cand: dict[str, list[Record]], tasks: list[str]
) -> list[tuple[Record, Record]]:
    """The (baseline, candidate) records of `tasks` on the same documents."""
    found = []
    for task in tasks:
        if task not in base or task not in cand:
            continue
        by_id = {r.doc_id: r for r in cand[task]}
        found += [(r, by_id[r.doc_id]) for r in base[task] if r.doc_id in by_id]
    return found


if __name__ == "__main__":
    main()
