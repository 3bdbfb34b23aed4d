"""The code sandbox contains hostile completions and records them as failures.

No test is skipped when a layer is missing: a machine without bubblewrap, user namespaces,
libseccomp or a process limit fails `test_every_layer_applies` (and the containment cases), as
it should. The same probes as a hosted runner meets them (regress under the interpreter's
prefix, uid 1000): test_sandbox_installed.py.
"""

from __future__ import annotations

import os
import socket
import sysconfig
import uuid
from pathlib import Path

import psutil
import pytest

from regress.core.errors import BadInput, RunFailed
from regress.tasks.scoring import confinement, sandbox
from regress.tasks.scoring.sandbox import LAYERS, Outcome, SandboxLimits, run_python

LIMITS = SandboxLimits(cpu_seconds=1, wall_seconds=2)


def run(program: str, *tests: str, limits: SandboxLimits = LIMITS) -> sandbox.SandboxResult:
    return run_python(program, tests or ("assert f()",), limits)


def sandbox_processes() -> list[psutil.Process]:
    """Sandbox processes still alive 10 s on: a SIGKILLed process exits only once it is next
    scheduled, which on a busy core (a pinned test worker's) can come after the run returned,
    and another worker's sandbox runs end within their 2 s wall limit. A leaked process
    (the sleepers below sleep 60 s) is still alive."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if any("sandbox_child.py" in part for part in proc.info["cmdline"] or ()):
            found.append(proc)
    alive = psutil.wait_procs(found, timeout=10)[1]
    return [p for p in alive if _status(p) not in (psutil.STATUS_ZOMBIE, None)]


def _status(proc: psutil.Process) -> str | None:
    """The process's status; None once it is gone (an exited process is nothing left)."""
    try:
        return proc.status()
    except psutil.NoSuchProcess:
        return None


def test_every_layer_applies() -> None:
    result = run("def f(x):\n    return 2 * x\n", "assert f(2) == 4", "assert f(0) == 0")
    assert result.outcome is Outcome.PASSED and result.passed
    assert set(result.layers) == set(LAYERS)
    assert sandbox.require_sandbox(LIMITS) == result.layers


def test_failed_tests_are_named() -> None:
    result = run("def f(x):\n    return 3 * x\n", "assert f(2) == 4", "assert f(0) == 0")
    assert result.outcome is Outcome.FAILED
    assert result.failed_tests == ("assert f(2) == 4",)
    assert result.n_tests == 2


def test_syntax_error() -> None:
    assert run("def f(x)\n    return x\n").outcome is Outcome.SYNTAX_ERROR


def test_exiting_early_is_not_a_pass() -> None:
    result = run("import sys\nsys.exit(0)\n", "assert False")
    assert result.outcome is Outcome.FAILED


def test_infinite_loop_hits_the_cpu_limit() -> None:
    result = run("def f():\n    while True:\n        pass\n")
    assert result.outcome is Outcome.TIMEOUT
    assert "CPU" in result.reason


def test_sleeping_forever_hits_the_wall_clock_limit() -> None:
    result = run("import time\ndef f():\n    time.sleep(60)\n")
    assert result.outcome is Outcome.TIMEOUT
    assert "wall-clock" in result.reason


def test_huge_allocation_is_a_memory_failure() -> None:
    result = run("def f():\n    return bytearray(64 << 30)\n")
    assert result.outcome is Outcome.MEMORY


def test_fork_bomb_is_capped_and_leaves_nothing_behind() -> None:
    bomb = "import os, time\ndef f():\n    while True:\n        os.fork()\n"
    result = run(bomb)
    assert result.outcome is Outcome.FAILED
    assert "Resource temporarily unavailable" in result.reason
    # Forks that keep running after the cap are killed with the pid namespace.
    # (A fork that hits the cap is passed over, so the first process always sleeps on.)
    sleeper = (
        "import os, time\ndef f():\n    for _ in range(5):\n        try:\n"
        "            os.fork()\n        except OSError:\n            pass\n    time.sleep(60)\n"
    )
    assert run(sleeper).outcome is Outcome.TIMEOUT
    assert sandbox_processes() == []


