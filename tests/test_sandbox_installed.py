"""Issue 47's probes of the code sandbox, as a hosted runner meets them: regress installed into
the interpreter's own prefix (action.yml's layout, `installed_layout.py`), run as root and as
an unprivileged user (uid 1000, as GitHub's runners are).

Each probe scored or escaped on the landlock sandbox this one replaced: the task data under
the prefix was readable (a body that read it and ran the reference solutions scored 30/30),
io_uring opened sockets past the socket filter, and as uid 1000 an RLIMIT_NPROC of 2 failed
every correct solution.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import installed_layout
import pytest
from installed_layout import NOT_ROOT

USERS = {"root": None, "uid 1000": NOT_ROOT}

# Appended after an item's signature: ends the function, then, at module level, finds the
# task data wherever the interpreter's prefix and site-packages are and defines every function
# from its reference solution.
STEAL = """
    return None
import json, os, sys, sysconfig
def _find():
    roots = {sys.prefix, sys.base_prefix, sysconfig.get_path('purelib'), '/'}
    for root in sorted(roots, key=len, reverse=True):
        for folder, _, files in os.walk(root):
            if 'python_functions.jsonl' in files:
                return os.path.join(folder, 'python_functions.jsonl')
_path = _find()
for _line in open(_path) if _path else ():
    _doc = json.loads(_line)
    exec(_doc['prompt'] + _doc['solution'])
"""

JUDGE = """
import json, sys
import regress
from regress.tasks import python_functions as pf
job = json.loads(sys.stdin.read())
docs = {d["id"]: d for d in pf.load()}
out = {"regress": regress.__file__, "results": {}}
for doc_id, completion in job["completions"].items():
    scored = pf.judge(docs[doc_id], completion)
    out["results"][doc_id] = [scored.metrics["pass"], scored.scores["sandbox"][0]]
print(json.dumps(out))
"""

SANDBOX = """
import json, sys
from regress.tasks.scoring.sandbox import SandboxLimits, run_python
job = json.loads(sys.stdin.read())
r = run_python(job["program"], job["tests"], SandboxLimits(cpu_seconds=2, wall_seconds=10))
print(json.dumps({"outcome": r.outcome.value, "reason": r.reason, "layers": list(r.layers)}))
"""

UNSANDBOXED = """
import json, sys
job = json.loads(sys.stdin.read())
namespace = {}
exec(job["program"], namespace)
print(json.dumps({"passed": all(eval(t[len("assert "):], namespace) for t in job["tests"])}))
"""


@pytest.fixture(scope="module")
def python() -> Iterator[Path]:
    assert os.geteuid() == 0, "these probes switch to uid 1000, which needs root"
    assert shutil.which("setpriv") and shutil.which("bwrap")
    dest = Path(tempfile.mkdtemp(prefix="regress-toolcache-", dir="/tmp"))
    dest.chmod(0o755)
    try:
        yield installed_layout.build(dest / "python")
    finally:
        shutil.rmtree(dest, ignore_errors=True)


@pytest.fixture(scope="module")
def docs() -> list[dict]:
    from regress.tasks import python_functions as pf

    return pf.load()[:6]


@pytest.mark.parametrize("user", USERS)
def test_correct_solutions_pass_and_the_task_data_is_out_of_reach(python, docs, user) -> None:
    """The reference solutions pass (as uid 1000 too: the sandbox's own processes no longer
    eat the process cap), and a body that reads the installed task data scores nothing."""
    judged = installed_layout.run(
        python, JUDGE, {"completions": {d["id"]: d["solution"] for d in docs}}, USERS[user]
    )
    assert judged["regress"].startswith(str(python.parents[1])), judged  # the installed copy
    assert {k: v[0] for k, v in judged["results"].items()} == {d["id"]: 1.0 for d in docs}
    stolen = installed_layout.run(
        python, JUDGE, {"completions": {d["id"]: STEAL for d in docs}}, USERS[user]
    )
    assert stolen["results"] == {d["id"]: [0.0, "failed"] for d in docs}


def test_the_stealing_body_does_pass_where_the_data_is_readable(python, docs) -> None:
    """The probe is potent: run without the sandbox, in the same layout, it passes every item."""
    for doc in docs:
        job = {"program": doc["prompt"] + STEAL, "tests": doc["tests"]}
        assert installed_layout.run(python, UNSANDBOXED, job) == {"passed": True}, doc["id"]


IO_URING = """
import ctypes
def f():
    libc = ctypes.CDLL(None, use_errno=True)
    params = ctypes.create_string_buffer(120)
    fd = libc.syscall(425, 8, params)
    return [fd, ctypes.get_errno()]
