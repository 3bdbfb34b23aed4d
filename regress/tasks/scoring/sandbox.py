"""Run untrusted, model-written Python against hidden unit tests, contained.

Each run is a bubblewrap sandbox (`confinement.py`: fresh namespaces, a read-only root of the
system libraries and the standard library only, a private tmpfs, a seccomp filter), killed at
a wall-clock limit. Inside, `sandbox_child.py` sets the rlimits before any tested code runs.
The layers, each reported per run in `SandboxResult.layers`:

- `bubblewrap`: the namespaces and the filesystem view (no network, no site-packages, no
  task data, writes only to a tmpfs of `disk_bytes`); when the run ends, every process it
  started dies with the pid namespace's init.
- `seccomp`: socket families allowlisted (INET, INET6), io_uring and other kernel surfaces
  refused.
- `rlimits`: CPU seconds, address space, file size, open files, no core files.
- `process_limit`: at most `processes` processes of tested code (fork bombs). Root ignores
  RLIMIT_NPROC, so as root a pids cgroup holds the whole sandbox; otherwise RLIMIT_NPROC
  inside the sandbox's user namespace, counting the sandbox's own processes on top.
- `memory_limit`: the memory of all the run's processes together: as root a memory cgroup at
  `memory_total`; otherwise RLIMIT_NPROC lowered so that RLIMIT_AS adds up to it.

A layer that cannot be applied makes the run a SANDBOX_ERROR (and `require_sandbox` raises)
unless it is listed in `SandboxLimits.optional_layers` or `REGRESS_SANDBOX_OPTIONAL`
(comma-separated names among OPTIONAL_LAYERS): containment never degrades silently, and
bubblewrap and the rlimits can never be opted out of.

The tested code is also judged from outside (`hidden_tests.py`): the child only calls the
solution's functions with arguments this side computed and reports the returned values as
tagged plain data; this side decodes them and evaluates each assertion itself.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
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
from typing import Any

from regress.core.errors import BadInput, RunFailed
from regress.tasks.scoring import confinement, sandbox_child
from regress.tasks.scoring.hidden_tests import HiddenTest, parse_test

LAYERS = ("bubblewrap", "seccomp", "rlimits", "process_limit", "memory_limit")
OPTIONAL_LAYERS = ("seccomp", "process_limit", "memory_limit")
OPTIONAL_ENV = "REGRESS_SANDBOX_OPTIONAL"
SANDBOX_OVERHEAD = 2
"""Processes of the sandbox itself in its cgroup: bubblewrap's monitor and its init."""
_TAIL = 2000
_REPORT_BYTES = 1 << 20
"""The most stdout read for the result line: a larger report is no report."""
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
    """Address space of each process (RLIMIT_AS)."""
    memory_total: int = 2 << 30
    """Memory of all the run's processes together: a memory cgroup as root; otherwise an
    RLIMIT_NPROC of memory_total // memory_bytes, so their address spaces add up to it."""
    processes: int = 32
    """Processes of tested code at once (the sandbox's own come on top)."""
    file_bytes: int = 16 << 20
    disk_bytes: int = 64 << 20
    """All files the run writes, together (a tmpfs over its folder)."""
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
    unknown = names - set(OPTIONAL_LAYERS)
    if unknown:
        raise BadInput(
            f"{OPTIONAL_ENV}: {sorted(unknown)} cannot be opted out of; "
            f"optional layers: {', '.join(OPTIONAL_LAYERS)}"
        )
    return names


def run_python(
    program: str, tests: Sequence[str | HiddenTest], limits: SandboxLimits
) -> SandboxResult:
    """Run `program` contained and judge it by the hidden tests (statements such as
    `assert f(2) == 4`, or parsed): the sandbox computes `f(2)`, this side the rest."""
    checks = [t if isinstance(t, HiddenTest) else parse_test(t) for t in tests]
    try:
        seccomp = confinement.seccomp_program()
    except confinement.Unavailable as exc:
        if "seccomp" not in limits.optional_layers:
            return _refused(checks, f"sandbox: seccomp: {exc}")
        seccomp = None
    try:
        confinement.bwrap_path()
    except confinement.Unavailable as exc:
        return _refused(checks, f"sandbox: {exc}")
    with _cgroups(limits) as groups:
        return _launch(program, seccomp, checks, groups, limits)


def require_sandbox(limits: SandboxLimits) -> tuple[str, ...]:
    """Raise RunFailed (exit 3) unless every required layer applies here; return the layers."""
    result = run_python("def f():\n    return 1\n", ["assert f() == 1"], limits)
    if result.outcome is not Outcome.PASSED:
        raise RunFailed(f"the code sandbox cannot run here: {result.reason} ({HINT})")
    return result.layers


