"""Reading benchmark files (and the Hugging Face Hub) into plain dict rows, with errors a user
can act on: every message names the file, the line and the task that needed it."""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path
from typing import Any

from regress.core import jsonl, safe_json
from regress.core.errors import BadInput, pip_install
from regress.tasks.base import DataSource

DATA_DIR_ENV = "REGRESS_DATA_DIR"

Doc = dict[str, Any]
"""One benchmark document, shaped like a row of the dataset lm-eval loads from the Hub."""


def resolve_source(data_dir: str | Path | None, hf: bool = False) -> DataSource:
    """The data source for a run: `data_dir`, else $REGRESS_DATA_DIR, else none (builtin only)."""
    chosen = data_dir if data_dir is not None else os.environ.get(DATA_DIR_ENV) or None
    if chosen is None:
        return DataSource(data_dir=None, hf=hf)
    path = Path(chosen).expanduser()
    if not path.is_dir():
        raise BadInput(f"data folder {path} does not exist (from --data-dir or ${DATA_DIR_ENV})")
    return DataSource(data_dir=path, hf=hf)


def data_file(source: DataSource, relative: str, task: str) -> Path:
    """The path of `relative` under the source's data folder; BadInput naming it when missing."""
    if source.data_dir is None:
        raise BadInput(
            f"task {task} needs benchmark data: pass --data-dir or set ${DATA_DIR_ENV} "
            f"(a folder holding {relative}), or use --hf"
        )
    path = Path(source.data_dir) / relative
    if not path.is_file():
        raise BadInput(f"task {task} needs {path}, which does not exist")
    return path


def read_jsonl(path: Path) -> list[Doc]:
    """One JSON object per non-blank line (nested at most safe_json.MAX_DEPTH deep)."""
    return [row for _, row in read_jsonl_numbered(path)]


def read_jsonl_numbered(path: Path) -> list[tuple[int, Doc]]:
    """Each non-blank line's number and JSON object, for messages that name the line."""
    return [(line.number, jsonl.json_object(line)) for line in jsonl.read_lines(path)]


def read_json(path: Path) -> Any:
    """A whole-file JSON document (nested at most safe_json.MAX_DEPTH deep)."""
    try:
        return safe_json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise BadInput(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from exc


def read_csv(path: Path, n_columns: int) -> list[list[str]]:
    """Rows of a header-less CSV, each with exactly `n_columns` string fields."""
    rows = []
    # newline="" lets the csv module handle quoted newlines and CRLF files alike.
    with io.StringIO(read_text(path), newline="") as handle:
        reader = csv.reader(handle)
        try:
            for row in reader:
                if len(row) != n_columns:
                    raise BadInput(
                        f"{path}:{reader.line_num}: expected {n_columns} columns, got {len(row)}"
                    )
                rows.append(row)
        except csv.Error as exc:
            raise BadInput(f"{path}:{reader.line_num}: malformed CSV ({exc})") from exc
    return rows


def read_lines(path: Path) -> list[str]:
    """Lines without their line endings (the file's final newline ends the last line)."""
    return read_text(path).splitlines()


def read_text(path: Path) -> str:
    """A data file's text; a file that is not UTF-8 is a BadInput naming its line."""
    return jsonl.decode(path.read_bytes(), str(path))


def load_hf(path: str, name: str | None, split: str, task: str) -> list[Doc]:
    """A split from the Hugging Face Hub through `datasets` (imported only here)."""
    try:
        import datasets
    except ImportError as exc:
        raise BadInput(
            f"task {task}: --hf needs the `datasets` package ({pip_install('datasets')})"
        ) from exc
    try:
        rows = datasets.load_dataset(path, name, split=split)
    except Exception as exc:  # the Hub raises many types: offline, missing split, auth
        where = f"{path}/{name}" if name else path
        raise BadInput(f"task {task}: cannot load {where} split {split!r} ({exc})") from exc
    return [dict(row) for row in rows]
