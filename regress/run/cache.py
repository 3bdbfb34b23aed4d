"""A persistent result cache, keyed by what determines a result: the model file's sha256,
the backend with every result-relevant setting, and the exact request.

lm-eval's cache key omits the model, so swapping weights behind the same name would replay
stale answers; here a different file is a different key. The cache is also what makes a
killed run resumable: results are committed in chunks as they are computed, and the same
command run again only computes what is missing.

A cache folder can be restored from CI storage or edited by hand, and a replayed result
decides a verdict like a computed one. So every row carries the sha256 of its key and its
content: a row that is not valid JSON, not a known result, or fails its digest is never
replayed; it is computed again, counted in `rejected`, and the reports say so.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from regress.backends import dispatch
from regress.backends.base import Backend, Progress
from regress.backends.models import cache_root
from regress.core.errors import BadInput
from regress.core.fingerprint import RuntimeFingerprint
from regress.core.requests import (
    AnyResult,
    FailedResult,
    GenerateResult,
    LoglikelihoodResult,
    Request,
    RollingResult,
    request_hash,
)

CHUNK = 64
"""Requests computed between commits: a kill loses at most this much work."""

_TYPES: dict[str, type[AnyResult]] = {
    t.__name__: t for t in (LoglikelihoodResult, RollingResult, GenerateResult, FailedResult)
}


def default_cache_dir() -> Path:
    """$REGRESS_CACHE_DIR, else ~/.cache/regress (`regress.backends.models.cache_root`)."""
    return cache_root()


def model_key(model_sha256: str, fingerprint: RuntimeFingerprint) -> str:
    """The part of every key that names the model and its compute path (backend, versions,
    result-relevant settings, CPU kernels); speed-only settings stay out, so a rerun on
    another thread count still hits. `results` versions the stored rows (2: a generation
    records why it ended; 3: each row carries its digest), so older rows are never replayed."""
    identity = {"model": model_sha256, "compute": fingerprint.compute_key(), "results": 3}
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


class ResultCache:
    """SQLite table of (key -> result JSON); safe to kill at any time."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / "results.sqlite"
        try:
            directory.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS results (key TEXT PRIMARY KEY, value TEXT)"
            )
        except (OSError, sqlite3.Error) as exc:
            raise BadInput(
                f"result cache {self.path}: {exc} (choose another --cache-dir, or --no-cache)"
            ) from exc
        self.hits = 0
        self.misses = 0
        self.rejected = 0
        """Rows found for a key but not replayed: corrupt, unknown, or failing their digest."""

    def get_many(self, keys: Sequence[str]) -> dict[str, AnyResult]:
        """The cached results among `keys` whose rows pass their digest."""
        found: dict[str, AnyResult] = {}
        for start in range(0, len(keys), 500):
            batch = list(keys[start : start + 500])
            marks = ",".join("?" * len(batch))
            try:
                rows = self._db.execute(
                    f"SELECT key, value FROM results WHERE key IN ({marks})", batch
                ).fetchall()
            except sqlite3.Error as exc:
                raise BadInput(
                    f"result cache {self.path}: {exc} (choose another --cache-dir, or --no-cache)"
                ) from exc
            for key, value in rows:
                result = _verified(key, value)
                if result is None:
                    self.rejected += 1
                else:
                    found[key] = result
        return found

    def put_many(self, items: Sequence[tuple[str, AnyResult]]) -> None:
        """Store results with their digests and commit, so they survive a kill."""
        rows = []
        for key, result in items:
            body = _body(result)
            rows.append((key, json.dumps({"body": body, "digest": _digest(key, body)})))
        self._db.executemany("INSERT OR REPLACE INTO results VALUES (?, ?)", rows)
        self._db.commit()

    def __len__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM results").fetchone()[0])

    def close(self) -> None:
        """Close the database."""
        self._db.close()


def _body(result: AnyResult) -> str:
    """A result as canonical JSON, its type included."""
    return json.dumps({"type": type(result).__name__, **asdict(result)}, sort_keys=True)


def _digest(key: str, body: str) -> str:
    return hashlib.sha256(f"{key}\n{body}".encode()).hexdigest()


def _verified(key: str, value: str) -> AnyResult | None:
    """The row's result, or None when the row is corrupt or fails its digest."""
    try:
        row = json.loads(value)
        body = row["body"]
        if not isinstance(body, str) or row["digest"] != _digest(key, body):
            return None
        data = json.loads(body)
        return _TYPES[data.pop("type")](**data)
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return None


def cached_execute(
    backend: Backend,
    requests: Sequence[Request],
    progress: Progress | None,
    cache: ResultCache,
    prefix: str,
) -> list[AnyResult]:
    """Answer requests from `cache`, computing the rest in committed chunks.

    Missing requests are computed in context order, so chunks keep shared prefixes together.
    Failed results are not cached: a timeout deserves a retry.
    """
    keys = [hashlib.sha256(f"{prefix}:{request_hash(r)}".encode()).hexdigest() for r in requests]
    found = cache.get_many(keys)
    cache.hits += len(found)
    if progress and found:
        progress(len(found))
    missing = [i for i, k in enumerate(keys) if k not in found]
    cache.misses += len(missing)
    missing.sort(key=lambda i: (requests[i].kind, getattr(requests[i], "context", ""), i))
    for start in range(0, len(missing), CHUNK):
        chunk = missing[start : start + CHUNK]
        answers = dispatch(backend, [requests[i] for i in chunk], progress)
        for i, answer in zip(chunk, answers, strict=True):
            found[keys[i]] = answer
        cache.put_many(
            [
                (keys[i], a)
                for i, a in zip(chunk, answers, strict=True)
                if not isinstance(a, FailedResult)
            ]
        )
    return [found[k] for k in keys]
