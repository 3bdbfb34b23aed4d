"""Run untrusted, model-written Python against hidden unit tests, contained.

Each run gets a throwaway folder, a scrubbed environment (PATH, HOME and TMPDIR pointing into
the folder, nothing from `os.environ`) and a new process group, and is killed at a
wall-clock limit. Inside, `regress/tasks/scoring/sandbox_child.py` applies the kernel's layers
before any tested code runs:

- `namespaces`: new user, mount, network and pid namespaces. No network (only a loopback
  that is down); when the run ends, every process it started dies with the namespace's init.
- `rlimits`: CPU seconds, address space, file size, open files, no core files.
- `process_limit`: at most `processes` processes (fork bombs). Root ignores RLIMIT_NPROC, so
  as root a pids cgroup (v1 `/sys/fs/cgroup/pids`, or v2 with the pids controller) caps them;
  otherwise RLIMIT_NPROC, which counts inside the fresh user namespace.
- `memory_limit`: the memory of all the run's processes together: as root a memory cgroup at
  `memory_total`; otherwise RLIMIT_NPROC lowered so that RLIMIT_AS adds up to it.
- `disk`: a tmpfs of `disk_bytes` (and `disk_files` files) over the sandbox folder, private
  to the run's mount namespace: every file the run writes, together, fits in it.
- `landlock` (Linux 5.13+, ABI 4+ for TCP, 6+ for scopes): writes only beneath the sandbox
  folder, reads only beneath the Python installation and system folders (/usr, /lib, /bin),
  no TCP bind or connect, no signals or abstract unix sockets outside the sandbox.
- `sockets`: a seccomp filter refuses unix, netlink and packet sockets (a pathname unix
  socket such as /var/run/docker.sock is beyond both the network namespace and Landlock).

A layer that cannot be applied makes the run a SANDBOX_ERROR (and `require_sandbox` raises)
unless it is listed in `SandboxLimits.optional_layers` or `REGRESS_SANDBOX_OPTIONAL`
(comma-separated layer names): containment never degrades silently.

The tested code is also judged from outside. Each hidden test `assert EXPR OP LITERAL` (or
`assert EXPR`) is split here: the child evaluates only EXPR, in the tested code's interpreter,
and reports its value as tagged JSON of plain built-in types; this process decodes it by its
own rules (anything else is a failure) and holds it against the LITERAL, which the child never
sees. Nothing the child can see or print decides a pass: a forged result line still has to
carry the right values, and an object whose `__eq__` always says yes is not a value.
"""

from __future__ import annotations

import ast
import contextlib
import json
import operator
import os
import re
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
from typing import Any

from regress.core.errors import BadInput, RunFailed
from regress.tasks.scoring import sandbox_child

LAYERS = ("namespaces", "rlimits", "process_limit", "memory_limit", "disk", "landlock", "sockets")
OPTIONAL_ENV = "REGRESS_SANDBOX_OPTIONAL"
READ_ROOTS = ("/usr", "/lib", "/lib64", "/bin", "/etc/ld.so.cache")
MIN_LANDLOCK_ABI = 4
"""TCP rules came with ABI 4 (Linux 6.7); below it Landlock could not deny the network."""
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
    file_bytes: int = 16 << 20
    disk_bytes: int = 64 << 20
    """All files the run writes, together (a tmpfs over its folder)."""
    disk_files: int = 1024
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


_OPERATORS = {
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Is: "is",
    ast.IsNot: "is not",
}
_COMPARE = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "is": operator.is_,
    "is not": operator.is_not,
}


@dataclass(frozen=True)
class Check:
    """One hidden test, split: what the child evaluates, and what this side holds it against."""

    statement: str
    expression: str
    """Evaluated in the sandbox: the left side of the comparison, or the whole assertion."""
    op: str | None = None
    """The comparison (`==`, `is`, ...); None: the value must be true."""
    expected: Any = None
    """The literal on the right; never sent to the child."""

    def holds(self, value: Any) -> bool:
        """Whether the decoded value passes (plain data: no code of the child runs here)."""
        if self.op is None:
            return bool(value)
        try:
            return bool(_COMPARE[self.op](value, self.expected))
        except TypeError:  # e.g. `<` between a list and a number
            return False


def parse_check(statement: str) -> Check:
    """`assert EXPR OP LITERAL` or `assert EXPR` as a Check; BadInput for anything else."""
    try:
        body = ast.parse(statement).body
    except SyntaxError as exc:
        raise BadInput(f"hidden test {statement[:80]!r}: {exc.msg}") from exc
    if len(body) != 1 or not isinstance(body[0], ast.Assert):
        raise BadInput(f"hidden test {statement[:80]!r}: not one `assert` statement")
    test = body[0].test
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return Check(statement, ast.unparse(test))
    op = _OPERATORS.get(type(test.ops[0]))
    try:
        expected = ast.literal_eval(test.comparators[0])
    except ValueError:
        op = None
    if op is None:
        raise BadInput(f"hidden test {statement[:80]!r}: compare with a literal (`== [1, 2]`)")
    if op in ("is", "is not") and not any(expected is v for v in (None, True, False)):
        raise BadInput(f"hidden test {statement[:80]!r}: `is` compares with None, True or False")
    return Check(statement, ast.unparse(test.left), op, expected)


