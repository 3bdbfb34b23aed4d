"""The code sandbox contains hostile completions and records them as failures.

No test is skipped when a layer is missing: a machine without user namespaces, Landlock or a
process limit fails `test_every_layer_applies` (and the containment cases), as it should.
"""

from __future__ import annotations

import os
import socket
import uuid
from pathlib import Path

import psutil
import pytest

from regress.core.errors import BadInput, RunFailed
from regress.tasks.scoring import sandbox
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
    targets = [tmp_path / "escaped.txt", Path.home() / f"regress-escaped-{uuid.uuid4().hex}"]
    for target in targets:
        result = run(f"def f():\n    open({str(target)!r}, 'w').write('x')\n    return True\n")
        assert result.outcome is Outcome.FAILED
        assert "Permission denied" in result.reason
        assert not target.exists()


def test_files_inside_the_sandbox_can_be_written() -> None:
    program = (
        "import os\ndef f():\n    open('scratch.txt', 'w').write('ok')\n"
        "    return open(os.path.join(os.environ['TMPDIR'], 'scratch.txt')).read() == 'ok'\n"
    )
    assert run(program).outcome is Outcome.PASSED


def test_files_outside_the_read_roots_cannot_be_read(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("hunter2")
    result = run(f"def f():\n    return open({str(secret)!r}).read() == 'hunter2'\n")
    assert result.outcome is Outcome.FAILED
    assert "Permission denied" in result.reason


def test_environment_secrets_are_not_visible(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REGRESS_FAKE_SECRET", "hunter2")
    from_env = (
        "import os\ndef f():\n    return os.environ.get('REGRESS_FAKE_SECRET') == 'hunter2'\n"
    )
    assert run(from_env).outcome is Outcome.FAILED
    parent = psutil.Process().pid
    from_proc = f"def f():\n    return b'hunter2' in open('/proc/{parent}/environ', 'rb').read()\n"
    result = run(from_proc)
    assert result.outcome is Outcome.FAILED
    assert "Permission denied" in result.reason


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
    """A pathname unix socket (a docker.sock) is beyond the network namespace and Landlock:
    the socket filter refuses to create one, and netlink and packet sockets too."""
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
    monkeypatch.setattr(sandbox, "MIN_LANDLOCK_ABI", 1000)
    result = run("def f():\n    return True\n")
    assert result.outcome is Outcome.SANDBOX_ERROR
    assert "landlock" in result.reason
    with pytest.raises(RunFailed, match="REGRESS_SANDBOX_OPTIONAL"):
        sandbox.require_sandbox(LIMITS)
    opted_out = SandboxLimits(
        cpu_seconds=1, wall_seconds=2, optional_layers=frozenset({"landlock"})
    )
    result = run("def f():\n    return True\n", limits=opted_out)
    assert result.outcome is Outcome.PASSED
    assert "landlock" not in result.layers


def test_opt_out_names_are_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(sandbox.OPTIONAL_ENV, "landlock, namespaces")
    assert sandbox.optional_layers_from_env() == {"landlock", "namespaces"}
    monkeypatch.setenv(sandbox.OPTIONAL_ENV, "seccomp")
    with pytest.raises(BadInput, match="seccomp"):
        sandbox.optional_layers_from_env()


_FORKS = (
    "import json, os, sys\n"
    "from regress.tasks.scoring.sandbox import SandboxLimits, run_python\n"
    "mib, total = int(sys.argv[1]), int(sys.argv[2])\n"
    "program = (\n"
    "    'import os, time\\ndef f():\\n    kids = []\\n    for _ in range(6):\\n'\n"
    "    '        pid = os.fork()\\n        if pid == 0:\\n'\n"
    "    f'            block = bytearray({mib} << 20)\\n'\n"
    "    '            block[::4096] = b\"x\" * len(block[::4096])\\n            time.sleep(1)\\n'\n"
    "    '            os._exit(0)\\n        kids.append(pid)\\n'\n"
    "    '    return all(os.waitpid(k, 0)[1] == 0 for k in kids)\\n'\n"
    ")\n"
    "limits = SandboxLimits(cpu_seconds=5, wall_seconds=20, memory_total=total << 20)\n"
    "r = run_python(program, ['assert f()'], limits)\n"
    "print(json.dumps({'outcome': r.outcome.value, 'layers': r.layers, 'reason': r.reason}))\n"
)


def _forks_as(prefix: list[str], mib: int, total_mib: int) -> dict:
    """Six forks of `mib` MiB in a sandbox capped at `total_mib`, run by another user."""
    import json
    import subprocess
    import sys
    import sysconfig

    repo = Path(__file__).resolve().parents[1]
    # The other user may not reach this interpreter (pyenv under a private /root): then the
    # system's of the same version, with this environment's packages on its path.
    python = os.path.realpath(sys.executable)
    relaunch = "import subprocess, sys; subprocess.run([sys.executable, '-c', ''], check=True)"
    probe = subprocess.run([*prefix, python, "-c", relaunch], capture_output=True, cwd="/tmp")
    if probe.returncode:
        python = f"/usr/bin/python3.{sys.version_info.minor}"
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{repo}:{sysconfig.get_paths()['purelib']}"}
    done = subprocess.run(
        [*prefix, python, "-c", _FORKS, str(mib), str(total_mib)],
        capture_output=True, text=True, env=env, cwd="/tmp", timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


NOT_ROOT = ["setpriv", "--reuid=1000", "--regid=1000", "--clear-groups"]


def test_without_root_the_memory_total_is_a_process_cap() -> None:
    """No cgroup for a user who is not root: RLIMIT_NPROC of memory_total // memory_bytes
    (1 GiB each) keeps the address spaces within the total."""
    assert os.geteuid() == 0, "this test switches to another user, which needs root"
    capped = _forks_as(NOT_ROOT, 600, 2048)
    assert "memory_limit" in capped["layers"] and capped["outcome"] != "passed", capped
    roomy = _forks_as(NOT_ROOT, 100, 16 << 10)
    assert roomy["outcome"] == "passed", roomy


def test_a_user_mapped_to_root_is_not_trusted_to_rlimit_nproc() -> None:
    """Inside a user namespace that maps uid 1000 to root, RLIMIT_NPROC never binds (the
    kernel exempts root): the sandbox must refuse rather than claim the layer."""
    mapped = ["unshare", "--user", "--map-user=1000", "--map-group=1000"]
    result = _forks_as(mapped, 600, 2048)
    assert result["outcome"] == "sandbox_error", result
    assert "RLIMIT_NPROC does not bind root" in result["reason"]