"""


def _io_uring_here() -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.syscall(425, 8, ctypes.create_string_buffer(120))
    if fd >= 0:
        os.close(fd)
    return fd


@pytest.mark.parametrize("user", USERS)
def test_io_uring_and_other_socket_families_are_refused(python, user) -> None:
    """io_uring can open and connect a unix socket without socket(2) (IORING_OP_SOCKET): it
    is refused with ENOSYS. Every socket family but INET and INET6 is refused (VSOCK too)."""
    assert _io_uring_here() >= 0, "io_uring works outside the sandbox: the probe is live"
    job = {"program": IO_URING, "tests": ["assert f() == [-1, 38]"]}
    result = installed_layout.run(python, SANDBOX, job, USERS[user])
    assert result["outcome"] == "passed", result
    assert {"bubblewrap", "seccomp"} <= set(result["layers"])
    for family in ("AF_UNIX", "AF_VSOCK", "AF_NETLINK", "AF_PACKET"):
        program = f"import socket\ndef f():\n    socket.socket(socket.{family})\n    return 1\n"
        job = {"program": program, "tests": ["assert f() == 1"]}
        result = installed_layout.run(python, SANDBOX, job, USERS[user])
        assert result["outcome"] == "failed" and "Permission denied" in result["reason"], family


FORKS = """
import json, sys
from regress.tasks.scoring.sandbox import SandboxLimits, run_python
job = json.loads(sys.stdin.read())
program = (
    "import os, time\\ndef f():\\n    kids = []\\n    for _ in range(6):\\n"
    "        pid = os.fork()\\n        if pid == 0:\\n"
    f"            block = bytearray({job['mib']} << 20)\\n"
    "            block[::4096] = b'x' * len(block[::4096])\\n            time.sleep(1)\\n"
    "            os._exit(0)\\n        kids.append(pid)\\n"
    "    return all(os.waitpid(k, 0)[1] == 0 for k in kids)\\n"
)
limits = SandboxLimits(cpu_seconds=5, wall_seconds=20, memory_total=job["total_mib"] << 20)
r = run_python(program, ["assert f()"], limits)
print(json.dumps({"outcome": r.outcome.value, "layers": r.layers, "reason": r.reason}))
"""


def test_without_root_the_memory_total_is_a_process_cap(python) -> None:
    """No cgroup for a user who is not root: RLIMIT_NPROC of memory_total // memory_bytes
    (1 GiB each) processes of tested code, on top of the sandbox's own, keeps the address
    spaces within the total."""
    capped = installed_layout.run(python, FORKS, {"mib": 600, "total_mib": 2048}, NOT_ROOT)
    assert "memory_limit" in capped["layers"] and capped["outcome"] != "passed", capped
    roomy = installed_layout.run(python, FORKS, {"mib": 100, "total_mib": 16 << 10}, NOT_ROOT)
    assert roomy["outcome"] == "passed", roomy


def test_a_user_mapped_to_root_is_not_trusted_to_rlimit_nproc(python) -> None:
    """Inside a user namespace that maps uid 1000 to root, RLIMIT_NPROC never binds (the
    kernel exempts root): the sandbox must refuse rather than claim the layer."""
    mapped = ["unshare", "--user", "--map-user=1000", "--map-group=1000"]
    result = installed_layout.run(python, FORKS, {"mib": 600, "total_mib": 2048}, mapped)
    assert result["outcome"] == "sandbox_error", result
    assert "RLIMIT_NPROC does not bind root" in result["reason"]
