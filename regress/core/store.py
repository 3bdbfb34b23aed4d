"""The baseline store: `<store>/<name>/manifest.json` + `records/<task>.jsonl`.

A run directory has the same layout wherever it lives (a committed baseline, a candidate's
saved run, a shard). Writes are atomic at the directory level: the new run is written and
fsynced beside the old one, then swapped in with renames; a write killed at any point leaves
the previous run readable (a half-finished swap is repaired on the next read, and the next
write deletes a killed writer's temporary folder).

Writers hold an exclusive `flock` on the folder that holds the run (the store), readers a
shared one, so two processes never interleave a swap or a repair: a second writer waits for
the first and then replaces its run whole. The manifest stores the sha256 of each records
file, and a records file that does not match it is refused.
"""

from __future__ import annotations

import fcntl
import glob
import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from regress.core import safe_json
from regress.core.errors import BadInput, RunFailed
from regress.core.files import umask
from regress.core.git_versions import VERSION, earlier_version, extract
from regress.core.jsonl import Tail, split_lines
from regress.core.manifest import Manifest, Run
from regress.core.records import Record

MANIFEST = "manifest.json"
RECORDS = "records"
LOCK_TIMEOUT_S = 600.0
"""How long a writer waits for another one before giving up (its run is saved elsewhere)."""
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_TASK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,199}$")
"""As a baseline name, and `@` (a task in a prompt format: `arc_easy@fmt2`)."""


def validate_name(name: str) -> str:
    """A baseline name is one safe path component: letters, digits, `.`, `_`, `-`."""
    if not isinstance(name, str) or not _NAME.match(name) or ".." in name:
        raise BadInput(
            f"bad baseline name {str(name)[:100]!r}: use letters, digits, '.', '_' or '-' "
            "(no '/', no '..', not empty)"
        )
    return name


def validate_task_name(name: str, where: str) -> str:
    """A task name from a manifest becomes a file name: one safe path component only."""
    if not isinstance(name, str) or not _TASK.match(name) or ".." in name:
        raise BadInput(f"{where}: bad task name {str(name)[:100]!r} (not a safe file name)")
    return name


