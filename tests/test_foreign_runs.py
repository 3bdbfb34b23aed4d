"""The two-foreign-runs check's rules, on the committed `baselines/main` records dressed as
another harness's runs (the real lm-eval and Inspect runs are gated in
tests/test_lm_eval_import.py and tests/test_inspect_import.py): what is refused before the
gate, what is named in the report, and that nothing is rerun.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from regress.checks import CheckOptions, check_foreign, read_samples
from regress.core.errors import BadInput
from regress.core.manifest import Run
from regress.core.store import Store
from regress.run.lm_eval_import import EVAL_SETTINGS, lm_eval_selection

ROOT = Path(__file__).resolve().parents[1]
SETTINGS = {"chat_template_sha": None, "system_instruction_sha": None, "gen_kwargs": {}}


@pytest.fixture(scope="module")
def main() -> Run:
    return Store(ROOT / "baselines").load("main")


def foreign(run: Run, name: str = "lm-eval:hf", **params: Any) -> Run:
    """`run` as if read from lm-eval files: its source, eval settings and model arguments."""
    backend = replace(
        run.manifest.backend,
        name=name,
        params={"pretrained": "org/model", "dtype": "float32", "batch_size": "1", **params},
    )
    environment = {"source": "lm-eval", EVAL_SETTINGS: dict(SETTINGS)}
    manifest = replace(run.manifest, backend=backend, environment=environment)
    return replace(run, manifest=manifest)


def with_settings(run: Run, **settings: Any) -> Run:
    environment = {**run.manifest.environment, EVAL_SETTINGS: {**SETTINGS, **settings}}
    return replace(run, manifest=replace(run.manifest, environment=environment))


def test_identical_runs_pair_every_example_and_say_nothing_was_rerun(main: Run) -> None:
    result = check_foreign(foreign(main), foreign(main))
    comparison = result.comparison
    n = sum(len(records) for records in main.records.values())
    assert sum(u.n for u in comparison.units) == n and comparison.n_flips == 0
    assert comparison.warnings[0].startswith(
        "no runtime check was possible: both sides are lm-eval"
    )
    assert result.reference is None


def test_a_run_regress_made_is_not_foreign(main: Run) -> None:
    with pytest.raises(BadInput, match="two imported runs"):
        check_foreign(main, foreign(main))


def test_other_tasks_are_refused(main: Run) -> None:
    fewer = foreign(main.restricted({t: {0} for t in list(main.records)[:-1]}))
    with pytest.raises(BadInput, match=r"tasks differ \(only in the baseline: builtin_units"):
        check_foreign(foreign(main), fewer)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"chat_template_sha": "ab12"}, "chat_template_sha unset in the baseline, ab12 in"),
        ({"gen_kwargs": {"max_gen_toks": 64}}, "gen_kwargs unset in the baseline"),
    ],
)
def test_prompt_settings_that_differ_are_refused(main: Run, settings: dict, message: str) -> None:
    with pytest.raises(BadInput, match=message):
        check_foreign(foreign(main), with_settings(foreign(main), **settings))


def test_other_shots_are_refused(main: Run) -> None:
    task = next(iter(main.manifest.tasks))
    tasks = dict(main.manifest.tasks)
    tasks[task] = replace(tasks[task], num_fewshot=5)
    shots = replace(foreign(main), manifest=replace(foreign(main).manifest, tasks=tasks))
    with pytest.raises(BadInput, match=f"{task}: n-shot 0 in the baseline, 5 in the candidate"):
        check_foreign(foreign(main), shots)


def test_another_model_type_needs_the_backend_change_allowed(main: Run) -> None:
    vllm = foreign(main, name="lm-eval:vllm")
    with pytest.raises(BadInput, match="pass --allow-backend-change"):
        check_foreign(foreign(main), vllm)
    allowed = check_foreign(foreign(main), vllm, CheckOptions(allow_backend_change=True))
    assert any("candidate ran on lm-eval:vllm" in w for w in allowed.comparison.warnings)


def test_model_settings_are_named_and_batch_size_flagged(main: Run) -> None:
    candidate = foreign(main, pretrained="org/model-w4a16", dtype="bfloat16", batch_size="8")
    warnings = check_foreign(foreign(main), candidate).comparison.warnings
    assert "dtype changed: float32 -> bfloat16" in warnings
    assert any(w.startswith("batch_size changed (1 -> 8): batching can move") for w in warnings)
    # The model's own name is reported once, as the model line (ref), not as a setting.
    assert not any(w.startswith("pretrained") for w in warnings)


def test_export_selection_is_each_task_s_doc_ids(main: Run) -> None:
    selection = lm_eval_selection(main)
    assert selection == {t: sorted(r.doc_id for r in rs) for t, rs in main.records.items()}
    variant = replace(main, records={"arc_easy@fmt2": [], **main.records})
    with pytest.raises(BadInput, match="arc_easy@fmt2: prompt variants only regress runs"):
        lm_eval_selection(variant)


def test_a_file_that_is_no_inspect_log_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "notes.txt"
    other.write_text("x")
    with pytest.raises(BadInput, match="not an Inspect log"):
        read_samples(other, "x")
    broken = tmp_path / "broken.eval"
    broken.write_text("not a zip")
    with pytest.raises(BadInput, match="not an Inspect log inspect-ai can read"):
        read_samples(broken, "x")


def lm_eval_folder(root: Path, lines: list[dict], filters: list[str]) -> Path:
    """An lm-eval output folder holding `lines` as its gsm8k samples."""
    stamp = "2026-01-01T00-00-00.000000"
    folder = root / "model"
    folder.mkdir(parents=True)
    config = {"output_type": "generate_until", "filter_list": [{"name": f} for f in filters]}
    results = {"configs": {"gsm8k": config}, "n-shot": {"gsm8k": 5}, "config": {"model": "hf"}}
    (folder / f"results_{stamp}.json").write_text(json.dumps(results))
    samples = "".join(json.dumps(line) + "\n" for line in lines)
    (folder / f"samples_gsm8k_{stamp}.jsonl").write_text(samples)
    return root


def test_a_generation_task_is_read_with_its_first_filter(tmp_path: Path) -> None:
    """lm-eval's GSM8K lines (tests/fixtures: a real run's, strings cut short): one per
    filter; the flexible-extract copy is edited to answer right, so the filters disagree."""
    fixture = json.loads((ROOT / "tests/fixtures/lm_eval_samples_shape.json").read_text())
    strict, flexible = fixture["lines"]["generate_until"]
    flexible = {**flexible, "filtered_resps": ["9"], "exact_match": 1.0}
    out = lm_eval_folder(tmp_path, [flexible, strict], ["strict-match", "flexible-extract"])
    run = read_samples(out, "x")
    [record] = run.records["gsm8k"]
    assert (record.pred, record.correct) == (strict["filtered_resps"][0], 0)
    assert record.metrics == {"exact_match": 0.0, "exact_match,flexible-extract": 1.0}
    info = run.manifest.tasks["gsm8k"]
    assert (info.output_type, info.metric, info.num_fewshot) == ("generate_until", "exact_match", 5)
    # The same run read again pairs with itself; an edited prompt is another prompt hash.
    again = {**strict, "arguments": {"gen_args_0": {**strict["arguments"]["gen_args_0"]}}}
    again["arguments"]["gen_args_0"]["arg_0"] += " (edited)"
    other = lm_eval_folder(tmp_path / "b", [again], ["strict-match"])
    assert read_samples(other, "y").records["gsm8k"][0].prompt_hash != record.prompt_hash


def test_export_names_each_task_s_shots_when_they_differ(main: Run, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from regress.cli import cli

    first, *_ = main.manifest.tasks
    tasks = {**main.manifest.tasks, first: replace(main.manifest.tasks[first], num_fewshot=5)}
    Store(tmp_path).save(replace(main, manifest=replace(main.manifest, tasks=tasks)))
    out = tmp_path / "samples.json"
    result = CliRunner().invoke(
        cli,
        [
            "baseline",
            "export-samples",
            main.manifest.name,
            "-o",
            str(out),
            "--store",
            str(tmp_path),
        ],
    )
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text()) == lm_eval_selection(main)
    assert f"different shots ({first} 5, " in result.stderr
    assert "without --num_fewshot when those are the tasks' own defaults" in result.stderr