HINT = (
    "docs/guarantees.md says how to install bubblewrap and allow it user namespaces; "
    f"{OPTIONAL_ENV} opts out of {', '.join(OPTIONAL_LAYERS)}"
)
_JOIN_AND_EXEC = (
    "import os, sys\n"
    "cut = sys.argv.index('--')\n"
    "for group in sys.argv[1:cut]:\n"
    "    with open(os.path.join(group, 'cgroup.procs'), 'w') as f:\n"
    "        f.write(str(os.getpid()))\n"
    "os.execv(sys.argv[cut + 1], sys.argv[cut + 1:])\n"
)
"""Moves the launcher into the run's cgroups, then becomes bwrap: every process of the run is
born inside them (a preexec_fn would do the same, but is unsafe beside threads)."""


def _refused(checks: Sequence[HiddenTest], reason: str) -> SandboxResult:
    return SandboxResult(Outcome.SANDBOX_ERROR, len(checks), (), reason, "", ())


def _job(program: str, checks: Sequence[HiddenTest], nonce: str) -> bytes:
    """What the child reads on stdin: the nonce, the program and every call, in order."""

    def tagged(value: Any) -> dict:
        return sandbox_child.encode(value, [sandbox_child.MAX_NODES])

    calls = [
        {"function": c.function, "args": [tagged(a) for a in c.args],
         "kwargs": [[k, tagged(v)] for k, v in c.kwargs]}
        for check in checks
        for c in check.calls
    ]  # fmt: skip
    return (json.dumps({"nonce": nonce, "source": program, "calls": calls}) + "\n").encode()


def _launch(
    program: str,
    seccomp: bytes | None,
    checks: Sequence[HiddenTest],
    groups: _Groups,
    limits: SandboxLimits,
) -> SandboxResult:
    nonce = secrets.token_hex(16)
    read_end, write_end = os.pipe()
    # stdout and stderr go to files opened outside the sandbox: RLIMIT_FSIZE bounds them,
    # and a flood of output cannot fill this process's memory.
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        tempfile.TemporaryFile() as rules,
    ):
        rules.write(seccomp or b"")
        rules.seek(0)
        command = confinement.bwrap_argv(
            limits.disk_bytes, str(_CHILD), rules.fileno() if seccomp else None
        )
        joined = [g for g in dict.fromkeys((groups.pids, groups.memory)) if g]
        if joined:
            python = [os.path.realpath(sys.executable), "-I", "-S", "-c", _JOIN_AND_EXEC]
            command = [*python, *joined, "--", *command]
        config = _config(limits, groups, write_end)
        command += [
            "--", os.path.realpath(sys.executable), "-I", "-S", confinement.CHILD_PATH,
            json.dumps(config),
        ]  # fmt: skip
        try:
            proc = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=err,
                pass_fds=(rules.fileno(), write_end),
                start_new_session=True,
            )
        finally:
            os.close(write_end)
        timed_out = False
        try:
            proc.communicate(input=_job(program, checks, nonce), timeout=limits.wall_seconds)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            # bwrap's init dies with its monitor (--die-with-parent), and every process of
            # the pid namespace with init.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        with os.fdopen(read_end, "rb") as pipe:
            raw = pipe.read(1 << 16)
        try:
            layers = tuple(json.loads(raw)) if raw else ()
        except ValueError:
            layers = ()
        stdout, stderr = _tail(out, _REPORT_BYTES), _tail(err)
    layers = (("bubblewrap",) + (("seccomp",) if seccomp else ()) + layers) if raw else ()

    def result(outcome: Outcome, reason: str, failed: Sequence[str] = ()) -> SandboxResult:
        return SandboxResult(outcome, len(checks), tuple(failed), reason, stderr, layers)

    if timed_out:
        return result(Outcome.TIMEOUT, f"wall-clock limit of {limits.wall_seconds:g} s")
    if not raw:
        first = next((line for line in stderr.splitlines() if line.strip()), "")
        if proc.returncode == sandbox_child.SETUP_FAILED and first.startswith("sandbox:"):
            return result(Outcome.SANDBOX_ERROR, first)
        return result(Outcome.SANDBOX_ERROR, f"sandbox: bubblewrap failed: {first[:300]}")
    missing = set(LAYERS) - limits.optional_layers - set(layers)
    if missing:
        return result(Outcome.SANDBOX_ERROR, f"sandbox: layers not applied: {sorted(missing)}")
    report = _report(stdout, nonce)
    if report is not None:
        return _judged(report, checks, result)
    code = proc.returncode
    if code == 128 + signal.SIGXCPU:
        return result(Outcome.TIMEOUT, f"CPU-time limit of {limits.cpu_seconds} s")
    if code > 128:
        return result(Outcome.KILLED, f"killed by {signal.Signals(code - 128).name}")
    return result(Outcome.FAILED, f"exited with code {code} before the tests reported")


