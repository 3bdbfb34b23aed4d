"""Calibrate and check `regress plan --budget`'s flip profiles on real requantizations.

A flip profile (regress.checks.plan.flip_chance) says how likely each example of a baseline is
to change outcome when a candidate moves every choice's log-likelihood by independent normal
noise of scale s nats. This script runs a packaged model (the baseline, here, so the CPU
kernels match) and real requantizations of it (regress's quantize API) on the same documents,
fits s per candidate so that the model's expected flips on ARC-Easy equal the observed ones,
then checks the fit where it was not made: the flips by quartile of the baseline's margin on
ARC-Easy, and the flips the ARC-Easy s predicts on PIQA and the built-in suite against the
observed. The result cache makes a rerun cheap.

    REGRESS_DATA_DIR=/work/shared/data flock /tmp/regress-model.lock env \\
      OMP_WAIT_POLICY=PASSIVE .venv/bin/python experiments/flip_profiles.py \\
      --write docs/results/flip-profiles.md
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
from regress.core.records import Record
from regress.gate.margins import record_margin
from regress.run.cache import default_cache_dir
from regress.run.engine import TaskSpec
from regress.run.runner import RunPlan, execute
from regress.sweep.quantize import quantize_file
from regress.tasks import get_tasks, resolve_source

DATA = Path(os.environ.get("REGRESS_DATA_DIR", REPO.parent / "shared/data"))


def main() -> None:
    """Run the baseline and each candidate, fit s on ARC-Easy, print (or write) the check."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m", help="the packaged baseline model")
    parser.add_argument("--limit", type=int, default=300, help="documents of ARC-Easy and PIQA")
    parser.add_argument("--types", default="Q8_0,Q4_0,Q2_K,IQ3_S", help="candidate types")
    parser.add_argument("--write", type=Path, default=None, help="write the Markdown page here")
    args = parser.parse_args()
    source = resolve_source(DATA)
    reference = resolve_model_path(args.model)
    specs = tuple(
        TaskSpec(task, None, args.limit) for task in get_tasks(["arc_easy", "piqa"])
    ) + tuple(TaskSpec(task, None, None) for task in get_tasks(["builtin"]))
    cache = default_cache_dir()
    base = execute(RunPlan(specs, str(reference), name="base", source=source, cache_dir=cache)).run
    rows, shapes = [], []
    with tempfile.TemporaryDirectory(prefix="flip-profiles-") as scratch:
        for kind in args.types.split(","):
            path = quantize_file(reference, kind, Path(scratch) / f"{kind}.gguf")
            plan = RunPlan(specs, str(path), name=kind, source=source, cache_dir=cache)
            cand = execute(plan).run
            row, shape = _check(kind, base.records, cand.records)
            rows.append(row)
            shapes.append(shape)
            print(row, shape, flush=True)
    text = (
        f"# Flip profiles: choice noise calibrated on real requantizations of {args.model}\n\n"
        "Written by `experiments/flip_profiles.py` (its docstring has the command and the "
        f"method). ARC-Easy and PIQA: the first {args.limit} test documents, zero-shot; built-in: "
        "the whole suite (500). s: the noise scale (nats per choice log-likelihood) whose "
        "expected flips on ARC-Easy equal the candidate's observed flips. Predicted: the flips "
        "that s gives on the other tasks, from the baseline's own log-likelihoods.\n\n"
        "| candidate | s (nats) | ARC-Easy flips | PIQA observed / predicted | built-in observed "
        "/ predicted |\n| --- | ---: | ---: | ---: | ---: |\n"
        + "\n".join(rows)
        + "\n\nARC-Easy flips by quartile of the baseline's margin (least sure first), observed / "
        "predicted at the fitted s:\n\n| candidate | Q1 | Q2 | Q3 | Q4 |\n| --- | ---: | ---: | "
        "---: | ---: |\n" + "\n".join(shapes) + f"\n\nllama.cpp system info (CPU flags): "
        f"`{cpu_flags()}`\n"
    )
    print(text)
    if args.write:
        args.write.write_text(text, encoding="utf-8")


def _check(
    kind: str, base: dict[str, list[Record]], cand: dict[str, list[Record]]
) -> tuple[str, str]:
    """One candidate's table row and its margin-quartile row."""
    arc = _pairs(base, cand, ["arc_easy"])
    observed = float(np.mean([b.right != c.right for b, c in arc]))
    refs = [b for b, _ in arc]
    s = optimize.brentq(lambda s: (flip_share(refs, s) or 0.0) - observed, 1e-3, 50.0)
    builtin = [t for t in base if t.startswith("builtin_")]
    cells = []
    for tasks in (["piqa"], builtin):
        pairs = _pairs(base, cand, tasks)
        seen = np.mean([b.right != c.right for b, c in pairs])
        predicted = flip_share([b for b, _ in pairs], s) or 0.0
        cells.append(f"{seen:.1%} / {predicted:.1%}")
    row = f"| {kind} | {s:.3f} | {observed:.1%} | {cells[0]} | {cells[1]} |"
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
        by_id = {r.doc_id: r for r in cand[task]}
        found += [(r, by_id[r.doc_id]) for r in base[task] if r.doc_id in by_id]
    return found


if __name__ == "__main__":
    main()
