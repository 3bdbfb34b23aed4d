"""Prompt formats on real models (docs/results/prompt-formats.md): how far accuracy moves with
the format alone, and whether the format changes a gate's verdict.

    flock /tmp/regress-model.lock .venv/bin/python experiments/format_spread.py \
        [--tasks arc_easy --limit 200 --formats 4 --num-fewshot 0] [--work /tmp/regress-formats]
        [--models smollm2-135m,gemma3-270m] [--gated smollm2-135m]

Through the `regress` CLI, as a user runs it (a step whose output exists in --work is
skipped):

1. SmolLM2-135M and Gemma 3 270M (`--models`) evaluated in K formats (`regress eval
   --formats K --save-run`; a gated model's baseline is its evaluation): each unit's accuracy
   per format and its spread with a 95% interval;
2. a baseline of each `--gated` model in the same K formats (`regress baseline create
   --formats K`);
3. its Q4_0 and IQ3_S requantizations gated against it (`regress check`): each format is a
   unit, Holm-corrected across them; the verdict per format beside the verdict format 0
   (the task as lm-eval writes it) alone would have given, and the pooled unit's
   (`formats: {pooled: true}`, judged from the same records).

Prints Markdown tables and the CPU flags llama.cpp reports.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from _common import REPO, cpu_flags, step

from regress.core.store import read_run
from regress.gate.compare import compare
from regress.gate.format_spread import format_spreads
from regress.gate.policy import Policy

REGRESS = [sys.executable, "-m", "regress.cli"]
DATA = os.environ.get("REGRESS_DATA_DIR", str(REPO.parent / "shared" / "data"))


def main() -> None:
    """Run the steps; print the spread table and the verdict table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="arc_easy")
    parser.add_argument("--limit", default="200")
    parser.add_argument("--formats", default="4")
    parser.add_argument("--num-fewshot", default=None, help="shots (MMLU's default is 5)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/regress-formats"))
    parser.add_argument("--candidates", default="Q4_0,IQ3_S", help='none: ""')
    parser.add_argument("--models", default="smollm2-135m,gemma3-270m")
    parser.add_argument("--gated", default="smollm2-135m")
    args = parser.parse_args()
    from regress.backends.models import resolve_model_path

    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    suite = ["-t", args.tasks, "--limit", args.limit, "--formats", args.formats,
             "--data-dir", DATA]  # fmt: skip
    if args.num_fewshot is not None:
        suite += ["--num-fewshot", args.num_fewshot]
    store = work / "baselines"
    gated = args.gated.split(",") if args.gated else []
    runs = {}
    for model in args.models.split(","):
        if model in gated:
            runs[model] = store / model  # the baseline below: the same prompts and records
        else:
            runs[model] = work / f"eval-{model}"
            step(f"eval {model}", runs[model], [*REGRESS, "eval", "-m", model, *suite,
                                               "--save-run", str(runs[model])])  # fmt: skip
    reports = {}
    for base in gated:
        create = ["baseline", "create", "--name", base, "-m", base, "--store", str(store)]
        step(f"baseline {base}", store / base, [*REGRESS, *create, *suite])
        source = str(resolve_model_path(base))
        for kind in filter(None, args.candidates.split(",")):
            model = work / f"{base}-{kind.lower()}.gguf"
            step(f"quantize {base} {kind}", model, [*REGRESS, "quantize", source, "--type", kind,
                                                    "-o", str(model)])  # fmt: skip
            reports[base, kind] = work / f"check-{base}-{kind}.json"
            step(f"check {base} {kind}", reports[base, kind], [
                *REGRESS, "check", "-b", base, "--store", str(store), "-m", str(model),
                "--data-dir", DATA, "--save-run", str(work / f"run-{base}-{kind}"),
                "--report-json", str(reports[base, kind]),
            ], ok=(0, 1))  # fmt: skip

    print(f"{args.tasks}, first {args.limit} documents, {args.formats} formats, "
          f"{args.num_fewshot or 'default'} shots; CPU flags: "
          f"{cpu_flags()}\n")  # fmt: skip
    print("| model | unit | n | accuracy per format | worst | median | best | spread [95% CI] |")
    print("|---|---|---:|---|---:|---:|---:|---|")
    for model, path in runs.items():
        run = read_run(path)
        for s in format_spreads(run.manifest.tasks, run.records):
            per = ", ".join(f"{a:.1%}" for a in s.accuracy)
            print(f"| {model} | {s.unit} | {s.n} | {per} | {s.worst:.1%} | {s.median:.1%} | "
                  f"{s.best:.1%} | {s.spread * 100:.1f} pts [{s.low * 100:.1f}, "
                  f"{s.high * 100:.1f}] |")  # fmt: skip
    print("\n| baseline | candidate | gate verdict | per format: Δ pts, verdict | format 0 alone "
          "| with `formats: {pooled: true}`: pooled Δ pts, verdict; gate |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for (base_name, kind), report in reports.items():
        data = json.loads(report.read_text())
        per = "; ".join(
            f"{u['name'].rsplit('@', 1)[1]} {u['delta'] * 100:+.1f} {u['verdict']}"
            for u in data["units"]
        )
        # Format 0 alone: the same records, the other formats left out of the family.
        base = read_run(store / base_name)
        cand = read_run(work / f"run-{base_name}-{kind}")
        zero = [t for t in base.manifest.tasks if t.endswith("@fmt0")]
        alone = compare(_only(base, zero), _only(cand, zero), Policy())
        pooled = compare(base, cand, Policy(pool_formats=True))
        [unit] = [u for u in pooled.units if u.name.endswith("@pooled")]
        both = f"{unit.delta * 100:+.1f} {unit.verdict}; {pooled.verdict}"
        print(f"| {base_name} | {kind} | {data['verdict']} | {per} | {alone.verdict} | {both} |")


def _only(run, tasks):
    """`run` with only `tasks`."""
    from dataclasses import replace

    manifest = replace(run.manifest, tasks={t: run.manifest.tasks[t] for t in tasks})
    return replace(run, manifest=manifest, records={t: run.records[t] for t in tasks})


if __name__ == "__main__":
    main()
