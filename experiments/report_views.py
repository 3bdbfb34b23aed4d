"""The three views of `regress report --view all`, built from real runs, and their screenshots
(docs/results/report-views.md).

    flock /tmp/regress-model.lock .venv/bin/python experiments/report_views.py \
        [--work /tmp/regress-views] [--out docs/results]

Everything runs through the `regress` CLI, as a user would, in this order (a step whose output
exists in --work is skipped, so a second run only redraws):

1. SmolLM2-135M's packaged Q4_1 requantized to Q8_0 and Q4_0 (`regress quantize`);
2. a bench file of the four models: SmolLM2 Q4_1, Q8_0, Q4_0 and Gemma 3 270M (`regress bench`);
3. a baseline of SmolLM2 Q4_1 on a suite of the built-in multiple-choice tasks and two
   generation tasks (`python_functions`, `json_extraction`), 3 samples per generation at
   temperature 0.7 (`regress baseline create`);
4. Gemma 3 270M evaluated on the first 20 documents of each of the suite's tasks (`regress eval
   --limit 20 --save-run`);
5. Q8_0 and Q4_0 gated against it with decision gates and the bench file, each appending to a
   history file (`regress check --bench --record-history`);
6. the page (`regress report --view all --prices`, with an illustrative API price table) and
   one screenshot per view in headless Chromium (Debian's `chromium`), each view opened by
   the page's address (`#exec`, `#dev`, `#efficiency`), with a check in the drawn DOM that
   the view asked for is shown and every chart drew.

Prints each step's wall time and the CPU flags llama.cpp reports. `--demo` loads no model:
steps 1-5 are replaced by the tests' model-free inputs (see `demo_inputs`), so it needs only
Chromium (a minute).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from functools import partial
from pathlib import Path

from _common import REPO, cpu_flags
from _common import step as _step

sys.path.insert(0, str(REPO / "tests"))

from chromium import chromium, draw  # noqa: E402 (the test helpers, found above)

REGRESS = [sys.executable, "-m", "regress.cli"]
WIDTH = 1400
HEIGHTS = {"exec": 3600, "dev": 5200, "efficiency": 2000}
"""Window heights that hold each view at WIDTH."""
TITLE = "regress: SmolLM2-135M requantized, and Gemma 3 270M"
DEMO_TITLE = "regress: baselines/main and two candidates made from its records"
PRICES = "input_per_1k: 0.00015\noutput_per_1k: 0.0006\ncurrency: USD\n"
"""An illustrative API price table (per 1,000 prompt and generated tokens)."""
VIEWS = ("exec", "dev", "efficiency")
SUITE = """\
name: views
tasks:
  - {task: builtin, limit: 100}   # the embedded default's 500
  - python_functions
  - json_extraction
"""
POLICY = """\
gates:
  pass_at_1: {unit: builtin, min: 0.30}
  refusal_rate: {unit: json_extraction, max: 0.10}
  ttft_ms: {max: 500}
"""
# The commands' own output shows: this script is watched as it draws.
step = partial(_step, show_output=True)
GENERATION = ["--repeats", "3", "--gen-kwargs", "temperature=0.7,seed=1"]


def make_inputs(work: Path) -> list[Path]:
    """Steps 1-5; the report's inputs."""
    from regress.backends.models import resolve_model_path

    work.mkdir(parents=True, exist_ok=True)
    source = str(resolve_model_path("smollm2-135m"))
    quants = {kind: work / f"smollm2-{kind.lower()}.gguf" for kind in ("Q8_0", "Q4_0")}
    for kind, path in quants.items():
        step(
            f"quantize {kind}",
            path,
            [*REGRESS, "quantize", source, "--type", kind, "-o", str(path)],
        )
    (work / "suite.yaml").write_text(SUITE)
    (work / "policy.yaml").write_text(POLICY)
    models = ["smollm2-135m", *map(str, quants.values()), "gemma3-270m"]
    bench = work / "bench.json"
    speed = ["-p", "128", "-n", "32", "-r", "3", "--output-len", "32"]
    step(
        "bench",
        bench,
        [*REGRESS, "bench", *(a for m in models for a in ("-m", m)), *speed, "-o", str(bench)],
    )
    store = work / "baselines"
    suite = ["--suite", str(work / "suite.yaml"), *GENERATION]
    step(
        "baseline",
        store / "views",
        [
            *REGRESS,
            "baseline",
            "create",
            "--name",
            "views",
            "-m",
            "smollm2-135m",
            *suite,
            "--store",
            str(store),
            "--policy",
            str(work / "policy.yaml"),
        ],
    )
    runs = work / "runs"
    gemma = runs / "gemma3-270m"
    # Gemma's 262k-token vocabulary makes each request several times slower than SmolLM2's:
    # the first 20 documents of each task (all 20 paired with the baseline's).
    step(
        "eval gemma3-270m",
        gemma,
        [*REGRESS, "eval", "-m", "gemma3-270m", *suite, "--limit", "20", "--save-run", str(gemma)],
    )
    reports = []
    for kind, path in quants.items():
        name = f"smollm2-{kind.lower()}"
        report = work / f"{name}.json"
        step(
            f"check {kind}",
            report,
            [
                *REGRESS,
                "check",
                "-b",
                "views",
                "--store",
                str(store),
                "-m",
                str(path),
                "--name",
                name,
                "--policy",
                str(work / "policy.yaml"),
                "--bench",
                str(bench),
                "--save-run",
                str(runs / name),
                "--report-json",
                str(report),
                "--record-history",
                str(work / "history.jsonl"),
            ],
            ok=(0, 1, 4),
        )
        reports.append(report)
    return [
        store / "views",
        *(runs / p.stem for p in reports),
        gemma,
        *reports,
        bench,
        work / "history.jsonl",
    ]


