"""Issue 26, items 9 and 10: nothing a user file holds can inject into the HTML report or crash a
command. Identities are checked (sha256 fields are 64 lowercase hex characters), every string the
report writes is escaped, and deep JSON, huge ranges, malformed gate reports and out-of-range
backend settings end in one line and exit 2. No test loads a model.
"""

from __future__ import annotations

import dataclasses
import json
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_compare import runs
from test_store import make_records

from regress.backends import load_backend, parse_model_args
from regress.bench.summaries import BenchModel, accuracy_run
from regress.cli import cli
from regress.core import safe_json
from regress.core.errors import BadInput, ExitCode
from regress.core.manifest import ModelInfo, Run
from regress.core.store import read_run, write_run
from regress.gate.compare import compare
from regress.gate.policy import Policy
from regress.report.charts import CHARTS
from regress.report.html import figure_json, render_html
from regress.report.json_report import render_json
from regress.report.sources import Inputs, load_inputs
from regress.tasks.golden import read_golden
from regress.tasks.loaders import read_json, read_jsonl
from regress.tasks.templates import render

SHA = "a" * 64
EVIL = "<plaintext>"
DEEP = "[" * 100_000 + "]" * 100_000
"""Far past Python's recursion limit: json.loads raises RecursionError on it."""


def cli_run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def one_line_error(text: str) -> bool:
    return text.startswith("regress: error: ") and text.count("\n") == 1


def valid_run(name: str = "main") -> Run:
    """test_store's five arc_easy records under a manifest with a real-looking sha256."""
    (base, _), records = runs({"arc_easy": (5, 0, 0)}), make_records()
    manifest = dataclasses.replace(
        base.manifest,
        name=name,
        model=ModelInfo(ref="m.gguf", sha256=SHA),
        tasks={"arc_easy": dataclasses.replace(base.manifest.tasks["arc_easy"], n=5)},
    )
    return Run(manifest, {"arc_easy": records})


def stored(tmp_path: Path, name: str = "main") -> Path:
    store = tmp_path / "store"
    write_run(valid_run(name), store / name)
    return store


def edit_manifest(folder: Path, change) -> None:
    path = folder / "manifest.json"
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def gate_report() -> dict:
    base, cand = runs({"arc_easy": (300, 0, 0)})
    return json.loads(render_json(compare(base, cand, Policy())))


# --- 10: deep JSON ---------------------------------------------------------------------------


def test_depth_bound_keeps_ordinary_nesting_and_refuses_deeper() -> None:
    fine = "[" * safe_json.MAX_DEPTH + "]" * safe_json.MAX_DEPTH
    assert safe_json.loads(fine) is not None
    deeper = "[" + fine + "]"
    with pytest.raises(safe_json.JsonTooDeep, match="nested deeper than"):
        safe_json.loads(deeper)
    with pytest.raises(safe_json.JsonTooDeep):
        safe_json.loads(DEEP)  # would be a RecursionError inside json.loads
    assert isinstance(safe_json.JsonTooDeep("x", "", 0), json.JSONDecodeError)


def test_deep_manifest_exits_2_in_baseline_list_and_show(tmp_path: Path) -> None:
    store = stored(tmp_path)
    (store / "main" / "manifest.json").write_text('{"name": ' + DEEP + "}")
    for command in (("baseline", "list"), ("baseline", "show", "main")):
        code, text = cli_run(*command, "--store", str(store))
        assert code == ExitCode.BAD_INPUT and one_line_error(text), text
        assert "manifest.json" in text and "nested deeper than" in text


def test_deep_records_line_exits_2_naming_file_and_line(tmp_path: Path) -> None:
    store = stored(tmp_path)
    records = store / "main" / "records" / "arc_easy.jsonl"
    lines = records.read_text().splitlines(keepends=True)
    lines[2] = '{"target": ' + DEEP + "}\n"
    records.write_text("".join(lines))
    code, text = cli_run("baseline", "verify", "main", "--store", str(store))
    assert code == ExitCode.BAD_INPUT and one_line_error(text), text
    assert "arc_easy.jsonl:3" in text and "nested deeper than" in text


def test_deep_golden_and_data_files_are_bad_input_naming_file_and_line(tmp_path: Path) -> None:
    jsonl = tmp_path / "golden.jsonl"
    jsonl.write_text('{"prompt": "a", "answer": "b"}\n{"prompt": ' + DEEP + "}\n")
    for reader in (read_golden, read_jsonl):
        with pytest.raises(BadInput, match=f"{jsonl}:2: not valid JSON .*nested deeper") as err:
            reader(jsonl)
        assert "\n" not in str(err.value)
    whole = tmp_path / "data.json"
    whole.write_text(DEEP)
    with pytest.raises(BadInput, match=f"{whole}:1: not valid JSON .*nested deeper"):
        read_json(whole)


def test_deep_json_given_to_report_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text('{"verdict": "PASS", "units": ' + DEEP + "}")
    code, text = cli_run("report", str(path), "-o", str(tmp_path / "r.html"))
    assert code == ExitCode.BAD_INPUT and one_line_error(text), text
    assert "deep.json" in text and "nested deeper than" in text


