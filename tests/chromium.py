"""Headless Chromium for the HTML report's tests: find it, install it with apt when missing.

Debian's `chromium` package. A test skips only where apt-get is unavailable, and never when
the `CI` environment variable is set: there a missing browser fails the test.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

NAMES = ("chromium", "chromium-browser")
INSTALL_TIMEOUT_S = 900
RUN_TIMEOUT_S = 120
FLAGS = (
    "--headless",
    "--no-sandbox",  # tests run as root in containers, where the sandbox cannot start
    "--disable-gpu",
    "--disable-dev-shm-usage",  # small /dev/shm in containers crashes the renderer
    "--hide-scrollbars",
    "--no-first-run",
    "--allow-file-access-from-files",
)


def _found() -> str | None:
    return next((path for name in NAMES if (path := shutil.which(name))), None)


def chromium() -> str:
    """The chromium binary, installed with `apt-get install -y chromium` when missing.

    Skips the calling test where apt-get is unavailable, unless `CI` is set (then fails).
    """
    path = _found()
    if path:
        return path
    if shutil.which("apt-get") is None:
        message = "chromium is not installed and apt-get is unavailable"
        if "CI" in os.environ:
            pytest.fail(message)
        pytest.skip(message)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "--no-install-recommends", "chromium"]
    result = subprocess.run(
        install, env=env, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S
    )
    if result.returncode != 0:
        # A stale package index is the usual cause: refresh it once and try again.
        subprocess.run(["apt-get", "update"], env=env, capture_output=True, timeout=600)
        result = subprocess.run(
            install, env=env, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S
        )
    path = _found()
    if path is None:
        pytest.fail(f"apt-get install chromium failed: {result.stderr[-2000:]}")
    return path


def draw(
    binary: str,
    page: Path,
    png: Path | None = None,
    width: int = 1400,
    height: int = 1000,
    fragment: str = "",
) -> str:
    """The page's DOM after its scripts ran (virtual time lets them finish), and when `png`
    is given a screenshot of its top `height` pixels at `width` pixels wide, in one run;
    `fragment` is the address's `#...` part."""
    shot = [f"--screenshot={png.resolve()}"] if png else []
    command = [
        binary,
        *FLAGS,
        f"--window-size={width},{height}",
        "--virtual-time-budget=10000",
        "--dump-dom",
        *shot,
        page.resolve().as_uri() + (f"#{fragment}" if fragment else ""),
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert result.returncode == 0, result.stderr[-2000:]
    assert png is None or (png.is_file() and png.stat().st_size > 0), result.stderr[-2000:]
    return result.stdout
