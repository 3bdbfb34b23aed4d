"""Run untrusted, model-written Python against hidden unit tests, contained.

Each run gets a throwaway folder, a scrubbed environment (PATH, HOME and TMPDIR pointing into
the folder, nothing from `os.environ`) and a new process group, and is killed at a
wall-clock limit. Inside, `regress/tasks/scoring/sandbox_child.py` applies the kernel's layers
before any tested code runs:

- `namespaces`: new user, network and pid namespaces. No network (only a loopback that is
  down); when the run ends, every process it started dies with the namespace's init.
- `rlimits`: CPU seconds, address space, file size, open files, no core files.
- `process_limit`: at most `processes` processes (fork bombs). Root ignores RLIMIT_NPROC, so
  as root a pids cgroup (v1 `/sys/fs/cgroup/pids`, or v2 with the pids controller) caps them;
  otherwise RLIMIT_NPROC, which counts inside the fresh user namespace.
- `landlock` (Linux 5.13+, ABI 4+ for TCP, 6+ for scopes): writes only beneath the sandbox
  folder, reads only beneath the Python installation and system folders (/usr, /lib, /bin),
  no TCP bind or connect, no signals or abstract unix sockets outside the sandbox.

A layer that cannot be applied makes the run a SANDBOX_ERROR (and `require_sandbox` raises)
unless it is listed in `SandboxLimits.optional_layers` or `REGRESS_SANDBOX_OPTIONAL`
(comma-separated layer names): containment never degrades silently.

This contains damage; it does not stop cheating. The tests run in the same interpreter as
the tested code, which could find the run's nonce in memory and forge a pass.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from regress.core.errors import BadInput, RunFailed
from regress.tasks.scoring import sandbox_child

LAYERS = ("namespaces", "rlimits", "process_limit", "landlock")
OPTIONAL_ENV = "REGRESS_SANDBOX_OPTIONAL"
READ_ROOTS = ("/usr", "/lib", "/lib64", "/bin", "/etc/ld.so.cache")
MIN_LANDLOCK_ABI = 4
"""TCP rules came with ABI 4 (Linux 6.7); below it Landlock could not deny the network."""
_TAIL = 2000
_CHILD = Path(sandbox_child.__file__)


class Outcome(StrEnum):
    """How a sandboxed run ended."""

    PASSED = "passed"
    FAILED = "failed"
    """A test failed or raised, or the solution raised before the tests."""
    SYNTAX_ERROR = "syntax_error"
    TIMEOUT = "timeout"
    """The wall-clock or CPU-time limit."""
    MEMORY = "memory"
    """MemoryError at the address-space limit."""
    KILLED = "killed"
    """Killed by a signal other than the time limits (file size limit, ...)."""
    SANDBOX_ERROR = "sandbox_error"
    """A containment layer could not be applied: nothing ran."""


@dataclass(frozen=True)
class SandboxLimits:
    """Limits of one run, and which containment layers may be missing."""

    cpu_seconds: int = 5
    wall_seconds: float = 10.0
    memory_bytes: int = 1 << 30
    processes: int = 32
    file_bytes: int = 16 << 20
    open_files: int = 64
    optional_layers: frozenset[str] = frozenset()
    """Layers allowed to be missing on this machine (an explicit opt-out; empty by default)."""


@dataclass(frozen=True)
class SandboxResult:
    """The typed outcome of one run."""

    outcome: Outcome
    n_tests: int
    failed_tests: tuple[str, ...]
    reason: str
    """One line: the first error, the limit hit, or why the sandbox refused."""
    stderr_tail: str
    layers: tuple[str, ...]
    """Containment layers applied to this run."""

    @property
    def passed(self) -> bool:
        """Every test passed."""
        return self.outcome is Outcome.PASSED


def optional_layers_from_env() -> frozenset[str]:
    """The layers `REGRESS_SANDBOX_OPTIONAL` allows to be missing (validated)."""
    names = frozenset(n.strip() for n in os.environ.get(OPTIONAL_ENV, "").split(",") if n.strip())
    unknown = names - set(LAYERS)
    if unknown:
        raise BadInput(f"{OPTIONAL_ENV}: unknown layer(s) {sorted(unknown)}; known: {LAYERS}")
    return names


def run_python(program: str, tests: Sequence[str], limits: SandboxLimits) -> SandboxResult:
    """Run `program`, then each test statement (e.g. `assert f(2) == 4`), contained."""
    workdir = Path(tempfile.mkdtemp(prefix="regress-sandbox-"))
    try:
        (workdir / "solution.py").write_text(program, encoding="utf-8")
        (workdir / "tests.json").write_text(json.dumps(list(tests)), encoding="utf-8")
        with _pids_cgroup(limits) as cgroup:
            return _launch(workdir, len(tests), cgroup, limits)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def require_sandbox(limits: SandboxLimits) -> tuple[str, ...]:
    """Raise RunFailed (exit 3) unless every required layer applies here; return the layers."""
    result = run_python("def f():\n    return 1\n", ["assert f() == 1"], limits)
    if result.outcome is not Outcome.PASSED:
        raise RunFailed(
            f"the code sandbox cannot run here: {result.reason} (to run with fewer layers, "
            f"set {OPTIONAL_ENV} to the missing ones, e.g. {OPTIONAL_ENV}=landlock)"
        )
    return result.layers


def _launch(
    workdir: Path, n_tests: int, cgroup: str | None, limits: SandboxLimits
) -> SandboxResult:
    read_end, write_end = os.pipe()
    config = {
        "optional": sorted(limits.optional_layers),
        "cgroup": cgroup,
        "report_fd": write_end,
        "min_landlock_abi": MIN_LANDLOCK_ABI,
        "read_roots": [os.path.realpath(sys.base_prefix), *READ_ROOTS],
        "rlimits": {
            "RLIMIT_CPU": limits.cpu_seconds,
            "RLIMIT_AS": limits.memory_bytes,
            "RLIMIT_NPROC": limits.processes,
            "RLIMIT_FSIZE": limits.file_bytes,
            "RLIMIT_NOFILE": limits.open_files,
            "RLIMIT_CORE": 0,
        },
    }
    env = {"PATH": "/usr/bin:/bin", "HOME": str(workdir), "TMPDIR": str(workdir),
           "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}  # fmt: skip
    nonce = secrets.token_hex(16)
    cpu_before = _children_cpu()
    # stdout and stderr go to files the parent opened outside the sandbox: RLIMIT_FSIZE
    # bounds them, and a flood of output cannot fill the parent's memory.
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            [os.path.realpath(sys.executable), "-I", "-S", str(_CHILD), json.dumps(config)],
            cwd=workdir,
            env=env,
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=err,
            pass_fds=(write_end,),
            start_new_session=True,
        )
        os.close(write_end)
        timed_out = False
        try:
            proc.communicate(input=f"{nonce}\n".encode(), timeout=limits.wall_seconds)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            # Init's parent-death signal then kills whatever is left in the pid namespace.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        with os.fdopen(read_end, "rb") as report:
            raw = report.read()
        layers = tuple(json.loads(raw)) if raw else ()
        stdout, stderr = _tail(out), _tail(err)
    cpu_used = _children_cpu() - cpu_before

    def result(outcome: Outcome, reason: str, failed: Sequence[str] = ()) -> SandboxResult:
        return SandboxResult(outcome, n_tests, tuple(failed), reason, stderr, layers)

    if timed_out:
        return result(Outcome.TIMEOUT, f"wall-clock limit of {limits.wall_seconds:g} s")
    if proc.returncode == sandbox_child.SETUP_FAILED and stderr.startswith("sandbox:"):
        return result(Outcome.SANDBOX_ERROR, stderr.splitlines()[0])
    missing = set(LAYERS) - limits.optional_layers - set(layers)
    if missing:
        return result(Outcome.SANDBOX_ERROR, f"sandbox: layers not applied: {sorted(missing)}")
    report_line = _report(stdout, nonce)
    if report_line is not None:
        errors = report_line["errors"]
        return result(Outcome(report_line["status"]), errors[0] if errors else "",
                      report_line["failed"])  # fmt: skip
    code = proc.returncode
    if (
        code in (128 + signal.SIGKILL, 128 + signal.SIGXCPU)
        and cpu_used >= limits.cpu_seconds - 0.5
    ):
        return result(Outcome.TIMEOUT, f"CPU-time limit of {limits.cpu_seconds} s")
    if code > 128:
        return result(Outcome.KILLED, f"killed by {signal.Signals(code - 128).name}")
    return result(Outcome.FAILED, f"exited with code {code} before the tests reported")


def _report(stdout: str, nonce: str) -> dict | None:
    """The harness's result line carrying this run's nonce, if any."""
    prefix = f"{sandbox_child.RESULT_PREFIX} {nonce} "
    lines = [line for line in stdout.splitlines() if line.startswith(prefix)]
    return json.loads(lines[-1][len(prefix) :]) if lines else None


def _tail(file) -> str:
    file.seek(0, os.SEEK_END)
    file.seek(max(0, file.tell() - _TAIL))
    return file.read().decode("utf-8", errors="replace")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _pids_root() -> Path | None:
    """A writable pids cgroup hierarchy (v1, or v2 with the pids controller), if any."""
    v1 = Path("/sys/fs/cgroup/pids")
    if (v1 / "cgroup.procs").exists() and os.access(v1, os.W_OK):
        return v1
    v2 = Path("/sys/fs/cgroup")
    control = v2 / "cgroup.subtree_control"
    if control.exists() and "pids" in control.read_text().split() and os.access(v2, os.W_OK):
        return v2
    return None


@contextlib.contextmanager
def _pids_cgroup(limits: SandboxLimits) -> Iterator[str | None]:
    """As root, a fresh pids cgroup capped at `limits.processes` (removed afterwards)."""
    root = _pids_root() if os.geteuid() == 0 else None
    if root is None:
        yield None
        return
    group = root / f"regress-sandbox-{uuid.uuid4().hex}"
    group.mkdir()
    try:
        (group / "pids.max").write_text(str(limits.processes))
        yield str(group)
    finally:
        # The namespace's processes take a moment to be reaped after init dies.
        for _ in range(50):
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.02)
