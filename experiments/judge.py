"""A real judged gate (docs/results/judge.md): Gemma 3 270M, in process through llama.cpp,
judges SmolLM2-135M's answers to the built-in `open_answers` set, pairwise in both orders,
its verdicts read from log-probs.

    flock /tmp/regress-model.lock .venv/bin/python experiments/judge.py \
        [--work /tmp/regress-judge] [--candidates Q4_1,Q8_0,Q2_K] [--graded Q4_1,Q2_K]

Through the `regress` CLI, as a user runs it (a step whose output exists in --work is
skipped):

1. a baseline of SmolLM2-135M (Q4_1) on `open_answers` (`regress baseline create`);
2. each candidate gated against it with a policy whose `judge:` block names Gemma 3 270M
   (`regress check --judgements`): `Q4_1` is the baseline's own file (an A/A check: every
   pair shows the judge two identical answers), the others SmolLM2's requantizations;
3. the `--graded` candidates again with the `rubric` template: each answer scored 1-5 alone.

A 270M model is no judge of quality: this shows the plumbing on real models (verdicts,
consistency, the gate's arithmetic, cost), not that the verdicts are right. Prints Markdown
tables and the CPU flags.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from _common import cpu_flags, step

REGRESS = [sys.executable, "-m", "regress.cli"]
POLICY = """\
max_drop: 0.05
min_examples: 40
judge:
  model: gemma3-270m
  template: {template}
"""


def main() -> None:
    """Run the steps; print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/regress-judge"))
    parser.add_argument("--candidates", default="Q4_1,Q8_0,Q2_K")
    parser.add_argument("--graded", default="Q4_1,Q2_K")
    args = parser.parse_args()
    from regress.backends.models import resolve_model_path

    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    store = work / "baselines"
    seconds = {}
    seconds["baseline"] = step(
        "baseline", store / "main",
        [*REGRESS, "baseline", "create", "--name", "main", "-m", "smollm2-135m", "-t",
         "open_answers", "--store", str(store)],
    )  # fmt: skip
    source = resolve_model_path("smollm2-135m")
    runs = [("pairwise", k) for k in args.candidates.split(",")]
    runs += [("rubric", k) for k in args.graded.split(",") if k]
    reports = {}
    for template, kind in runs:
        policy = work / f"policy-{template}.yaml"
        policy.write_text(POLICY.format(template=template))
        model = work / f"smollm2-{kind.lower()}.gguf"
        if kind == "Q4_1":
            model = source
        else:
            step(f"quantize {kind}", model,
                 [*REGRESS, "quantize", str(source), "--type", kind, "-o", str(model)])  # fmt: skip
        name = f"{template}-{kind}"
        reports[name] = work / f"check-{name}.json"
        seconds[name] = step(
            f"check {name}", reports[name],
            [*REGRESS, "check", "-b", "main", "--store", str(store), "-m", str(model),
             "--policy", str(policy), "--judgements", str(work / f"judgements-{name}.jsonl"),
             "--report-json", str(reports[name]), "--report-md", str(work / f"check-{name}.md"),
             "--no-cache"],
            ok=(0, 1),
        )  # fmt: skip

    print(f"Built-in `open_answers` (40 questions); judge Gemma 3 270M Q4_K_M, verdicts from "
          f"log-probs; CPU flags: {cpu_flags()}\n")  # fmt: skip
    print("| template | candidate | verdict | wins / losses / ties | win rate [95% CI] | "
          "mean score [95% CI] | consistency | length ratio | adj. p | reason |")  # fmt: skip
    print("|---|---|---|---|---|---|---:|---:|---:|---|")
    for name, report in reports.items():
        [u] = json.loads(report.read_text())["units"]
        j = u["judged"]
        low, high = j["win_rate_ci"]
        counts = f"{j['wins']} / {j['losses']} / {j['ties']}"
        score = "-"
        if j.get("scores"):
            (ours, theirs), (q_low, q_high) = j["scores"], j["quality_ci"]
            score = f"{ours:.2f} → {theirs:.2f} [{q_low:.2f}, {q_high:.2f}]"
        consistency = "-" if j["consistency"] is None else f"{j['consistency']:.1%}"
        template, kind = name.split("-", 1)
        print(f"| {template} | {kind} | {u['verdict']} | {counts} | {j['win_rate']:.1%} "
              f"[{low:.1%}, {high:.1%}] | {score} | {consistency} | {j['length_ratio']:.2f} | "
              f"{u['adjusted_pvalue']:.3g} | {u['reason']} |")  # fmt: skip
    print("\n| check | judge requests | judge prompt tokens | check wall time |")
    print("|---|---:|---:|---:|")
    for name, report in reports.items():
        [u] = json.loads(report.read_text())["units"]
        j = u["judged"]
        wall = f"{seconds[name]:.0f} s" if seconds[name] else "(reused)"
        print(f"| {name} | {j['calls']} | {j['tokens']['prompt']:,} | {wall} |")
    print("\n| check | first order says A | second order says A | scores given | first reply |")
    print("|---|---:|---:|---|---|")
    for name in reports:
        text = (work / f"judgements-{name}.jsonl").read_text()
        lines = [json.loads(x) for x in text.splitlines()]
        reply = lines[0]["replies"][0]
        if lines[0]["mode"] != "pairwise":
            given = sorted({v for x in lines for v in x["verdicts"] if v is not None})
            print(f"| {name} | - | - | {', '.join(given)} | {reply} |")
            continue
        first = sum(x["verdicts"][0] == "baseline" for x in lines) / len(lines)
        second = sum(x["verdicts"][1] == "candidate" for x in lines) / len(lines)
        print(f"| {name} | {first:.0%} | {second:.0%} | - | {reply} |")


if __name__ == "__main__":
    main()
