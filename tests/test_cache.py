"""The result cache replays only rows that pass their digest: a corrupt or edited row is
computed again and counted, never replayed as if the model had answered it."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path

from regress.backends.base import Progress
from regress.core.requests import LoglikelihoodRequest, LoglikelihoodResult
from regress.run.cache import ResultCache, cached_execute

REQUESTS = [LoglikelihoodRequest(f"Question {i}:", f" answer {i}") for i in range(6)]


class Scripted:
    """A backend whose log-prob of request i is -(i + 1) / 10, counting what it computes."""

    name = "scripted"

    def __init__(self) -> None:
        self.computed: list[str] = []

    def loglikelihood(
        self, requests: Sequence[LoglikelihoodRequest], progress: Progress | None = None
    ) -> list[LoglikelihoodResult]:
        self.computed += [r.context for r in requests]
        return [
            LoglikelihoodResult(-(int(r.context.split()[1][:-1]) + 1) / 10, True, 2)
            for r in requests
        ]

    # dispatch() looks up every request kind's method; only log-likelihoods are sent here.
    loglikelihood_rolling = generate = loglikelihood


def _run(folder: Path, backend: Scripted) -> tuple[list[LoglikelihoodResult], int]:
    cache = ResultCache(folder)
    try:
        results = cached_execute(backend, REQUESTS, None, cache, "prefix")  # type: ignore[arg-type]
        return results, cache.rejected  # type: ignore[return-value]
    finally:
        cache.close()


def _rewrite(folder: Path, edit) -> None:
    with sqlite3.connect(folder / "results.sqlite") as db:
        rows = db.execute("SELECT key, value FROM results").fetchall()
        db.executemany(
            "UPDATE results SET value = ? WHERE key = ?", [(edit(v), k) for k, v in rows]
        )


def test_rows_replay_exactly(tmp_path: Path) -> None:
    first = Scripted()
    computed, rejected = _run(tmp_path, first)
    assert len(first.computed) == 6 and rejected == 0
    again = Scripted()
    replayed, rejected = _run(tmp_path, again)
    assert again.computed == [] and rejected == 0
    assert replayed == computed


def test_an_edited_row_is_computed_again_and_counted(tmp_path: Path) -> None:
    truth, _ = _run(tmp_path, Scripted())

    def worse(value: str) -> str:
        # What a tamperer does: every log-prob to -1, the row otherwise intact.
        row = json.loads(value)
        body = json.loads(row["body"])
        body["logprob"] = -1.0
        return json.dumps({**row, "body": json.dumps(body, sort_keys=True)})

    _rewrite(tmp_path, worse)
    backend = Scripted()
    results, rejected = _run(tmp_path, backend)
    assert rejected == 6 and len(backend.computed) == 6
    assert results == truth
    # The recomputed rows replace the edited ones.
    backend = Scripted()
    assert _run(tmp_path, backend) == (truth, 0) and backend.computed == []


def test_corrupt_rows_are_computed_again(tmp_path: Path) -> None:
    truth, _ = _run(tmp_path, Scripted())
    bad = iter(["not json", "[]", '{"body": 3, "digest": "x"}', '{"body": "{}"}', "{}", "null"])
    _rewrite(tmp_path, lambda _value: next(bad))
    backend = Scripted()
    results, rejected = _run(tmp_path, backend)
    assert rejected == 6 and len(backend.computed) == 6 and results == truth


def test_a_row_moved_to_another_request_fails_its_digest(tmp_path: Path) -> None:
    truth, _ = _run(tmp_path, Scripted())
    with sqlite3.connect(tmp_path / "results.sqlite") as db:
        rows = db.execute("SELECT key, value FROM results ORDER BY key").fetchall()
        # Every key gets its neighbour's (validly digested) row.
        shifted = [(rows[(i + 1) % len(rows)][1], key) for i, (key, _) in enumerate(rows)]
        db.executemany("UPDATE results SET value = ? WHERE key = ?", shifted)
    results, rejected = _run(tmp_path, Scripted())
    assert rejected == 6 and results == truth