def test_files_outside_the_sandbox_cannot_be_written(tmp_path: Path) -> None:
    """Outside folders are not in the sandbox's root, and all of it but the working folder is
    read-only (the root's own folders too: they have no size cap)."""
    home = Path.home() / f"regress-escaped-{uuid.uuid4().hex}"
    stdlib = Path(os.__file__).parent / f"regress-escaped-{uuid.uuid4().hex}"
    for target, error in ((tmp_path / "escaped.txt", "No such file or directory"),
                          (home, "Read-only file system"), (stdlib, "Read-only file system"),
                          (Path("/escaped.txt"), "Read-only file system")):  # fmt: skip
        result = run(f"def f():\n    open({str(target)!r}, 'w').write('x')\n    return True\n")
        assert result.outcome is Outcome.FAILED
        assert error in result.reason, (target, result.reason)
        assert not target.exists()


def test_files_inside_the_sandbox_can_be_written() -> None:
    program = (
        "import os\ndef f():\n    open('scratch.txt', 'w').write('ok')\n"
        "    return open(os.path.join(os.environ['TMPDIR'], 'scratch.txt')).read() == 'ok'\n"
    )
    assert run(program).outcome is Outcome.PASSED


def test_files_outside_the_read_roots_cannot_be_read(tmp_path: Path) -> None:
    """Neither outside files nor installed packages (regress, its task data) are in the root."""
    secret = tmp_path / "secret.txt"
    secret.write_text("hunter2")
    result = run(f"def f():\n    return open({str(secret)!r}).read() == 'hunter2'\n")
    assert result.outcome is Outcome.FAILED
    assert "No such file or directory" in result.reason
    import regress.tasks

    data = Path(regress.tasks.__file__).parent / "data" / "python_functions.jsonl"
    assert data.exists()
    listing = "import os\ndef f(path):\n    return os.path.exists(path)\n"
    assert run(listing, f"assert f({str(data)!r}) is False").passed
    site_packages = sysconfig.get_paths()["purelib"]
    assert run(listing, f"assert f({site_packages + '/numpy'!r}) is False").passed


def test_environment_secrets_are_not_visible(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REGRESS_FAKE_SECRET", "hunter2")
    from_env = (
        "import os\ndef f():\n    return os.environ.get('REGRESS_FAKE_SECRET') == 'hunter2'\n"
    )
    assert run(from_env).outcome is Outcome.FAILED
    parent = psutil.Process().pid
    from_proc = f"def f():\n    return b'hunter2' in open('/proc/{parent}/environ', 'rb').read()\n"
    result = run(from_proc)
    assert result.outcome is Outcome.FAILED  # another pid namespace: no such process
    assert "No such file or directory" in result.reason


def test_network_is_unreachable() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.setblocking(False)
        port = server.getsockname()[1]
        program = (
            "import socket\ndef f():\n"
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=1).sendall(b'x')\n"
            "    return True\n"
        )
        assert run(program).outcome is Outcome.FAILED
        with pytest.raises(BlockingIOError):
            server.accept()


def test_unix_sockets_outside_cannot_be_reached(tmp_path: Path) -> None:
    """A pathname unix socket (a docker.sock) is beyond the network namespace: the socket
    filter refuses to create one, and netlink and packet sockets too."""
    path = tmp_path / "docker.sock"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        server.listen()
        server.setblocking(False)
        program = (
            "import socket\ndef f():\n    s = socket.socket(socket.AF_UNIX)\n"
            f"    s.connect({str(path)!r})\n"
            "    s.sendall(b'GET /containers/json')\n    return True\n"
        )
        result = run(program)
        assert result.outcome is Outcome.FAILED and "Permission denied" in result.reason
        with pytest.raises(BlockingIOError):
            server.accept()
    for family in ("AF_NETLINK", "AF_PACKET"):
        result = run(
            f"import socket\ndef f():\n    socket.socket(socket.{family})\n    return True\n"
        )
        assert result.outcome is Outcome.FAILED and "Permission denied" in result.reason
    # Local plumbing stays: a socketpair reaches nothing outside the run.
    assert run("import socket\ndef f():\n    return len(socket.socketpair()) == 2\n").passed


