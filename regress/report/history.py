"""The gate's history: one JSON line per gate run of the default branch (`history.jsonl`).

Each gate run stands alone; the history is what lets a team see a slow slide, and where the
ground moved under it. A line holds the commit and date, the baseline (its name and an id of
its records), the candidate's model sha256, a fingerprint of what computes and scores the
answers (backend, version, result-relevant settings, CPU kernels, suite hashes), every unit's
accuracy with its interval and verdict, the gate's verdict and the tokens the candidate ran.

The file is append-only: a line is written whole under an exclusive lock and fsynced; a
writer killed mid-line leaves a tail without a newline that is no JSON, which readers skip and
the next append removes before it writes. A last line that is whole JSON but lacks its newline
(an editor or a merge dropped it) is a line like any other: read, and ended before the next
append, so nothing complete is ever lost. Reading refuses any malformed line, naming it,
including a field of the wrong type.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from regress.core import safe_json
from regress.core.errors import BadInput
from regress.core.jsonl import Tail, is_torn, read_lines
from regress.core.manifest import Run
from regress.gate.results import Comparison, UnitKind
from regress.stats import wilson_interval

SCHEMA = 1
TAIL = 1 << 20
"""Bytes read back to find a killed append's partial line: far more than one line holds."""


@dataclass(frozen=True)
class UnitPoint:
    """One unit of one gate run, as the history keeps it."""

    name: str
    since: str | None
    """The anchor of a creep-guard row; None for the baseline's own row."""
    kind: str
    n: int
    baseline: float | None
    candidate: float | None
    candidate_ci: tuple[float, float] | None
    """Wilson's 95% interval of the candidate's accuracy (accuracy units only)."""
    delta: float | None
    delta_ci: tuple[float, float] | None
    verdict: str


@dataclass(frozen=True)
class HistoryEntry:
    """One gate run of the default branch."""

    commit: str | None
    date: str
    """UTC ISO-8601."""
    baseline: str
    baseline_id: str
    """sha256 over the baseline's records hashes: a promoted or recreated baseline differs."""
    model_sha256: str
    candidate: str
    fingerprint: str
    """sha256 of the runtime and scoring fingerprint: backend, version, result-relevant
    settings, CPU kernels and the suite's dataset and prompt hashes. Points on either side
    of a change are not comparable, and the page does not join them."""
    runtime: str
    """The same, in words: `llama_cpp 0.3.36 (AVX AVX2 ...)`."""
    suite: str
    verdict: str
    exit_code: int
    tokens: int
    """Prompt and generated tokens the candidate's records hold: the run's cost."""
    units: tuple[UnitPoint, ...]
    schema: int = SCHEMA

    def to_json(self) -> str:
        """The entry as one line of JSON, keys sorted."""
        return json.dumps(asdict(self), sort_keys=True, allow_nan=False) + "\n"


def history_entry(
    comparison: Comparison, baseline: Run, candidate: Run, commit: str | None, now: datetime
) -> HistoryEntry:
    """The history line of a gate run: `comparison` of `candidate` against `baseline`."""
    side = comparison.candidate
    scoring = {
        "backend": side.backend,
        "version": side.backend_version,
        "params": side.params,
        "kernels": side.kernels,
        "tasks": {
            name: [info.dataset_hash, info.prompt_hash, info.metric]
            for name, info in sorted(baseline.manifest.tasks.items())
        },
    }
    return HistoryEntry(
        commit=commit,
        date=now.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        baseline=baseline.manifest.name,
        baseline_id=_sha256(json.dumps(baseline.manifest.records_sha256, sort_keys=True)),
        model_sha256=side.sha256,
        candidate=side.label,
        fingerprint=_sha256(json.dumps(scoring, sort_keys=True, default=str)),
        runtime=f"{side.backend} {side.backend_version} ({side.kernels or 'kernels unknown'})",
        suite=comparison.suite,
        verdict=comparison.verdict.value,
        exit_code=int(comparison.exit_code),
        tokens=sum(sum(r.tokens.values()) for rs in candidate.records.values() for r in rs),
        units=tuple(_point(u) for u in comparison.units),
    )


def _point(unit: Any) -> UnitPoint:
    accuracy = unit.kind is UnitKind.ACCURACY and unit.candidate is not None and unit.n
    interval = wilson_interval(round(unit.candidate * unit.n), unit.n) if accuracy else None
    return UnitPoint(
        name=unit.name,
        since=unit.since,
        kind=unit.kind.value,
        n=unit.n,
        baseline=unit.baseline,
        candidate=unit.candidate,
        candidate_ci=interval,
        delta=unit.delta,
        delta_ci=unit.ci,
        verdict=unit.verdict.value,
    )


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def check_history_file(path: Path) -> None:
    """BadInput now, before a model runs, when `path` cannot take a history line."""
    if path.exists() and not path.is_file():
        raise BadInput(f"{path}: not a file, cannot hold the history")
    if not path.parent.is_dir():
        raise BadInput(f"{path}: no folder {path.parent} to write the history in")


