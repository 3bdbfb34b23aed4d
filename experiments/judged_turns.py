"""Judged conversation turns on real models (docs/results/conversations.md): SmolLM2's
requantization gated on `examples/golden/support_chat.jsonl`, whose last turns Gemma 3 grades.

    flock /tmp/regress-model.lock .venv/bin/python experiments/judged_turns.py \
        [--work /tmp/regress-judged-turns] [--candidate IQ3_S]

Through the `regress` CLI, as a user runs it (a step whose output exists in --work is
skipped):

1. a baseline of SmolLM2-135M (Q4_1) on the set (`regress baseline create --golden`);
2. its requantization gated against it (`regress check --golden ... --judgements`), under a
   policy whose judge is Gemma 3 270M with the `single` template (1-10, read from
   log-probs): the judge grades each side's reply to each judged turn, and each conversation
   passes when every check, code's and the judge's, passes.

Prints the verdict, the turn-by-turn table, the judge's grades and the CPU flags.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from _common import REPO, cpu_flags, step

REGRESS = [sys.executable, "-m", "regress.cli"]
SET = REPO / "examples" / "golden" / "support_chat.jsonl"
POLICY = """\
max_drop: 0.05
min_examples: 12
judge:
  model: gemma3-270m
  template: single
  model_args: {n_ctx: 2048}
"""


def main() -> None:
    """Run the steps; print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/regress-judged-turns"))
    parser.add_argument("--candidate", default="IQ3_S")
    args = parser.parse_args()
    from regress.backends.models import resolve_model_path

    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    store = work / "baselines"
    golden = ["--golden", str(SET)]
    seconds = {
        "baseline": step(
            "baseline",
            store / "chat",
            [
                *REGRESS,
                "baseline",
                "create",
                "--name",
                "chat",
                "-m",
                "smollm2-135m",
                *golden,
                "--store",
                str(store),
            ],
        )  # fmt: skip
    }
    policy = work / "policy.yaml"
    policy.write_text(POLICY)
    kind = args.candidate
    model = work / f"smollm2-{kind.lower()}.gguf"
    source = str(resolve_model_path("smollm2-135m"))
    step(f"quantize {kind}", model,
         [*REGRESS, "quantize", source, "--type", kind, "-o", str(model)])  # fmt: skip
    report = work / f"check-{kind}.json"
    judgements = work / f"judgements-{kind}.jsonl"
    seconds[f"check {kind}"] = step(
        f"check {kind}", report,
        [*REGRESS, "check", "-b", "chat", "--store", str(store), "-m", str(model), *golden,
         "--policy", str(policy), "--judgements", str(judgements), "--report-json", str(report),
         "--report-md", str(work / f"check-{kind}.md")],
        ok=(0, 1),
    )  # fmt: skip

    print(f"`examples/golden/support_chat.jsonl`; CPU flags: {cpu_flags()}\n")
    data = json.loads(report.read_text())
    [unit] = data["units"]
    low, high = unit["ci"]
    print("| candidate | verdict | n | baseline | candidate | Δ [95% CI] | b / c | reason |")
    print("|---|---|---:|---:|---:|---|---|---|")
    print(f"| {kind} | {unit['verdict']} | {unit['n']} | {unit['baseline']:.1%} | "
          f"{unit['candidate']:.1%} | {unit['delta'] * 100:+.1f} [{low * 100:+.1f}, "
          f"{high * 100:+.1f}] | {unit['b']} / {unit['c']} | {unit['reason']} |")  # fmt: skip
    print("\n| turn | n | baseline | candidate | broke | fixed |\n|---:|---:|---:|---:|---:|---:|")
    for t in data["turns"]:
        print(f"| {t['turn']} | {t['n']} | {t['baseline']:.0%} | {t['candidate']:.0%} | "
              f"{t['broke']} | {t['fixed']} |")  # fmt: skip
    lines = [json.loads(line) for line in judgements.read_text().splitlines()]
    grades = {side: Counter(int(j["verdicts"][i]) for j in lines) for i, side in enumerate("bc")}
    judged = unit["judged"]
    print("\n| side | grades (1-10: count) | mean | judged turns passed (min) |")
    print("|---|---|---:|---|")
    for i, (side, name) in enumerate((("b", "baseline"), ("c", kind))):
        shown = ", ".join(f"{g}: {n}" for g, n in sorted(grades[side].items()))
        passed = sum(int(j["verdicts"][i]) >= j["min"] for j in lines)
        print(f"| {name} | {shown} | {judged['scores'][i]:.2f} | {passed} of {len(lines)} "
              f"({lines[0]['min']:g}) |")  # fmt: skip
    print(f"\njudge {judged['judge']}: {judged['calls']} calls, {judged['tokens']['prompt']:,} "
          "prompt tokens")  # fmt: skip
    print("\n| run | wall time |\n|---|---:|")
    for name, value in seconds.items():
        print(f"| {name} | {value:.0f} s |" if value else f"| {name} | (reused) |")


if __name__ == "__main__":
    main()