# --- 10: huge template range, malformed gate JSON, unbounded settings --------------------------


def test_template_with_a_huge_range_is_bad_input() -> None:
    with pytest.raises(BadInput, match="arc: doc_to_text: template .* failed") as err:
        render("{% for i in range(10**9) %}x{% endfor %}", {}, "arc: doc_to_text")
    assert "\n" not in str(err.value)
    for source in ("{{ 'x' * 10**10 }}", "{{ [1] * 10**10 }}", "{{ 9**999999999 }}"):
        with pytest.raises(BadInput, match="failed .* would build"):
            render(source, {}, "arc: doc_to_text")
    assert render("{{ 'ab' * 3 }} {{ 2**10 }} {{ 3 * 'c' }}", {}, "t") == "ababab 1024 ccc"
    with pytest.raises(BadInput, match="template .* nested too deeply"):
        render("{{ " + "(" * 5000 + "1" + ")" * 5000 + " }}", {}, "arc: doc_to_text")


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d.pop("candidate"),
        lambda d: d["candidate"].pop("model"),
        lambda d: d["baseline"].update(run=5),
        lambda d: d.update(units={"a": 1}),
        lambda d: d["units"][0].pop("threshold"),
        lambda d: d["units"][0].update(ci=[0.1]),
        lambda d: d["units"][0].update(delta="big"),
        lambda d: d.update(verdict=["PASS"]),
    ],
    ids=["no-candidate", "no-model", "run-number", "units-map", "no-threshold", "short-ci",
         "text-delta", "verdict-list"],
)  # fmt: skip
def test_malformed_gate_json_given_to_report_exits_2(tmp_path: Path, change) -> None:
    data = gate_report()
    change(data)
    path = tmp_path / "gate.json"
    path.write_text(json.dumps(data))
    code, text = cli_run("report", str(path), "-o", str(tmp_path / "r.html"))
    assert code == ExitCode.BAD_INPUT and one_line_error(text), text
    assert "gate.json: malformed gate JSON report" in text


def test_a_well_formed_gate_json_still_renders(tmp_path: Path) -> None:
    path = tmp_path / "gate.json"
    path.write_text(json.dumps(gate_report()))
    (comparison,) = load_inputs([path]).comparisons
    assert comparison["verdict"] == "PASS"


@pytest.mark.parametrize(
    ("setting", "value"),
    [("n_batch", 4294967291), ("n_ctx", 10**9), ("threads", 10**6), ("max_length", 10**12)],
)
def test_backend_settings_have_an_upper_bound(setting: str, value: int) -> None:
    with pytest.raises(BadInput, match=f"--model-args: {setting} must be <= "):
        parse_model_args(f"{setting}={value}")
    with pytest.raises(BadInput, match=f"--model-args: {setting} must be <= "):
        load_backend("llama_cpp", "missing.gguf", {setting: value})


def test_huge_n_batch_exits_2_before_a_model_loads() -> None:
    code, text = cli_run(
        "eval", "-m", "missing.gguf", "-t", "builtin", "--model-args", "n_batch=4294967291"
    )
    assert code == ExitCode.BAD_INPUT and one_line_error(text), text
    assert "n_batch must be <= 65536, got 4294967291" in text


def test_ordinary_settings_pass_the_bounds() -> None:
    args = parse_model_args("n_ctx=131072,n_batch=2048,threads=64,dtype=float32")
    assert args == {"n_ctx": 131072, "n_batch": 2048, "threads": 64, "dtype": "float32"}


# --- 9: validated identities ---------------------------------------------------------------


@pytest.mark.parametrize("sha", [EVIL, "A" * 64, "a" * 63, "g" * 64, 12])
def test_model_sha256_in_a_manifest_must_be_64_lowercase_hex(tmp_path: Path, sha) -> None:
    store = stored(tmp_path)
    edit_manifest(store / "main", lambda d: d["model"].update(sha256=sha))
    with pytest.raises(BadInput, match="manifest.json: malformed manifest .*model.sha256") as err:
        read_run(store / "main")
    assert EVIL not in str(err.value)
    code, text = cli_run("report", str(store / "main"), "-o", str(tmp_path / "r.html"))
    assert code == ExitCode.BAD_INPUT and one_line_error(text), text


def test_empty_model_sha256_still_reads(tmp_path: Path) -> None:
    """A served model (openai backend) or an lm-eval import may name no weights."""
    store = stored(tmp_path)
    edit_manifest(store / "main", lambda d: d["model"].update(sha256=""))
    assert read_run(store / "main").manifest.model.sha256 == ""


def test_records_sha256_must_be_hex(tmp_path: Path) -> None:
    store = stored(tmp_path)
    edit_manifest(store / "main", lambda d: d["records_sha256"].update(arc_easy=EVIL))
    with pytest.raises(BadInput, match="malformed manifest .*records_sha256"):
        read_run(store / "main")


