"""scripts/sandbox-setup.sh, the Action's step that makes the code sandbox work on a runner:
on Ubuntu 24.04 AppArmor keeps bwrap from creating user namespaces until a profile allows it.
The runner is simulated (a regress that fails until the profile is loaded), the script real."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "sandbox-setup.sh"


def _runner(tmp_path: Path, restricted: str) -> tuple[subprocess.CompletedProcess, Path]:
    """The script on a runner whose bwrap works only once `apparmor_parser` loaded a profile."""
    loaded = tmp_path / "loaded"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    parser = bin_dir / "apparmor_parser"
    parser.write_text(f'#!/bin/sh\ncp "$2" {tmp_path}/profile && touch {loaded}\n')
    python = tmp_path / "python"
    python.write_text(
        f"#!/bin/sh\nif [ -f {loaded} ]; then echo 'bubblewrap seccomp rlimits'; exit 0; fi\n"
        "echo 'regress: error: the code sandbox cannot run here: sandbox: bubblewrap failed: "
        "bwrap: setting up uid map: Permission denied'\nexit 1\n"
    )
    for tool in (parser, python):
        tool.chmod(0o755)
    sysctl = tmp_path / "restrict"
    sysctl.write_text(restricted + "\n")
    (tmp_path / "apparmor").mkdir()
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "PYTHON": str(python),
        "REGRESS_USERNS_SYSCTL": str(sysctl),
        "REGRESS_APPARMOR_DIR": str(tmp_path / "apparmor"),
    }
    done = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, env=env)
    return done, tmp_path / "profile"


def test_an_apparmor_restriction_is_lifted_for_bwrap_alone(tmp_path: Path) -> None:
    assert os.geteuid() == 0 and shutil.which("bwrap"), "the Action's runner has sudo"
    done, profile = _runner(tmp_path, "1")
    assert done.returncode == 0, done.stderr
    assert "allowing them to" in done.stdout and "code sandbox ready" in done.stdout
    text = profile.read_text()
    assert f"profile regress-bwrap {shutil.which('bwrap')} flags=(unconfined)" in text
    assert "  userns," in text


def test_a_sandbox_that_cannot_run_is_a_warning_not_a_silent_pass(tmp_path: Path) -> None:
    """Without the AppArmor restriction there is nothing this step may relax: it warns, and
    regress itself stops at the first code unit (exit 3)."""
    done, profile = _runner(tmp_path, "0")
    assert done.returncode == 0
    assert done.stdout.startswith("::warning::the code sandbox cannot run on this runner")
    assert "setting up uid map: Permission denied" in done.stdout
    assert not profile.exists()


def test_here_the_real_sandbox_is_ready() -> None:
    env = {**os.environ, "PYTHON": sys.executable}
    done = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, env=env)
    assert done.returncode == 0 and done.stdout.startswith("code sandbox ready"), done.stdout
    assert "bubblewrap seccomp" in done.stdout
