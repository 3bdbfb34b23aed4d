"""`regress merge` joins only shards computed on one compute path (issue 48 item 2).

Two shards of the committed `baselines/main`: as they are, they merge into the baseline's own
records; with one of them relabelled as computed elsewhere (AVX-512/AMX kernels, another
build description, another library version) the merge is refused with one line naming what
differs, exit 2. Speed settings and the CPU's model may differ.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import REPO

from regress.cli import cli
from regress.core.errors import BadInput, ExitCode
from regress.core.fingerprint import Cpu, RuntimeFingerprint
from regress.core.manifest import Run
from regress.core.merge import merge_runs
from regress.core.store import read_run, write_run

AVX512_AMX = (
    "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | "
    "AVX512 = 1 | AVX512_VNNI = 1 | AVX512_BF16 = 1 | AMX_INT8 = 1 | LLAMAFILE = 1 | "
    "OPENMP = 1 | REPACK = 1 | "
)


def _shards() -> tuple[Run, Run]:
    """baselines/main cut in two shards, each task's records split at its middle."""
    main = read_run(REPO / "baselines" / "main")
    halves: tuple[dict, dict] = ({}, {})
    for task, records in main.records.items():
        cut = len(records) // 2
        halves[0][task], halves[1][task] = records[:cut], records[cut:]
    runs = []
    for i, records in enumerate(halves):
        tasks = {
            name: dataclasses.replace(info, n=len(records[name]))
            for name, info in main.manifest.tasks.items()
        }
        manifest = dataclasses.replace(main.manifest, shard=f"{i}/2", tasks=tasks)
        runs.append(Run(manifest, records))
    return runs[0], runs[1]


def _relabel(run: Run, **backend: object) -> Run:
    fingerprint: RuntimeFingerprint = dataclasses.replace(run.manifest.backend, **backend)
    return Run(dataclasses.replace(run.manifest, backend=fingerprint), run.records)


def _avx512(run: Run) -> Run:
    """`run` as if computed on an AVX-512/AMX build: its kernels and its system info line."""
    backend = run.manifest.backend
    hardware = dataclasses.replace(
        backend.hardware, kernels="AMX_INT8 AVX AVX2 AVX512 AVX512_BF16 AVX512_VNNI BMI2 F16C"
    )
    return _relabel(run, hardware=hardware, build={**backend.build, "system_info": AVX512_AMX})


def test_shards_of_one_compute_path_merge_into_the_baseline() -> None:
    main = read_run(REPO / "baselines" / "main")
    s0, s1 = _shards()
    # Another CPU model and another thread count are not a compute path.
    other_cpu = dataclasses.replace(
        s1.manifest.backend.hardware, cpu=Cpu(vendor="AuthenticAMD", family=25), threads=8
    )
    merged = merge_runs([s0, _relabel(s1, hardware=other_cpu)], name="main")
    assert merged.records == main.records


@pytest.mark.parametrize(
    ("relabel", "named"),
    [
        (_avx512, "kernels"),
        (lambda r: _relabel(r, build={**r.manifest.backend.build, "scoring": "x"}), "build"),
        (lambda r: _relabel(r, libraries={"ggml": "other"}), "libraries"),
    ],
    ids=["kernels", "build", "libraries"],
)
def test_a_shard_of_another_compute_path_is_refused(relabel, named: str) -> None:
    s0, s1 = _shards()
    with pytest.raises(BadInput, match=rf"compute path than shard 0/2: {named} ") as caught:
        merge_runs([s0, relabel(s1)])
    assert "\n" not in str(caught.value)


def test_merge_command_refuses_the_relabelled_shard(tmp_path: Path) -> None:
    s0, s1 = _shards()
    write_run(s0, tmp_path / "s0")
    write_run(_avx512(s1), tmp_path / "s1")
    result = CliRunner().invoke(
        cli, ["merge", str(tmp_path / "s0"), str(tmp_path / "s1"), "-o", str(tmp_path / "out")]
    )
    assert result.exit_code == ExitCode.BAD_INPUT, result.output
    assert result.output.startswith("regress: error: merge: shard 1/2 ")
    assert result.output.count("\n") == 1
    assert "AVX512" in result.output and not (tmp_path / "out").exists()
