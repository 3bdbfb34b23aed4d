"""Real requantizations of SmolLM2 gated under both `pass_requires` settings (issue 32's table).

    .venv/bin/python experiments/three_way_verdicts.py [--work DIR] [--candidates Q4_0,IQ3_S]

The baseline is the packaged SmolLM2-135M Q4_1 on ARC-Easy 300 + PIQA 300 (issue 32's suite);
the candidates are llama.cpp's own requantizations of it and the model itself (whose run the
result cache replays: same file, same runtime). Each candidate runs once, through
`regress check` (default policy, under the shared model lock);
its stored run is then judged again under `pass_requires: no_evidence_of_harm`, so both columns
come from the same answers. Prints the llama.cpp system info (CPU flags), then one row per
candidate and unit: Δ with its two-sided 95% interval, b / c, the one-sided bound the default
verdict rests on, and the verdict under each setting.
"""

from __future__ import annotations

import argparse
import dataclasses
import fcntl
import os
import subprocess
import sys
from pathlib import Path

from regress.core.store import Store, read_run
from regress.gate.compare import compare
from regress.gate.policy import Policy
from regress.gate.results import UnitResult
from regress.stats import PassRequires

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("REGRESS_DATA_DIR", REPO.parent / "shared" / "data"))
SUITE = """name: arc-piqa
tasks:
  - {task: arc_easy, limit: 300}
  - {task: piqa, limit: 300}
"""


def regress(*args: str, lock: str) -> None:
    """Run the CLI alone on the CPU: two model processes on 2 cores slow each other 5-100x."""
    env = {**os.environ, "REGRESS_DATA_DIR": str(DATA)}
    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        # The reports go to stdout; this script prints its own table.
        done = subprocess.run(
            [sys.executable, "-m", "regress.cli", *args],
            env=env,
            check=False,
            stdout=subprocess.DEVNULL,
        )
    if done.returncode not in (0, 1):
        raise SystemExit(f"regress {' '.join(args)}: exit {done.returncode}")


def bound(unit: UnitResult) -> str:
    if unit.bounds is None:
        return "–"
    if unit.verdict.value == "REGRESSION" and unit.bounds.at_least is not None:
        return f"≥ {unit.bounds.at_least * 100:.1f}"
    return f"≤ {unit.bounds.at_most * 100:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/regress-three-way"))
    parser.add_argument("--candidates", default="Q4_0,Q2_K,IQ3_S")
    parser.add_argument("--lock", default="/tmp/regress-model.lock")
    args = parser.parse_args()
    work, lock = args.work, args.lock
    store = work / "baselines"
    work.mkdir(parents=True, exist_ok=True)
    suite, cache = work / "suite.yaml", work / "cache"
    suite.write_text(SUITE)
    if not (store / "ref").exists():
        regress(
            "baseline", "create", "--name", "ref", "--model", "smollm2-135m",
            "--suite", str(suite), "--store", str(store), "--cache-dir", str(cache), lock=lock,
        )  # fmt: skip
    models = {"Q4_1 (itself)": "smollm2-135m"}
    for kind in args.candidates.split(","):
        path = work / f"smollm2-{kind.lower()}.gguf"
        if not path.exists():
            regress("quantize", "smollm2-135m", "--type", kind, "-o", str(path), lock=lock)
        models[kind] = str(path)
    baseline = Store(store).load("ref")
    print(f"llama.cpp system info: {baseline.manifest.backend.build}")
    print(
        "| candidate | unit | n | Δ pts [95% CI] | b / c | drop bound (default) "
        "| `evidence` (default) | `no_evidence_of_harm` |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | --- | --- |")
    default = Policy()
    legacy = dataclasses.replace(default, pass_requires=PassRequires.NO_EVIDENCE_OF_HARM)
    for label, model in models.items():
        saved = work / "runs" / label.split()[0]
        if not saved.exists():
            regress(
                "check", "--baseline", "ref", "--model", model, "--store", str(store),
                "--cache-dir", str(cache), "--save-run", str(saved), lock=lock,
            )  # fmt: skip
        candidate = read_run(saved)
        ours, theirs = compare(baseline, candidate, default), compare(baseline, candidate, legacy)
        for unit, old in zip(ours.units, theirs.units, strict=True):
            low, high = unit.ci or (0.0, 0.0)
            print(
                f"| {label} | {unit.name} | {unit.n} | {(unit.delta or 0) * 100:+.1f} "
                f"[{low * 100:+.1f}, {high * 100:+.1f}] | {unit.b} / {unit.c} | {bound(unit)} "
                f"| {unit.verdict} | {old.verdict} |"
            )
        print(f"| {label} | **gate** | | | | | **{ours.verdict}** | **{theirs.verdict}** |")


if __name__ == "__main__":
    main()
