"""Issue 30, item 3: `regress report --view exec|dev|efficiency|all`, seed 002's three reports
(docs/speed.md#three-views). Each figure is checked against an oracle computed another way:
the buckets against the gate's own discordant counts, the heatmap against each run's
per-task accuracy, TES and over-thinkers by hand; headless Chromium draws every view.

No model is loaded: the demo inputs of tests/test_report_html.py (the stored baseline, two
candidates made from its records, a gate report, a bench file), and crafted generation runs
sampled three times with reasoning tokens for the efficiency view. tests/test_history.py
builds the views from real runs.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_compare import run
from test_report_html import _MARK, _chart_doms, bench_file, demo_inputs

from regress.cli import cli
from regress.core.manifest import TaskInfo
from regress.core.records import Record
from regress.core.store import read_run, write_run
from regress.gate.compare import compare
from regress.gate.policy import Metric, Policy, Requirement
from regress.report.example_buckets import Bucket, sort_examples
from regress.report.html import figure_json
from regress.report.json_report import render_json
from regress.report.sources import load_inputs
from regress.report.views import OVERTHINKING, View, render_views
from regress.run.cost import Prices


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """baselines/main, candidate1 (40 answers flipped), candidate2, gate.json (with decision
    gates), bench.json."""
    folder = tmp_path_factory.mktemp("views")
    paths = demo_inputs(folder)
    base, first = read_run(paths[0]), read_run(paths[1])
    gates = (Requirement(Metric.PASS_AT_1, 0.20, "builtin"), Requirement(Metric.TTFT_MS, 500))
    paths[3].write_text(render_json(compare(base, first, Policy(gates=gates))))
    return paths


def _gen_run(folder: Path, name: str, outcomes: list[list[int]], reasoning: list[int | None]):
    """A stored run of one generation task, each example sampled len(outcomes[i]) times, 60
    generated tokens per sample of which `reasoning[i]` reasoned."""
    records = [
        Record(
            task="gen",
            doc_id=i,
            doc_hash=f"d{i}",
            prompt_hash="p",
            target="4",
            pred="4" if sum(o) else "5",
            correct=None,
            metrics={"pass@1": sum(o) / len(o)},
            scores={"correct": o, "failure": ["answered"] * len(o), "pred": ["4"] * len(o)},
            tokens={"prompt": 100, "completion": 60 * len(o)}
            | ({} if reasoning[i] is None else {"reasoning": reasoning[i]}),
        )
        for i, o in enumerate(outcomes)
    ]
    info = TaskInfo("gen", None, len(records), 0, "pass@1", "generate_until", "d", "p")
    out = folder / name
    write_run(run(name, {"gen": records}, [info]), out)
    return out


def _page(paths: list[Path], view: str, tmp_path: Path, *extra: str) -> str:
    out = tmp_path / f"{view}.html"
    args = ["report", *map(str, paths), "--view", view, "-o", str(out), *extra]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    return out.read_text()


def _views(page: str) -> list[str]:
    return re.findall(r'<div class="view" id="view-(\w+)" data-view="\1">', page)


def test_all_is_three_tabs_and_each_view_stands_alone(inputs, tmp_path):
    page = _page(inputs, "all", tmp_path)
    assert _views(page) == ["exec", "dev", "efficiency"]
    assert re.findall(r'<a href="#(\w+)" data-view="\1">', page) == _views(page)
    for view in ("exec", "dev", "efficiency"):
        alone = _page(inputs, view, tmp_path)
        assert _views(alone) == [view] and '<nav class="views">' not in alone
    # Without --view the page of every chart is unchanged.
    plain = tmp_path / "plain.html"
    CliRunner().invoke(cli, ["report", *map(str, inputs), "-o", str(plain)])
    assert 'class="view"' not in plain.read_text()


def test_exec_shows_each_decision_gate_with_its_interval(inputs, tmp_path):
    page = _page(inputs, "exec", tmp_path)
    gate = json.loads(inputs[3].read_text())
    [accuracy, ttft] = gate["requirements"]
    low, high = accuracy["ci"]
    row = re.search(r"<tr><td>[^<]*</td><td>pass_at_1 of builtin &gt;= 20.0%</td>.*?</tr>", page)
    assert row, "no row for the pass@1 gate"
    assert f"{accuracy['value']:.1%}" in row.group(0)
    assert f"[{low:.1%}, {high:.1%}]" in row.group(0)
    assert f'class="{accuracy["verdict"]}"' in row.group(0)
    # The TTFT gate had no bench file in the check: a row saying so, never a PASS.
    assert ttft["verdict"] == "INCONCLUSIVE" and "not evaluated" in page
    # The only gate report is a REGRESSION: nothing is chosen, and the page says why (the
    # baseline, the most accurate, is no candidate; the candidate did not pass).
    frontier = figure_json(page, "frontier")
    assert not [t["name"] for t in frontier["data"] if t["name"].endswith("(chosen)")]
    assert "No model is chosen: no candidate on this chart passed the gate" in page


def test_exec_chooses_only_among_the_candidates_the_gate_passed(inputs, tmp_path):
    """Issue 52, item 4: the faster candidate1 regressed, so the slower candidate2 (no answer
    changed: PASS) is chosen, though compare's rule alone would take a faster model."""
    base, first, second = (read_run(p) for p in inputs[:3])
    passed = tmp_path / "gate2.json"
    passed.write_text(render_json(compare(base, second, Policy())))
    assert json.loads(passed.read_text())["verdict"] == "PASS"
    bench = tmp_path / "bench3.json"
    bench.write_text(bench_file([base, first, second], "2026-12-02T12:00:00+00:00"))
    page = _page([*inputs[:4], passed, bench], "exec", tmp_path)
    frontier = figure_json(page, "frontier")
    chosen = [t["name"] for t in frontier["data"] if t["name"].endswith("(chosen)")]
    assert len(chosen) == 1 and chosen[0].startswith("candidate (candidate.gguf) · ")
    assert second.manifest.model.sha256[:8] in chosen[0]
    assert "Chosen among the 1 candidate the gate passed" in page


