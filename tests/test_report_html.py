"""Issue 27, item 4: the HTML page shows only what it has. Charts without data are left out
with a line naming the input that would add them, a verdict card heads the page, every
candidate has its own legend label, the gate chart is in points, history is drawn as lines,
and plotly.js is embedded once, compressed. Headless Chromium draws the page and its DOM is
checked: every chart div holds drawn traces.

No model is loaded: the inputs are the stored baseline (baselines/main), candidates made from
its records with answers flipped, the gate's own pure comparison of them, and a bench file
built from the bench types.
"""

from __future__ import annotations

import base64
import dataclasses
import gzip
import hashlib
import html
import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from plotly.offline import get_plotlyjs
from test_sweep import _result

from regress.bench.latency import RequestTiming, summarise
from regress.bench.render import render_json as render_bench_json
from regress.bench.resources import Resources, Sample
from regress.bench.run import BenchOptions, BenchRun, ModelBench
from regress.bench.summaries import bench_models
from regress.bench.summary import rate_stat
from regress.cli import cli
from regress.core.errors import BadInput
from regress.core.fingerprint import HardwarePath, RuntimeFingerprint
from regress.core.manifest import Run
from regress.core.store import Store, read_run, write_run
from regress.gate.compare import compare
from regress.gate.policy import Policy
from regress.report.charts import CHARTS, TIMELINE_POINTS, distinct, log_ticks, resources_over_time
from regress.report.history_chart import PERCENT
from regress.report.html import figure_json, render_page, unit_words
from regress.report.json_report import render_json
from regress.report.markdown import render_markdown
from regress.report.sources import Inputs, load_inputs
from regress.report.sweep_charts import SWEEP_CHARTS
from regress.sweep.frontier import Frontier
from regress.sweep.pareto import Direction, Objective, Standing
from regress.sweep.results import SweepResults

REPO = Path(__file__).resolve().parents[1]
BASELINE = REPO / "baselines" / "main"
FLIPPED = {"builtin_arithmetic": 25, "builtin_comparison": 15}
"""Right answers the first demo candidate gets wrong, per task: 40 of the suite's 500, a drop
of 8 points, a clear regression of its one unit."""
BENCH_FIGURES = (
    "latency_distributions",
    "accuracy_vs_latency",
    "accuracy_vs_memory",
    "resources_over_time",
    "radar",
)


def flipped(base: Run, name: str, model: str, created: str, flips: dict[str, int]) -> Run:
    """`base` under another model file (its sha256 made from `model` and `created`), with the
    first `flips[task]` right answers of each task turned to the likeliest wrong choice."""
    records = {}
    for task, recs in base.records.items():
        left, out = flips.get(task, 0), []
        for r in recs:
            loglik = list(r.scores.get("loglik", ()))
            if left and r.correct == 1 and len(loglik) > 1:
                wrong = max(
                    (i for i in range(len(loglik)) if i != r.target), key=loglik.__getitem__
                )
                loglik[wrong] = max(loglik) + 0.5  # the candidate now prefers it
                metrics = {k: 0.0 for k in r.metrics}
                r = dataclasses.replace(
                    r, pred=wrong, correct=0, metrics=metrics, scores={**r.scores, "loglik": loglik}
                )
                left -= 1
            out.append(r)
        records[task] = out
    sha = hashlib.sha256(f"{model} {created}".encode()).hexdigest()
    info = dataclasses.replace(base.manifest.model, ref=model, sha256=sha)
    manifest = dataclasses.replace(base.manifest, name=name, model=info, created=created)
    return Run(manifest, records)


