"""The baseline store: round trips, atomic replacement, and one-line errors on damage."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os

import pytest

from regress.core.errors import BadInput, RunFailed
from regress.core.manifest import Manifest, Run
from regress.core.records import Record, Status
from regress.core.store import Store, read_run, validate_name, write_run


def make_manifest(name: str = "main", tasks: dict[str, int] | None = None) -> Manifest:
    """A manifest parsed from plain JSON, as a stored one is."""
    tasks = tasks or {"arc_easy": 5}
    return Manifest.from_dict(
        {
            "schema_version": 1,
            "name": name,
            "created": "2026-11-30T00:00:00+00:00",
            "regress_version": "0.1.0",
            "model": {"ref": "m.gguf", "sha256": "a" * 64},
            "backend": {"name": "llama_cpp", "version": "0.3.36", "params": {}, "build": {}},
            "suite_name": "s",
            "tasks": {
                task: {
                    "name": task,
                    "group": None,
                    "n": n,
                    "num_fewshot": 0,
                    "metric": "acc",
                    "output_type": "loglikelihood",
                    "dataset_hash": "dh",
                    "prompt_hash": "ph",
                }
                for task, n in tasks.items()
            },
        }
    )


def make_records(task: str = "arc_easy", n: int = 5, acc: int = 1) -> list[Record]:
    return [
        Record(
            task=task,
            doc_id=i,
            doc_hash=f"d{i}",
            prompt_hash=f"p{i}",
            target=0,
            pred=0 if acc else 1,
            correct=acc,
            metrics={"acc": float(acc)},
            scores={"loglik": [-1.0, -2.0] if acc else [-2.0, -1.0], "chars": [1, 1]},
        )
        for i in range(n)
    ]


def make_run(name: str = "main", n: int = 5, acc: int = 1) -> Run:
    return Run(
        manifest=make_manifest(name, {"arc_easy": n}),
        records={"arc_easy": make_records(n=n, acc=acc)},
    )


def test_round_trip_is_exact(tmp_path):
    run = make_run()
    Store(tmp_path).save(run)
    loaded = Store(tmp_path).load("main")
    assert loaded.records == run.records
    assert loaded.manifest.tasks == run.manifest.tasks
    text = (tmp_path / "main" / "records" / "arc_easy.jsonl").read_bytes()
    assert loaded.manifest.records_sha256 == {"arc_easy": hashlib.sha256(text).hexdigest()}
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

    monkeypatch.setattr("regress.core.store.os.rename", boom)
    with pytest.raises(RunFailed, match="cannot write .*main: disk full"):
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
    manifest = make_manifest(tasks={"arc_easy": 1})
    write_run(Run(manifest, {"arc_easy": [failed]}), tmp_path / "r")
    assert read_run(tmp_path / "r").records["arc_easy"][0] == failed


# --- nothing lost: what a write may replace ---------------------------------------------------


def test_write_refuses_a_folder_that_is_not_a_run(tmp_path):
    folder = tmp_path / "v"
    (folder / "src").mkdir(parents=True)
    (folder / "src" / "keep.py").write_text("x\n")
    with pytest.raises(BadInput, match=r"v is not empty and not a regress run: refusing"):
        write_run(make_run(), folder)
    assert (folder / "src" / "keep.py").read_text() == "x\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v"]


def test_write_refuses_a_run_folder_holding_other_files(tmp_path):
    write_run(make_run(), tmp_path / "r")
    (tmp_path / "r" / "notes.txt").write_text("mine\n")
    with pytest.raises(BadInput, match="not a regress run"):
        write_run(make_run(acc=0), tmp_path / "r")
    assert (tmp_path / "r" / "notes.txt").read_text() == "mine\n"
    assert read_run(tmp_path / "r").records["arc_easy"][0].correct == 1


def test_write_replaces_a_run_and_fills_an_empty_folder(tmp_path):
    (tmp_path / "empty").mkdir()
    write_run(make_run(), tmp_path / "empty")
    write_run(make_run(acc=0), tmp_path / "empty")
    assert read_run(tmp_path / "empty").records["arc_easy"][0].correct == 0


def test_store_that_is_a_file(tmp_path):
    store = tmp_path / "s"
    store.write_text("not a folder\n")
    with pytest.raises(BadInput, match=r"s is a file, not a folder"):
        Store(store).save(make_run())
    with pytest.raises(BadInput, match=r"store .*s is a file, not a folder of baselines"):
        Store(store).names()
    assert store.read_text() == "not a folder\n"


# --- crash leftovers ----------------------------------------------------------------------------


def test_leftovers_are_ignored_by_names_and_removed_by_the_next_write(tmp_path):
    store = Store(tmp_path)
    store.save(make_run())
    # What a kill leaves: a writer's temporary folder (with a manifest) and an old copy.
    write_run(make_run(acc=0), tmp_path / ".main.tmp-abc123")
    write_run(make_run(acc=0), tmp_path / ".other.old")
    assert store.names() == ["main", "other"]  # `.other.old` without `other` is `other`
    assert store.load("main").records["arc_easy"][0].correct == 1
    store.save(make_run(acc=0))
    assert sorted(p.name for p in tmp_path.iterdir()) == [".other.old", "main"]


def test_old_copy_beside_the_new_run_is_removed_on_read(tmp_path):
    store = Store(tmp_path)
    store.save(make_run(acc=0))
    write_run(make_run(acc=1), tmp_path / ".main.old")  # killed after the second rename
    assert store.load("main").records["arc_easy"][0].correct == 0
    assert [p.name for p in tmp_path.iterdir()] == ["main"]


# --- path traversal and tampering ---------------------------------------------------------------


@pytest.mark.parametrize("task", ["../../../escaped", "a/b", "..", ".hidden", ""])
def test_task_names_from_a_manifest_are_path_safe(tmp_path, task):
    write_run(make_run(), tmp_path / "r")
    path = tmp_path / "r" / "manifest.json"
    data = json.loads(path.read_text())
    data["tasks"] = {task: data["tasks"]["arc_easy"]}
    data.pop("records_sha256")
    path.write_text(json.dumps(data))
    with pytest.raises(BadInput, match="bad task name"):
        read_run(tmp_path / "r")
    run = make_run()
    escaped = Run(run.manifest, {task: run.records["arc_easy"]})
    with pytest.raises(BadInput, match="bad task name"):
        write_run(escaped, tmp_path / "w")
    assert not (tmp_path / "escaped.jsonl").exists() and not (tmp_path / "w").exists()


def test_edited_records_do_not_match_their_hash(tmp_path):
    Store(tmp_path).save(make_run())
    path = tmp_path / "main" / "records" / "arc_easy.jsonl"
    path.write_text(path.read_text().replace('"correct":1', '"correct":0', 1))
    with pytest.raises(BadInput, match="arc_easy.jsonl: content does not match the sha256"):
        Store(tmp_path).load("main")


def test_unknown_records_file_is_an_error(tmp_path):
    Store(tmp_path).save(make_run())
    extra = tmp_path / "main" / "records" / "piqa.jsonl"
    extra.write_text("")
    with pytest.raises(BadInput, match=r"piqa.jsonl: not a records file of a task in"):
        Store(tmp_path).load("main")


# --- malformed records lines: one line naming file and line -------------------------------------


def _replace_line(tmp_path, line: bytes) -> None:
    Store(tmp_path).save(make_run())
    manifest = tmp_path / "main" / "manifest.json"
    data = json.loads(manifest.read_text())
    data.pop("records_sha256")  # as if hand-written: the line itself must be judged
    manifest.write_text(json.dumps(data))
    path = tmp_path / "main" / "records" / "arc_easy.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    lines[1] = line
    path.write_bytes(b"".join(lines))


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (b"[1,2,3]\n", "a JSON array, not an object"),
        (b"null\n", "a JSON null, not an object"),
        (b'{"task":"arc_easy","doc_id":"1"}\n', 'doc_id is "1", expected an integer'),
        (b'{"task":"arc_easy","doc_id":1,"correct":"yes"}\n', 'correct is "yes", expected 0, 1'),
        (b'{"task":"arc_easy","doc_id":1,"metrics":{"acc":NaN}}\n', "NaN is not JSON"),
        (b'{"task":"arc_easy","doc_id":1,"extra":1}\n', "unknown fields"),
        (b'{"task":"arc_\xff"}\n', r"arc_easy.jsonl:2: not UTF-8 text"),
    ],
)
def test_malformed_record_line_names_file_and_line(tmp_path, line, message):
    _replace_line(tmp_path, line)
    with pytest.raises(BadInput, match=r"arc_easy.jsonl:2: ") as err:
        Store(tmp_path).load("main")
    assert message in str(err.value) and "\n" not in str(err.value)


def test_non_utf8_manifest(tmp_path):
    Store(tmp_path).save(make_run())
    path = tmp_path / "main" / "manifest.json"
    path.write_bytes(path.read_bytes().replace(b'"s"', b'"\xff"'))
    with pytest.raises(BadInput, match=r"manifest.json: not UTF-8 text"):
        Store(tmp_path).load("main")


def test_nan_is_never_written(tmp_path):
    run = make_run()
    broken = [*run.records["arc_easy"]]
    broken[2] = dataclasses.replace(broken[2], scores={"loglik": [float("nan"), -1.0]})
    with pytest.raises(RunFailed, match="arc_easy doc 2: non-finite"):
        write_run(Run(run.manifest, {"arc_easy": broken}), tmp_path / "r")
    assert list(tmp_path.iterdir()) == []
