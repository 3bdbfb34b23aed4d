"""The gate's history: one JSON line per gate run of the default branch (`history.jsonl`).

Each gate run stands alone; the history is what lets a team see a slow slide, and where the
ground moved under it. A line holds the commit and date, the baseline (its name and an id of
its records), the candidate's model sha256, a fingerprint of what computes and scores the
answers (backend, version, result-relevant settings, CPU kernels, suite hashes), every unit's
accuracy with its interval and verdict, the gate's verdict and the tokens the candidate ran.

The file is append-only: a line is written whole under an exclusive lock and fsynced; a
writer killed mid-line leaves a tail without a newline, which the next append removes before
it writes (nothing complete is ever lost). Reading refuses any malformed line, naming it.
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
                os.ftruncate(fd, size - len(tail) + cut + 1)
        os.lseek(fd, 0, os.SEEK_END)
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def read_history(path: Path) -> list[HistoryEntry]:
    """Every entry of a history file, oldest first; BadInput naming a malformed line."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadInput(
            f"{path}: no history file (`regress check --record-history` writes one)"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"{path}: cannot read the history ({exc})") from exc
    entries = []
    for number, line in enumerate(text.splitlines(keepends=True), 1):
        if not line.endswith("\n"):
            break  # a writer killed mid-line: the next append removes it
        if line.strip():
            entries.append(_entry(line, f"{path}:{number}"))
    return entries


def _entry(line: str, where: str) -> HistoryEntry:
    try:
        data = safe_json.loads(line)
        if data.get("schema") != SCHEMA:
            raise BadInput(f"{where}: history schema {data.get('schema')!r}, expected {SCHEMA}")
        units = tuple(
            UnitPoint(
                **{
                    **u,
                    "candidate_ci": _pair(u["candidate_ci"]),
                    "delta_ci": _pair(u["delta_ci"]),
                }
            )
            for u in data.pop("units")
        )
        return HistoryEntry(**data, units=units)
    except json.JSONDecodeError as exc:
        raise BadInput(f"{where}: not JSON ({exc.msg})") from exc
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise BadInput(f"{where}: malformed history line ({exc})") from exc


def _pair(value: Any) -> tuple[float, float] | None:
    if value is None:
        return None
    low, high = value
    return float(low), float(high)