def append_history(path: Path, entry: HistoryEntry) -> None:
    """Append `entry` as one whole line; a killed writer's partial line goes first."""
    line = entry.to_json().encode()
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise BadInput(f"{path}: cannot write the history ({exc.strerror})") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.lseek(fd, 0, os.SEEK_END)
        if size:
            tail = os.pread(fd, min(size, TAIL), max(0, size - TAIL))
            if not tail.endswith(b"\n"):
                cut = tail.rfind(b"\n")
                if cut < 0 and size > TAIL:
                    # No line ends in the last TAIL bytes: not a killed append; keep it all.
                    raise BadInput(f"{path}: its end is no history line; repair it by hand")
                if not is_torn(tail[cut + 1 :]):
                    line = b"\n" + line  # a whole last line without its newline: end it
                else:
                    os.ftruncate(fd, size - len(tail) + cut + 1)
        os.lseek(fd, 0, os.SEEK_END)
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def read_history(path: Path) -> list[HistoryEntry]:
    """Every entry of a history file, oldest first; BadInput naming a malformed line."""
    try:
        # A writer killed mid-line leaves a torn tail: skipped, and the next append removes it.
        lines = read_lines(path, tail=Tail.SKIP_TORN)
    except FileNotFoundError:
        raise BadInput(
            f"{path}: no history file (`regress check --record-history` writes one)"
        ) from None
    except OSError as exc:
        raise BadInput(f"{path}: cannot read the history ({exc})") from exc
    return [_entry(line.text, line.where) for line in lines]


_TEXT, _COUNT, _NUMBER, _PAIR = "a string", "a whole number", "a number", "a pair of numbers"
_ENTRY_FIELDS = {
    "commit": (_TEXT, True),
    "date": (_TEXT, False),
    "baseline": (_TEXT, False),
    "baseline_id": (_TEXT, False),
    "model_sha256": (_TEXT, False),
    "candidate": (_TEXT, False),
    "fingerprint": (_TEXT, False),
    "runtime": (_TEXT, False),
    "suite": (_TEXT, False),
    "verdict": (_TEXT, False),
    "exit_code": (_COUNT, False),
    "tokens": (_COUNT, False),
    "schema": (_COUNT, False),
}
"""Each field of a history line but `units`: what it holds, and whether it may be null."""
_UNIT_FIELDS = {
    "name": (_TEXT, False),
    "since": (_TEXT, True),
    "kind": (_TEXT, False),
    "n": (_COUNT, False),
    "baseline": (_NUMBER, True),
    "candidate": (_NUMBER, True),
    "candidate_ci": (_PAIR, True),
    "delta": (_NUMBER, True),
    "delta_ci": (_PAIR, True),
    "verdict": (_TEXT, False),
}
"""Each field of a unit of a history line."""


def _entry(line: str, where: str) -> HistoryEntry:
    try:
        data = safe_json.loads(line)
    except json.JSONDecodeError as exc:
        raise BadInput(f"{where}: not JSON ({exc.msg})") from exc
    if not isinstance(data, dict):
        raise BadInput(f"{where}: malformed history line (not a JSON object)")
    if data.get("schema") != SCHEMA:
        raise BadInput(f"{where}: history schema {data.get('schema')!r:.40}, expected {SCHEMA}")
    units = data.pop("units", None)
    if not isinstance(units, list) or not all(isinstance(u, dict) for u in units):
        raise BadInput(f"{where}: malformed history line (units must be a list of objects)")
    _typed(data, _ENTRY_FIELDS, where)
    for i, unit in enumerate(units, 1):
        _typed(unit, _UNIT_FIELDS, f"{where}: unit {i}")
    points = tuple(
        UnitPoint(
            **{**u, "candidate_ci": _pair(u["candidate_ci"]), "delta_ci": _pair(u["delta_ci"])}
        )
        for u in units
    )
    return HistoryEntry(**data, units=points)


def _typed(data: dict[str, Any], fields: dict[str, tuple[str, bool]], where: str) -> None:
    """BadInput naming the first field that is missing, unknown or of the wrong type: a
    history line is read back into typed entries that the page computes with."""
    unknown = sorted(data.keys() - fields.keys())
    if unknown:
        raise BadInput(f"{where}: malformed history line (unknown field {unknown[0]!r:.40})")
    for key, (kind, nullable) in fields.items():
        if key not in data:
            raise BadInput(f"{where}: malformed history line (missing field {key!r})")
        value = data[key]
        if value is None and nullable:
            continue
        if not _is_kind(value, kind):
            shown = json.dumps(value)
            shown = shown if len(shown) <= 40 else shown[:37] + "..."
            raise BadInput(f"{where}: {key} must be {kind}, got {shown}")


def _is_kind(value: Any, kind: str) -> bool:
    if kind == _TEXT:
        return isinstance(value, str)
    if kind == _PAIR:
        return (
            isinstance(value, list) and len(value) == 2 and all(_is_kind(v, _NUMBER) for v in value)
        )
    number = isinstance(value, int | float) and not isinstance(value, bool)
    return number and (kind == _NUMBER or isinstance(value, int))


def _pair(value: list[float] | None) -> tuple[float, float] | None:
    if value is None:
        return None
    low, high = value
    return float(low), float(high)
