"""A PR gate under 5 minutes on 2 cores that detects a 3-point drop: budget, power, wall time.

    .venv/bin/python experiments/proxy_gate.py [--runs-dir DIR] [--candidate Q4_0] [--drop 0.03]

Uses the full ARC-Easy reference run of experiments/proxy_efficiency.py (DIR/arc_easy/ref, made
there). Steps:
1. the discordance ψ to plan for: the real candidate's share of changed answers over the
   whole test set (DIR/arc_easy/<candidate>);
2. the smallest budget (in steps of 100) whose proxy, drawn with the shipped calibration,
   flags a true --drop as REGRESSION in at least 80% of 2,000 simulated candidates
   (`regress selftest`, policy `rule: change, max_drop: 0.01`), with its false-alarm rate;
3. the wall time of `regress check --baseline <that proxy> --model <candidate> --no-cache`
   on llama.cpp, model load included, run alone (under the shared model lock).

Prints the llama.cpp system info (CPU flags) first.
"""

from __future__ import annotations

import argparse
import dataclasses
import fcntl
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from regress.core.store import Store, read_run
from regress.gate.policy import Policy
from regress.proxy.build import ProxyOptions, build_proxy
from regress.proxy.selftest import SelftestOptions, selftest_baseline
from regress.stats import Rule

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("REGRESS_DATA_DIR", REPO.parent / "shared" / "data"))
POLICY = "rule: change\nmax_drop: 0.01\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs-dir", type=Path, default=Path("/tmp/regress-full-runs"))
    parser.add_argument("--models-dir", type=Path, default=None)
    parser.add_argument("--candidate", default="Q4_0")
    parser.add_argument("--drop", type=float, default=0.03)
    parser.add_argument("--lock", default="/tmp/regress-model.lock")
    args = parser.parse_args()
    ref = read_run(args.runs_dir / "arc_easy" / "ref")
    cand = read_run(args.runs_dir / "arc_easy" / args.candidate)
    print(f"llama.cpp system info: {ref.manifest.backend.build}")
    before = {r.doc_id: r.correct for r in ref.records["arc_easy"]}
    after = {r.doc_id: r.correct for r in cand.records["arc_easy"]}
    psi = sum(before[d] != after[d] for d in before) / len(before)
    print(f"planning for ψ = {psi:.1%} (the {args.candidate} candidate over all {len(before)})")
    policy = Policy(rule=Rule.CHANGE, max_drop=0.01)
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "baselines")
        store.save(
            dataclasses.replace(ref, manifest=dataclasses.replace(ref.manifest, name="full"))
        )
        full = store.load("full")
        chosen = None
        for budget in range(300, len(before), 100):
            proxy = build_proxy(full, "proxy", ProxyOptions(budget=budget))
            options = SelftestOptions(
                drops=(0.0, args.drop), runs=2000, discordance=psi, policy=policy
            )
            unit = selftest_baseline(proxy, options).units[0]
            null, hit = unit.points
            print(
                f"budget {budget}: P(REGRESSION) {hit.regression:.1%} at a {args.drop:.0%} drop, "
                f"{null.regression:.1%} with no drop; MDE {unit.mde * 100:.1f} pts"
            )
            if hit.regression >= 0.8:
                chosen = budget
                store.save(proxy)
                break
        if chosen is None:
            print("no budget below the full suite reaches 80% power")
            return
        policy_file = Path(tmp) / "policy.yaml"
        policy_file.write_text(POLICY)
        models = args.models_dir or args.runs_dir / "models"
        model = models / f"smollm2-{args.candidate}.gguf"
        command = [
            sys.executable, "-m", "regress.cli", "check", "--baseline", "proxy",
            "--store", str(store.root), "--model", str(model), "--data-dir", str(DATA),
            "--policy", str(policy_file), "--no-cache", "--report-md", str(Path(tmp) / "r.md"),
        ]  # fmt: skip
        with open(args.lock, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            start = time.perf_counter()
            result = subprocess.run(command, capture_output=True, text=True)
            elapsed = time.perf_counter() - start
        print(
            f"regress check on the {chosen}-example proxy, {args.candidate} candidate, no cache: "
            f"{elapsed:.0f} s wall, exit {result.returncode}"
        )
        print((Path(tmp) / "r.md").read_text().split("\n\n")[0:3])


if __name__ == "__main__":
    main()
