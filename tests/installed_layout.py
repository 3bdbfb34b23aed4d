"""regress installed as action.yml installs it, and run by a user who is not root.

action.yml runs `pip install` into setup-python's interpreter: no venv, so regress and its task
data (`regress/tasks/data/python_functions.jsonl`, the hidden tests and reference solutions)
lie in `site-packages` under the interpreter's own prefix. The editable venv the other tests
use hides that layout. `build` copies this interpreter (binary, libpython, standard library)
into a world-readable folder and installs this checkout's `regress` into the copy's own
`site-packages`, which also gives an unprivileged user an interpreter to run (this machine's
Python lives under root's private home).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import sysconfig
from pathlib import Path

import pyseccomp

REPO = Path(__file__).resolve().parents[1]
NOT_ROOT = ["setpriv", "--reuid=1000", "--regid=1000", "--clear-groups"]
_SKIP = shutil.ignore_patterns(
    "site-packages", "test", "__pycache__", "config-3*", "idlelib", "tkinter", "ensurepip"
)


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def build(dest: Path) -> Path:
    """The copied interpreter's path; regress is importable from its own site-packages only."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    binary = dest / "bin" / version
    binary.parent.mkdir(parents=True)
    shutil.copy2(os.path.realpath(sys.executable), binary)
    libdir = dest / "lib"
    stdlib = libdir / version
    shutil.copytree(sysconfig.get_path("stdlib"), stdlib, ignore=_SKIP,
                    copy_function=_link_or_copy)  # fmt: skip
    for line in Path("/proc/self/maps").read_text().splitlines():
        path = line.split(maxsplit=5)[-1]
        if "/libpython3" in path and not (libdir / Path(path).name).exists():
            shutil.copy2(path, libdir / Path(path).name)
    site = stdlib / "site-packages"
    shutil.copytree(REPO / "regress", site / "regress",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    shutil.copy2(pyseccomp.__file__, site / "pyseccomp.py")
    # Readable by everyone, as a toolcache is: the unprivileged user runs it.
    for root, dirs, files in os.walk(dest):
        for name in dirs + files:
            path = os.path.join(root, name)
            mode = os.stat(path).st_mode
            executable = stat.S_ISDIR(mode) or mode & stat.S_IXUSR
            os.chmod(path, mode | 0o444 | (0o111 if executable else 0))
    os.chmod(dest, 0o755)
    return binary


def run(python: Path, script: str, job: dict, user: list[str] | None = None) -> dict:
    """`script` run by the copied interpreter (as `user`, e.g. NOT_ROOT), the job as JSON on
    stdin; returns the JSON object it prints. The third-party packages regress imports come
    from this environment's site-packages, after the copy's own (regress itself is not there:
    it is installed editable)."""
    purelib = sysconfig.get_paths()["purelib"]
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "PYTHONPATH": purelib,
           "LD_LIBRARY_PATH": str(python.parents[1] / "lib")}  # fmt: skip
    done = subprocess.run(
        [*(user or []), str(python), "-c", script], input=json.dumps(job),
        capture_output=True, text=True, env=env, cwd="/tmp", timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
