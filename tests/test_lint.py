"""The code base stays ruff-clean: part of the test command so CI enforces it."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO


def test_ruff_check_and_format():
    for args in (["check"], ["format", "--check"]):
        result = subprocess.run(
            [sys.executable, "-m", "ruff", *args, "regress", "tests", "experiments", "scripts"],
            cwd=REPO,
            capture_output=True,
            text=True,
        )
        assert result.returncode == 0, result.stdout + result.stderr
