"""Time the gate on an MMLU-sized comparison: 14,042 synthetic records per side.

57 subjects in group `mmlu` (the real per-subject sizes are not needed: 14,042 split as
evenly as possible), 4 choices with log-likelihoods, about 12% of answers changed, a few
failures. Prints the time of compare, Markdown and JSON; the target is well under 2 s.

    .venv/bin/python experiments/compare_speed.py
"""

from __future__ import annotations

import time

import numpy as np

from regress.core.fingerprint import RuntimeFingerprint
from regress.core.manifest import Manifest, ModelInfo, Run, TaskInfo
from regress.core.records import Record, Status
from regress.gate.compare import compare
from regress.gate.policy import Policy
from regress.report.json_report import render_json
from regress.report.markdown import render_markdown

N_RECORDS = 14_042
N_SUBJECTS = 57
N_CHOICES = 4


def synthetic_run(name: str, logliks: np.ndarray, targets: np.ndarray, failed: set[int]) -> Run:
    """A run over N_RECORDS multiple-choice examples whose answers are the loglik argmax."""
    sizes = np.full(N_SUBJECTS, N_RECORDS // N_SUBJECTS)
    sizes[: N_RECORDS % N_SUBJECTS] += 1
    tasks: dict[str, TaskInfo] = {}
    records: dict[str, list[Record]] = {}
    start = 0
    for s, size in enumerate(sizes):
        task = f"mmlu_subject_{s:02d}"
        tasks[task] = TaskInfo(
            task, "mmlu", int(size), 0, "acc", "loglikelihood", "d" * 64, "p" * 64
        )
        records[task] = [
            _record(task, i - start, logliks[i], int(targets[i]), i in failed)
            for i in range(start, start + int(size))
        ]
        start += int(size)
    manifest = Manifest(
        name=name,
        created="2026-01-01T00:00:00Z",
        regress_version="0.1.0",
        model=ModelInfo(ref=f"{name}.gguf", sha256="0" * 64, quantization=name),
        backend=RuntimeFingerprint("llama_cpp", "0.3.36", {"n_ctx": 2048, "threads": 2}),
        suite_name="mmlu",
        tasks=tasks,
        command=f"regress check --model {name}.gguf --baseline q4_1",
    )
    return Run(manifest, records)


def _record(task: str, doc_id: int, logliks: np.ndarray, target: int, failed: bool) -> Record:
    pred = None if failed else int(np.argmax(logliks))
    correct = None if failed else int(pred == target)
    return Record(
        task=task,
        doc_id=doc_id,
        doc_hash=f"{task}-{doc_id}",
        prompt_hash="p",
        target=target,
        pred=pred,
        correct=correct,
        metrics={} if failed else {"acc": float(correct)},
        scores={} if failed else {"loglik": [float(x) for x in logliks]},
        status=Status.TIMEOUT if failed else Status.OK,
    )


def main() -> None:
    """Build both sides, then time compare, Markdown and JSON separately."""
    rng = np.random.default_rng(0)
    targets = rng.integers(0, N_CHOICES, N_RECORDS)
    base = rng.normal(-5.0, 1.0, (N_RECORDS, N_CHOICES))
    cand = base + rng.normal(0.0, 0.35, base.shape)
    failed = set(rng.choice(N_RECORDS, 20, replace=False).tolist())
    started = time.perf_counter()
    baseline = synthetic_run("q4_1", base, targets, set())
    candidate = synthetic_run("q4_0", cand, targets, failed)
    built = time.perf_counter() - started

    timings = {}
    started = time.perf_counter()
    comparison = compare(baseline, candidate, Policy())
    timings["compare"] = time.perf_counter() - started
    started = time.perf_counter()
    markdown = render_markdown(comparison)
    timings["markdown"] = time.perf_counter() - started
    started = time.perf_counter()
    text = render_json(comparison)
    timings["json"] = time.perf_counter() - started

    unit = comparison.units[0]
    print(f"records per side: {N_RECORDS:,} in {N_SUBJECTS} subjects (built in {built:.2f} s)")
    print(f"verdict {comparison.verdict}, n {unit.n:,}, b/c {unit.b}/{unit.c}")
    for step, seconds in timings.items():
        print(f"{step:>9}: {seconds * 1000:7.1f} ms")
    print(f"    total: {sum(timings.values()) * 1000:7.1f} ms (target: well under 2000 ms)")
    print(f"markdown {len(markdown.encode()):,} bytes, json {len(text.encode()):,} bytes")


if __name__ == "__main__":
    main()