class _Undecodable(Exception):
    """A reported value outside the tagged form."""


_INT = re.compile(r"-?\d{1,4300}")
_SEQUENCES = {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}


def decode(node: Any, depth: int = 0) -> Any:
    """A value the child reported, by this side's rules: only the tagged built-in types."""
    if depth > 100 or not isinstance(node, dict) or not set(node) <= {"t", "v"}:
        raise _Undecodable
    tag, v = node.get("t"), node.get("v")
    if tag == "none" and "v" not in node:
        return None
    if tag == "bool" and type(v) is bool:
        return v
    if tag == "int" and type(v) is str and _INT.fullmatch(v):
        return int(v)
    if tag == "float" and type(v) is str:
        try:
            return float(v)
        except ValueError:
            raise _Undecodable from None
    if tag == "str" and type(v) is str:
        return v
    if tag in _SEQUENCES and type(v) is list:
        try:
            return _SEQUENCES[tag](decode(x, depth + 1) for x in v)
        except TypeError:  # an unhashable element of a set
            raise _Undecodable from None
    if tag == "dict" and type(v) is list:
        try:
            return {decode(k, depth + 1): decode(x, depth + 1) for k, x in v}
        except (TypeError, ValueError):
            raise _Undecodable from None
    raise _Undecodable


def optional_layers_from_env() -> frozenset[str]:
    """The layers `REGRESS_SANDBOX_OPTIONAL` allows to be missing (validated)."""
    names = frozenset(n.strip() for n in os.environ.get(OPTIONAL_ENV, "").split(",") if n.strip())
    unknown = names - set(LAYERS)
    if unknown:
        raise BadInput(f"{OPTIONAL_ENV}: unknown layer(s) {sorted(unknown)}; known: {LAYERS}")
    return names


def run_python(program: str, tests: Sequence[str], limits: SandboxLimits) -> SandboxResult:
    """Run `program` contained and judge it by the hidden test statements (e.g.
    `assert f(2) == 4`): the sandbox computes `f(2)`, this side compares it with 4."""
    checks = [parse_check(t) for t in tests]
    workdir = Path(tempfile.mkdtemp(prefix="regress-sandbox-"))
    try:
        (workdir / "solution.py").write_text(program, encoding="utf-8")
        expressions = [check.expression for check in checks]
        (workdir / "expressions.json").write_text(json.dumps(expressions), encoding="utf-8")
        with _cgroups(limits) as groups:
            return _launch(workdir, checks, groups, limits)
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
    workdir: Path, checks: Sequence[Check], groups: _Groups, limits: SandboxLimits
) -> SandboxResult:
    read_end, write_end = os.pipe()
    config = {
        "optional": sorted(limits.optional_layers),
        "cgroup": groups.pids,
        "memory_cgroup": groups.memory,
        "memory_nproc": max(2, limits.memory_total // limits.memory_bytes),
        "disk_bytes": limits.disk_bytes,
        "disk_files": limits.disk_files,
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
        stdout, stderr = _tail(out, _REPORT_BYTES), _tail(err)
    cpu_used = _children_cpu() - cpu_before

    def result(outcome: Outcome, reason: str, failed: Sequence[str] = ()) -> SandboxResult:
        return SandboxResult(outcome, len(checks), tuple(failed), reason, stderr, layers)

    if timed_out:
        return result(Outcome.TIMEOUT, f"wall-clock limit of {limits.wall_seconds:g} s")
    if proc.returncode == sandbox_child.SETUP_FAILED and stderr.startswith("sandbox:"):
        return result(Outcome.SANDBOX_ERROR, stderr.splitlines()[0])
    missing = set(LAYERS) - limits.optional_layers - set(layers)
    if missing:
        return result(Outcome.SANDBOX_ERROR, f"sandbox: layers not applied: {sorted(missing)}")
    report = _report(stdout, nonce)
    if report is not None:
        return _judged(report, checks, result)
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
    """The last result line carrying this run's nonce, if any parses as a JSON object."""
    prefix = f"{sandbox_child.RESULT_PREFIX} {nonce} "
    lines = [line for line in stdout.splitlines() if line.startswith(prefix)]
    try:
        report = json.loads(lines[-1][len(prefix) :]) if lines else None
    except (ValueError, RecursionError):
        return None
    return report if isinstance(report, dict) else None


def _judged(report: dict, checks: Sequence[Check], result: Any) -> SandboxResult:
    """Each check held against the value the child reported for it; a missing, raised or
    undecodable value fails its check. The report's own words decide nothing but the kind of
    failure (a syntax error, MemoryError)."""
    errors = report.get("errors")
    reason = str(errors[0])[:300] if isinstance(errors, list) and errors else ""
    if report.get("status") == "syntax_error":
        return result(Outcome.SYNTAX_ERROR, reason, [c.statement for c in checks])
    values = report.get("results")
    values = values if isinstance(values, list) and len(values) == len(checks) else []
    failed = []
    for i, check in enumerate(checks):
        item = values[i] if values else None
        try:
            if not (isinstance(item, dict) and "value" in item):
                raise _Undecodable
            passed = check.holds(decode(item["value"]))
        except (_Undecodable, RecursionError):
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


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


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
    caps = {"pids": limits.processes, "memory": limits.memory_total}
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