def _config(limits: SandboxLimits, groups: _Groups, report_fd: int) -> dict:
    return {
        "optional": sorted(limits.optional_layers),
        "cgroup": groups.pids,
        "memory_cgroup": groups.memory,
        "root": kernel_root(os.getuid()),
        "memory_nproc": max(1, limits.memory_total // limits.memory_bytes),
        "report_fd": report_fd,
        "rlimits": {
            "RLIMIT_CPU": limits.cpu_seconds,
            "RLIMIT_AS": limits.memory_bytes,
            "RLIMIT_NPROC": limits.processes,
            "RLIMIT_FSIZE": limits.file_bytes,
            "RLIMIT_NOFILE": limits.open_files,
            "RLIMIT_CORE": 0,
        },
    }


def kernel_root(uid: int) -> bool:
    """Whether `uid` is root to the kernel, which never holds root to RLIMIT_NPROC: uid 0, or
    a uid this user namespace maps to its parent's 0 (regress run as a mapped user inside a
    rootless container's namespace). One level is read; deeper parents are not visible."""
    if uid == 0:
        return True
    with open("/proc/self/uid_map") as lines:
        for line in lines:
            inner, outer, count = (int(field) for field in line.split())
            if inner <= uid < inner + count:
                return outer + uid - inner == 0
    return False


def _report(stdout: str, nonce: str) -> dict | None:
    """The last result line carrying this run's nonce, if any parses as a JSON object."""
    prefix = f"{sandbox_child.RESULT_PREFIX} {nonce} "
    lines = [line for line in stdout.splitlines() if line.startswith(prefix)]
    try:
        report = json.loads(lines[-1][len(prefix) :]) if lines else None
    except (ValueError, RecursionError):
        return None
    return report if isinstance(report, dict) else None


def _judged(report: dict, checks: Sequence[HiddenTest], result: Any) -> SandboxResult:
    """Each test evaluated here over the values the child reported for its calls; a missing,
    raised or undecodable value fails its test. The report's own words decide nothing but the
    kind of failure (a syntax error, MemoryError)."""
    errors = report.get("errors")
    reason = str(errors[0])[:300] if isinstance(errors, list) and errors else ""
    if report.get("status") == "syntax_error":
        return result(Outcome.SYNTAX_ERROR, reason, [c.statement for c in checks])
    values = report.get("results")
    n_calls = sum(len(c.calls) for c in checks)
    values = values if isinstance(values, list) and len(values) == n_calls else []
    failed = []
    at = 0
    for check in checks:
        mine = values[at : at + len(check.calls)] if values else []
        at += len(check.calls)
        try:
            if len(mine) != len(check.calls):
                raise sandbox_child.Undecodable
            decoded = []
            for item in mine:
                if not (isinstance(item, dict) and "value" in item):
                    raise sandbox_child.Undecodable
                decoded.append(sandbox_child.decode(item["value"]))
            passed = check.holds(decoded)
        except (sandbox_child.Undecodable, RecursionError):
            passed = False
        if not passed:
            failed.append(check.statement)
    if not failed:
        return result(Outcome.PASSED, "")
    kind = Outcome.MEMORY if report.get("memory") is True else Outcome.FAILED
    return result(kind, reason or f"failed: {failed[0][:200]}", failed)


def _tail(file, size: int = _TAIL) -> str:
    file.seek(0, os.SEEK_END)
    file.seek(max(0, file.tell() - size))
    return file.read().decode("utf-8", errors="replace")


def _controller_root(controller: str) -> Path | None:
    """A writable cgroup hierarchy with `controller` (v1, or v2 with it enabled), if any."""
    v1 = Path("/sys/fs/cgroup") / controller
    if (v1 / "cgroup.procs").exists() and os.access(v1, os.W_OK):
        return v1
    v2 = Path("/sys/fs/cgroup")
    control = v2 / "cgroup.subtree_control"
    if control.exists() and controller in control.read_text().split() and os.access(v2, os.W_OK):
        return v2
    return None


@dataclass(frozen=True)
class _Groups:
    pids: str | None
    memory: str | None


@contextlib.contextmanager
def _cgroups(limits: SandboxLimits) -> Iterator[_Groups]:
    """As root, fresh cgroups capping the run's processes at `limits.processes` and their
    memory together at `limits.memory_total` (v2 holds both in one group); removed after."""
    caps = {"pids": limits.processes + SANDBOX_OVERHEAD, "memory": limits.memory_total}
    made: dict[Path, Path] = {}  # hierarchy -> the run's group in it
    groups: dict[str, str | None] = {"pids": None, "memory": None}
    try:
        for controller, cap in caps.items():
            root = _controller_root(controller) if os.geteuid() == 0 else None
            if root is None:
                continue
            if root not in made:
                made[root] = root / f"regress-sandbox-{uuid.uuid4().hex}"
                made[root].mkdir()
            v1 = root.name == controller
            name = {"pids": "pids.max", "memory": "memory.limit_in_bytes" if v1 else "memory.max"}
            (made[root] / name[controller]).write_text(str(cap))
            groups[controller] = str(made[root])
        yield _Groups(groups["pids"], groups["memory"])
    finally:
        # The namespace's processes take a moment to be reaped after init dies.
        for group in made.values():
            for _ in range(50):
                try:
                    group.rmdir()
                    break
                except OSError:
                    time.sleep(0.02)
