"""The gate as a library, on the real SmolLM2 model: check through the Python API only,
hardware-matched baselines (rerun here when the CPU build differs) and drift on another CPU
build (drift by the other causes, through the CLI: tests/test_cli_gate.py).

A baseline "from another machine" is made honestly reproducible: a real run of this machine
whose manifest names other CPU kernels and whose records carry k answers moved the way
another build moves close answers (the two best choices' log-likelihoods swapped). The oracle
for every count is then k itself, on any CPU.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

import regress
from regress.checks.drift import DriftOptions
from regress.core.errors import ExitCode
from regress.core.fingerprint import HardwarePath
from regress.core.manifest import Run
from regress.core.records import Record
from regress.gate.drift import DriftVerdict, drift_report
from regress.gate.noise import Cause
from regress.gate.results import HardwareAction
from regress.run.suite import inline_suite
from regress.stats import Side, drop_bound

OTHER_KERNELS = "AVX AVX2 AVX512 F16C FMA OPENMP"
"""A build this machine's portable llama.cpp is not (it has no AVX-512)."""
PER_TASK = 20
"""Built-in examples per task (five tasks)."""


@pytest.fixture(scope="module")
def computed(tmp_path_factory) -> Path:
    """The result cache `here` filled: a check whose subject is not the computation itself
    replays this machine's answers from it instead of computing them again."""
    return tmp_path_factory.mktemp("computed")


@pytest.fixture(scope="module")
def here(computed) -> Run:
    """100 built-in examples (20 per task) run on this machine, through the public API."""
    specs = regress.suite_specs(inline_suite("builtin", limit=PER_TASK))
    plan = regress.RunPlan(
        specs=tuple(specs), model="smollm2-135m", name="main", cache_dir=computed
    )
    return regress.execute(plan).run


def moved(record: Record) -> Record:
    """The record as another CPU build would give it when the two best choices swap."""
    logliks = list(record.scores["loglik"])
    first, second = np.argsort(logliks)[::-1][:2]
    logliks[first], logliks[second] = logliks[second], logliks[first]
    chars = record.scores["chars"]
    pred = int(np.argmax(logliks))
    norm = int(np.argmax(np.asarray(logliks) / np.asarray(chars)))
    return dataclasses.replace(
        record,
        pred=pred,
        correct=int(pred == record.target),
        metrics={
            **record.metrics,
            "acc": float(pred == record.target),
            "acc_norm": float(norm == record.target),
        },
        scores={**record.scores, "loglik": logliks},
    )


def from_other_machine(run: Run, k: int, store: Path) -> Run:
    """`run` as stored by a machine with other kernels, its first k right answers moved to
    wrong ones (so exactly k outcomes differ from what this machine computes)."""
    backend = run.manifest.backend
    other = dataclasses.replace(
        backend,
        hardware=HardwarePath(kernels=OTHER_KERNELS, cpu=backend.hardware.cpu, threads=2),
        build={"system_info": "CPU : " + " | ".join(f"{f} = 1" for f in OTHER_KERNELS.split())},
    )
    records = {task: list(rs) for task, rs in sorted(run.records.items())}
    left = k
    for rs in records.values():
        for i, record in enumerate(rs):
            if left and record.correct == 1:
                rs[i], left = moved(record), left - 1
    assert left == 0, "not enough right answers to move"
    manifest = dataclasses.replace(run.manifest, backend=other)
    regress.write_run(Run(manifest, records), store / "main")
    return regress.Store(store).load("main")


@pytest.mark.model
def test_check_through_the_python_api_passes_the_same_model(here, computed, tmp_path):
    regress.write_run(here, tmp_path / "main")
    baseline = regress.Store(tmp_path).load("main")
    # The candidate replays `here`'s computation from the cache; the repeatability check
    # computes 7 examples again (never cached). A fresh computation of the same model equal to
    # stored records: tests/test_cli_misc.py (README's job against the committed baseline).
    options = regress.CheckOptions(repeat_check=7, cache_dir=computed)
    result = regress.check(baseline, regress.CandidateModel("smollm2-135m"), options)
    comparison = result.comparison
    # Same machine, same build: a rerun is byte-identical, so nothing flips. 100 unchanged
    # answers cannot show a drop within 2 points (a 2-point drop leaves them all unchanged
    # 13% of the time): INCONCLUSIVE, which exits 0 by default, never a REGRESSION.
    assert comparison.n_flips == 0 and sum(u.n for u in comparison.units) == 5 * PER_TASK
    assert comparison.verdict is regress.Verdict.INCONCLUSIVE
    assert comparison.exit_code == ExitCode.OK
    (unit,) = comparison.units
    assert unit.bounds.at_most == drop_bound(0, 0, 5 * PER_TASK, 0.05, Side.WITHIN) > 0.02
    assert comparison.hardware.action is HardwareAction.NONE and not comparison.hardware.differences
    assert result.candidate.records == here.records
    text = regress.render_markdown(comparison)
    assert text.startswith("## regress: ⚠️ INCONCLUSIVE") and "CPU build kernels" in text
    # 7 examples sent again: in-process llama.cpp is exact, so the oracle is the first run.
    repeat = comparison.repeatability
    assert (repeat.n, repeat.changed, repeat.max_abs_logprob_delta) == (7, 0, 0.0)
    assert "7 examples sent again, 0 answers changed" in text


