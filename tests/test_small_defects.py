"""The smaller defects of issue #47's probe (item 11), each as the probe found it: a history
line that lost its newline, exit 3 where bad input is due (history fields of the wrong type, an
anchor whose records are a symlink, a 5,001-digit doc_id), a huge value echoed whole, a
labelling form with a repeated key, `bench` reporting figures when every request failed, and a
failing judge blamed on the candidate."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_bench_server_figures import CHUNKS, serve  # noqa: F401 (a fixture)
from test_history import _entry
from test_judge import _policy, _runs, _spec, judge_server  # noqa: F401 (a fixture)
from test_judge_audit import judgement_line, write_lines

from regress.checks import CheckOptions, check
from regress.cli import cli
from regress.core.errors import MAX_MESSAGE, BadInput, ExitCode
from regress.core.store import Store, write_run
from regress.gate.policy import parse_policy
from regress.gate.results import Verdict
from regress.report.history import append_history, read_history
from regress.report.markdown import render_markdown

ROOT = Path(__file__).resolve().parents[1]


# --- the history file -------------------------------------------------------------------


def test_a_last_history_line_without_its_newline_is_read_and_kept(tmp_path: Path) -> None:
    """An editor or a merge that drops the file's last newline lost that run: `regress
    history` skipped it and the next append deleted it."""
    entry, _ = _entry({"arc": (200, 5, 5)})
    path = tmp_path / "history.jsonl"
    path.write_text(entry.to_json() + entry.to_json().rstrip("\n"), encoding="utf-8")
    assert read_history(path) == [entry, entry]
    append_history(path, entry)
    assert read_history(path) == [entry, entry, entry]
    assert path.read_text(encoding="utf-8") == entry.to_json() * 3
    page = tmp_path / "history.html"
    result = CliRunner().invoke(cli, ["history", "-f", str(path), "-o", str(page)])
    assert result.exit_code == 0 and "(3 runs, 1 units)" in " ".join(result.output.split())


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"exit_code": "1"}, 'exit_code must be a whole number, got "1"'),
        ({"tokens": 2.5}, "tokens must be a whole number, got 2.5"),
        ({"verdict": 3}, "verdict must be a string, got 3"),
        ({"units": 5}, "malformed history line (units must be a list of objects)"),
        ({"unit": {"n": "200"}}, 'unit 1: n must be a whole number, got "200"'),
        ({"unit": {"candidate": "0.5"}}, 'unit 1: candidate must be a number, got "0.5"'),
        ({"unit": {"delta_ci": [0.1]}}, "unit 1: delta_ci must be a pair of numbers, got [0.1]"),
        ({"unit": {"kind": None}}, "unit 1: kind must be a string, got null"),
    ],
)
def test_a_history_field_of_the_wrong_type_is_bad_input(
    tmp_path: Path, change: dict, message: str
) -> None:
    entry, _ = _entry({"arc": (200, 5, 5)})
    data = json.loads(entry.to_json())
    data["units"][0].update(change.pop("unit", {}))
    data.update(change)
    path = tmp_path / "history.jsonl"
    path.write_text(entry.to_json() + json.dumps(data) + "\n", encoding="utf-8")
    result = CliRunner().invoke(
        cli, ["history", "-f", str(path), "-o", str(tmp_path / "history.html")]
    )
    assert result.exit_code == ExitCode.BAD_INPUT, result.output
    assert result.output.strip() == f"regress: error: {path}:2: {message}"


# --- exit 2 where bad input is due ------------------------------------------------------


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        check=True,
        capture_output=True,
    )


def test_an_anchor_whose_records_are_a_symlink_is_bad_input(tmp_path: Path) -> None:
    """`main~1` comes out of git; a commit whose records folder is a link out of the
    baseline (tarfile's data filter refuses it) ended in an unexpected error, exit 3."""
    repo = tmp_path / "repo"
    folder = repo / "baselines" / "main"
    shutil.copytree(ROOT / "baselines" / "main", folder)
    elsewhere = tmp_path / "elsewhere"
    shutil.move(folder / "records", elsewhere)
    (folder / "records").symlink_to(elsewhere)
    _git(tmp_path, "init", "-q", str(repo))
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "records linked")
    (folder / "records").unlink()
    shutil.copytree(elsewhere, folder / "records")
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    later = {**manifest, "created": "2026-12-02T09:00:00+00:00"}  # a new version of main
    (folder / "manifest.json").write_text(json.dumps(later), encoding="utf-8")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "records copied")
    with pytest.raises(BadInput, match=r"main~1: baselines/main at \w{12} cannot be read back"):
        Store(repo / "baselines").find("main~1")
    write_run(Store(ROOT / "baselines").load("main"), tmp_path / "candidate")
    result = CliRunner().invoke(
        cli,
        [
            "check",
            "-b",
            "main",
            "--store",
            str(repo / "baselines"),
            "--candidate-run",
            str(tmp_path / "candidate"),
            "--anchor",
            "main~1",
        ],
    )
    assert result.exit_code == ExitCode.BAD_INPUT, result.output
    assert "cannot be read back ('baselines/main/records' is a link to an absolute path)" in (
        result.output
    )


def test_a_doc_id_of_five_thousand_digits_is_bad_input(tmp_path: Path) -> None:
    judgements = write_lines(tmp_path / "judgements.jsonl", [judgement_line(0, "win")])
    labels = tmp_path / "labels.jsonl"
    labels.write_text('{"task": "open", "doc_id": ' + "9" * 5001 + ', "label": "win"}\n')
    result = CliRunner().invoke(
        cli, ["judge", "audit", str(labels), "--judgements", str(judgements)]
    )
    assert result.exit_code == ExitCode.BAD_INPUT, result.output
    assert result.output.strip() == (
        f"regress: error: {labels}:1: not valid JSON (an integer of 5,001 digits (at most 4,300))"
    )


def test_a_labelling_form_that_repeats_a_key_is_bad_input(tmp_path: Path) -> None:
    """json keeps the last of two values, so a form answering both "A" and "B" was read as
    whichever came second."""
    judgements = write_lines(tmp_path / "judgements.jsonl", [judgement_line(0, "win")])
    labels = tmp_path / "labels.jsonl"
    labels.write_text(
        '{"task": "open", "doc_id": 0, "a_is": "baseline", "preferred": "A", "preferred": "B"}\n'
    )
    result = CliRunner().invoke(
        cli, ["judge", "audit", str(labels), "--judgements", str(judgements)]
    )
    assert result.exit_code == ExitCode.BAD_INPUT, result.output
    assert result.output.strip() == (
        f'regress: error: {labels}:1: not valid JSON (key "preferred" repeated)'
    )


def test_a_huge_bad_value_is_cut_in_the_error_line() -> None:
    """A 200 MB value was echoed whole as the error's "one line"; 2 MB show the same."""
    with pytest.raises(BadInput) as caught:
        parse_policy({"max_drop": "x" * 2_000_000})
    message = str(caught.value)
    assert len(message) < MAX_MESSAGE + 50
    assert message.startswith("policy file: max_drop must be")
    assert "characters cut ...]" in message and message.endswith("x" * 100 + "'")


# --- bench when every request failed ------------------------------------------------------


def _bench(url: str) -> object:
    args = ["bench", "--backend", "openai", "-m", "m", "--model-args", f"base_url={url}"]
    args += ["--num-requests", "3", "--output-len", str(CHUNKS)]
    return CliRunner().invoke(cli, args)


def test_bench_fails_when_the_server_reports_negative_counts(serve) -> None:  # noqa: F811
    """Every request refused its negative count, and `bench` printed `0.00 t/s, nan` and
    exited 0."""
    result = _bench(serve({"prompt_tokens": 2, "completion_tokens": -209}))
    assert result.exit_code == ExitCode.RUN_FAILED, result.output
    assert result.output.strip().splitlines()[-1] == (
        "regress: error: m: every request at concurrency 1 failed (3 of 3), first: "
        "RuntimeError: the server reported completion_tokens -209"
    )
    assert "0.00" not in result.output and "nan" not in result.output
    honest = _bench(serve({"prompt_tokens": 2, "completion_tokens": CHUNKS}))
    assert honest.exit_code == 0, honest.output


# --- a judge that fails every reply --------------------------------------------------------


def test_a_judge_that_fails_every_reply_is_named_not_the_candidate(judge_server) -> None:  # noqa: F811
    url, _ = judge_server
    base, _ = _runs({})
    n = len(base.records["open_answers"])
    # The scripted judge answers without a verdict whenever an answer holds GARBLE.
    _, candidate = _runs({k: f"answer {k} GARBLE" for k in range(n)})
    result = check(base, candidate, CheckOptions(policy=_policy(_spec(url))))
    (unit,) = result.comparison.units
    assert unit.verdict is Verdict.ERROR
    assert unit.reason == (
        f"the judge failed on 100.0% of the examples ({n} of {n}) (max_error_rate 5.0%): "
        "the candidate's answers went unjudged"
    )
    first = render_markdown(result.comparison).splitlines()[0]
    assert unit.reason in first and "candidate's examples failed" not in first
