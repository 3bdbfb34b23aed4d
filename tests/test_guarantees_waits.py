"""A bound on every wait a user's input can cause (regular expressions with a deadline,
include breadth, JSON depth in every reader), and the smaller input defects of the same probe:
unsafe task and configuration names, half-written lm-eval files, a killed quantization's
leftovers."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from regress.bench.prompts import load_prompts
from regress.core import safe_regex
from regress.core.errors import BadInput
from regress.core.jsonl import Line
from regress.proxy.flip_rates import load_calibration
from regress.report import lm_eval
from regress.run.generation import GenerationSettings
from regress.run.lm_eval_import import _parse
from regress.sweep.quantize import _remove_orphans
from regress.sweep.results import load_results
from regress.tasks import golden, templates, yaml_config
from regress.tasks.base import DataSource
from regress.tasks.catalog import load_catalog
from regress.tasks.listing import ListOptions, list_tasks
from regress.tasks.scoring.validators import parse_validator
from regress.tasks.yaml_task import YamlTask

# Backtracking the `regex` package cannot cut short: exponential in the a's before the "!".
SLOW = r"^(a|aa)+$"
TEXT = "a" * 60 + "!"


def _bounded(call) -> str:
    start = time.monotonic()
    with pytest.raises(BadInput) as exc:
        call()
    assert time.monotonic() - start < 10 * safe_regex.SECONDS
    return str(exc.value)


def test_the_probes_pattern_is_fast_now() -> None:
    # `^(\w+\s?)+$` on a 41-character answer once ran for more than a minute under `re`.
    assert safe_regex.search(r"^(\w+\s?)+$", "a" * 40 + "!") is None


def test_a_golden_regex_that_backtracks_is_bad_input() -> None:
    item = {"expected": [SLOW], "match": "regex", "ignore_case": False}
    message = _bounded(lambda: golden.matches(TEXT, item))
    assert "ran past 1 s" in message and "(a|aa)" in message


def test_a_validator_regex_that_backtracks_is_bad_input() -> None:
    check = parse_validator({"type": "regex", "pattern": SLOW})
    _bounded(lambda: check.check(TEXT))


def test_a_template_regex_replace_that_backtracks_is_bad_input() -> None:
    source = "{{ text | regex_replace('" + SLOW.replace("\\", "\\\\") + "', 'x') }}"
    _bounded(lambda: templates.render(source, {"text": TEXT}, "task t"))


@pytest.mark.parametrize(
    ("source", "budget"),
    [
        # Two loops, each within Jinja's own range bound: 10^10 steps.
        (
            "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
            "steps",
        ),
        # No loop at all: a macro that calls itself twice, 2^40 calls.
        (
            "{% macro m(n) %}{% if n %}{{ m(n-1) }}{{ m(n-1) }}{% endif %}{% endmacro %}"
            "{{ m(40) }}",
            "steps",
        ),
        # A few steps, each writing a MAX_SIZE string: 10^11 characters.
        (
            "{% set x = 'x' * 1000000 %}{% for i in range(100000) %}{{ x }}{% endfor %}",
            "characters",
        ),
    ],
)
def test_a_template_has_a_render_budget(source: str, budget: str) -> None:
    start = time.monotonic()
    with pytest.raises(BadInput, match=f"task t: template .* failed \\(.* {budget}\\)"):
        templates.render(source, {}, "task t")
    assert time.monotonic() - start < templates.MAX_SECONDS


def test_a_template_whose_steps_are_slow_stops_at_its_deadline(monkeypatch) -> None:
    monkeypatch.setattr(templates, "MAX_SECONDS", 0.2)
    source = (
        "{% set x = 'x ' * 500000 %}{% for i in range(1000) %}{% set y = x.split() %}{% endfor %}"
    )
    start = time.monotonic()
    with pytest.raises(BadInput, match=r"ran longer than 0.2 s"):
        templates.render(source, {}, "task t")
    assert time.monotonic() - start < 2.0


def test_a_template_within_budget_renders_as_jinja_does() -> None:
    source = "{% for c in choices %}{{ loop.index }}. {{ c }}\n{% endfor %}Answer:"
    doc = {"choices": ["red", "blue"]}
    assert templates.render(source, doc, "t") == templates.compile_template(source).render(**doc)
    assert templates.render(source, doc, "t") == "1. red\n2. blue\nAnswer:"


def test_a_refusal_pattern_is_checked_and_bounded() -> None:
    with pytest.raises(BadInput, match=r"refusal pattern '\(' is not a regex"):
        GenerationSettings(refusals=("(",))
    _bounded(lambda: safe_regex.search(SLOW, TEXT, ignore_case=True))


def test_include_breadth_has_a_total_cap(tmp_path) -> None:
    """20 levels of 4 includes each once took more than a minute (4**20 reads); 18 stay
    within the depth limit and are refused by the total."""
    for level in range(18):
        names = "[" + ", ".join(f"l{level + 1}.yaml.inc" for _ in range(4)) + "]"
        (tmp_path / f"l{level}.yaml.inc").write_text(f"include: {names}\n")
    (tmp_path / "l18.yaml.inc").write_text("dataset_path: json\n")
    (tmp_path / "task.yaml").write_text("task: wide\ninclude: l0.yaml.inc\n")
    message = _bounded(lambda: yaml_config.scan([tmp_path]))
    assert f"includes read more than {yaml_config.MAX_INCLUDED_FILES} files" in message


def test_tasks_counts_a_task_file_s_rows_without_rendering_them(tmp_path, monkeypatch) -> None:
    """`regress tasks` on a 10^6-row file once rendered every request: 59 s and 2 GB. Each
    format's count must equal the rows a run loads, and no request is rendered."""
    rows = [{"q": f"line\u2028{i}", "a": i % 2} for i in range(50)]
    (tmp_path / "rows.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    (tmp_path / "rows.json").write_text(json.dumps(rows))
    (tmp_path / "rows.csv").write_text('q,a\n"two\nlines",1\n\n' + "x,0\n" * 49 + "\n")
    import pyarrow as pa  # a test dependency: parquet is read only when the extra is installed
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "rows.parquet")
    for kind, name in [("json", "rows.jsonl"), ("json", "rows.json"), ("csv", "rows.csv"),
                       ("parquet", "rows.parquet")]:  # fmt: skip
        (tmp_path / f"t_{name.replace('.', '_')}.yaml").write_text(
            f"task: t_{name.replace('.', '_')}\ndataset_path: {kind}\n"
            f"dataset_kwargs: {{data_files: {{test: {name}}}}}\ntest_split: test\n"
            "output_type: multiple_choice\ndoc_to_text: '{{q}}'\ndoc_to_choice: ['0', '1']\n"
            "doc_to_target: a\n"
        )
    catalog = load_catalog([tmp_path])
    source = DataSource()
    loaded = {t.name: len(t.docs(source)) for t in catalog.loaded.values()}
    assert set(loaded.values()) == {50}
    monkeypatch.setattr(YamlTask, "examples", lambda *a, **k: pytest.fail("rendered requests"))
    listed = list_tasks(catalog, ListOptions(tuple(loaded), source))
    assert {row.name: row.size for row in listed} == loaded


