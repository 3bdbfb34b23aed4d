"""Files written whole or not at all: a temporary file beside the target, then a rename.

A report, a judgements file or a labelling form that a killed process left half-written would
be read later as if complete; a rename within one folder is atomic on POSIX filesystems.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def umask() -> int:
    """The process's umask (reading it means setting it: set it straight back)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text_atomic(path: Path, text: str) -> None:
    """Write `text` (UTF-8) to `path`, creating its folder; OSError when impossible, and then
    `path` is as it was."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o666 & ~umask())  # mkstemp's 0600 would hide a report from others
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)
