"""How many examples each estimand needs to decide real requantizations: 0/1 accuracy against
the gold choice's probability (`estimand: p_gold`), at the same 2-point margin.

A packaged model is the baseline (run here, so the CPU kernels match); each candidate is a real
requantization of it (regress's quantize API). Both run the same multiple-choice documents.
For each unit and estimand, the script resamples the observed paired examples (with
replacement, 400 draws per size) at sizes up to 8,000 and applies the gate's own test at each:
the exact margin test for accuracy (regress.stats.margin_pvalue), the betting test for p_gold
(regress.stats.BoundedDrop). "n to PASS" is the smallest size at which at least 80% of draws
show the drop within the margin (at alpha 0.05: the gate's PASS is an intersection of the
units' tests, each at the full alpha); "n to REGRESS" the same for a drop shown beyond it
(alpha 0.05 / units, the Bonferroni share). "> 8,000" means never on the grid. The estimates
describe these candidates on these documents: the n a gate needs for a candidate like them.

    REGRESS_DATA_DIR=/work/shared/data flock /tmp/regress-model.lock \\
      .venv/bin/python experiments/estimand_n.py --write docs/results/estimands.md
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from functools import cache
from pathlib import Path

import numpy as np
from _common import REPO, cpu_flags

from regress.backends.models import resolve_model_path
from regress.gate.divergence import KL_CAP
from regress.gate.outcomes import gold_probability
from regress.run.cache import default_cache_dir
from regress.run.engine import TaskSpec
from regress.run.runner import RunPlan, execute
from regress.stats import Side, bounded_mean_pvalue, kl_divergence_choices, margin_pvalue
from regress.sweep.quantize import quantize_file
from regress.tasks import get_tasks, resolve_source

DATA = Path(os.environ.get("REGRESS_DATA_DIR", REPO.parent / "shared/data"))
SIZES = (50, 100, 200, 300, 500, 750, 1000, 1500, 2000, 3000, 5000, 8000)
DRAWS = 400
POWER = 0.8
ALPHA = 0.05


def main() -> None:
    """Run the baseline and each candidate, then print (or write) the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m", help="the packaged baseline model")
    parser.add_argument("--tasks", default="arc_easy,piqa", help="multiple-choice tasks")
    parser.add_argument("--limit", type=int, default=500, help="documents per task")
    parser.add_argument("--types", default="Q8_0,Q4_0,IQ3_S,Q2_K", help="candidate types")
    parser.add_argument("--margin", type=float, default=0.02, help="max_drop of both estimands")
    parser.add_argument("--max-kl", type=float, default=0.02, help="max_kl of the KL estimand")
    parser.add_argument("--write", type=Path, default=None, help="write the Markdown page here")
    args = parser.parse_args()
    source = resolve_source(DATA)
    reference = resolve_model_path(args.model)
    specs = tuple(TaskSpec(task, None, args.limit) for task in get_tasks(args.tasks.split(",")))
    rows = []
    with tempfile.TemporaryDirectory(prefix="estimands-") as scratch:
        # The result cache (regress's default) makes a killed run resume.
        cache = default_cache_dir()
        plan = RunPlan(specs, str(reference), name="base", source=source, cache_dir=cache)
        base = execute(plan).run
        for kind in args.types.split(","):
            path = quantize_file(reference, kind, Path(scratch) / f"{kind}.gguf")
            plan = RunPlan(specs, str(path), name=kind, source=source, cache_dir=cache)
            cand = execute(plan).run
            for spec in specs:
                name = spec.task.name
                rows.append(_row(kind, name, base.records[name], cand.records[name], args))
                print(rows[-1], file=sys.stderr, flush=True)
    units = len(specs)
    text = (
        f"# Estimands: examples to decide real requantizations of {args.model}\n\n"
        "Written by `experiments/estimand_n.py` (its docstring has the command and the method). "
        f"{args.limit} documents per task, zero-shot; margin {args.margin * 100:g} points for "
        f"accuracy and p_gold, max_kl {args.max_kl:g} nats (each example capped at {KL_CAP:g}); "
        f"n to PASS at alpha {ALPHA}, n to REGRESS at alpha {ALPHA} / {units}; "
        f"{DRAWS} resamples per size, {POWER:.0%} of them deciding. Flips: answers that changed. "
        "p_gold: the gold choice's probability among the choices. KL: mean capped KL divergence "
        "of the candidate's choice distribution from the baseline's (`max_kl`).\n\n"
        "n to PASS and n to REGRESS, each for accuracy / p_gold / KL:\n\n"
        "| candidate | task | n | flips | Δ accuracy | Δ p_gold | mean KL | PASS: accuracy "
        "| p_gold | KL | REGRESS: accuracy | p_gold | KL |\n"
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| ---: |\n" + "\n".join(rows) + f"\n\nllama.cpp system info (CPU flags): `{cpu_flags()}`\n"
    )
    print(text)
    if args.write:
        args.write.write_text(text, encoding="utf-8")


