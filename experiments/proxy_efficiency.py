"""Margin-stratified proxies vs the full suite and a uniform subset (docs/proxies.md,
docs/results/proxy-efficiency.md).

    .venv/bin/python experiments/proxy_efficiency.py [--runs-dir DIR] [--tasks arc_easy]
        [--candidates Q8_0,Q6_K,Q4_0,Q2_K,IQ3_S] [--budget 600] [--draws 2000]

For each task, the reference (SmolLM2-135M Q4_1) and every candidate (real requantizations
made with `regress quantize`) are run once over the WHOLE test set with `regress eval
--save-run DIR/<task>/<name>` (missing runs are made, one model at a time; existing ones are
reused). Then, for each candidate, with a calibration measured on the OTHER candidates only
(leave-one-out, so no candidate calibrates its own proxy):

- full Δ: the candidate's true accuracy change over every example, and its discordance;
- proxy: `regress proxy build --budget N` of the reference, the gate's stratified estimate of
  the full Δ with the interval of the full suite's own Δ, and the gate's interval;
- uniform: a simple random subset of the same N gated as a plain baseline (Tango's interval);
- n≈: the uniform subset size whose interval is as narrow as the proxy's (efficiency);
- coverage and bias over --draws proxies redrawn with other seeds on the same real records.

Prints the llama.cpp system info (CPU flags) of the runs above the table.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from regress.core.manifest import Run
from regress.core.store import read_run
from regress.gate.compare import compare
from regress.gate.policy import Policy
from regress.proxy import flip_rates
from regress.proxy.build import ProxyOptions, build_proxy
from regress.stats import moments, paired_diff_ci

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("REGRESS_DATA_DIR", REPO.parent / "shared" / "data"))
REGRESS = [sys.executable, "-m", "regress.cli"]
Z95 = 1.959964


def ensure_run(runs_dir: Path, task: str, name: str, models_dir: Path) -> Run:
    """The saved full-test-set run of `name` on `task`, made first if missing."""
    folder = runs_dir / task / name
    if not (folder / "manifest.json").exists():
        model = "smollm2-135m"
        if name != "ref":
            model = str(models_dir / f"smollm2-{name}.gguf")
            if not Path(model).exists():
                cmd = [*REGRESS, "quantize", "smollm2-135m", "--type", name, "-o", model]
                subprocess.run(cmd, check=True, capture_output=True)
        cmd = [*REGRESS, "eval", "-m", model, "-t", task, "--data-dir", str(DATA)]
        subprocess.run([*cmd, "--save-run", str(folder)], check=True)
    return read_run(folder)


def restrict(run: Run, keep: dict[str, set[int]], name: str) -> Run:
    """`run` cut to the kept doc ids (what rerunning those examples gives: runs are exact)."""
    subset = run.restricted(keep)
    return Run(dataclasses.replace(subset.manifest, name=name), subset.records)


def outcome(run: Run, task: str) -> dict[int, int]:
    return {r.doc_id: int(r.right) for r in run.records[task]}


def simulate(proxy: Run, ref: Run, cand: Run, task: str, draws: int) -> tuple[float, float]:
    """(coverage of the full Δ by the design interval, mean bias) over redrawn proxies."""
    design = proxy.manifest.proxy
    before, after = outcome(ref, task), outcome(cand, task)
    true = (sum(after.values()) - sum(before.values())) / len(before)
    rng = np.random.default_rng(7)
    strata = design.unit_strata(task)
    # Every example of the parent, by stratum (the design's margin ranges, in rank order).
    ranks = flip_rates.margin_ranks(ref, [task])
    ordered = sorted(ranks, key=ranks.get)
    b = np.zeros((draws, len(strata)))
    c = np.zeros((draws, len(strata)))
    start = 0
    for h, s in enumerate(strata):
        members = ordered[start : start + s.population]
        start += s.population
        d = np.array([after[doc] - before[doc] for _, doc in members])
        picks = rng.random((draws, len(d))).argsort(axis=1)[:, : s.sampled]
        b[:, h] = (d[picks] < 0).sum(axis=1)
        c[:, h] = (d[picks] > 0).sum(axis=1)
    pop = [s.population for s in strata]
    m = moments(pop, [s.sampled for s in strata], b, c)
    covered = np.abs(m.delta - true) <= Z95 * np.sqrt(m.var_design)
    return float(covered.mean()), float((m.delta - true).mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs-dir", type=Path, default=Path("/tmp/regress-full-runs"))
    parser.add_argument("--models-dir", type=Path, default=None)
    parser.add_argument("--tasks", default="arc_easy")
    parser.add_argument("--candidates", default="Q8_0,Q6_K,Q4_0,Q2_K,IQ3_S")
    parser.add_argument("--budget", type=int, default=600)
    parser.add_argument("--draws", type=int, default=2000)
    args = parser.parse_args()
    models_dir = args.models_dir or args.runs_dir / "models"
    models_dir.mkdir(parents=True, exist_ok=True)
    names = args.candidates.split(",")
    policy = Policy()
    for task in args.tasks.split(","):
        ref = ensure_run(args.runs_dir, task, "ref", models_dir)
        cands = {name: ensure_run(args.runs_dir, task, name, models_dir) for name in names}
        print(f"llama.cpp system info: {ref.manifest.backend.build}")
        every = flip_rates.measure(ref, list(cands.values()), f"smollm2-requant-{task}")
        print(f"calibration over every candidate (regress/proxy/flip_rates.py DEFAULT): {every}")
        n_full = len(ref.records[task])
        print(f"\n{task}: {n_full} examples, proxy budget {args.budget}\n")
        print(
            "| candidate | full Δ pts | full flips | proxy Δ̂ [CI of full Δ] | proxy gate CI "
            "| uniform Δ [CI] | gate width proxy / uniform | uniform n, same gate width "
            "| uniform n, same CI of full Δ | coverage | bias pts |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for name, cand in cands.items():
            others = [c for other, c in cands.items() if other != name]
            calib = flip_rates.measure(ref, others, f"leave-out-{name}")
            options = ProxyOptions(budget=args.budget, calibration=calib)
            proxy = build_proxy(ref, "proxy", options)
            keep = {t: {r.doc_id for r in recs} for t, recs in proxy.records.items()}
            unit = compare(proxy, restrict(cand, keep, name), policy).units[0]
            before, after = outcome(ref, task), outcome(cand, task)
            true = (sum(after.values()) - sum(before.values())) / n_full
            flips = sum(before[d] != after[d] for d in before) / n_full
            # A uniform random subset of the same size, gated as a plain baseline.
            rng = np.random.default_rng(11)
            sub = rng.choice(sorted(before), args.budget, replace=False)
            b = sum(before[d] > after[d] for d in sub)
            c = sum(before[d] < after[d] for d in sub)
            low, high = paired_diff_ci(int(b), int(c), args.budget)
            width_uniform = high - low
            width_proxy = unit.ci[1] - unit.ci[0]
            equivalent = flips / (width_proxy / (2 * Z95)) ** 2 if width_proxy > 0 else float("inf")
            # The same for the interval of the full suite's own Δ: a uniform sample of n has
            # design variance (1 - n/N) S² / n, so n = S² / (V + S² / N) matches the proxy's V.
            d = np.array([after[doc] - before[doc] for doc in sorted(before)])
            spread = float(d.var(ddof=1))
            v_design = ((unit.proxy.ci_design[1] - unit.proxy.ci_design[0]) / (2 * Z95)) ** 2
            design_equivalent = spread / (v_design + spread / n_full)
            coverage, bias = simulate(proxy, ref, cand, task, args.draws)
            d_low, d_high = unit.proxy.ci_design
            print(
                f"| {name} | {true * 100:+.2f} | {flips:.1%} "
                f"| {unit.delta * 100:+.2f} [{d_low * 100:+.1f}, {d_high * 100:+.1f}] "
                f"| [{unit.ci[0] * 100:+.1f}, {unit.ci[1] * 100:+.1f}] "
                f"| {(c - b) / args.budget * 100:+.2f} [{low * 100:+.1f}, {high * 100:+.1f}] "
                f"| {width_proxy / width_uniform:.2f} | {equivalent:,.0f} "
                f"| {design_equivalent:,.0f} "
                f"| {coverage:.1%} | {bias * 100:+.3f} |"
            )


if __name__ == "__main__":
    main()