@pytest.mark.model
def test_another_cpu_build_is_rerun_here_and_its_drift_reported(here, computed, tmp_path):
    baseline = from_other_machine(here, k=6, store=tmp_path)
    # The rerun's answers are this machine's: `here`'s, replayed from its cache.
    options = regress.CheckOptions(cache_dir=computed)
    result = regress.check(baseline, regress.CandidateModel("smollm2-135m"), options)
    comparison = result.comparison
    hardware = comparison.hardware
    assert hardware.action is HardwareAction.RERAN
    assert any("CPU build kernels differ" in line for line in hardware.differences)
    # The rerun moved exactly the k answers the other build had moved; the candidate is
    # gated against the rerun, so the same model flips nothing.
    assert (hardware.n, hardware.flips) == (5 * PER_TASK, 6)
    assert comparison.n_flips == 0 and comparison.exit_code == ExitCode.OK
    assert result.reference.records == here.records
    assert hardware.stored.kernels == OTHER_KERNELS
    text = regress.render_markdown(comparison)
    assert "| stored baseline | baseline rerun here | candidate |" in text
    assert f"6 of {5 * PER_TASK} answers changed" in text
    # The rerun and the candidate go through the result cache, computing nothing it holds.
    uses = {u.run: (u.replayed > 0, u.computed) for u in comparison.cache}
    assert uses == {"baseline rerun": (True, 0), "candidate": (True, 0)}


@pytest.mark.model
def test_rebaseline_never_and_a_missing_model_gate_against_the_stored_records(
    here, computed, tmp_path
):
    baseline = from_other_machine(here, k=6, store=tmp_path)
    never = regress.CheckOptions(rebaseline=regress.Rebaseline.NEVER, cache_dir=computed)
    result = regress.check(baseline, regress.CandidateModel("smollm2-135m"), never).comparison
    assert result.hardware.action is HardwareAction.STORED and result.n_flips == 6
    assert any("hardware noise" in w for w in result.warnings)
    missing = regress.CheckOptions(reference_model=str(tmp_path / "gone.gguf"), cache_dir=computed)
    result = regress.check(baseline, regress.CandidateModel("smollm2-135m"), missing).comparison
    assert result.hardware.action is HardwareAction.STORED and result.n_flips == 6
    assert any("baseline not rerun here" in w and "gone.gguf" in w for w in result.warnings)


@pytest.mark.model
def test_drift_on_another_cpu_build_is_stable_within_noise_and_drift_beyond(here, tmp_path):
    # A drift check's rerun of the pinned model here is `here` again (k counts every
    # difference from it), so each other baseline is judged against `here` as its rerun: the
    # judgement without rerunning the model (`regress drift` reruns it:
    # tests/test_cli_gate.py).
    options = DriftOptions()
    within = drift_report(
        from_other_machine(here, k=2, store=tmp_path / "a"), here, options.policy, options.max_age
    )
    assert within.cause is Cause.HARDWARE and within.verdict is DriftVerdict.STABLE
    assert within.exit_code == ExitCode.OK and sum(t.flips for t in within.tasks) == 2
    assert "within its measured noise" in within.reason
    beyond = drift_report(
        from_other_machine(here, k=20, store=tmp_path / "b"), here, options.policy, options.max_age
    )
    assert beyond.cause is Cause.HARDWARE and beyond.verdict is DriftVerdict.DRIFT
    assert beyond.exit_code == ExitCode.REGRESSION and sum(t.flips for t in beyond.tasks) == 20
    assert "beyond its measured noise" in beyond.reason
    markdown = regress.render_drift_markdown(beyond)
    assert "(cause: hardware)" in markdown and "noise floor" in markdown
