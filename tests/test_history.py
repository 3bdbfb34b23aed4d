"""The gate's history: `check --record-history` appends one line per run, `regress history`
draws them, and nothing complete is ever lost."""

from __future__ import annotations

import dataclasses
import json
import re
import shlex
from datetime import UTC, datetime

import pytest
from click.testing import CliRunner
from test_compare import runs

from regress.checks import check
from regress.cli import cli
from regress.core.errors import BadInput, ExitCode
from regress.core.store import Store, write_run
from regress.report.history import (
    append_history,
    history_entry,
    read_history,
)
from regress.report.history_page import CHART, changed, history_figure, history_page
from regress.report.html import figure_json

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def _entry(spec, commit="a" * 40, kernels=None):
    base, cand = runs(spec)
    if kernels is not None:
        hardware = dataclasses.replace(cand.manifest.backend.hardware, kernels=kernels)
        backend = dataclasses.replace(cand.manifest.backend, hardware=hardware)
        cand = dataclasses.replace(
            cand, manifest=dataclasses.replace(cand.manifest, backend=backend)
        )
    result = check(base, cand).comparison
    return history_entry(result, base, cand, commit, NOW), result


def test_an_entry_holds_the_run_and_reads_back_equal(tmp_path):
    entry, result = _entry({"arc": (400, 60, 10), "boolq": (300, 2, 2)})
    [arc, boolq] = entry.units
    assert (entry.verdict, entry.exit_code, entry.date) == (
        result.verdict.value,
        1,
        "2026-12-02T12:00:00Z",
    )
    assert arc.name == "arc" and arc.delta == pytest.approx(-50 / 400)
    low, high = arc.candidate_ci
    assert low < arc.candidate < high and arc.verdict == "REGRESSION"
    assert boolq.verdict == result.units[1].verdict.value
    path = tmp_path / "history.jsonl"
    append_history(path, entry)
    append_history(path, entry)
    assert read_history(path) == [entry, entry]
    assert all(json.loads(line)["schema"] == 1 for line in path.read_text().splitlines())


def test_a_writer_killed_mid_line_loses_nothing_complete(tmp_path):
    entry, _ = _entry({"arc": (200, 5, 5)})
    path = tmp_path / "history.jsonl"
    append_history(path, entry)
    with path.open("a") as f:
        f.write(entry.to_json()[:57])  # a killed writer's half line
    assert read_history(path) == [entry]  # the reader stops before it
    append_history(path, entry)  # the next writer removes it first
    assert read_history(path) == [entry, entry]
    assert path.read_text().count("\n") == 2
    # A tail no killed append could leave (over a megabyte without a line end) is kept whole.
    with path.open("a") as f:
        f.write("x" * (2 << 20))
    before = path.read_bytes()
    with pytest.raises(BadInput, match="no history line"):
        append_history(path, entry)
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json\n", "history.jsonl:2: not JSON"),
        ('{"schema": 9}\n', "history.jsonl:2: history schema 9, expected 1"),
        ('{"schema": 1, "units": []}\n', "history.jsonl:2: malformed history line"),
    ],
)
def test_a_malformed_line_is_named(tmp_path, line, message):
    entry, _ = _entry({"arc": (200, 5, 5)})
    path = tmp_path / "history.jsonl"
    append_history(path, entry)
    with path.open("a") as f:
        f.write(line)
    with pytest.raises(BadInput, match=re.escape(message)):
        read_history(path)


def test_points_across_a_fingerprint_or_baseline_change_are_not_joined():
    first, _ = _entry({"arc": (400, 4, 4)})
    same, _ = _entry({"arc": (400, 6, 4)}, commit="b" * 40)
    rebuilt, _ = _entry({"arc": (400, 6, 6)}, commit="c" * 40, kernels="AVX512")
    rebased = dataclasses.replace(rebuilt, commit="d" * 40, baseline_id="e" * 64)
    entries = [first, same, rebuilt, rebased]
    assert changed(entries) == [[], [], ["fingerprint"], ["baseline"]]
    figure = history_figure(entries)
    lines = [t for t in figure.data if t.mode == "lines+markers"]
    assert [len(t.x) for t in lines] == [2, 1, 1]  # three segments: nothing joined across
    assert len(figure.layout.shapes) == 2  # a dashed line at each change
    page = history_page(entries)
    assert "run 3: fingerprint changed" in page and "run 4: baseline changed" in page
    assert figure_json(page, CHART)["data"][1]["y"] == [lines[0].y[0], lines[0].y[1]]


def _storable(run):
    """A test run as the store holds one: named `main` or `cand`, each task's n its records."""
    tasks = {
        name: dataclasses.replace(info, n=len(run.records[name]))
        for name, info in run.manifest.tasks.items()
    }
    name = "main" if run.manifest.name == "base" else run.manifest.name
    return dataclasses.replace(
        run, manifest=dataclasses.replace(run.manifest, name=name, tasks=tasks)
    )


