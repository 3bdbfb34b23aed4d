"""The baseline store: `<store>/<name>/manifest.json` + `records/<task>.jsonl`.

A run directory has the same layout wherever it lives (a committed baseline, a candidate's
saved run, a shard). Writes are atomic at the directory level: the new run is written and
fsynced beside the old one, then swapped in with renames; a write killed at any point leaves
the previous run readable (a half-finished swap is repaired on the next read).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from regress.errors import BadInput
from regress.manifest import Manifest, Run
from regress.records import Record

MANIFEST = "manifest.json"
RECORDS = "records"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def validate_name(name: str) -> str:
    """A baseline name is one safe path component: letters, digits, `.`, `_`, `-`."""
    if not _NAME.match(name) or ".." in name:
        raise BadInput(
            f"bad baseline name {name!r}: use letters, digits, '.', '_' or '-' "
            "(no '/', no '..', not empty)"
        )
    return name


def _fsync_write(path: Path, text: str) -> None:
    with path.open("w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_run(run: Run, target: Path) -> None:
    """Write `run` to directory `target`, replacing what is there only once fully written."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    _repair(target)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)  # mkdtemp's 0700 would hide a committed baseline
        (tmp / RECORDS).mkdir()
        for task in sorted(run.records):
            records = sorted(run.records[task], key=lambda r: r.doc_id)
            lines = "".join(r.to_json() + "\n" for r in records)
            _fsync_write(tmp / RECORDS / f"{task}.jsonl", lines)
        manifest = json.dumps(run.manifest.to_dict(), indent=2, sort_keys=True) + "\n"
        _fsync_write(tmp / MANIFEST, manifest)
        _fsync_dir(tmp / RECORDS)
        _fsync_dir(tmp)
        old = target.parent / f".{target.name}.old"
        if target.exists():
            os.rename(target, old)
        os.rename(tmp, target)
        _fsync_dir(target.parent)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _repair(target: Path) -> None:
    """Finish or undo a swap that was killed between its two renames."""
    old = target.parent / f".{target.name}.old"
    if old.exists():
        if target.exists():
            shutil.rmtree(old)
        else:
            os.rename(old, target)


def read_run(path: Path) -> Run:
    """Read and validate a run directory; any damage is a BadInput naming file and line."""
    path = Path(path)
    _repair(path)
    manifest_path = path / MANIFEST
    if not manifest_path.is_file():
        raise BadInput(f"{manifest_path}: missing (not a regress run or baseline)")
    try:
        data = json.loads(manifest_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise BadInput(f"{manifest_path}: corrupt JSON at line {exc.lineno} ({exc.msg})") from exc
    manifest = Manifest.from_dict(data, where=str(manifest_path))
    records: dict[str, list[Record]] = {}
    for name, info in manifest.tasks.items():
        records[name] = _read_records(path / RECORDS / f"{name}.jsonl", name, info.n)
    return Run(manifest=manifest, records=records)


def _read_records(path: Path, task: str, expected: int) -> list[Record]:
    if not path.is_file():
        raise BadInput(f"{path}: missing records file for task {task}")
    records = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.endswith("\n"):
                raise BadInput(f"{path}:{lineno}: truncated line (no newline at end)")
            record = Record.from_json(line, where=f"{path}:{lineno}")
            if record.task != task:
                raise BadInput(
                    f"{path}:{lineno}: record of task {record.task!r}, expected {task!r}"
                )
            records.append(record)
    if len(records) != expected:
        raise BadInput(f"{path}: {len(records)} records, manifest says {expected}")
    ids = [r.doc_id for r in records]
    if ids != sorted(set(ids)):
        raise BadInput(f"{path}: doc_ids not unique and sorted")
    return records


@dataclass(frozen=True)
class Store:
    """A folder of named baselines (default `./baselines`)."""

    root: Path

    def path(self, name: str) -> Path:
        """Directory of baseline `name` (validated)."""
        return Path(self.root) / validate_name(name)

    def save(self, run: Run) -> Path:
        """Write `run` as baseline `run.manifest.name` atomically; return its directory."""
        target = self.path(run.manifest.name)
        write_run(run, target)
        return target

    def load(self, name: str) -> Run:
        """Read baseline `name`, or BadInput listing the ones that exist."""
        path = self.path(name)
        if not path.exists() and not (path.parent / f".{name}.old").exists():
            known = ", ".join(self.names()) or "none"
            raise BadInput(f"no baseline {name!r} in {self.root} (have: {known})")
        return read_run(path)

    def names(self) -> list[str]:
        """Names of the baselines in the store, sorted."""
        root = Path(self.root)
        if not root.is_dir():
            return []
        return sorted(p.name for p in root.iterdir() if (p / MANIFEST).is_file())