def demo_inputs(work: Path) -> list[Path]:
    """`--demo`: the model-free inputs of tests/test_report_html.py and test_report_views.py
    (baselines/main, two candidates made from its records, a bench file of the three model
    files), the gate's reports of both candidates (the first, 40 answers flipped, with decision
    gates: a REGRESSION; the second, unchanged: a PASS) and a history file of two gate runs."""
    from test_report_html import _history_file, bench_file
    from test_report_html import demo_inputs as model_free

    from regress.core.store import read_run
    from regress.gate.compare import compare
    from regress.gate.policy import Metric, Policy, Requirement
    from regress.report.json_report import render_json

    work.mkdir(parents=True, exist_ok=True)
    paths = model_free(work)
    base, first, second = (read_run(p) for p in paths[:3])
    gates = (Requirement(Metric.PASS_AT_1, 0.20, "builtin"), Requirement(Metric.TTFT_MS, 500))
    paths[3].write_text(render_json(compare(base, first, Policy(gates=gates))))
    passed = work / "gate2.json"
    passed.write_text(render_json(compare(base, second, Policy())))
    paths[4].write_text(bench_file([base, first, second], "2026-12-02T12:00:00+00:00"))
    return [*paths, passed, _history_file(paths, work)]


def main() -> None:
    """Make the inputs, render the page, screenshot each view and check it drew."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/regress-views"))
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "results")
    parser.add_argument("--inputs-only", action="store_true", help="stop after step 5")
    parser.add_argument(
        "--demo", action="store_true", help="the tests' model-free inputs instead of steps 1-5"
    )
    args = parser.parse_args()
    inputs = demo_inputs(args.work) if args.demo else make_inputs(args.work)
    print(f"CPU: {cpu_flags()}")
    if args.inputs_only:
        return
    page = args.work / "views.html"
    prices = args.work / "prices.yaml"
    prices.write_text(PRICES)
    subprocess.run(
        [
            *REGRESS,
            "report",
            *map(str, inputs),
            "--view",
            "all",
            "-o",
            str(page),
            "--prices",
            str(prices),
            "--title",
            DEMO_TITLE if args.demo else TITLE,
        ],
        cwd=REPO,
        check=True,
    )
    text = page.read_text()
    figures = len(re.findall(r'type="application/json" id="fig-', text))
    binary = chromium()
    print(subprocess.run([binary, "--version"], capture_output=True, text=True).stdout.strip())
    print(f"{page}: {page.stat().st_size / 1e6:.2f} MB, {figures} charts")
    for view in VIEWS:
        shot = args.out / f"report-view-{view}.png"
        dom = draw(binary, page, shot, WIDTH, HEIGHTS[view], fragment=view)
        shown = re.search(r'<body[^>]*data-view="(\w+)"', dom)
        drawn = re.search(r'<body[^>]*data-drawn="(\d+)"', dom)
        failed = not re.search(r'<p id="plotly-error" hidden[^>]*></p>', dom)
        if not (shown and shown.group(1) == view and drawn and int(drawn.group(1)) == figures):
            raise SystemExit(f"{view}: not drawn as asked ({shown}, {drawn})")
        if failed:
            raise SystemExit(f"{view}: the page reported an error")
        print(f"{view}: {shot} ({shot.stat().st_size / 1e3:.0f} kB), {figures} charts drawn")


if __name__ == "__main__":
    main()