def test_check_appends_and_history_draws_without_a_model(tmp_path):
    """`--candidate-run` gates a stored run: the line is appended, the page drawn; a missing
    file and a folder in the history's place are bad input (exit 2)."""
    base, cand = (_storable(r) for r in runs({"arc": (300, 3, 3)}))
    Store(tmp_path / "store").save(base)
    write_run(cand, tmp_path / "cand")
    history = tmp_path / "history.jsonl"
    args = ["check", "-b", "main", "--candidate-run", str(tmp_path / "cand")]
    args += ["--store", str(tmp_path / "store"), "--record-history", str(history)]
    for _ in range(2):
        result = CliRunner(env={"GITHUB_SHA": "f" * 40}).invoke(cli, args)
        assert result.exit_code in (ExitCode.OK, ExitCode.REGRESSION), result.output
    entries = read_history(history)
    assert [e.commit for e in entries] == ["f" * 40] * 2
    page = tmp_path / "history.html"
    result = CliRunner().invoke(cli, ["history", "-f", str(history), "-o", str(page)])
    assert result.exit_code == 0 and "(2 runs, 1 units)" in " ".join(result.output.split())
    assert figure_json(page.read_text(), CHART)["data"]
    result = CliRunner().invoke(
        cli, ["history", "-f", str(tmp_path / "none.jsonl"), "-o", str(page)]
    )
    assert result.exit_code == ExitCode.BAD_INPUT and "no history file" in result.output
    args[-1] = str(tmp_path)
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == ExitCode.BAD_INPUT and "not a file" in result.output


@pytest.mark.model
def test_real_runs_append_history_and_chromium_draws_it(tmp_path, data_dir):
    """A baseline of SmolLM2, then the model itself, its Q8_0 and its Q4_0 checked one after
    another with `--record-history`: three lines whose accuracies are the runs' own, and a
    page that draws in headless Chromium and loads nothing from outside."""
    from chromium import chromium, draw

    def run(*args: str) -> str:
        result = CliRunner().invoke(cli, list(args))
        assert result.exit_code in (ExitCode.OK, ExitCode.REGRESSION), result.output
        return result.output

    store, history = tmp_path / "store", tmp_path / "history.jsonl"
    common = ("--store", str(store), "--no-cache")
    run(*shlex.split("baseline create --name main -m smollm2-135m -t builtin --limit 5"), *common)
    models = {"smollm2-135m": "smollm2-135m"}
    for kind in ("Q8_0", "Q4_0"):
        out = tmp_path / f"{kind}.gguf"
        run("quantize", "smollm2-135m", "--type", kind, "-o", str(out))
        models[kind] = str(out)
    saved = []
    for name, model in models.items():
        report = tmp_path / f"{name}.json"
        gate = f"check -b main -m {model} --record-history {history} --report-json {report}"
        run(*shlex.split(gate), *common, "--save-run", str(tmp_path / "runs" / name))
        saved.append(json.loads(report.read_text()))
    entries = read_history(history)
    assert len(entries) == 3
    for entry, data in zip(entries, saved, strict=True):
        [unit] = entry.units
        assert entry.verdict == data["verdict"] and unit.candidate == data["units"][0]["candidate"]
        assert entry.model_sha256 == data["candidate"]["sha256"] and entry.tokens > 0
    assert len({e.fingerprint for e in entries}) == 1  # one machine, one suite: one segment
    page = tmp_path / "history.html"
    run("history", "-f", str(history), "-o", str(page))
    text = page.read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text)  # nothing from outside
    dom = draw(chromium(), page, tmp_path / "history.png")
    assert 'data-drawn="1"' in dom and re.search(r'<p id="plotly-error" hidden[^>]*></p>', dom)
    # Plotly drew a marker per run (a path with a shape, not an empty one).
    assert len(re.findall(r'<path class="point[^"]*"[^>]*\sd="M', dom)) >= 3
    # The three views from the same real runs: each candidate's buckets are its gate report's
    # discordant counts and the trend is the history's. Chromium draws one view of them here
    # (every view of one page: tests/test_report_views.py).
    runs = [str(tmp_path / "runs" / name) for name in models]
    reports = [str(tmp_path / f"{name}.json") for name in models]
    views = tmp_path / "views.html"
    run("report", str(store / "main"), *runs, *reports, str(history), "--view", "all", "-o",
        str(views))  # fmt: skip
    text = views.read_text()
    counts = re.findall(r"<h3>Examples: [^<]*</h3><p>(\d+) regressed, (\d+) fixed", text)
    assert counts == [(str(d["units"][0]["b"]), str(d["units"][0]["c"])) for d in saved]
    trend = figure_json(text, "history")
    verdicts = [m for t in trend["data"] if t["mode"] == "lines+markers" for m in t["text"]]
    assert len(verdicts) == 3
    dom = draw(chromium(), views, fragment="dev", height=1200)
    assert re.search(r'<body[^>]*data-view="dev"', dom)
    drawn = len(re.findall(r'id="fig-', text))
    assert f'data-drawn="{drawn}"' in dom and 'id="plotly-error" hidden' in dom
