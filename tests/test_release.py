"""Releases a user can pin: `regress --version` says how far a checkout is past its release,
and release.yml tags vX.Y.Z, moves v0 and publishes the build, its steps run for real (git
repositories made here, a fake `gh` that records what it is asked)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from conftest import REPO

import regress
from regress.cli import cli
from regress.cli.version import checkout_version

WORKFLOW = REPO / ".github" / "workflows" / "release.yml"


def git(root: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.strip()


def project(root: Path, version: str = "0.1.0", name: str = "regress-gate") -> Path:
    """A git repository laid out as this one: pyproject.toml and the regress package."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q")
    (root / "regress").mkdir()
    (root / "regress" / "__init__.py").write_text(f'__version__ = "{version}"\n')
    (root / "pyproject.toml").write_text(f'[project]\nname = "{name}"\nversion = "{version}"\n')
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "set the version")
    return root


def commits(root: Path, n: int) -> None:
    for i in range(n):
        (root / "work.txt").write_text(f"{i}\n")
        git(root, "add", "work.txt")
        git(root, "commit", "-q", "-m", f"work {i}")


# --- regress --version -----------------------------------------------------------------------


def test_a_checkout_says_how_far_past_the_commit_that_set_the_version(tmp_path: Path) -> None:
    root = project(tmp_path / "repo")
    assert checkout_version("0.1.0", root / "regress") == "0.1.0"
    commits(root, 3)
    head = git(root, "rev-parse", "--short=7", "HEAD")
    assert checkout_version("0.1.0", root / "regress") == f"0.1.0+3.g{head}"


def test_a_release_tag_is_counted_from(tmp_path: Path) -> None:
    root = project(tmp_path / "repo")
    commits(root, 4)
    git(root, "tag", "-a", "v0.1.0", "-m", "release", "HEAD~1")
    head = git(root, "rev-parse", "--short=7", "HEAD")
    assert checkout_version("0.1.0", root / "regress") == f"0.1.0+1.g{head}"
    git(root, "checkout", "-q", "v0.1.0")
    assert checkout_version("0.1.0", root / "regress") == "0.1.0"


