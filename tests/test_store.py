"""The baseline store: round trips, atomic replacement, and one-line errors on damage."""

from __future__ import annotations

import json
import os

import pytest

from regress.errors import BadInput
from regress.manifest import BackendInfo, Manifest, ModelInfo, Run, TaskInfo
from regress.records import Record, Status
from regress.store import Store, read_run, validate_name, write_run


def make_run(name: str = "main", n: int = 5, acc: int = 1) -> Run:
    records = [
        Record(
            task="arc_easy",
            doc_id=i,
            doc_hash=f"d{i}",
            prompt_hash=f"p{i}",
            target=0,
            pred=0 if acc else 1,
            correct=acc,
            metrics={"acc": float(acc)},
            scores={"loglik": [-1.0, -2.0]},
        )
        for i in range(n)
    ]
    info = TaskInfo("arc_easy", None, n, 0, "acc", "multiple_choice", "dh", "ph")
    manifest = Manifest(
        name=name,
        created="2026-11-30T00:00:00+00:00",
        regress_version="0.1.0",
        model=ModelInfo(ref="m.gguf", sha256="abc"),
        backend=BackendInfo("llama_cpp", "0.3.36"),
        suite_name="s",
        tasks={"arc_easy": info},
    )
    return Run(manifest=manifest, records={"arc_easy": records})


def test_round_trip_is_exact(tmp_path):
    run = make_run()
    Store(tmp_path).save(run)
    assert Store(tmp_path).load("main") == run
    assert Store(tmp_path).names() == ["main"]


def test_records_are_sorted_canonical_lines(tmp_path):
    Store(tmp_path).save(make_run())
    lines = (tmp_path / "main" / "records" / "arc_easy.jsonl").read_text().splitlines()
    assert [json.loads(x)["doc_id"] for x in lines] == list(range(5))
    assert lines[0] == Record.from_json(lines[0]).to_json()


@pytest.mark.parametrize("name", ["", "a/b", "..", "../x", ".hidden", "a b"])
def test_bad_names_are_refused(name):
    with pytest.raises(BadInput, match="bad baseline name"):
        validate_name(name)


def test_failed_write_keeps_previous_baseline(tmp_path, monkeypatch):
    store = Store(tmp_path)
    store.save(make_run(acc=1))

    def boom(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr("regress.store.os.rename", boom)
    with pytest.raises(OSError):
        store.save(make_run(acc=0))
    monkeypatch.undo()
    assert store.load("main").records["arc_easy"][0].correct == 1
    assert [p.name for p in tmp_path.iterdir()] == ["main"]  # no temp dirs left


def test_swap_killed_between_renames_is_repaired(tmp_path):
    store = Store(tmp_path)
    store.save(make_run())
    os.rename(tmp_path / "main", tmp_path / ".main.old")  # as if killed mid-swap
    assert store.load("main").records["arc_easy"][0].correct == 1
    assert (tmp_path / "main").is_dir()


def test_corrupt_manifest(tmp_path):
    Store(tmp_path).save(make_run())
    (tmp_path / "main" / "manifest.json").write_text("{not json")
    with pytest.raises(BadInput, match=r"manifest.json: corrupt JSON at line 1"):
        Store(tmp_path).load("main")


def test_truncated_records_line(tmp_path):
    Store(tmp_path).save(make_run())
    path = tmp_path / "main" / "records" / "arc_easy.jsonl"
    path.write_text(path.read_text()[:-20])
    with pytest.raises(BadInput, match=r"arc_easy.jsonl:5: truncated line"):
        Store(tmp_path).load("main")


def test_missing_records_file(tmp_path):
    Store(tmp_path).save(make_run())
    (tmp_path / "main" / "records" / "arc_easy.jsonl").unlink()
    with pytest.raises(BadInput, match="missing records file for task arc_easy"):
        Store(tmp_path).load("main")


def test_record_count_must_match_manifest(tmp_path):
    Store(tmp_path).save(make_run())
    path = tmp_path / "main" / "records" / "arc_easy.jsonl"
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:3]))
    with pytest.raises(BadInput, match="3 records, manifest says 5"):
        Store(tmp_path).load("main")


def test_unknown_baseline_lists_known(tmp_path):
    Store(tmp_path).save(make_run("main"))
    with pytest.raises(BadInput, match=r"no baseline 'dev' .*have: main"):
        Store(tmp_path).load("dev")


def test_failed_record_keeps_its_status(tmp_path):
    run = make_run(n=1)
    failed = Record(
        task="arc_easy",
        doc_id=0,
        doc_hash="d0",
        prompt_hash="p0",
        target=0,
        pred=None,
        correct=None,
        metrics={},
        status=Status.TIMEOUT,
        error="no answer in 30 s",
    )
    write_run(Run(run.manifest, {"arc_easy": [failed]}), tmp_path / "r")
    assert read_run(tmp_path / "r").records["arc_easy"][0] == failed