def _row(kind: str, task: str, base: list, cand: list, args: argparse.Namespace) -> str:
    """One candidate's task: what moved, and the n each estimand needs to decide."""
    by_id = {r.doc_id: r for r in cand}
    pairs = [(r, by_id[r.doc_id]) for r in base if r.doc_id in by_id]
    right = np.array([[r.correct or 0, c.correct or 0] for r, c in pairs], dtype=float)
    gold = np.array([[gold_probability(r), gold_probability(c)] for r, c in pairs])
    kl = np.array([kl_divergence_choices(r.scores["loglik"], c.scores["loglik"]) for r, c in pairs])
    capped = np.clip(kl, 0.0, KL_CAP)
    units = len(args.tasks.split(","))
    n_pass = _n_to(right, gold, capped, args, Side.WITHIN, ALPHA)
    n_regress = _n_to(right, gold, capped, args, Side.BEYOND, ALPHA / units)
    flips = float(np.mean(right[:, 0] != right[:, 1]))
    return (
        f"| {kind} | {task} | {len(pairs)} | {flips:.1%} | "
        f"{(right[:, 1] - right[:, 0]).mean() * 100:+.1f} pts | "
        f"{(gold[:, 1] - gold[:, 0]).mean() * 100:+.1f} pts | {capped.mean():.4f} | "
        + " | ".join(_shown(n) for n in (*n_pass, *n_regress))
        + " |"
    )


def _n_to(
    right: np.ndarray,
    gold: np.ndarray,
    kl: np.ndarray,
    args: argparse.Namespace,
    side: Side,
    level: float,
) -> tuple[int | None, ...]:
    """The smallest size on SIZES at which POWER of the resamples decide `side`, for
    accuracy, p_gold and the capped KL (None: none on the grid)."""
    rng = np.random.default_rng(0)
    direction = "above" if side is Side.BEYOND else "below"
    found: list[int | None] = [None, None, None]
    for n in SIZES:
        draws = rng.integers(0, len(right), size=(DRAWS, n))
        b = (right[draws, 0] > right[draws, 1]).sum(axis=1)
        c = (right[draws, 0] < right[draws, 1]).sum(axis=1)
        pairs = zip(b.tolist(), c.tolist(), strict=True)
        shown = [
            np.mean([_exact(x, y, n, args.margin, side) < level for x, y in pairs]),
            np.mean(
                bounded_mean_pvalue(
                    gold[draws, 0] - gold[draws, 1], args.margin, direction, -1.0, 1.0
                )
                < level
            ),
            np.mean(bounded_mean_pvalue(kl[draws], args.max_kl, direction, 0.0, KL_CAP) < level),
        ]
        found = [f if f is not None or s < POWER else n for f, s in zip(found, shown, strict=True)]
        if None not in found:
            break
    return tuple(found)


@cache
def _exact(b: int, c: int, n: int, margin: float, side: Side) -> float:
    return margin_pvalue(b, c, n, margin, side)


def _shown(n: int | None) -> str:
    return f"{n:,}" if n is not None else f"> {SIZES[-1]:,}"


if __name__ == "__main__":
    main()
