"""The store under real concurrent processes and SIGKILL: nothing lost, nothing half-read."""

from __future__ import annotations

import fcntl
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_store import make_run

from regress.cli import cli
from regress.core import store as store_module
from regress.core.errors import RunFailed
from regress.core.store import Store, read_run, write_run

ROOT = Path(__file__).resolve().parents[1]

# A process that writes baseline `main` again and again; all records of one run share their
# `correct` value, so a reader can tell a whole run from a mix of two.
WRITER = """
import sys
sys.path.insert(0, sys.argv[4])
from test_store import make_run
from regress.core.store import Store
store, acc, times = Store(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
for _ in range(times):
    store.save(make_run(n=2000, acc=acc))
"""

READER = """
import sys
sys.path.insert(0, sys.argv[3])
from regress.core.store import Store
for _ in range(int(sys.argv[2])):
    run = Store(sys.argv[1]).load("main")
    values = {r.correct for r in run.records["arc_easy"]}
    assert len(values) == 1 and len(run.records["arc_easy"]) == 2000, values
"""


def _python(code: str, *args: object) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", code, *map(str, args)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_concurrent_writers_and_a_reader_never_fail(tmp_path: Path) -> None:
    tests = Path(__file__).parent
    Store(tmp_path).save(make_run(n=2000, acc=1))
    # 20 swaps and 40 loads, the reader busy as long as the writers: every load races a write.
    procs = [
        _python(WRITER, tmp_path, 0, 10, tests),
        _python(WRITER, tmp_path, 1, 10, tests),
        _python(READER, tmp_path, 40, tests),
    ]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    run = Store(tmp_path).load("main")
    assert {r.correct for r in run.records["arc_easy"]} in ({0}, {1})
    assert _leftovers(tmp_path) == []


def test_sigkill_at_any_point_leaves_a_readable_baseline(tmp_path: Path) -> None:
    tests = Path(__file__).parent
    Store(tmp_path).save(make_run(n=2000, acc=1))
    rng = random.Random(13)
    for _ in range(8):
        writer = _python(WRITER, tmp_path, 0, 1000, tests)
        # The interpreter starts (0.2 s), then writes in a loop, a save every 0.1 s: 0.4 s of
        # kill points past start-up reach every phase of a save several times over.
        time.sleep(rng.uniform(0.3, 0.7))
        writer.send_signal(signal.SIGKILL)
        writer.communicate(timeout=30)
        assert writer.returncode == -signal.SIGKILL
        # What a user runs next (in this process: an interpreter's start-up is not the test).
        listed = CliRunner().invoke(cli, ["baseline", "list", "--store", str(tmp_path)])
        assert listed.exit_code == 0, listed.output
        assert "main" in listed.stdout
        run = Store(tmp_path).load("main")
        assert len({r.correct for r in run.records["arc_easy"]}) == 1
    Store(tmp_path).save(make_run(n=10, acc=1))  # the next write clears what kills left
    assert _leftovers(tmp_path) == []
    assert len(read_run(tmp_path / "main").records["arc_easy"]) == 10


def test_a_writer_that_waits_too_long_saves_its_run_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    Store(tmp_path).save(make_run(acc=1))
    monkeypatch.setattr(store_module, "LOCK_TIMEOUT_S", 0.3)
    holder = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(holder, fcntl.LOCK_EX)  # another writer, mid-swap
        with pytest.raises(RunFailed, match="locked by another regress process") as err:
            write_run(make_run(acc=0), tmp_path / "main")
    finally:
        os.close(holder)
    message = str(err.value)
    assert "\n" not in message
    saved = Path(message.rsplit("saved in ", 1)[1])
    try:
        assert read_run(saved).records["arc_easy"][0].correct == 0
        assert read_run(tmp_path / "main").records["arc_easy"][0].correct == 1
    finally:
        shutil.rmtree(saved)