def bench_file(runs: list[Run], created: str) -> str:
    """A `regress bench` JSON file measuring these runs' model files, from the bench types;
    the later a run in the list, the slower and larger its model."""
    results = []
    for i, run in enumerate(runs, start=1):
        timings = [
            RequestTiming(k, 16 + k, 8, 40.0 * i + 5 * k, 90.0 * i + 7 * k, (6.0 * i,) * 7)
            for k in range(6)
        ]
        timeline = tuple(Sample(0.05 * t, (80 + 20 * i + t) << 20, 150.0) for t in range(40))
        resources = Resources(
            interval_s=0.01,
            mean_interval_s=0.0101,
            max_gap_s=0.012,
            start_rss_bytes=80 << 20,
            peak_rss_bytes=(120 + 20 * i) << 20,
            cpu_percent_mean=150.0,
            cpu_count=2,
            gpu=None,
            gpu_note="no GPU",
            phases=(("load", 0.0),),
            timeline=timeline,
        )
        fingerprint = RuntimeFingerprint(
            "llama_cpp", "0.3.36", {"threads": 2}, hardware=HardwarePath(kernels="AVX2", threads=2)
        )
        micro = (rate_stat(512, 0, [10**9 // i] * 3), rate_stat(0, 128, [2 * 10**9 // i] * 3))
        results.append(
            ModelBench(
                run.manifest.model, fingerprint, 0.2, micro, summarise(timings, 1.0), resources
            )
        )
    options = BenchOptions(models=tuple(r.manifest.model.ref for r in runs), runs=3)
    return render_bench_json(BenchRun(created, "0.1.0", options, tuple(results)))


def demo_inputs(folder: Path) -> list[Path]:
    """Every kind of input the page reads, written to `folder`: the stored baseline, two
    candidates with the same run name and model file name (different files), the gate's
    JSON report of the first against the baseline, and a bench file of both models."""
    base = read_run(BASELINE)
    first = flipped(base, "candidate", "candidate.gguf", "2026-12-02T09:00:00+00:00", FLIPPED)
    second = flipped(base, "candidate", "candidate.gguf", "2026-12-02T11:00:00+00:00", {})
    paths = [BASELINE]
    for i, run in enumerate((first, second), start=1):
        write_run(run, folder / f"candidate{i}")
        paths.append(folder / f"candidate{i}")
    gate = folder / "gate.json"
    gate.write_text(render_json(compare(base, first, Policy())))
    bench = folder / "bench.json"
    bench.write_text(bench_file([base, first], "2026-12-02T12:00:00+00:00"))
    return [*paths, gate, bench]


def demo_sweep() -> tuple[SweepResults, Frontier]:
    """A sweep of two configurations from test_sweep's result, the smaller one less accurate,
    with a hand-made Pareto analysis (both on the front)."""
    big = _result("Q8_0")
    small = dataclasses.replace(
        _result("Q2_K"),
        size_bytes=2**19,
        scores=(dataclasses.replace(big.scores[0], accuracy=0.4, low=0.1, high=0.7),),
    )
    sweep = SweepResults("smollm2-135m", "s" * 64, (big, small), (), ())
    frontier = Frontier(
        objectives=(Objective("accuracy", Direction.MAX), Objective("size", Direction.MIN)),
        names=("Q8_0", "Q2_K"),
        points=np.array([[0.5, 1.0], [0.4, 0.5]]),
        standings=(Standing(True, (), ()), Standing(True, (), ())),
        reference=(0.3, 1.1),
        hypervolume=0.01,
        alpha=0.05,
        warnings=(),
    )
    return sweep, frontier


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """baselines/main, candidate1, candidate2, gate.json, bench.json."""
    return demo_inputs(tmp_path_factory.mktemp("report-inputs"))


def _drawn(page: str) -> set[str]:
    return set(re.findall(r'<script type="application/json" id="fig-([\w-]+)">', page))


# --- labels ----------------------------------------------------------------------------------


def test_distinct_adds_parts_only_to_the_labels_that_clash() -> None:
    assert distinct([("a", "1"), ("b", "2")]) == ["a", "b"]
    assert distinct([("a", "1", "x"), ("a", "2", "y"), ("b", "3")]) == ["a · 1", "a · 2", "b"]
    # the second parts clash too: the third ones tell them apart
    assert distinct([("a", "1", "x"), ("a", "1", "y")]) == ["a · 1 · x", "a · 1 · y"]
    # nothing tells them apart: numbered in order; an empty part is skipped
    assert distinct([("a", ""), ("a", "")]) == ["a #1", "a #2"]


def test_two_candidates_of_one_name_get_their_own_labels(inputs: list[Path]) -> None:
    loaded = load_inputs(inputs)
    page = render_page(loaded).text
    shas = [r.sha256[:8] for r in loaded.accuracy]
    names = [t["name"] for t in figure_json(page, "accuracy_by_task")["data"]]
    assert names == [
        "main (smollm2-135m)",
        f"candidate (candidate.gguf) · {shas[1]}",
        f"candidate (candidate.gguf) · {shas[2]}",
    ]
    flips = figure_json(page, "flips_by_margin")["data"]
    assert [t["name"] for t in flips] == [
        f"{names[i]}: {outcome}" for i in (1, 2) for outcome in ("regressed", "improved")
    ]
    # examples per bin times the share flipped: the first candidate's 40 flipped answers
    flipped_n = [
        round(sum(y * n for y, n in zip(t["y"], t["customdata"], strict=True))) for t in flips
    ]
    assert flipped_n == [sum(FLIPPED.values()), 0, 0, 0]


# --- what the page leaves out ------------------------------------------------------------------


def test_without_a_bench_file_the_latency_charts_are_left_out_in_one_line(
    inputs: list[Path],
) -> None:
    page = render_page(load_inputs(inputs[:3]))
    assert set(page.left_out) == {"gate_units", *BENCH_FIGURES}
    assert _drawn(page.text) == set(page.drawn) == set(CHARTS) - set(page.left_out)
    line = (
        "<li>Latency distributions, Accuracy vs latency, Accuracy vs memory, Resource use over "
        "time, Models compared: add a bench file (<code>regress bench -o bench.json</code>)</li>"
    )
    assert page.text.count(line) == 1
    assert "<li>Gate units: add a gate JSON report" in page.text
    for chart in page.drawn:
        traces = figure_json(page.text, chart)["data"]
        assert traces and all(len(t.get("x") or t.get("r") or []) for t in traces), chart
    # no gate report: the card says what the page holds and how to get a verdict
    card = re.search(r'<div class="verdict-card none" id="verdict">(.*?)</div>', page.text)
    assert card and "This page holds 3 accuracy runs." in card.group(1)


def test_every_input_draws_every_chart(inputs: list[Path]) -> None:
    page = render_page(load_inputs(inputs))
    assert page.left_out == () and page.drawn == CHARTS
    assert "Charts not drawn" not in page.text


def test_a_bench_of_another_model_says_what_joins_them(inputs: list[Path], tmp_path) -> None:
    other = flipped(read_run(BASELINE), "x", "x.gguf", "2026-12-03T00:00:00+00:00", {})
    bench = tmp_path / "bench.json"
    bench.write_text(bench_file([other], "2026-12-03T01:00:00+00:00"))
    page = render_page(load_inputs([BASELINE, bench]))
    assert {"accuracy_vs_latency", "accuracy_vs_memory"} <= set(page.left_out)
    assert "same model file (same sha256)" in page.text
    assert {"latency_distributions", "radar", "resources_over_time"} <= set(page.drawn)


# --- the gate chart and the verdict card ---------------------------------------------------------


def test_gate_chart_is_in_points_with_each_units_threshold(inputs: list[Path]) -> None:
    gate = json.loads(inputs[3].read_text())
    measured = [u for u in gate["units"] if u["delta"] is not None]
    figure = figure_json(render_page(load_inputs([inputs[3]])).text, "gate_units")
    changes, thresholds = figure["data"]
    assert changes["x"] == pytest.approx([u["delta"] * 100 for u in measured])
    assert changes["error_x"]["arrayminus"] == pytest.approx(
        [(u["delta"] - u["ci"][0]) * 100 for u in measured]
    )
    assert thresholds["x"] == pytest.approx([-u["threshold"] * 100 for u in measured])
    assert changes["y"] == thresholds["y"] == [u["name"] for u in measured]
    assert "points" in figure["layout"]["xaxis"]["title"]["text"]
    low, high = figure["layout"]["xaxis"]["range"]  # no change (0) and every interval in view
    assert low < min(u["ci"][0] * 100 for u in measured) and high > 0
    (unit,) = measured  # the built-in suite is one unit
    assert changes["x"] == pytest.approx([-100 * sum(FLIPPED.values()) / unit["n"]])


def test_each_gate_report_gets_its_own_row_within_a_unit(inputs: list[Path], tmp_path) -> None:
    """Two candidates' intervals of one unit side by side (plotly's grouped scatter: one
    offset group per report, its change and threshold together), not drawn over each other."""
    second = tmp_path / "gate2.json"
    base, cand2 = read_run(BASELINE), read_run(inputs[2])
    second.write_text(render_json(compare(base, cand2, Policy())))
    figure = figure_json(render_page(load_inputs([inputs[3], second])).text, "gate_units")
    assert figure["layout"]["scattermode"] == "group"
    groups = [(t["offsetgroup"], t["orientation"], tuple(t["y"])) for t in figure["data"]]
    assert groups == [("0", "h", ("builtin",))] * 2 + [("1", "h", ("builtin",))] * 2


def test_perplexity_units_get_their_own_panel_in_percent(inputs: list[Path], tmp_path) -> None:
    gate = json.loads(inputs[3].read_text())
    ppl = {**gate["units"][0], "name": "wikitext", "kind": "perplexity", "delta": 0.031,
           "ci": [0.02, 0.04], "threshold": 0.05}  # fmt: skip
    gate["units"].append(ppl)
    path = tmp_path / "gate.json"
    path.write_text(json.dumps(gate))
    figure = figure_json(render_page(load_inputs([path])).text, "gate_units")
    ppl_traces = [t for t in figure["data"] if t.get("xaxis") == "x2"]
    assert [t["x"] for t in ppl_traces] == [pytest.approx([3.1]), pytest.approx([5.0])]
    assert "%" in figure["layout"]["xaxis2"]["title"]["text"]


def test_verdict_card_heads_the_page_with_the_deciding_unit(inputs: list[Path]) -> None:
    gate = json.loads(inputs[3].read_text())
    assert gate["verdict"] == "REGRESSION"
    text = render_page(load_inputs(inputs)).text
    card = re.search(r'<div class="verdict-card REGRESSION" id="verdict"[^>]*>(.*?)</div>', text)
    assert card and text.index(card.group(0)) < text.index('id="chart-')
    (unit,) = gate["units"]
    assert unit["verdict"] == "REGRESSION" and unit["n"] == 500
    body = card.group(1)
    # In the Markdown's words: the candidate by its label as the Markdown's second line names
    # it (a check labels it by its model file), not "Candidate <b>run</b> (file sha)"; the
    # unit's change and bound in words (40 of 500 broke), not its reason's statistics.
    assert '<p class="verdict">REGRESSION</p>' in body
    label = gate["candidate"]["label"]
    assert f"<p><b>{label}</b> vs baseline <b>main</b>, suite builtin:" in body
    markdown = render_markdown(compare(read_run(BASELINE), read_run(inputs[1]), Policy()))
    assert f"**{label}** vs baseline **main**" in markdown
    assert "1 regressed of 1 gated unit." in body
    at_least = unit["bounds"]["at_least"] * 100
    words = (
        f"<li>builtin dropped 8.0 pts (40 broke, 0 fixed); the drop is at least "
        f"{at_least:.1f} pts, beyond the 2.0-pt limit</li>"
    )
    assert words in body
    assert "adj. p" not in body and "H0" not in body and html.escape(unit["reason"]) not in body


@pytest.mark.parametrize(
    ("spec", "verdict"),
    [
        ({"arc": (400, 60, 10)}, "REGRESSION"),
        ({"arc": (300, 12, 6)}, "INCONCLUSIVE"),
        ({"arc": (40, 3, 1)}, "INCONCLUSIVE"),  # under min_examples
        ({"arc": (2000, 10, 12)}, "PASS"),
    ],
)
def test_a_cards_unit_words_are_the_markdowns(spec, verdict) -> None:
    """What the card says of a unit, from the JSON report, is what the Markdown report says
    of it from the comparison (the Markdown may go on: what would decide it)."""
    from test_compare import runs

    comparison = compare(*runs(spec), Policy())
    (unit,) = json.loads(render_json(comparison))["units"]
    assert unit["verdict"] == verdict
    words = unit_words(unit, comparison.policy.min_examples)
    assert "arc" in words and words in render_markdown(comparison)


def test_one_card_per_gate_report_naming_golden_sets_that_failed(
    inputs: list[Path], tmp_path
) -> None:
    gate = json.loads(inputs[3].read_text())
    passed = {**gate, "verdict": "PASS", "units": [{**u, "verdict": "PASS"} for u in gate["units"]]}
    golden = {"task": "golden_math", "failed": True, "reason": "2 must-pass items fail"}
    failed = {**gate, "golden": [golden, {**golden, "task": "other", "failed": False}]}
    paths = []
    for name, data in (("passed", passed), ("failed", failed)):
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps(data))
    text = render_page(load_inputs(paths)).text
    cards = re.findall(r'<div class="verdict-card (\w+)" id="([\w-]+)"[^>]*>(.*?)</div>', text)
    assert [(css, card_id) for css, card_id, _ in cards] == [
        ("PASS", "verdict"),
        ("REGRESSION", "verdict-2"),
    ]
    assert "<ul>" not in cards[0][2] and "1 passed of 1 gated unit." in cards[0][2]
    assert cards[1][2].count("<li>") == 2  # the golden set that failed, then the unit
    assert (
        "<li>golden set golden_math: 2 must-pass items fail</li><li>builtin dropped 8.0 pts" in text
    )


# --- history, margins, size ---------------------------------------------------------------------


def test_history_joins_only_runs_of_one_model(inputs: list[Path], tmp_path) -> None:
    """Runs of one suite over time: a line per model file, never one line through three
    different models; a model run twice is joined."""
    loaded = load_inputs(inputs[:3])
    lines = figure_json(render_page(loaded).text, "history")["data"]
    assert [len(t["x"]) for t in lines] == [1, 1, 1]  # three models, one run each
    assert sorted(y for t in lines for y in t["y"]) == pytest.approx(
        sorted(r.accuracy for r in loaded.accuracy)
    )
    again = read_run(inputs[1])  # candidate1's model file run again two days later
    again = dataclasses.replace(
        again, manifest=dataclasses.replace(again.manifest, created="2026-12-04T00:00:00+00:00")
    )
    write_run(again, tmp_path / "again")
    lines = figure_json(render_page(load_inputs([*inputs[:3], tmp_path / "again"])).text, "history")
    joined = [t for t in lines["data"] if len(t["x"]) > 1]
    assert len(lines["data"]) == 3 and len(joined) == 1 and joined[0]["x"] == sorted(joined[0]["x"])
    single = render_page(load_inputs([BASELINE]))
    assert "history" in single.left_out  # one run is a dot, not a history


def _history_file(inputs: list[Path], folder: Path) -> Path:
    """A history file of two gate runs of candidate1 against baselines/main (`check
    --candidate-run --record-history`, no model)."""
    Store(folder / "store").save(read_run(BASELINE))
    history = folder / "history.jsonl"
    args = ["check", "-b", "main", "--store", str(folder / "store"), "--candidate-run"]
    args += [str(inputs[1]), "--record-history", str(history)]
    for _ in range(2):
        assert CliRunner().invoke(cli, args).exit_code == 1  # candidate1 regressed
    return history


def test_a_history_file_alone_draws_the_gate_history(inputs: list[Path], tmp_path) -> None:
    """`regress report hist.jsonl` draws the history (not '0 charts; 10 left out') and the
    card says what the page holds."""
    history = _history_file(inputs, tmp_path)
    out = tmp_path / "page.html"
    result = CliRunner().invoke(cli, ["report", str(history), "-o", str(out)])
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert f"(1 chart; {len(CHARTS) - 1} left out for want of data)" in said  # not "1 charts"
    page = out.read_text()
    assert _drawn(page) == {"history"}
    markers = [t for t in figure_json(page, "history")["data"] if t["mode"] == "lines+markers"]
    assert [len(t["x"]) for t in markers] == [2]  # the two gate runs, one unit
    assert "This page holds 2 recorded gate runs." in page


def test_share_ticks_never_repeat_and_log_axes_label_decades_or_1_2_5() -> None:
    """A share's ticks carry the decimals they need (".0%" labelled 57.5% and 58% both 58%);
    a log axis labels 1, 2, 5 per decade within two decades, the decades alone beyond."""
    assert PERCENT == ".2~%"
    assert log_ticks([40.0, 180.0]) == pytest.approx([10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3])
    assert log_ticks([3.0, 90_000.0]) == pytest.approx([1, 10, 100, 1e3, 1e4, 1e5])
    assert log_ticks([]) == []


def test_every_axis_makes_room_for_its_labels(inputs: list[Path]) -> None:
    text = render_page(load_inputs(inputs)).text
    for chart in CHARTS:
        layout = figure_json(text, chart)["layout"]
        axes = [k for k in layout if re.fullmatch(r"[xy]axis\d*", k)]
        assert all(layout[k]["automargin"] is True for k in axes), chart


def test_plotly_is_embedded_once_compressed(inputs: list[Path]) -> None:
    text = render_page(load_inputs(inputs)).text
    assert text.count('id="plotly-js"') == 1 and text.count("DecompressionStream") == 2
    packed = re.search(r'<script type="application/gzip" id="plotly-js"[^>]*>([^<]+)<', text)
    assert packed and gzip.decompress(base64.b64decode(packed.group(1))).decode() == get_plotlyjs()
    assert len(text.encode()) < 0.5 * len(get_plotlyjs().encode())


def test_a_long_resource_timeline_is_thinned_keeping_its_peak() -> None:
    """A minute of 10 ms samples is 6,000 per line: drawn as at most TIMELINE_POINTS, each a
    window's peak RSS, so the page stays small and the peak is still drawn."""
    samples = tuple((k / 100, (100 + (k == 4321) * 50) << 20, 100.0) for k in range(6000))
    (model,) = bench_models(json.loads(bench_file([read_run(BASELINE)], "2026-12-02T12:00:00Z")))
    long = dataclasses.replace(model, timeline=samples)
    rss, cpu = resources_over_time([long]).data
    assert len(rss.x) == len(cpu.x) == TIMELINE_POINTS
    assert max(rss.y) == 150.0 and min(rss.y) == 100.0  # MiB: the one-sample peak survives
    assert rss.x[1] - rss.x[0] == pytest.approx(0.06)  # every sixth sample


def test_a_sweep_page_holds_its_table_and_three_charts() -> None:
    page = render_page(Inputs((), (), (), (demo_sweep(),)))
    assert page.drawn == tuple(f"sweep0-{chart}" for chart in SWEEP_CHARTS)
    assert set(page.left_out) == set(CHARTS)  # nothing but the sweep was given
    assert "This page holds 1 quantization sweep." in page.text
    assert page.text.count("<section") == page.text.count("</section>")
    for chart in page.drawn:
        points = figure_json(page.text, chart)["data"][1]
        assert points["text"] == ["Q8_0", "Q2_K"] and points["cliponaxis"] is False


# --- input checks and the command ------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "what"),
    [
        (lambda d: d.update(golden=[{"task": "g", "failed": "yes"}]), "golden entry's failed"),
        (lambda d: d.update(failures={"a": 1}), "failures is not a list"),
        (lambda d: d["units"][0].update(gated="no"), "gated is not true or false"),
        (lambda d: d.update(suite=3), "suite is not text"),
    ],
)
def test_fields_the_card_reads_are_checked(inputs: list[Path], tmp_path, change, what) -> None:
    data = json.loads(inputs[3].read_text())
    change(data)
    path = tmp_path / "gate.json"
    path.write_text(json.dumps(data))
    with pytest.raises(BadInput, match=f"gate.json: malformed gate JSON report .*{what}"):
        load_inputs([path])


def test_cli_says_what_it_drew_and_left_out(inputs: list[Path], tmp_path) -> None:
    out = tmp_path / "page.html"
    result = CliRunner().invoke(cli, ["report", *map(str, inputs[:3]), "-o", str(out)])
    assert result.exit_code == 0, result.output
    # The console wraps a long temporary path wherever it falls: compare the words.
    said = " ".join(result.output.split())
    assert f"({len(CHARTS) - 6} charts; 6 left out for want of data)" in said
    assert _drawn(out.read_text()) == set(CHARTS) - {"gate_units", *BENCH_FIGURES}


# --- in a browser ------------------------------------------------------------------------------


def _chart_doms(dom: str) -> dict[str, tuple[str, str]]:
    """Each chart div of a drawn page: its opening tag and the DOM plotly put inside it (up to
    the chart's JSON block, which follows its div)."""
    charts = {}
    for match in re.finditer(r'<div[^>]*id="chart-([\w-]+)"[^>]*>', dom):
        end = dom.index(f'<script type="application/json" id="fig-{match.group(1)}"', match.end())
        charts[match.group(1)] = (match.group(0), dom[match.end() : end])
    return charts


_MARK = re.compile(
    r'<path class="(point|js-line|box|js-fill)[^"]*"[^>]*\sd="M[^"]+"'  # markers, lines, boxes
    r'|<g class="point"><path[^>]*\sd="M[^"]+"'  # bars
)


def _assert_drawn(dom: str, page: str) -> None:
    """Every chart of `page` was drawn with each of its traces holding a mark, the verdict card
    is there, and the page's script reported no error."""
    body = re.search(r"<body[^>]*>", dom)
    assert body and f'data-drawn="{len(_drawn(page))}"' in body.group(0), "not every chart drawn"
    assert re.search(r'<p id="plotly-error" hidden[^>]*></p>', dom), "the page reported an error"
    assert re.search(r'<div class="verdict-card [^"]*" id="verdict"', dom)
    charts = _chart_doms(dom)
    assert set(charts) == _drawn(page)
    for chart, (tag, inside) in charts.items():
        assert "js-plotly-plot" in tag, chart
        traces = re.split(r'<g class="trace[ "]', inside)[1:]
        assert traces and len(traces) == len(figure_json(page, chart)["data"]), chart
        assert all(_MARK.search(trace) for trace in traces), f"{chart}: a trace without marks"


def test_the_chromium_helper_skips_only_without_apt_and_never_under_ci(monkeypatch) -> None:
    import chromium as helper

    monkeypatch.setattr(helper.shutil, "which", lambda name: None)  # no browser, no apt-get
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="apt-get is unavailable"):
        helper.chromium()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="apt-get is unavailable"):
        helper.chromium()


def test_chromium_draws_every_chart_and_the_card(inputs: list[Path], tmp_path) -> None:
    from chromium import chromium, draw

    binary = chromium()
    everything = load_inputs(inputs)
    # the second page: the runs and a sweep, no bench file or gate report
    runs_and_sweep = dataclasses.replace(load_inputs(inputs[:3]), sweeps=(demo_sweep(),))
    pages = {}
    for given, name in ((everything, "all"), (runs_and_sweep, "no-bench")):
        pages[name] = tmp_path / f"{name}.html"
        pages[name].write_text(render_page(given).text)
    png = tmp_path / "all.png"
    # Two browsers at once: each spends most of its time in one thread.
    with ThreadPoolExecutor(2) as pool:
        doms = {
            name: pool.submit(draw, binary, page, png if name == "all" else None, height=1200)
            for name, page in pages.items()
        }
    for name, dom in doms.items():
        _assert_drawn(dom.result(), pages[name].read_text())
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
