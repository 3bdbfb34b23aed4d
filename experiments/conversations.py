"""Conversations on real models (docs/results/conversations.md): the built-in set on SmolLM2
and Gemma 3, turn by turn, and a real gate of SmolLM2's requantizations on it.

    flock /tmp/regress-model.lock .venv/bin/python experiments/conversations.py \
        [--work /tmp/regress-conversations] [--candidates Q8_0,IQ3_S]

Through the `regress` CLI, as a user runs it (a step whose output exists in --work is
skipped):

1. a baseline of SmolLM2-135M (Q4_1) on `conversations` (`regress baseline create`);
2. Gemma 3 270M on the same set through the shipped Gemma template (`regress eval
   --model-args chat_template=gemma --save-run`);
3. SmolLM2's Q8_0 and IQ3_S requantizations gated against the baseline (`regress check`),
   with a policy that lowers `min_examples` to the set's 30 conversations, so the verdict is
   the statistics', not the floor's.

Prints Markdown tables (per-conversation and per-turn figures with the conversation-clustered
interval, failure classes, the verdicts and turn-by-turn changes) and the CPU flags.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from _common import cpu_flags, step

from regress.core.store import read_run
from regress.tasks.conversation import cluster_interval

REGRESS = [sys.executable, "-m", "regress.cli"]
POLICY = "max_drop: 0.05\nmin_examples: 30\n"


def figures(records: list) -> str:
    """One table row of a run's conversation figures, from its records."""
    ok = [r for r in records if r.ok]
    turns = [[p for p in r.scores["turn_pass"] if p is not None] for r in ok]
    passed, checked = [sum(t) for t in turns], [len(t) for t in turns]
    low, high = cluster_interval(passed, checked)
    positions = []
    for t in range(max(len(r.scores["turn_pass"]) for r in ok)):
        at = [r.scores["turn_pass"][t] for r in ok if len(r.scores["turn_pass"]) > t]
        at = [p for p in at if p is not None]
        positions.append(f"{sum(at) / len(at):.0%}")
    conv = sum(r.right for r in records) / len(records)
    before = sum(r.metrics["turns_before_failure"] for r in ok) / len(ok)
    return (
        f"{len(records)} | {conv:.1%} | {sum(passed) / sum(checked):.1%} [{low:.1%}, "
        f"{high:.1%}] | {', '.join(positions)} | {before:.2f}"
    )


def classes(records: list) -> str:
    """Each failure class's share of the run's turns."""
    seen = [c for r in records if r.ok for c in r.scores["failure"]]
    counts = {c: seen.count(c) for c in dict.fromkeys(sorted(seen))}
    return ", ".join(f"{c} {n / len(seen):.0%}" for c, n in counts.items())


def main() -> None:
    """Run the steps; print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/regress-conversations"))
    parser.add_argument("--candidates", default="Q8_0,IQ3_S")
    args = parser.parse_args()
    from regress.backends.models import resolve_model_path

    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    store = work / "baselines"
    seconds = {}
    seconds["smollm2-135m"] = step(
        "baseline", store / "main",
        [*REGRESS, "baseline", "create", "--name", "main", "-m", "smollm2-135m", "-t",
         "conversations", "--store", str(store)],
    )  # fmt: skip
    gemma = work / "eval-gemma3-270m"
    seconds["gemma3-270m"] = step(
        "eval gemma3-270m", gemma,
        [*REGRESS, "eval", "-m", "gemma3-270m", "--model-args", "chat_template=gemma", "-t",
         "conversations", "--save-run", str(gemma), "--no-cache"],
    )  # fmt: skip
    policy = work / "policy.yaml"
    policy.write_text(POLICY)
    source = str(resolve_model_path("smollm2-135m"))
    reports = {}
    for kind in args.candidates.split(","):
        model = work / f"smollm2-{kind.lower()}.gguf"
        step(f"quantize {kind}", model,
             [*REGRESS, "quantize", source, "--type", kind, "-o", str(model)])  # fmt: skip
        reports[kind] = work / f"check-{kind}.json"
        seconds[kind] = step(
            f"check {kind}", reports[kind],
            [*REGRESS, "check", "-b", "main", "--store", str(store), "-m", str(model),
             "--policy", str(policy), "--save-run", str(work / f"run-{kind}"),
             "--report-json", str(reports[kind]), "--report-md", str(work / f"check-{kind}.md")],
            ok=(0, 1),
        )  # fmt: skip

    print(f"Built-in `conversations` (30 conversations, 96 turns, 85 checked); CPU flags: "
          f"{cpu_flags()}\n")  # fmt: skip
    runs = {"SmolLM2-135M Q4_1": store / "main", "Gemma 3 270M Q4_K_M": gemma}
    runs |= {f"SmolLM2 {kind}": work / f"run-{kind}" for kind in reports}
    print("| model | conversations | conversation pass | turn pass [95% CI, clustered] | "
          "pass by turn position | turns before first failure |")  # fmt: skip
    print("|---|---:|---:|---|---|---:|")
    for name, path in runs.items():
        print(f"| {name} | {figures(read_run(path).records['conversations'])} |")
    print("\n| model | failure classes of all turns |\n|---|---|")
    for name, path in runs.items():
        print(f"| {name} | {classes(read_run(path).records['conversations'])} |")
    print("\n| candidate | verdict | n | baseline | candidate | Δ [95% CI] | b / c | reason |")
    print("|---|---|---:|---:|---:|---|---|---|")
    for kind, report in reports.items():
        data = json.loads(report.read_text())
        [u] = data["units"]
        low, high = u["ci"]
        print(f"| {kind} | {u['verdict']} | {u['n']} | {u['baseline']:.1%} | "
              f"{u['candidate']:.1%} | {u['delta'] * 100:+.1f} [{low * 100:+.1f}, "
              f"{high * 100:+.1f}] | {u['b']} / {u['c']} | {u['reason']} |")  # fmt: skip
    print("\n| candidate | turn | n | baseline | candidate | broke | fixed |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for kind, report in reports.items():
        for t in json.loads(report.read_text())["turns"]:
            print(f"| {kind} | {t['turn']} | {t['n']} | {t['baseline']:.0%} | "
                  f"{t['candidate']:.0%} | {t['broke']} | {t['fixed']} |")  # fmt: skip
    print("\n| run | wall time |\n|---|---:|")
    for name, value in seconds.items():
        print(f"| {name} | {value:.0f} s |" if value else f"| {name} | (reused) |")


if __name__ == "__main__":
    main()