def test_a_task_name_that_is_no_file_name_is_refused_before_anything_runs(tmp_path) -> None:
    (tmp_path / "evil.yaml").write_text("task: ../../evil\ndataset_path: json\n")
    with pytest.raises(BadInput, match=r"bad task name '\.\./\.\./evil'"):
        yaml_config.scan([tmp_path])


def test_lm_eval_files_are_written_all_or_none(tmp_path, monkeypatch) -> None:
    """`eval -o DIR --log-samples` once left a results file behind and then exited 2."""
    runs = [SimpleNamespace(task=SimpleNamespace(name="t"))]
    monkeypatch.setattr(lm_eval, "results_json", lambda *a: {"results": {}})
    monkeypatch.setattr(lm_eval, "sample_lines", lambda run: ['{"doc_id": 0}'])
    real = Path.write_text

    def full_disk(self, text, **kwargs):
        if self.name.startswith("samples_"):
            raise OSError(28, "No space left on device")
        return real(self, text, **kwargs)

    monkeypatch.setattr(Path, "write_text", full_disk)
    out = tmp_path / "out"
    with pytest.raises(BadInput, match="cannot write results"):
        lm_eval.write_lm_eval(runs, out, {}, 1.0, log_samples=True)
    assert list(out.iterdir()) == []
    monkeypatch.setattr(Path, "write_text", real)
    written = lm_eval.write_lm_eval(runs, out, {}, 1.0, log_samples=True)
    assert sorted(p.name.split("_")[0] for p in out.iterdir()) == ["results", "samples"]
    assert len(written) == 2


def test_a_sweep_folder_cannot_name_a_file_outside_it(tmp_path) -> None:
    """A sweep.json naming `../../x` once made `recommend` read a file outside the folder."""
    outside = tmp_path / "secret.json"
    outside.write_text('{"skipped": "x", "settings": {"type": "Q8_0"}}')
    folder = tmp_path / "sweep"
    (folder / "configs").mkdir(parents=True)
    configs = ["../secret"]
    (folder / "sweep.json").write_text(
        json.dumps({"model": "m", "source_sha256": "a" * 64, "configs": configs})
    )
    with pytest.raises(BadInput, match="is not a safe file name"):
        load_results(folder)


def test_a_killed_quantization_s_temporary_file_is_removed_by_the_next(tmp_path) -> None:
    out = tmp_path / "q.gguf"
    dead = tmp_path / ".q.gguf.999999999.abc"  # no such process
    live = tmp_path / f".q.gguf.{os.getpid()}.def"  # a quantization still running
    dead.write_bytes(b"x")
    live.write_bytes(b"x")
    _remove_orphans(out)
    assert not dead.exists() and live.exists()


DEEP = "[" * 5000 + "]" * 5000


def test_deep_json_in_every_other_reader_is_bad_input(tmp_path) -> None:
    """Calibration files, bench prompts, lm-eval samples and sweep folders parse through the
    depth-bounded reader too: RecursionError once crashed them (exit 3)."""
    calibration = tmp_path / "calibration.json"
    calibration.write_text(DEEP)
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(DEEP + "\n")
    folder = tmp_path / "sweep"
    folder.mkdir()
    (folder / "sweep.json").write_text(DEEP)
    for call in (
        lambda: load_calibration(calibration),
        lambda: load_prompts(str(prompts)),
        lambda: _parse(Line(1, DEEP, "samples.jsonl:1")),
        lambda: load_results(folder),
    ):
        with pytest.raises(BadInput):
            call()