def test_cost_per_success_is_tokens_over_right_answers(inputs, tmp_path):
    prices = tmp_path / "prices.yaml"
    prices.write_text("input_per_1k: 0.5\ncurrency: EUR\n")
    page = _page(inputs, "exec", tmp_path, "--prices", str(prices))
    base = read_run(inputs[0])
    records = [r for recs in base.records.values() for r in recs]
    tokens = sum(r.tokens["prompt"] + r.tokens.get("completion", 0) for r in records)
    right = sum(r.right for r in records)
    assert f"<td>{tokens / right:,.0f}</td>" in page
    cost = sum(r.tokens["prompt"] for r in records) / 1000 * 0.5 / right
    assert f"<td>{cost:.6f} EUR</td>" in page
    result = CliRunner().invoke(cli, ["report", str(inputs[0]), "-o", "x.html", "--prices", "p"])
    assert result.exit_code == 2 and "--prices applies to the views" in result.output


def test_buckets_match_the_gates_discordant_counts(inputs):
    """Regressed and fixed are the gate's b and c; unchanged are the baseline's right answers
    the candidate kept."""
    base, cand = read_run(inputs[0]), read_run(inputs[1])
    [unit] = compare(base, cand, Policy()).units
    buckets = sort_examples(base, cand)
    assert buckets.count(Bucket.REGRESSED) == unit.b == 40
    assert buckets.count(Bucket.FIXED) == unit.c
    assert buckets.count(Bucket.UNCHANGED) == round(unit.baseline * unit.n) - unit.b
    assert sum(buckets.count(b) for b in Bucket) == unit.n and buckets.unpaired == 0
    regressed = buckets.of(Bucket.REGRESSED)[0]
    record = next(r for r in cand.records[regressed.task] if r.doc_id == regressed.doc_id)
    assert regressed.candidate_answer == f"choice {record.pred}"


def test_dev_heatmap_is_each_runs_accuracy_by_task(inputs, tmp_path):
    page = _page(inputs, "dev", tmp_path)
    heatmap = figure_json(page, "heatmap-pass1")["data"][0]
    loaded = load_inputs(inputs)
    for column, run_ in enumerate(loaded.accuracy):
        accuracy = {t.task: t.accuracy for t in run_.tasks}
        got = {task: row[column] for task, row in zip(heatmap["y"], heatmap["z"], strict=True)}
        assert got == pytest.approx(accuracy)
    assert "Examples: candidate (candidate.gguf) · 81066988 against main" in page
    assert "40 regressed, 0 fixed" in page
    assert "pass^k" in page and "--repeats 3" in page  # left out, saying what would draw it