def test_model_sha256_in_model_args_must_be_hex() -> None:
    with pytest.raises(BadInput, match="--model-args: model_sha256 must be 64 hex"):
        parse_model_args(f"base_url=http://x/v1,model_sha256={EVIL}")
    digits = "1" * 64  # all digits: still the string it names, not an int
    assert parse_model_args(f"model_sha256={digits}") == {"model_sha256": digits}
    assert parse_model_args(f"model_sha256={'AB' * 32}") == {"model_sha256": "ab" * 32}
    assert parse_model_args("model_sha256=") == {"model_sha256": ""}
    with pytest.raises(BadInput, match="model_sha256 must be 64 hex"):  # from a suite file
        load_backend("openai", "m", {"base_url": "http://x/v1", "model_sha256": EVIL})


def test_bench_and_gate_json_sha256_must_be_hex(tmp_path: Path) -> None:
    bench = tmp_path / "bench.json"
    bench.write_text(
        json.dumps(
            {
                "schema": "regress-bench/1",
                "created": "2026-01-01T00:00:00+00:00",
                "results": [
                    {
                        "model": {"ref": "m", "sha256": EVIL},
                        "micro": [],
                        "resources": {"peak_rss_bytes": 1, "cpu_percent_mean": 1.0, "timeline": []},
                    }
                ],
            }
        )
    )
    code, text = cli_run("report", str(bench), "-o", str(tmp_path / "r.html"))
    assert code == ExitCode.BAD_INPUT and one_line_error(text), text
    assert "bench.json" in text and "sha256" in text
    gate = tmp_path / "gate.json"
    data = gate_report()
    data["candidate"]["sha256"] = EVIL
    gate.write_text(json.dumps(data))
    code, text = cli_run("report", str(gate), "-o", str(tmp_path / "r.html"))
    assert code == ExitCode.BAD_INPUT and one_line_error(text), text
    assert "gate.json" in text and "sha256" in text


# --- 9: every string the page writes is escaped ------------------------------------------------


class _Page(HTMLParser):
    """Start tags, text, and the data of each JSON script block of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.text: list[str] = []
        self.scripts: dict[str, str] = {}
        self._script: str | None = None

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "script" and dict(attrs).get("type") == "application/json":
            self._script = dict(attrs)["id"]
            self.scripts[self._script] = ""

    def handle_endtag(self, tag):
        self._script = None

    def handle_data(self, data):
        if self._script is not None:
            self.scripts[self._script] += data
        else:
            self.text.append(data)


def _page(text: str) -> str:
    """A page from inputs built in Python (so nothing was validated on reading) whose every
    string field, sha256 included, is `text`."""
    base, cand = runs({"arc_easy": (40, 3, 2)})
    accuracy = []
    for run in (base, cand):
        model = dataclasses.replace(
            run.manifest.model, ref=text, sha256=text, quantization=text, name=text
        )
        manifest = dataclasses.replace(run.manifest, model=model, name=text, suite_name=text)
        accuracy.append(accuracy_run(dataclasses.replace(run, manifest=manifest)))
    gate = gate_report()
    gate["verdict"] = text
    for side in ("candidate", "baseline"):
        gate[side].update(run=text, model=text, sha256=text, created=text)
    for unit in gate["units"]:
        unit.update(name=text, verdict=text, reason=text)
    bench = BenchModel(
        model=text,
        sha256=text,
        quantization=text,
        created="2026-01-02T00:00:00+00:00",
        rates={text: 1.0, "tg128": 2.0},
        ttft_ms=(1.0,),
        tpot_ms=(1.0,),
        e2el_ms=(2.0,),
        e2el_p50=2.0,
        peak_rss_bytes=1 << 20,
        cpu_percent=10.0,
        timeline=((0.0, 1 << 20, 5.0),),
    )
    return render_html(Inputs(tuple(accuracy), (gate,), (bench,)), title=text)


def _parsed(page: str) -> _Page:
    parsed = _Page()
    parsed.feed(page)
    parsed.close()
    return parsed


@pytest.mark.parametrize("evil", [EVIL, "</script><plaintext>", "<!--<script>", "</td></tr>"])
def test_every_string_of_the_page_is_escaped(evil: str) -> None:
    """The page parses to the very elements of the same page with plain text, and each chart's
    JSON is intact and holds the text unchanged."""
    page, plain = _page(evil), _parsed(_page("plain"))
    parsed = _parsed(page)
    assert "plaintext" not in parsed.tags and parsed.tags == plain.tags
    # Both runs name one model file (the text): no flips between two models to draw.
    assert set(parsed.scripts) == {f"fig-{chart}" for chart in CHARTS if chart != "flips_by_margin"}
    for chart, data in parsed.scripts.items():
        assert "<" not in data, chart  # no `</script>`, no `<!--`: nothing a parser acts on
        assert json.loads(data) == figure_json(page, chart.removeprefix("fig-"))
    names = [trace["name"] for trace in figure_json(page, "accuracy_by_task")["data"]]
    # the data itself is kept, not mangled; the two runs' labels are told apart
    assert len(set(names)) == 2 and all(n.startswith(f"{evil} ({evil}) · ") for n in names)
    # the title twice, then the inputs table: accuracy run names and models, gate cells
    assert "".join(parsed.text).count(evil) >= 9