def test_an_installed_package_is_its_release(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    (site / "regress").mkdir(parents=True)
    assert checkout_version("0.1.0", site / "regress") == "0.1.0"
    # Inside some other project's repository: not a checkout of regress.
    other = project(tmp_path / "other", name="something-else")
    commits(other, 2)
    assert checkout_version("0.1.0", other / "regress") == "0.1.0"


def test_regress_version_asks_git_only_when_asked(tmp_path: Path, monkeypatch) -> None:
    root = project(tmp_path / "repo")
    commits(root, 2)
    head = git(root, "rev-parse", "--short=7", "HEAD")
    monkeypatch.setattr(regress, "__file__", str(root / "regress" / "__init__.py"))
    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0
    assert result.output == f"regress, version 0.1.0+2.g{head}\n"
    # `import regress` (and the command line's own module) start no process for it.
    code = "import sys, regress, regress.cli; print('subprocess' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert done.stdout.strip() == "False", done.stderr


def test_the_package_and_pyproject_agree_on_the_version() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert pyproject["project"]["version"] == regress.__version__


# --- release.yml -----------------------------------------------------------------------------


def release_workflow() -> dict[str, Any]:
    data = yaml.safe_load(WORKFLOW.read_text())
    assert isinstance(data, dict)
    return data


def step(job: str, name: str) -> dict[str, Any]:
    (found,) = [s for s in release_workflow()["jobs"][job]["steps"] if s.get("name") == name]
    return found


def run_script(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_release_runs_on_a_version_change_of_the_default_branch_with_least_privilege() -> None:
    wf = release_workflow()
    on = wf.get("on", wf.get(True))
    assert on["push"] == {"paths": ["pyproject.toml"]} and "workflow_dispatch" in on
    assert wf["permissions"] == {}
    jobs = wf["jobs"]
    assert jobs["build"]["if"] == (
        "github.ref == format('refs/heads/{0}', github.event.repository.default_branch)"
    )
    assert {name: job["permissions"] for name, job in jobs.items()} == {
        "build": {"contents": "read"},
        "release": {"contents": "write"},
        "pypi": {"id-token": "write"},
    }
    # The job that may write runs no checkout, no pip, no code of the repository's.
    assert [s.get("uses", "").split("@")[0] for s in jobs["release"]["steps"]] == [
        "actions/download-artifact",
        "",
    ]
    # PyPI is trusted publishing: no secret anywhere, and only when the repository opts in.
    assert "secrets." not in WORKFLOW.read_text()
    assert jobs["pypi"]["if"] == "vars.PYPI_PUBLISH == 'true'"
    assert jobs["pypi"]["environment"] == "pypi"


@pytest.fixture
def python_env(tmp_path: Path) -> dict[str, str]:
    """PATH with `python` as this interpreter, HOME without a git config."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    (tmp_path / "home").mkdir()
    return {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(tmp_path / "home"),
        "PYTHONPATH": "",
    }


def version_step(root: Path, env: dict[str, str]) -> tuple[int, dict[str, str], str]:
    output = root.parent / "output"
    output.write_text("")
    done = run_script(
        step("build", "Read the version and whether it is released")["run"],
        root,
        env | {"GITHUB_OUTPUT": str(output)},
    )
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines())
    return done.returncode, outputs, done.stdout


def test_a_new_version_is_released_once(tmp_path: Path, python_env: dict[str, str]) -> None:
    root = project(tmp_path / "repo", version="0.2.0")
    code, outputs, _ = version_step(root, python_env)
    assert (code, outputs) == (0, {"version": "0.2.0", "release": "true"})
    git(root, "tag", "v0.2.0")
    code, outputs, text = version_step(root, python_env)
    assert (code, outputs) == (0, {"version": "0.2.0", "release": "false"})
    assert "v0.2.0 is released already" in text


@pytest.mark.parametrize(
    ("pyproject", "package", "error"),
    [
        ("1.0", "1.0", "must be X.Y.Z, not '1.0'"),
        ("0.2.0\nx=1", "0.2.0", "must be X.Y.Z"),
        ("0.2.0", "0.1.0", "regress/__init__.py says 0.1.0, pyproject.toml 0.2.0"),
    ],
)
def test_a_version_that_cannot_be_a_tag_or_disagrees_is_refused(
    tmp_path: Path, python_env: dict[str, str], pyproject: str, package: str, error: str
) -> None:
    root = project(tmp_path / "repo", version=package)
    # A JSON string is a TOML basic string too (the newline stays an escape).
    version = json.dumps(pyproject)
    (root / "pyproject.toml").write_text(f'[project]\nname = "regress-gate"\nversion = {version}\n')
    code, outputs, text = version_step(root, python_env)
    assert code == 1 and outputs == {} and error in text


FAKE_GH = """#!/bin/bash
echo "$*" >> "$GH_LOG"
if [ "$1" = api ] && [ "$2" = "repos/acme/m/git/ref/tags/v0" ]; then exit "$MAJOR_EXISTS"; fi
exit 0
"""


@pytest.mark.parametrize(("major_exists", "move"), [(0, "PATCH"), (1, "POST")])
def test_the_release_tags_publishes_and_moves_the_major_tag(
    tmp_path: Path, major_exists: int, move: str
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    gh = bin_dir / "gh"
    gh.write_text(FAKE_GH)
    gh.chmod(gh.stat().st_mode | stat.S_IEXEC)
    work = tmp_path / "work"
    (work / "dist").mkdir(parents=True)
    for name in ("regress_gate-0.2.0-py3-none-any.whl", "regress_gate-0.2.0.tar.gz"):
        (work / "dist" / name).write_text("x")
    sha = "1" * 40
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "GH_LOG": str(tmp_path / "gh.log"),
        "MAJOR_EXISTS": str(major_exists),
        "GH_TOKEN": "t",
        "VERSION": "0.2.0",
        "GITHUB_REPOSITORY": "acme/m",
        "GITHUB_SHA": sha,
    }
    script = step("release", "Tag vX.Y.Z, publish the release, move the major tag")["run"]
    done = run_script(script, work, env)
    assert done.returncode == 0, done.stderr
    calls = (tmp_path / "gh.log").read_text().splitlines()
    assert calls[0] == (
        "release create v0.2.0 dist/regress_gate-0.2.0-py3-none-any.whl "
        f"dist/regress_gate-0.2.0.tar.gz --repo acme/m --target {sha} --title regress 0.2.0 "
        "--generate-notes"
    )
    assert calls[1] == "api repos/acme/m/git/ref/tags/v0"
    if move == "PATCH":
        assert calls[2] == (
            f"api --method PATCH repos/acme/m/git/refs/tags/v0 -f sha={sha} -F force=true"
        )
    else:
        assert (
            calls[2] == f"api --method POST repos/acme/m/git/refs -f ref=refs/tags/v0 -f sha={sha}"
        )
    assert len(calls) == 3 and done.stdout == f"released v0.2.0; v0 now points at {sha}\n"
