"""A task YAML's local data: `dataset_path: json|csv|parquet` with `data_files`, read into
plain rows the way Hugging Face `datasets` would present them (and the Hub through `datasets`
when the run is allowed to go online).

`data_files` is a path, a list of paths, or a mapping from split name to either; a bare path
or list is the `train` split, as in `datasets`. Relative paths are resolved against the folder
of the task's YAML file, so a task folder can be moved or checked out anywhere (lm-eval
resolves them against the working directory). JSON files are JSON Lines, or one JSON array of
objects. CSV files have a header row; a column whose filled cells all read as integers,
floats or True/False becomes one, and an empty cell is None, as pandas (behind `datasets`)
reads them. Parquet needs `pyarrow` (`pip install 'regress-gate[parquet]'`).
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from regress.core.errors import BadInput, pip_install
from regress.tasks.base import DataSource
from regress.tasks.loaders import Doc, load_hf, read_json, read_jsonl, read_text

LOCAL_FORMATS = ("json", "csv", "parquet")
_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?|[+-]?(inf|nan)", re.IGNORECASE)


@dataclass(frozen=True)
class Dataset:
    """Where a YAML task's splits come from."""

    path: str
    """`json`, `csv`, `parquet`, or a Hub dataset id (`allenai/ai2_arc`)."""
    name: str | None
    """The Hub configuration (`ARC-Easy`); unused for local files."""
    files: Mapping[str, tuple[Path, ...]]
    """Split name -> local files, resolved (empty for a Hub dataset)."""

    def load(self, source: DataSource, split: str, task: str) -> list[Doc]:
        """The rows of `split`, in file order."""
        if self.path in LOCAL_FORMATS:
            if split not in self.files:
                raise BadInput(
                    f"task {task}: split {split!r} has no data_files (it has "
                    f"{', '.join(sorted(self.files)) or 'none'})"
                )
            return [row for path in self.files[split] for row in _read(self.path, path)]
        if not source.hf:
            raise BadInput(
                f"task {task}: dataset {self.path} is on the Hugging Face Hub; pass "
                "--hf-datasets to download it, or point the YAML at local files with "
                "`dataset_path: json` and `dataset_kwargs: {data_files: ...}`"
            )
        return load_hf(self.path, self.name, split, task)

    def count(self, source: DataSource, split: str, task: str) -> int:
        """How many rows `split` has, read without building them where the format allows:
        `regress tasks` on a file of a million rows counts in a second, not a minute."""
        if self.path not in LOCAL_FORMATS or split not in self.files:
            return len(self.load(source, split, task))
        return sum(_count(self.path, path) for path in self.files[split])


def _count(kind: str, path: Path) -> int:
    """Rows in one data file: JSON Lines' non-blank lines, CSV records, parquet's metadata."""
    if not path.is_file():
        raise BadInput(f"data file {path} does not exist")
    if kind == "parquet":
        try:
            import pyarrow.parquet as pq

            return pq.ParquetFile(path).metadata.num_rows
        except ImportError:
            return len(_read_parquet(path))  # its error names the extra to install
        except Exception as exc:  # pyarrow raises its own types for a damaged file
            raise BadInput(f"{path}: not a readable parquet file ({exc})") from exc
    with path.open("rb") as handle:
        if kind == "json" and handle.read(4096).lstrip().startswith(b"["):
            return len(_read_json(path))
        handle.seek(0)
        if kind == "json":
            return sum(1 for line in handle if line.strip())
    with path.open(encoding="utf-8", errors="replace", newline="") as text:
        try:
            # Blank lines are no rows (DictReader skips them); the header row is none either.
            return max(0, sum(1 for row in csv.reader(text) if row) - 1)
        except csv.Error as exc:
            raise BadInput(f"{path}: malformed CSV ({exc})") from exc


def dataset_of(
    path: Any, name: Any, kwargs: Mapping[str, Any] | None, base: Path, where: str
) -> Dataset:
    """The Dataset a task config describes; `base` resolves relative data_files."""
    if not isinstance(path, str) or not path:
        raise BadInput(f"{where}: dataset_path must be a name such as json or allenai/ai2_arc")
    kwargs = dict(kwargs or {})
    unknown = sorted(set(kwargs) - {"data_files"})
    if unknown:
        raise BadInput(f"{where}: dataset_kwargs.{unknown[0]} is not supported (only data_files)")
    spec = kwargs.get("data_files")
    if path in LOCAL_FORMATS and spec is None:
        raise BadInput(f"{where}: dataset_path {path} needs dataset_kwargs.data_files")
    if path not in LOCAL_FORMATS and spec is not None:
        raise BadInput(f"{where}: data_files need dataset_path json, csv or parquet, not {path!r}")
    files: dict[str, tuple[Path, ...]] = {}
    if spec is not None:
        by_split = spec if isinstance(spec, dict) else {"train": spec}
        for split, paths in by_split.items():
            listed = paths if isinstance(paths, list) else [paths]
            if not listed or not all(isinstance(p, str) and p for p in listed):
                raise BadInput(f"{where}: data_files.{split} must be a path or a list of paths")
            files[str(split)] = tuple(_resolve(base, p) for p in listed)
    return Dataset(path=path, name=name if isinstance(name, str) else None, files=files)


def _resolve(base: Path, path: str) -> Path:
    candidate = Path(path).expanduser()
    return candidate if candidate.is_absolute() else base / candidate


def _read(kind: str, path: Path) -> list[Doc]:
    if not path.is_file():
        raise BadInput(f"data file {path} does not exist")
    if kind == "json":
        return _read_json(path)
    if kind == "csv":
        return _read_csv(path)
    return _read_parquet(path)


def _read_json(path: Path) -> list[Doc]:
    if read_text(path).lstrip().startswith("["):
        rows = read_json(path)
        if not all(isinstance(row, dict) for row in rows):
            raise BadInput(f"{path}: a JSON array must hold objects, one per row")
        return rows
    return read_jsonl(path)


def _read_csv(path: Path) -> list[Doc]:
    with io.StringIO(read_text(path), newline="") as handle:
        reader = csv.DictReader(handle)
        rows: list[dict[str, str]] = []
        try:
            for row in reader:
                if None in row or None in row.values():
                    raise BadInput(f"{path}:{reader.line_num}: row and header differ in length")
                rows.append(row)
        except csv.Error as exc:
            raise BadInput(f"{path}:{reader.line_num}: malformed CSV ({exc})") from exc
    columns = {key: _column_type([row[key] for row in rows]) for key in reader.fieldnames or []}
    return [{key: columns[key](value) for key, value in row.items()} for row in rows]


def _column_type(cells: list[str]) -> Callable[[str], Any]:
    """How pandas would type a column: int, float or bool when every filled cell is one."""
    filled = [c for c in cells if c != ""]
    if filled and all(_INT.fullmatch(c) for c in filled):
        return lambda c: int(c) if c != "" else None
    if filled and all(_INT.fullmatch(c) or _FLOAT.fullmatch(c) for c in filled):
        return lambda c: float(c) if c != "" else None
    if filled and all(c in ("True", "False") for c in filled):
        return lambda c: c == "True" if c != "" else None
    return lambda c: c if c != "" else None


def _read_parquet(path: Path) -> list[Doc]:
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise BadInput(f"{path}: reading parquet needs pyarrow ({pip_install('parquet')})") from exc
    try:
        return pq.read_table(path).to_pylist()
    except Exception as exc:  # pyarrow raises its own types for a damaged file
        raise BadInput(f"{path}: not a readable parquet file ({exc})") from exc
