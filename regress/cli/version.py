"""`regress --version`: the release, and how far past it a git checkout is.

An installed wheel is its release (`0.1.0`). Run from a git checkout, regress says how many
commits it is past that release, as a PEP 440 local version (`0.1.0+65.g2237472`): past the
tag `v0.1.0`, or, where the clone has no tags (a plain clone of a fork, a CI checkout), past
the commit that set the version in pyproject.toml. Only `--version` asks git, so neither
`import regress` nor any other command starts a process for it.
"""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path

DISTRIBUTION = "regress-gate"
_GIT_TIMEOUT_S = 10.0


def _git(root: Path, *args: str) -> str:
    """git's output in `root`, stripped; empty when git fails or says nothing."""
    done = subprocess.run(
        ["git", "-C", str(root), *args],
        capture_output=True,
        text=True,
        timeout=_GIT_TIMEOUT_S,
        check=False,
    )
    return done.stdout.strip() if done.returncode == 0 else ""


def _is_checkout(root: Path) -> bool:
    """Whether `root` is a git checkout of this project (not some repository regress happens
    to be installed inside)."""
    if not (root / ".git").exists():
        return False
    try:
        project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return project.get("project", {}).get("name") == DISTRIBUTION


def checkout_version(release: str, package_dir: Path) -> str:
    """`release` as the code in `package_dir` (the `regress` folder) is: `release` itself
    when installed or on the release's commit, else `release+N.gSHA`, N commits past it."""
    root = package_dir.resolve().parent
    if not _is_checkout(root):
        return release
    try:
        base = _git(root, "rev-parse", "-q", "--verify", f"refs/tags/v{release}^{{commit}}")
        if not base:
            # No tag here: the latest commit that wrote this version into pyproject.toml.
            line = f'version = "{release}"'
            base = _git(root, "log", "-n1", "--format=%H", "-S", line, "--", "pyproject.toml")
        count = _git(root, "rev-list", "--count", f"{base}..HEAD") if base else ""
        head = _git(root, "rev-parse", "--short=7", "HEAD")
    except (OSError, subprocess.SubprocessError):
        return release  # no git on PATH, or it hung: the release is still true
    if not count.isdigit() or not head or int(count) == 0:
        return release
    return f"{release}+{int(count)}.g{head}"