def test_all_files_together_fit_the_disk_cap() -> None:
    """RLIMIT_FSIZE caps one file; the private tmpfs caps them all (768 MB once went to the
    temp folder in 1.2 s and the outcome was still passed)."""
    program = (
        "def f():\n    for i in range(4):\n        with open(f'part{i}', 'wb') as out:\n"
        "            out.write(b'x' * (15 << 20))\n    return True\n"
    )
    limits = SandboxLimits(cpu_seconds=2, wall_seconds=5, disk_bytes=32 << 20)
    result = run(program, limits=limits)
    assert result.outcome is Outcome.FAILED and "No space left on device" in result.reason
    assert run(program, limits=SandboxLimits(cpu_seconds=2, wall_seconds=5)).passed


def test_memory_of_all_processes_together_is_capped() -> None:
    """Each process has its own address-space limit; 6 forks of 600 MiB once used 3.5 GB."""
    program = (
        "import os, time\ndef f():\n    kids = []\n    for _ in range(6):\n"
        "        pid = os.fork()\n        if pid == 0:\n            block = bytearray(600 << 20)\n"
        "            block[::4096] = b'x' * len(block[::4096])\n            time.sleep(1)\n"
        "            os._exit(0)\n        kids.append(pid)\n"
        "    return all(os.waitpid(k, 0)[1] == 0 for k in kids)\n"
    )
    limits = SandboxLimits(cpu_seconds=5, wall_seconds=20, memory_total=2 << 30)
    result = run(program, limits=limits)
    assert "memory_limit" in result.layers
    assert not result.passed, result
    # Within the total, the same forks pass.
    assert run(program.replace("600 << 20", "200 << 20"), limits=limits).passed


def test_a_missing_layer_refuses_to_run(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_libseccomp() -> bytes:
        raise confinement.Unavailable("libseccomp is not available: (test)")

    monkeypatch.setattr(confinement, "seccomp_program", no_libseccomp)
    result = run("def f():\n    return True\n")
    assert result.outcome is Outcome.SANDBOX_ERROR
    assert "seccomp" in result.reason
    with pytest.raises(RunFailed, match="REGRESS_SANDBOX_OPTIONAL"):
        sandbox.require_sandbox(LIMITS)
    opted_out = SandboxLimits(cpu_seconds=1, wall_seconds=2, optional_layers=frozenset({"seccomp"}))
    result = run("def f():\n    return True\n", limits=opted_out)
    assert result.outcome is Outcome.PASSED
    assert "seccomp" not in result.layers and "bubblewrap" in result.layers


def test_without_bubblewrap_nothing_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """No opt-out covers bubblewrap: a code unit is an error with the install line, never a
    silent 0 and never an uncontained run."""
    monkeypatch.setenv("PATH", "/nonexistent")
    everything = SandboxLimits(optional_layers=frozenset(sandbox.OPTIONAL_LAYERS))
    result = run("def f():\n    return True\n", limits=everything)
    assert result.outcome is Outcome.SANDBOX_ERROR
    assert "apt-get install bubblewrap" in result.reason


def test_opt_out_names_are_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(sandbox.OPTIONAL_ENV, "seccomp, process_limit")
    assert sandbox.optional_layers_from_env() == {"seccomp", "process_limit"}
    for name in ("bubblewrap", "rlimits", "landlock"):
        monkeypatch.setenv(sandbox.OPTIONAL_ENV, name)
        with pytest.raises(BadInput, match=name):
            sandbox.optional_layers_from_env()