def test_views_on_multiple_choice_runs_say_accuracy_and_what_was_read(inputs, tmp_path):
    """Issue 52, item 5: dev calls a multiple-choice run's share right its accuracy (not
    pass@1); efficiency on multiple-choice runs alone says why generation's measures do not
    apply and what each run read, on a page without plotly.js (it was 1.96 MB)."""
    dev = _page(inputs, "dev", tmp_path)
    heatmap = figure_json(dev, "heatmap-pass1")
    assert heatmap["layout"]["title"]["text"] == "accuracy"
    assert "pass@1" not in dev.split('id="plotly-js"')[0]
    runs = inputs[:3]
    page = _page(runs, "efficiency", tmp_path)
    assert len(page.encode()) < 100_000 and 'id="plotly-js"' not in page
    assert "These runs hold no generation task" in page
    for run_ in load_inputs(runs).accuracy:
        records = [r for recs in run_.run.records.values() for r in recs]
        read = sum(r.tokens.get("prompt", 0) for r in records)
        right = sum(r.correct == 1 for r in records)
        assert f"<td>{read:,}</td><td>{read / len(records):,.0f}</td>" in page
        assert f"<td>{read / right:,.0f}</td>" in page


def test_efficiency_counts_tes_pass_k_and_overthinkers(tmp_path):
    """Two crafted generation runs, 3 samples per example: TES, pass^k and the over-thinkers
    as computed by hand."""
    outcomes = [[1, 1, 1], [1, 0, 1], [0, 0, 0], [1, 1, 0]]
    thinking = _gen_run(tmp_path, "deep", outcomes, [170, 30, 175, 0])
    plain = _gen_run(tmp_path, "fast", [[1, 1, 1]] * 4, [None] * 4)
    page = render_views(load_inputs([thinking, plain]), View.ALL, prices=Prices()).text
    # TES: success rate per 1,000 generated tokens per sample (60 each).
    rate = sum(map(sum, outcomes)) / 12
    assert f"<td>{rate / 60 * 1000:.2f}</td>" in page
    passk = figure_json(page, "heatmap-passk")["data"][0]
    assert passk["z"] == [[0.25, 1.0]]  # only the first example is right on all 3 samples
    # Over-thinkers: 170 of 180 tokens reasoning (17 per answer token) and 175 of 180 (35).
    listed = re.search(r"<h3>Over-thinkers</h3><p>(\d+) example", page)
    ratios = [170 / 10, 175 / 5]
    assert listed and int(listed.group(1)) == sum(r >= OVERTHINKING for r in ratios) == 2
    assert page.index("<td>35</td>") < page.index("<td>17</td>")  # worst first
    # Sampled examples move as the gate counts them: by their pass rate.
    [unit] = compare(read_run(plain), read_run(thinking), Policy()).units
    buckets = sort_examples(read_run(plain), read_run(thinking))
    assert buckets.count(Bucket.REGRESSED) == unit.b == 3 and buckets.count(Bucket.FIXED) == 0
    assert buckets.count(Bucket.UNCHANGED) == 1
    # A run without reasoning tokens alone: the section says what would fill it.
    alone = render_views(load_inputs([plain]), View.EFFICIENCY).text
    assert "--think-end-token" in alone and "<h3>Over-thinkers</h3><p>" not in alone


def _assert_drawn(dom: str, page: str) -> None:
    """Every chart drew (a heatmap its image, the others a mark per trace), the verdict card
    is there and the page's script reported no error."""
    charts = _chart_doms(dom)
    assert set(charts) == set(re.findall(r'id="fig-([\w-]+)"', page))
    assert re.search(rf'<body[^>]*data-drawn="{len(charts)}"', dom), "not every chart drawn"
    assert re.search(r'<p id="plotly-error" hidden[^>]*></p>', dom), "the page reported an error"
    assert re.search(r'<div class="verdict-card [^"]*" id="verdict"', dom)
    for chart, (tag, inside) in charts.items():
        assert "js-plotly-plot" in tag, chart
        data = figure_json(page, chart)["data"]
        if data[0]["type"] == "heatmap":
            assert re.search(r'<g class="hm"[^>]*>\s*<image', inside), chart
            continue
        traces = re.split(r'<g class="trace[ "]', inside)[1:]
        assert traces and len(traces) == len(data), chart
        assert all(_MARK.search(trace) for trace in traces), f"{chart}: a trace without marks"


def test_chromium_draws_every_view(inputs, tmp_path):
    from chromium import chromium, draw

    page = tmp_path / "all.html"
    page.write_text(render_views(load_inputs(inputs), View.ALL).text)
    binary = chromium()
    for view in ("exec", "dev", "efficiency"):
        png = tmp_path / f"{view}.png"
        dom = draw(binary, page, png, height=1200, fragment=view)
        _assert_drawn(dom, page.read_text())
        assert re.search(rf'<body[^>]*data-view="{view}"', dom)
        # The view asked for is on screen, the others are moved off it.
        on = re.search(r'<div class="view( off)?" id="view-(\w+)"[^>]*aria-hidden="false"', dom)
        assert on and on.group(2) == view and not on.group(1)
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
