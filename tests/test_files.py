"""Files written whole or not at all (regress.core.files): reports, judgements files and
labelling forms."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from regress.cli.common import write_report
from regress.core.errors import BadInput
from regress.core.files import umask, write_text_atomic


def test_a_failed_write_leaves_the_old_file_and_nothing_beside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "r.md"
    path.write_text("old report")

    def full_disk(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(BadInput, match=r"cannot write the report to .*r\.md: No space left"):
        write_report(path, "new report")
    assert path.read_text() == "old report"
    assert [p.name for p in tmp_path.iterdir()] == ["r.md"]


def test_a_written_file_is_whole_in_a_new_folder_and_readable_by_others(tmp_path: Path) -> None:
    path = tmp_path / "new" / "judgements.jsonl"
    write_text_atomic(path, "ü\n" * 3)
    assert path.read_text(encoding="utf-8") == "ü\n" * 3
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask()
    assert [p.name for p in path.parent.iterdir()] == ["judgements.jsonl"]
