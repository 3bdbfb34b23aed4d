"""Bench Markdown against exact text, JSON Lines rows, and the HTML report's charts, from a
synthetic run (no model: the renderers are pure functions)."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import plotly.graph_objects as go
import pytest

from regress.bench.latency import RequestTiming, summarise
from regress.bench.render import render_json, render_jsonl, render_markdown
from regress.bench.resources import Resources, Sample
from regress.bench.run import BenchOptions, BenchRun, ModelBench
from regress.bench.summaries import bench_models
from regress.bench.summary import rate_stat
from regress.core.fingerprint import HardwarePath, RuntimeFingerprint
from regress.core.manifest import ModelInfo
from regress.core.store import read_run
from regress.gate.choice_calibration import reliability_diagram
from regress.report.charts import CHARTS
from regress.report.html import figure_json, render_page
from regress.report.sources import load_inputs

BASELINE = Path(__file__).resolve().parents[1] / "baselines" / "main"
SHA = json.loads((BASELINE / "manifest.json").read_text())["model"]["sha256"]


def _run() -> BenchRun:
    model = ModelInfo(
        ref="smollm2-135m",
        sha256=SHA,
        architecture="llama",
        quantization="Q4_1",
        n_params=134_515_008,
        size_bytes=98_362_432,
    )
    fingerprint = RuntimeFingerprint(
        "llama_cpp",
        "0.3.36",
        {"n_ctx": 2048, "threads": 2},
        hardware=HardwarePath(kernels="AVX2", threads=2),
        build={"system_info": "AVX2 = 1 | "},
    )
    requests = [
        RequestTiming(0, 7, 4, 50.0, 80.0, (10.0, 10.0, 10.0)),
        RequestTiming(1, 31, 4, 150.0, 190.0, (10.0, 10.0, 20.0)),
    ]
    resources = Resources(
        interval_s=0.01,
        mean_interval_s=0.0102,
        max_gap_s=0.013,
        start_rss_bytes=100 << 20,
        peak_rss_bytes=300 << 20,
        cpu_percent_mean=180.4,
        cpu_count=2,
        gpu=None,
        gpu_note="no GPU: NVML unavailable (Driver Not Loaded)",
        phases=(("load", 0.0), ("pp512", 0.2)),
        timeline=(Sample(0.0, 100 << 20, 0.0), Sample(0.01, 300 << 20, 190.0)),
    )
    result = ModelBench(
        model,
        fingerprint,
        0.25,
        (rate_stat(512, 0, [2 * 10**9, 2 * 10**9]), rate_stat(0, 128, [10**9, 2 * 10**9])),
        summarise(requests, 0.5),
        resources,
    )
    options = BenchOptions(models=("smollm2-135m",), prompts=("a", "b"), runs=1, output_len=4)
    return BenchRun("2026-12-01T18:00:00Z", "0.1.0", options, (result,))


MARKDOWN = """\
| model | size | params | backend | threads | test | t/s |
| --- | ---: | ---: | --- | ---: | ---: | ---: |
| llama Q4_1 | 93.81 MiB | 134.52 M | llama_cpp | 2 | pp512 | 256.00 ± 0.00 |
| llama Q4_1 | 93.81 MiB | 134.52 M | llama_cpp | 2 | tg128 | 96.00 ± 45.25 |

Requests: 2 prompts (builtin) x 1, 4 output tokens each (EOS ignored), one at a time. \
Milliseconds, vLLM's definitions.

| model | TTFT mean / p50 / p99 | TPOT mean / p50 / p99 | ITL mean / p99 | \
E2EL mean / p50 / p95 / p99 | output tok/s |
| --- | ---: | ---: | ---: | ---: | ---: |
| smollm2-135m | 100.0 / 100.0 / 149.0 | 11.7 / 11.7 / 13.3 | 11.7 / 19.5 | \
135.0 / 135.0 / 184.5 / 188.9 | 16.00 |

