"""The latency gate's false-alarm rate on A/A runs on this machine (docs/speed.md).

    flock /tmp/regress-model.lock \\
        .venv/bin/python experiments/speed_gate_aa.py [--model smollm2-135m] [--repeats 40]
        [--prompts 4] [--output-len 16] [--rounds 3] [--slower-threads 1]

Runs `regress.bench.speed_gate.run_speed_gate` --repeats times with the baseline as its own
candidate (same file, same settings, two separately loaded instances) and counts:

- SLOWER verdicts: the gate's false alarms (what CI would see);
- runs whose B/A bounds exclude 1 on either side: how often the test calls a difference
  at all (its nominal rate is 2 x alpha = 10%);
- the A/A noise floor the gate measured each time.

With --slower-threads N it then runs the same number of gates against the baseline on N
threads (a truly slower candidate) and counts how often the gate catches it.
Prints the CPU flags (llama.cpp system info) first.
"""

from __future__ import annotations

import argparse
import statistics
import time

from regress.bench.prompts import BUILTIN_PROMPTS
from regress.bench.speed_gate import SpeedGateOptions, SpeedVerdict, run_speed_gate


def _series(args: argparse.Namespace, candidate_args: dict[str, int], label: str) -> None:
    verdicts, ratios, floors, differs = [], [], [], 0
    start = time.perf_counter()
    for i in range(args.repeats):
        result = run_speed_gate(
            SpeedGateOptions(
                baseline=args.model,
                candidate=args.model,
                baseline_args={"threads": 2},
                candidate_args=candidate_args,
                prompts=BUILTIN_PROMPTS[: args.prompts],
                output_len=args.output_len,
                rounds=args.rounds,
            )
        )
        d = result.decision
        if i == 0:
            print(f"CPU flags: {result.baseline_fingerprint.build['system_info'].strip()}")
        verdicts.append(d.verdict)
        ratios.append(d.ratio.ratio)
        floors.append(d.noise_floor)
        differs += d.ratio.low > 1 or d.ratio.high < 1
        print(
            f"{label} {i + 1:3d}: {d.verdict.value:12s} B/A {d.ratio.ratio:.3f} "
            f"[{d.ratio.low:.3f}, {d.ratio.high:.3f}] floor {d.noise_floor:.1%}",
            flush=True,
        )
    n = len(verdicts)
    print(
        f"\n{label}: {n} gate runs in {time.perf_counter() - start:.0f} s; "
        f"SLOWER {verdicts.count(SpeedVerdict.SLOWER)}/{n}, "
        f"INCONCLUSIVE {verdicts.count(SpeedVerdict.INCONCLUSIVE)}/{n}, "
        f"bounds exclude 1: {differs}/{n}; B/A median {statistics.median(ratios):.3f} "
        f"(range {min(ratios):.3f}-{max(ratios):.3f}); A/A noise floor median "
        f"{statistics.median(floors):.1%}, max {max(floors):.1%}\n",
        flush=True,
    )


def main() -> None:
    """Parse the flags, run the A/A series, then the slower-candidate series if asked."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--repeats", type=int, default=40)
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--output-len", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--slower-threads", type=int, default=0)
    args = parser.parse_args()
    print(
        f"{args.model}: {args.prompts} built-in prompts x {args.rounds} rounds, A B A B, "
        f"{args.output_len} output tokens, max_slowdown 10%, alpha 0.05"
    )
    _series(args, {"threads": 2}, "A/A")
    if args.slower_threads:
        _series(args, {"threads": args.slower_threads}, f"threads 2 vs {args.slower_threads}")


if __name__ == "__main__":
    main()