def records_sha256(text: str) -> str:
    """sha256 of a records file's content, as the manifest stores it."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def is_run_folder(path: Path) -> bool:
    """Whether `path` holds only what a regress run holds (manifest.json, records/*.jsonl)."""
    entries = {p.name: p for p in Path(path).iterdir()}
    if MANIFEST not in entries or not entries[MANIFEST].is_file():
        return False
    if set(entries) - {MANIFEST, RECORDS}:
        return False
    records = entries.get(RECORDS)
    if records is None:
        return True
    return records.is_dir() and all(p.is_file() and p.suffix == ".jsonl" for p in records.iterdir())


class _LockTimeout(Exception):
    """Another process held the lock longer than LOCK_TIMEOUT_S."""


@contextmanager
def _locked(folder: Path, exclusive: bool) -> Iterator[None]:
    """Hold an advisory lock on `folder` (the folder itself: no lock file is left behind)."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        # A folder we cannot open is one nobody can write a run into: reading needs no lock.
        if exclusive:
            raise
        yield
        return
    try:
        mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        deadline = time.monotonic() + LOCK_TIMEOUT_S
        while True:
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise _LockTimeout(f"{folder} is locked by another regress process") from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)


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


def check_replaceable(target: Path) -> None:
    """BadInput unless a run may be written to `target`: a new path under folders (not files),
    an empty folder, or a regress run. Called before a run starts, and again under the lock."""
    target = Path(os.path.abspath(target))
    for folder in target.parents:
        if folder.exists() and not folder.is_dir():
            raise BadInput(f"{folder} is a file, not a folder: cannot store a run under it")
    if not target.exists() and not target.is_symlink():
        return
    if target.is_symlink() or not target.is_dir():
        raise BadInput(f"{target} exists and is not a folder: refusing to replace it")
    if any(target.iterdir()) and not is_run_folder(target):
        raise BadInput(
            f"{target} is not empty and not a regress run: refusing to replace it "
            "(give a new or empty folder)"
        )


def existing_run(target: Path) -> str | None:
    """What the run stored at `target` holds, in words (its model, examples and date), or
    None when nothing is stored there."""
    manifest_path = Path(target) / MANIFEST
    if not manifest_path.is_file():
        return None
    try:
        data = safe_json.loads(manifest_path.read_bytes().decode("utf-8"))
        manifest = Manifest.from_dict(data, where=str(manifest_path))
    except (BadInput, OSError, ValueError, KeyError, TypeError):
        # Damaged or not ours to read: it is still there, and still worth keeping.
        return "an unreadable manifest"
    n = sum(info.n for info in manifest.tasks.values())
    return f"model {manifest.model.ref}, {n} examples, created {manifest.created}"


def refuse_existing(target: Path) -> None:
    """BadInput naming what the baseline at `target` holds, when one is stored there."""
    held = existing_run(target)
    if held is not None:
        raise BadInput(
            f"baseline {Path(target).name!r} already exists ({held}); --force replaces it"
        )


@dataclass(frozen=True)
class SaveOptions:
    """How `save_baseline` treats a baseline already stored under the run's name."""

    force: bool = False
    """Replace it. Without it an existing baseline is refused, never silently replaced."""


def check_baseline_target(store: Store, name: str, options: SaveOptions) -> Path:
    """The folder baseline `name` would be written to; BadInput when it cannot be, or when a
    baseline is there and `options.force` is not set. Called before a run starts, so a
    refusal costs nothing; `save_baseline` checks again under the lock."""
    target = store.path(name)
    check_replaceable(target)
    if not options.force:
        refuse_existing(target)
    return target


def save_baseline(store: Store, run: Run, options: SaveOptions) -> Path:
    """Store `run` as baseline `run.manifest.name`: refused when one exists, unless
    `options.force`; return its folder."""
    target = store.path(run.manifest.name)
    write_run(run, target, keep_existing=not options.force)
    return target


def _make_parent(parent: Path) -> None:
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BadInput(f"cannot create folder {parent} ({exc.strerror})") from exc


def _write_tree(run: Run, folder: Path) -> None:
    """Write manifest and records into the existing empty `folder`, fsynced."""
    (folder / RECORDS).mkdir()
    hashes = {}
    for task in sorted(run.records):
        validate_task_name(task, f"run {run.manifest.name!r}")
        records = sorted(run.records[task], key=lambda r: r.doc_id)
        lines = "".join(r.to_json() + "\n" for r in records)
        hashes[task] = records_sha256(lines)
        _fsync_write(folder / RECORDS / f"{task}.jsonl", lines)
    manifest = replace(run.manifest, records_sha256=hashes)
    _fsync_write(folder / MANIFEST, json.dumps(manifest.to_dict(), indent=2, sort_keys=True) + "\n")
    _fsync_dir(folder / RECORDS)
    _fsync_dir(folder)


def write_run(run: Run, target: Path, *, keep_existing: bool = False) -> None:
    """Write `run` to directory `target`, replacing what is there only once fully written.

    `target` must be new, empty, or a regress run (anything else is refused, never deleted);
    with `keep_existing`, a run already there is refused too, checked under the writers'
    lock so a second writer cannot slip in between the check and the swap. A writer that
    waits too long for another one saves its run in a temporary folder and says where.
    """
    target = Path(os.path.abspath(target))
    check_replaceable(target)
    _make_parent(target.parent)
    try:
        with _locked(target.parent, exclusive=True):
            _repair(target)
            check_replaceable(target)
            if keep_existing:
                refuse_existing(target)
            _remove_leftovers(target)
            _swap_in(run, target)
    except _LockTimeout as exc:
        rescue = Path(tempfile.mkdtemp(prefix=f"regress-{target.name}-"))
        _write_tree(run, rescue)
        raise RunFailed(f"{exc} for {LOCK_TIMEOUT_S:.0f} s; this run is saved in {rescue}") from exc
    except OSError as exc:
        raise RunFailed(f"cannot write {target}: {exc.strerror or exc}") from exc


def _swap_in(run: Run, target: Path) -> None:
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        os.chmod(tmp, 0o777 & ~umask())  # mkdtemp's 0700 would hide a committed baseline
        _write_tree(run, tmp)
        old = target.parent / f".{target.name}.old"
        if target.exists():
            os.rename(target, old)
        os.rename(tmp, target)
        _fsync_dir(target.parent)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _remove_leftovers(target: Path) -> None:
    """Delete temporary folders of killed writers (the caller holds the exclusive lock)."""
    for stale in target.parent.glob(f".{glob.escape(target.name)}.tmp-*"):
        shutil.rmtree(stale, ignore_errors=True)


def _needs_repair(target: Path) -> bool:
    return (target.parent / f".{target.name}.old").exists()


def _repair(target: Path) -> None:
    """Finish or undo a swap that was killed between its two renames (exclusive lock held)."""
    old = target.parent / f".{target.name}.old"
    if old.exists():
        if target.exists():
            shutil.rmtree(old)
        else:
            os.rename(old, target)


def read_run(path: Path) -> Run:
    """Read and validate a run directory; any damage is a BadInput naming file and line."""
    path = Path(os.path.abspath(path))
    if _needs_repair(path):
        try:
            with _locked(path.parent, exclusive=True):
                _repair(path)
        except _LockTimeout as exc:
            raise RunFailed(str(exc)) from exc
        except OSError as exc:
            raise BadInput(f"{path}: a killed write left it half-swapped ({exc})") from exc
    try:
        with _locked(path.parent, exclusive=False):
            return _read_unlocked(path)
    except _LockTimeout as exc:
        raise RunFailed(str(exc)) from exc


def _read_unlocked(path: Path) -> Run:
    manifest_path = path / MANIFEST
    if not manifest_path.is_file():
        raise BadInput(f"{manifest_path}: missing (not a regress run or baseline)")
    try:
        data = safe_json.loads(manifest_path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise BadInput(f"{manifest_path}: not UTF-8 text (byte {exc.start})") from exc
    except json.JSONDecodeError as exc:
        raise BadInput(f"{manifest_path}: corrupt JSON at line {exc.lineno} ({exc.msg})") from exc
    except OSError as exc:
        raise BadInput(f"{manifest_path}: cannot read ({exc.strerror})") from exc
    if not isinstance(data, dict):
        raise BadInput(f"{manifest_path}: malformed manifest (not a JSON object)")
    manifest = Manifest.from_dict(data, where=str(manifest_path))
    hashes = manifest.records_sha256
    if not isinstance(hashes, dict):
        raise BadInput(f"{manifest_path}: malformed manifest (records_sha256 is not a mapping)")
    for name in manifest.tasks:
        validate_task_name(name, str(manifest_path))
    _refuse_unknown_records(path, manifest)
    records: dict[str, list[Record]] = {}
    for name, info in manifest.tasks.items():
        file = path / RECORDS / f"{name}.jsonl"
        records[name] = _read_records(file, name, info.n, hashes.get(name))
    return Run(manifest=manifest, records=records)


def _refuse_unknown_records(path: Path, manifest: Manifest) -> None:
    folder = path / RECORDS
    if not folder.is_dir():
        return
    for file in sorted(folder.iterdir()):
        if file.suffix != ".jsonl" or file.stem not in manifest.tasks:
            raise BadInput(
                f"{file}: not a records file of a task in {path / MANIFEST} "
                "(remove it, or rerun the suite that produced it)"
            )


def _read_records(path: Path, task: str, expected: int, sha256: str | None) -> list[Record]:
    if not path.is_file():
        raise BadInput(f"{path}: missing records file for task {task}")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise BadInput(f"{path}: cannot read ({exc.strerror})") from exc
    records = []
    # Written whole and fsynced: a line without its newline is a file cut short, and a
    # blank line is no record.
    for line in split_lines(data, str(path), tail=Tail.REFUSE, blank=True):
        record = Record.from_json(line.text, where=line.where)
        if record.task != task:
            raise BadInput(f"{line.where}: record of task {record.task[:100]!r}, expected {task!r}")
        records.append(record)
    if len(records) != expected:
        raise BadInput(f"{path}: {len(records)} records, manifest says {expected}")
    ids = [r.doc_id for r in records]
    if ids != sorted(set(ids)):
        raise BadInput(f"{path}: doc_ids not unique and sorted")
    if sha256 is not None and hashlib.sha256(data).hexdigest() != sha256:
        raise BadInput(
            f"{path}: content does not match the sha256 in its manifest (records edited after "
            "they were written; restore the file or recreate the baseline)"
        )
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

    def find(self, ref: str) -> Run:
        """A baseline named in the store, a run folder given by path (`baselines/v1`,
        `runs/release`: a reference with a `/` is a path), or a baseline as it was N
        promotions ago (`main~3`, from git: regress.core.git_versions), named `ref`."""
        if "/" in ref or os.sep in ref:
            if not Path(ref).is_dir():
                raise BadInput(f"{ref}: no such run folder")
            return read_run(Path(ref))
        earlier = VERSION.match(ref)
        if earlier is None:
            return self.load(ref)
        folder = self.path(earlier["name"])
        version = earlier_version(folder, int(earlier["back"]), ref)
        with tempfile.TemporaryDirectory() as scratch:
            run = read_run(extract(version, Path(scratch), ref))
        return replace(run, manifest=replace(run.manifest, name=ref))

    def names(self) -> list[str]:
        """Names of the baselines in the store, sorted.

        Hidden entries (a killed writer's `.NAME.tmp-*`, a half-swapped `.NAME.old`) are not
        baselines; a `.NAME.old` without `NAME` is baseline NAME, repaired when it is read.
        """
        root = Path(self.root)
        if root.exists() and not root.is_dir():
            raise BadInput(f"store {root} is a file, not a folder of baselines")
        if not root.is_dir():
            return []
        names = set()
        for entry in root.iterdir():
            name = entry.name
            if name.startswith(".") and name.endswith(".old"):
                name = name[1:-4]
                if (root / name).exists():
                    continue
            if _NAME.match(name) and ".." not in name and (entry / MANIFEST).is_file():
                names.add(name)
        return sorted(names)