| model | load s | RSS at start | peak RSS | CPU % (of N cores) | GPU | sampler |
| --- | ---: | ---: | ---: | ---: | --- | --- |
| smollm2-135m | 0.25 | 100.00 MiB | 300.00 MiB | 180 (2) | \
no GPU: NVML unavailable (Driver Not Loaded) | every 10.2 ms (max gap 13.0) |

System info: `AVX2 = 1 |`
"""


def test_markdown_is_llama_bench_table_then_vllm_latencies_then_resources():
    assert render_markdown(_run()) == MARKDOWN.replace("\\\n", "")


def test_jsonl_has_one_row_per_measurement_with_sha_and_fingerprint():
    rows = [json.loads(line) for line in render_jsonl(_run()).splitlines()]
    assert [r["measurement"] for r in rows] == [
        "load",
        "pp512",
        "tg128",
        "ttft",
        "tpot",
        "itl",
        "e2el",
        "output_throughput",
        "peak_rss",
        "cpu",
        "gpu",
    ]
    assert all(r["model_sha256"] == SHA and r["fingerprint"]["version"] == "0.3.36" for r in rows)
    assert rows[2]["samples"] == [128.0, 64.0]
    assert rows[-1]["value"] is None and rows[-1]["note"].startswith("no GPU")


class _Checker(HTMLParser):
    """Every opened element is closed (void elements aside) and no script is external."""

    VOID = {"meta", "br", "img", "input", "link", "hr"}

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.external: list[str] = []

    def handle_starttag(self, tag, attrs):
        if dict(attrs).get("src") or (tag == "link" and dict(attrs).get("href")):
            self.external.append(tag)
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        assert self.stack and self.stack.pop() == tag, tag


def test_html_report_holds_every_chart_offline(tmp_path):
    bench = tmp_path / "bench.json"
    bench.write_text(render_json(_run()))
    rendered = render_page(load_inputs([BASELINE, bench]))
    page = rendered.text
    checker = _Checker()
    checker.feed(page)
    checker.close()
    assert checker.stack == [] and checker.external == []
    assert "Plotly.newPlot" in page and page.count('id="plotly-js"') == 1
    # no gate report; one model and one run of it: no flips against another model, no history
    assert rendered.left_out == ("gate_units", "flips_by_margin", "history")
    assert rendered.drawn == tuple(c for c in CHARTS if c not in rendered.left_out)
    for chart in rendered.drawn:
        figure = go.Figure(figure_json(page, chart))  # validates against plotly's schema
        assert figure.layout.title.text and figure.data, chart
    # the bench and the baseline are the same model file: the tradeoff charts are drawn
    scatter = figure_json(page, "accuracy_vs_memory")["data"][0]
    assert scatter["x"] == [300.0] and 0 < scatter["y"][0] < 1
    # issue 15's reliability diagram: the baseline's equal-width bins, then the diagonal
    records = [r for recs in read_run(BASELINE).records.values() for r in recs]
    bins = [b for b in reliability_diagram(records) if b.n]
    curve, diagonal = figure_json(page, "reliability")["data"]
    assert curve["y"] == pytest.approx([b.accuracy for b in bins])
    assert sum(c[2] for c in curve["customdata"]) == len(records)
    assert diagonal["x"] == [0, 1]


def test_bench_json_reads_back_for_the_report():
    (model,) = bench_models(json.loads(render_json(_run())))
    assert model.sha256 == SHA and model.rates == {"pp512": 256.0, "tg128": 96.0}
    assert model.ttft_ms == (50.0, 150.0) and model.e2el_p50 == 135.0


def test_cli_bad_inputs_are_one_line_exit_2(tmp_path):
    from click.testing import CliRunner

    from regress.cli import cli

    other = tmp_path / "other.json"
    other.write_text('{"hello": 1}')
    runner = CliRunner()
    cases = [
        (["report", str(other), "-o", str(tmp_path / "r.html")], "neither a run folder"),
        (["bench", "-m", "m", "-p", "0", "-n", "0", "--output-len", "0"], "nothing to measure"),
        (["bench", "-m", "smollm2-135m", "-p", "x"], "--n-prompt: expected comma-separated"),
        (["bench", "-m", "m", "--backend", "openai", "--slo", "ttft=fast"], "--slo: expected"),
        (["compare", "-m", "a,b", "--max-memory", "lots"], "--max-memory: expected a size"),
        # One meaning per option name: --baseline is a stored baseline in every other command.
        (["bench", "--baseline", "b.gguf", "-m", "m"], "bench --baseline is now --against"),
        (["sweep", "-m", "m", "--bench-runs", "3", "-o", "x"], "sweep --bench-runs is now --runs"),
        # lm-eval's --model names a backend; here it is the model, and the error says so.
        (["eval", "-m", "hf", "-t", "arc_easy"], "did you mean --backend hf"),
        (["bench", "-m", "vllm"], "did you mean --backend openai"),
    ]
    for args, message in cases:
        result = runner.invoke(cli, args)
        assert result.exit_code == 2, (args, result.output)
        assert message in result.output


def test_speed_gate_markdown():
    from regress.bench.render import render_speed_gate
    from regress.bench.shift import Shift
    from regress.bench.speed_gate import Decision, SpeedGateResult, SpeedVerdict

    run = _run().results[0]
    decision = Decision(
        SpeedVerdict.SLOWER, "B/A 1.474 (lower bound 1.386, 32 pairs): why",
        Shift(1.474, 1.386, 1.546, 32, 0.05), Shift(1.01, 0.973, 1.048, 16, 0.05), 0.048,
    )  # fmt: skip
    order = tuple((side, 0, 1.0) for side in "ABAB" * 16)
    result = SpeedGateResult(
        decision, run.model, run.model, run.fingerprint, run.fingerprint, order, 0.10
    )
    assert render_speed_gate(result) == (
        "## regress speed: ❌ SLOWER\n\n"
        "| | model | sha256 | threads |\n| --- | --- | --- | ---: |\n"
        f"| A (baseline) | smollm2-135m | {SHA[:12]} | 2 |\n"
        f"| B (candidate) | smollm2-135m | {SHA[:12]} | 2 |\n\n"
        "| end-to-end latency | ratio (Hodges-Lehmann) | one-sided 95% bounds | pairs |\n"
        "| --- | ---: | ---: | ---: |\n"
        "| B / A | 1.474 | 1.386 – 1.546 | 32 |\n"
        "| A / A (noise floor 4.8%) | 1.010 | 0.973 – 1.048 | 16 |\n\n"
        "B/A 1.474 (lower bound 1.386, 32 pairs): why. Timed interleaved A B A B, 16 "
        "quadruples (prompts x rounds); max_slowdown 10%.\n"
    )


def test_server_markdown_has_no_empty_llama_bench_table():
    import dataclasses

    from regress.bench.serving import ServingLevel

    run = _run()
    result = run.results[0]
    level = ServingLevel(2, float("inf"), 0, (), result.latency, 1.5)
    served = dataclasses.replace(result, micro=(), latency=None, load_s=None, serving=(level,))
    options = dataclasses.replace(run.options, backend="openai", num_requests=2)
    text = render_markdown(dataclasses.replace(run, options=options, results=(served,)))
    assert text.startswith(
        "Server: 2 requests per level over 2 prompts, 4 output tokens each, all sent at once. "
        "Milliseconds, vLLM's definitions.\n\n| model | concurrency |"
    )
    assert (
        "| smollm2-135m | 2 | 2 | 0 | 4.00 | 16.00 | 1.50 | 100.0 / 149.0 | 11.7 / 13.3 | "
        "19.5 | 135.0 / 188.9 |" in text
    )
    assert "| smollm2-135m | - | 100.00 MiB |" in text
