"""No silent overwrite: `baseline create` and `promote` refuse an existing baseline without
`--force`, in the library and on the command line, and say what would be replaced."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import REPO
from test_store import make_run

from regress.cli import cli
from regress.core.errors import BadInput, ExitCode
from regress.core.store import (
    SaveOptions,
    Store,
    check_baseline_target,
    read_run,
    save_baseline,
    write_run,
)


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_save_baseline_refuses_an_existing_one_and_says_what_it_holds(tmp_path: Path) -> None:
    store = Store(tmp_path)
    save_baseline(store, make_run(n=7, acc=1), SaveOptions())
    before = snapshot(tmp_path)
    with pytest.raises(BadInput) as info:
        save_baseline(store, make_run(n=3, acc=0), SaveOptions())
    message = str(info.value)
    assert "\n" not in message
    assert message == (
        "baseline 'main' already exists (model m.gguf, 7 examples, created "
        "2026-11-30T00:00:00+00:00); --force replaces it"
    )
    assert snapshot(tmp_path) == before
    with pytest.raises(BadInput, match="already exists"):
        check_baseline_target(store, "main", SaveOptions())


def test_force_replaces_and_a_new_name_needs_no_force(tmp_path: Path) -> None:
    store = Store(tmp_path)
    assert check_baseline_target(store, "main", SaveOptions()) == tmp_path / "main"
    save_baseline(store, make_run(n=7, acc=1), SaveOptions())
    check_baseline_target(store, "main", SaveOptions(force=True))
    save_baseline(store, make_run(n=3, acc=0), SaveOptions(force=True))
    assert read_run(tmp_path / "main").manifest.tasks["arc_easy"].n == 3


def test_a_baseline_written_after_the_early_check_is_still_kept(tmp_path: Path) -> None:
    """The check is repeated under the writers' lock: a baseline another process stored while
    this one ran is not replaced."""
    store = Store(tmp_path)
    options = SaveOptions()
    check_baseline_target(store, "main", options)  # nothing there yet
    write_run(make_run(n=4), tmp_path / "main")  # another writer, meanwhile
    with pytest.raises(BadInput, match=r"4 examples"):
        save_baseline(store, make_run(n=9), options)
    assert read_run(tmp_path / "main").manifest.tasks["arc_easy"].n == 4


def test_an_unreadable_baseline_is_refused_too(tmp_path: Path) -> None:
    (tmp_path / "main").mkdir()
    (tmp_path / "main" / "manifest.json").write_text("{not json\n")
    with pytest.raises(BadInput, match=r"'main' already exists \(an unreadable manifest\)"):
        save_baseline(Store(tmp_path), make_run(), SaveOptions())


def test_promote_refuses_the_committed_main_without_force(tmp_path: Path) -> None:
    store = tmp_path / "store"
    shutil.copytree(REPO / "baselines", store)
    source = tmp_path / "run"
    write_run(make_run(name="cand", n=3), source)
    before = snapshot(store)
    committed = read_run(store / "main").manifest
    n = sum(t.n for t in committed.tasks.values())
    code, text = run("baseline", "promote", "--run", str(source), "--name", "main",
                     "--store", str(store))  # fmt: skip
    assert code == ExitCode.BAD_INPUT and text.count("\n") == 1, text
    assert text == (
        f"regress: error: baseline 'main' already exists (model {committed.model.ref}, {n} "
        f"examples, created {committed.created}); --force replaces it\n"
    )
    assert snapshot(store) == before
    code, text = run("baseline", "promote", "--run", str(source), "--name", "main",
                     "--store", str(store), "--force")  # fmt: skip
    assert code == 0, text
    assert read_run(store / "main").manifest.tasks["arc_easy"].n == 3


def test_create_refuses_an_existing_baseline_before_running_anything(tmp_path: Path) -> None:
    store = tmp_path / "store"
    write_run(make_run(n=500), store / "main")
    before = snapshot(store)
    # A model that does not exist: the refusal must come before anything looks for it.
    code, text = run("baseline", "create", "--name", "main", "-m", str(tmp_path / "no.gguf"),
                     "-t", "builtin_dates", "--store", str(store))  # fmt: skip
    assert code == ExitCode.BAD_INPUT and text.count("\n") == 1, text
    assert "baseline 'main' already exists (model m.gguf, 500 examples" in text
    assert snapshot(store) == before


def test_verify_says_when_no_model_sha256_was_pinned(tmp_path: Path) -> None:
    """An imported baseline pins no weights: verify must not say their sha256 is ok."""
    import json

    store = tmp_path / "store"
    shutil.copytree(REPO / "baselines" / "main", store / "main")
    model = tmp_path / "m.gguf"
    model.write_bytes(b"weights")
    manifest = store / "main" / "manifest.json"
    data = json.loads(manifest.read_text())
    data["model"] = {**data["model"], "ref": str(model), "sha256": ""}
    manifest.write_text(json.dumps(data))
    done = CliRunner().invoke(cli, ["baseline", "verify", "main", "--store", str(store)])
    assert done.exit_code == 0, done.output
    assert "no model sha256 pinned" in done.output and "sha256 ok" not in done.output
