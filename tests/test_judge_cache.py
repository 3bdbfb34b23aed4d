"""Tampered judge-cache rows are recomputed and reported (issue 47, item 6): a judge-cache edit
once turned a PASS into a REGRESSION, and the rows the cache refused were never reported,
because `run/judge.py` did not pass the cache's `rejected` count on.

No model: a local stand-in judge server (tests/test_judge.py)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from test_judge import _mixed, _policy, _runs, _spec, judge_server  # noqa: F401 (fixture)

from regress.checks import CheckOptions, check
from regress.report.markdown import render_markdown


def _tamper(cache: Path, rows: int) -> None:
    """Rewrite the verdict of `rows` cached judge replies (the only rows here: the runs are
    given) without recomputing their digest, as a hand edit of the cache folder would."""
    db = sqlite3.connect(cache / "results.sqlite")
    try:
        found = db.execute(
            "SELECT key, value FROM results ORDER BY key LIMIT ?",
            (rows,),
        ).fetchall()
        assert len(found) == rows
        for key, value in found:
            row = json.loads(value)
            body = json.loads(row["body"])
            body["text"] = "[[B]]" if "[[A]]" in body.get("text", "") else "[[A]]"
            row["body"] = json.dumps(body, sort_keys=True)
            db.execute("UPDATE results SET value = ? WHERE key = ?", (json.dumps(row), key))
        db.commit()
    finally:
        db.close()


def test_tampered_judge_rows_are_recomputed_and_reported(
    judge_server,  # noqa: F811 (the fixture imported above)
    tmp_path: Path,
) -> None:
    url, server = judge_server
    base, cand = _runs(_mixed())
    options = CheckOptions(policy=_policy(_spec(url)), cache_dir=tmp_path)
    first = check(base, cand, options).comparison
    asked = server.calls
    _tamper(tmp_path, 5)
    again = check(base, cand, options).comparison
    # The 5 edited rows are asked again; their verdicts are the judge's, not the edit's.
    assert server.calls == asked + 5
    assert again.units == first.units
    (use,) = [u for u in again.cache if u.run == "judge"]
    assert (use.replayed, use.computed, use.rejected) == (asked - 5, 5, 5)
    warning = (
        "5 cached result(s) of the judge failed their digest or were corrupt and were "
        "computed again: the cache folder was damaged or edited"
    )
    assert warning in again.warnings
    report = render_markdown(again)
    assert "5 cached rows refused (corrupt or failing their digest)" in report
    # Untouched, the cache replays everything and says nothing.
    clean = check(base, cand, options).comparison
    (use,) = [u for u in clean.cache if u.run == "judge"]
    assert use.rejected == 0 and not [w for w in clean.warnings if "cached result" in w]
