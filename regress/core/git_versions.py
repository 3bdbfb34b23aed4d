"""Earlier versions of a committed baseline: `main~3` is baseline `main` as it was three
promotions ago.

Baselines live in git (`baselines/<name>/`, committed), and every promotion or recreation
rewrites the baseline's manifest. So the commits that changed `<name>/manifest.json`, newest
first, are its versions; those whose manifest is the one in the working tree are the current
version, and `~N` is the N-th distinct version before it. The files come out of git itself
(`git archive`), so an anchor three promotions back needs no copy kept anywhere, only the
history: a shallow clone has none (actions/checkout needs `fetch-depth: 0`).
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

from regress.core.errors import BadInput

VERSION = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]{0,99})~(?P<back>[1-9][0-9]{0,3})$")
"""`NAME~N`: baseline NAME, N promotions ago."""
GIT_TIMEOUT_S = 60


@dataclass(frozen=True)
class Version:
    """A committed version of a baseline folder."""

    top: Path
    """The repository's top folder."""
    commit: str
    folder: str
    """The baseline folder's path inside the repository."""


def earlier_version(folder: Path, back: int, ref: str) -> Version:
    """The commit holding `folder` (a baseline) as it was `back` promotions ago; BadInput
    (naming `ref`) when git or enough history is missing."""
    folder = Path(os.path.abspath(folder))
    top = Path(_git(folder.parent, ref, "rev-parse", "--show-toplevel").strip())
    inside = folder.relative_to(top.resolve()).as_posix()
    manifest = f"{inside}/manifest.json"
    commits = _git(top, ref, "log", "--format=%H", "--", manifest).split()
    current = (
        _git(top, ref, "hash-object", manifest).strip()
        if (folder / "manifest.json").is_file()
        else ""
    )
    versions: list[str] = []
    seen = current
    for commit in commits:
        blob = _git(top, ref, "rev-parse", f"{commit}:{manifest}").strip()
        if blob != seen:
            versions.append(commit)
            seen = blob
    if len(versions) < back:
        raise BadInput(
            f"{ref}: git holds {len(versions)} earlier version(s) of {inside}, not {back} (a "
            "shallow clone holds none: check out with fetch-depth: 0)"
        )
    return Version(top, versions[back - 1], inside)


def extract(version: Version, into: Path, ref: str) -> Path:
    """Write the version's baseline folder under `into` (from `git archive`); its path."""
    try:
        packed = subprocess.run(
            [
                "git",
                "-C",
                str(version.top),
                "archive",
                "--format=tar",
                version.commit,
                "--",
                version.folder,
            ],
            capture_output=True,
            timeout=GIT_TIMEOUT_S,
            check=True,
        ).stdout
    except subprocess.CalledProcessError as exc:
        raise BadInput(
            f"{ref}: git archive: {exc.stderr.decode(errors='replace').strip()}"
        ) from exc
    try:
        with tarfile.open(fileobj=io.BytesIO(packed)) as archive:
            archive.extractall(into, filter="data")  # refuses links and paths out of `into`
    except tarfile.TarError as exc:  # FilterError among them: a link out of the baseline
        raise BadInput(
            f"{ref}: {version.folder} at {version.commit[:12]} cannot be read back ({exc})"
        ) from exc
    return into / version.folder


def _git(where: Path, ref: str, *args: str) -> str:
    try:
        done = subprocess.run(
            ["git", "-C", str(where), *args],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except FileNotFoundError:
        raise BadInput(f"{ref}: an earlier version of a baseline needs git, not found") from None
    if done.returncode != 0:
        why = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed"
        raise BadInput(f"{ref}: git {args[0]}: {why}")
    return done.stdout
