"""Task YAML files: what is refused and why, and how the supported keys render and score.

No model: scoring is fed given backend results (the real-model parity is in
test_tasks_yaml_parity.py).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from regress.cli.common import chosen_suite, task_catalog
from regress.core.errors import BadInput
from regress.core.requests import (
    GenerateRequest,
    GenerateResult,
    LoglikelihoodResult,
    RollingResult,
)
from regress.run.runner import suite_specs
from regress.run.suite import load_suite
from regress.tasks import DataSource
from regress.tasks.catalog import load_catalog
from regress.tasks.listing import ListOptions, list_tasks
from regress.tasks.yaml_task import exact_match, f1, mcc

DOCS = [
    {"q": "2 + 2", "options": ["3", "4", "5"], "gold": 1, "answer": "4"},
    {"q": "3 + 3", "options": ["6", "7", "8"], "gold": 0, "answer": "6"},
    {"q": "1 + 1", "options": ["1", "2", "3"], "gold": 1, "answer": "2"},
]
NONE = DataSource()


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def tasks_dir(tmp_path: Path) -> Path:
    """A folder with a data file and a base multiple-choice task others include."""
    write(tmp_path, "data/sums.jsonl", "".join(json.dumps(d) + "\n" for d in DOCS))
    write(
        tmp_path,
        "_base.yml.inc",
        "dataset_path: json\n"
        "dataset_kwargs: {data_files: {test: data/sums.jsonl, train: data/sums.jsonl}}\n"
        "test_split: test\noutput_type: multiple_choice\n"
        'doc_to_text: "Q: {{q}}?\\nA:"\ndoc_to_choice: options\ndoc_to_target: gold\n',
    )
    return tmp_path


def task_of(folder: Path, name: str):
    [task] = load_catalog([folder]).get([name])
    return task


def test_include_merges_and_local_keys_win(tasks_dir: Path) -> None:
    write(tasks_dir, "sums.yaml", 'include: _base.yml.inc\ntask: sums\ndescription: "Add.\\n"\n')
    write(
        tasks_dir,
        "sums_colon.yaml",
        "include: sums.yaml\ntask: sums_colon\ntarget_delimiter: ':'\n",
    )
    first = task_of(tasks_dir, "sums").examples(NONE)[0]
    assert first.requests[0].context == "Add.\nQ: 2 + 2?\nA:"
    assert [r.continuation for r in first.requests] == [" 3", " 4", " 5"]
    assert first.target == 1
    colon = task_of(tasks_dir, "sums_colon").examples(NONE)[0]
    assert [r.continuation for r in colon.requests] == [":3", ":4", ":5"]


def test_unknown_key_is_an_error_naming_it(tasks_dir: Path) -> None:
    path = write(tasks_dir, "bad.yaml", "include: _base.yml.inc\ntask: bad\nprocess_results: x\n")
    with pytest.raises(BadInput, match=r"bad\.yaml: key 'process_results' is not supported"):
        load_catalog([path])


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("fewshot_config: {sampler: balanced}", "sampler 'balanced' is not supported"),
        ("fewshot_config: {samples: []}", "fewshot_config.samples must be a non-empty list"),
        ("fewshot_config: {shuffle: true}", "'fewshot_config.shuffle' is not supported"),
        (
            "output_type: generate_until\nrepeats: 4\nfilter_list: [{name: maj@8, filter: "
            "[{function: take_first_k, k: 8}, {function: majority_vote}, "
            "{function: take_first}]}]",
            "filter 'maj@8' takes the first 8 of 4 generations",
        ),
        ("metric_list: [{metric: acc_mutual_info}]", "metric 'acc_mutual_info' is not supported"),
        ("metric_list: [{metric: acc, aggregation: median}]", "acc aggregates by mean"),
        ("dataset_kwargs: {data_files: x.json, field: rows}", "dataset_kwargs.field"),
        ("output_type: ranking", "output_type 'ranking' is not one of"),
        ("repeats: 3", "repeats > 1 needs output_type generate_until"),
        ("metric_list: [{metric: brier_score}]", "needs a 0/1 metric to gate on"),
    ],
)
def test_unsupported_settings_are_errors(tasks_dir: Path, extra: str, message: str) -> None:
    write(tasks_dir, "bad.yaml", f"include: _base.yml.inc\ntask: bad\n{extra}\n")
    with pytest.raises(BadInput, match=message):
        load_catalog([tasks_dir]).get(["bad"])


def test_function_tag_is_refused_with_its_key_and_line(tasks_dir: Path) -> None:
    write(
        tasks_dir,
        "code.yaml",
        "include: _base.yml.inc\ntask: code\nprocess_docs: !function utils.process_docs\n",
    )
    with pytest.raises(BadInput) as caught:
        load_catalog([tasks_dir])
    assert "code.yaml:3: process_docs: !function utils.process_docs refused" in str(caught.value)


def test_function_in_an_included_file_is_refused(tasks_dir: Path) -> None:
    write(tasks_dir, "base_code.yml.inc", "doc_to_text: !function utils.doc_to_text\n")
    write(tasks_dir, "uses.yaml", "include: [_base.yml.inc, base_code.yml.inc]\ntask: uses\n")
    with pytest.raises(BadInput, match=r"base_code\.yml\.inc:1: doc_to_text: !function"):
        load_catalog([tasks_dir])


def test_templates_run_in_a_sandbox(tasks_dir: Path) -> None:
    write(
        tasks_dir,
        "escape.yaml",
        "include: _base.yml.inc\ntask: escape\n"
        'doc_to_text: "{{ q.__class__.__mro__[1].__subclasses__() }}"\n',
    )
    with pytest.raises(BadInput, match="refused by the sandbox.*'__class__'.*unsafe"):
        task_of(tasks_dir, "escape").examples(NONE)
    write(
        tasks_dir,
        "mutate.yaml",
        "include: _base.yml.inc\ntask: mutate\ndoc_to_text: \"{{ options.append('x') }}\"\n",
    )
    with pytest.raises(BadInput, match="'append' of 'list' object is unsafe"):
        task_of(tasks_dir, "mutate").examples(NONE)


def test_an_undefined_field_names_the_template(tasks_dir: Path) -> None:
    write(tasks_dir, "typo.yaml", "include: _base.yml.inc\ntask: typo\ndoc_to_text: '{{qq}}'\n")
    with pytest.raises(BadInput, match="'qq' is undefined"):
        task_of(tasks_dir, "typo").examples(NONE)


def test_a_builtin_name_cannot_be_redefined(tasks_dir: Path) -> None:
    write(tasks_dir, "arc.yaml", "include: _base.yml.inc\ntask: arc_easy\n")
    with pytest.raises(BadInput, match="'arc_easy' is a built-in task"):
        load_catalog([tasks_dir])


def test_first_n_shots_in_order_and_the_eval_doc_dropped(tasks_dir: Path) -> None:
    # fewshot_split == test_split: lm-eval drops the evaluated document from the pool.
    write(
        tasks_dir,
        "firstn.yaml",
        "include: _base.yml.inc\ntask: firstn\nfewshot_split: test\n"
        "fewshot_config: {sampler: first_n}\n",
    )
    examples = task_of(tasks_dir, "firstn").examples(NONE, num_fewshot=1)
    assert examples[0].requests[0].context == "Q: 3 + 3?\nA: 6\n\nQ: 2 + 2?\nA:"
    assert examples[1].requests[0].context == "Q: 2 + 2?\nA: 4\n\nQ: 3 + 3?\nA:"


def test_a_yaml_num_fewshot_of_zero_pins_the_task(tasks_dir: Path) -> None:
    write(tasks_dir, "zero.yaml", "include: _base.yml.inc\ntask: zero\nnum_fewshot: 0\n")
    task = task_of(tasks_dir, "zero")
    assert task.effective_fewshot(3) == 0


def test_multiple_choice_metrics_from_given_results(tasks_dir: Path) -> None:
    write(
        tasks_dir,
        "scored.yaml",
        "include: _base.yml.inc\ntask: scored\nmetric_list:\n"
        "  - {metric: acc_norm}\n  - {metric: exact_match}\n  - {metric: brier_score}\n"
        "  - {metric: f1}\n  - {metric: mcc}\n",
    )
    task = task_of(tasks_dir, "scored")
    example = task.examples(NONE)[0]
    results = [
        LoglikelihoodResult(-2.0, False, 1),
        LoglikelihoodResult(-1.0, True, 1),
        LoglikelihoodResult(-3.0, False, 1),
    ]
    scored = task.score(example, results)
    assert task.primary_metric == "acc_norm"
    assert (scored.pred, scored.correct) == (1, 1)
    # Brier score over the softmax of the summed log-likelihoods, by hand.
    total = math.exp(-2) + math.exp(-1) + math.exp(-3)
    p = [math.exp(-2) / total, math.exp(-1) / total, math.exp(-3) / total]
    assert scored.metrics["brier_score"] == pytest.approx(p[0] ** 2 + (1 - p[1]) ** 2 + p[2] ** 2)
    assert scored.metrics["exact_match"] == 1.0
    aggregate = task.aggregate([scored, scored])
    assert aggregate["f1"] == 1.0 and aggregate["mcc"] == 0.0


def test_f1_and_mcc_match_scikit_learn() -> None:
    sklearn = pytest.importorskip("sklearn.metrics")  # lm-eval's own dependency (dev extra)
    golds, preds = [0, 1, 1, 2, 1, 0, 2, 2], [0, 1, 0, 2, 1, 1, 2, 0]
    assert mcc(golds, preds) == pytest.approx(sklearn.matthews_corrcoef(golds, preds))
    binary_g, binary_p = [0, 1, 1, 0, 1], [1, 1, 0, 0, 1]
    assert f1(binary_g, binary_p) == pytest.approx(sklearn.f1_score(binary_g, binary_p))


def test_generate_until_with_filters_and_exact_match_options(tasks_dir: Path) -> None:
    write(
        tasks_dir,
        "gen.yaml",
        "dataset_path: json\ndataset_kwargs: {data_files: {test: data/sums.jsonl}}\n"
        "test_split: test\ntask: gen\noutput_type: generate_until\n"
        'doc_to_text: "Q: {{q}}?\\nA:"\ndoc_to_target: answer\n'
        'generation_kwargs: {until: ["\\n"], max_gen_toks: 8}\n'
        "filter_list:\n"
        "  - name: strict\n    filter: [{function: regex, regex_pattern: 'is (\\d+)'},"
        " {function: take_first}]\n"
        "  - name: last-number\n    filter: [{function: regex, regex_pattern: '(\\d+)',"
        " group_select: -1}, {function: take_first}]\n"
        "metric_list: [{metric: exact_match, ignore_case: true, ignore_punctuation: true}]\n",
    )
    task = task_of(tasks_dir, "gen")
    example = task.examples(NONE)[0]
    assert example.requests == (GenerateRequest("Q: 2 + 2?\nA:", ("\n",), 8, 0.0, 1.0, 1234),)
    scored = task.score(example, [GenerateResult("It is 5, no, 4", 5)])
    assert scored.metrics == {"exact_match": 0.0, "exact_match_last_number": 1.0}
    assert (scored.pred, scored.correct) == ("5", 0)
    assert set(task.higher_is_better) == {"exact_match", "exact_match_last_number"}


def test_exact_match_options_follow_lm_eval() -> None:
    assert exact_match(
        "The Answer.", "the answer", {"ignore_case": True, "ignore_punctuation": True}
    )
    assert not exact_match("The Answer.", "the answer", {"ignore_case": True})
    assert exact_match("$1,000", "1000", {"regexes_to_ignore": [",", r"\$"]})
    assert exact_match("abc 12", "abc ", {"ignore_numbers": True})


def test_majority_vote_over_repeats(tasks_dir: Path) -> None:
    write(
        tasks_dir,
        "vote.yaml",
        "dataset_path: json\ndataset_kwargs: {data_files: {test: data/sums.jsonl}}\n"
        "test_split: test\ntask: vote\noutput_type: generate_until\ndoc_to_text: '{{q}} ='\n"
        "doc_to_target: answer\nrepeats: 3\n"
        'generation_kwargs: {until: ["\\n"], do_sample: true, temperature: 0.7}\n'
        "filter_list: [{name: vote, filter: [{function: remove_whitespace},"
        " {function: majority_vote}, {function: take_first}]}]\n",
    )
    task = task_of(tasks_dir, "vote")
    example = task.examples(NONE)[0]
    assert [r.seed for r in example.requests] == [1234, 1235, 1236]
    assert {r.temperature for r in example.requests} == {0.7}
    answers = [GenerateResult(t, 1) for t in (" 4", "5", "4 ")]
    assert task.score(example, answers).metrics == {"exact_match": 1.0}


def test_rolling_loglikelihood_counts_words_and_bytes(tasks_dir: Path) -> None:
    write(
        tasks_dir,
        "ppl.yaml",
        "dataset_path: json\ndataset_kwargs: {data_files: {test: data/sums.jsonl}}\n"
        "test_split: test\ntask: ppl\noutput_type: loglikelihood_rolling\n"
        "doc_to_text: ''\ndoc_to_target: '{{q}} = {{answer}}'\n",
    )
    task = task_of(tasks_dir, "ppl")
    example = task.examples(NONE)[0]
    scored = task.score(example, [RollingResult(-10.0, 6)])
    assert scored.metrics["n_words"] == 5.0 and scored.metrics["n_bytes"] == 9.0
    assert scored.correct is None and task.output_type == "loglikelihood_rolling"


def test_csv_and_parquet_data_files(tasks_dir: Path) -> None:
    write(tasks_dir, "data/sums.csv", "q,gold,opt\n2 + 2,1,x\n3 + 3,0,\n")
    write(
        tasks_dir,
        "csv.yaml",
        "dataset_path: csv\ndataset_kwargs: {data_files: {test: data/sums.csv}}\n"
        "test_split: test\ntask: csvtask\noutput_type: multiple_choice\n"
        "doc_to_text: '{{q}}'\ndoc_to_choice: ['a', 'b']\ndoc_to_target: gold\n",
    )
    [first, second] = task_of(tasks_dir, "csvtask").examples(NONE)
    assert first.doc == {"q": "2 + 2", "gold": 1, "opt": "x"}
    assert second.doc["opt"] is None and second.target == 0
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(DOCS), tasks_dir / "data" / "sums.parquet")
    write(
        tasks_dir,
        "pq.yaml",
        "include: _base.yml.inc\ntask: pqtask\ndataset_path: parquet\n"
        "dataset_kwargs: {data_files: {test: data/sums.parquet}}\n",
    )
    assert [e.doc for e in task_of(tasks_dir, "pqtask").examples(NONE)] == DOCS


def test_groups_are_units_and_tags_select(tasks_dir: Path) -> None:
    for name in ("a", "b"):
        write(tasks_dir, f"{name}.yaml", f"include: _base.yml.inc\ntask: sums_{name}\ntag: sums\n")
    write(tasks_dir, "group.yaml", "group: arithmetic\ntask: [sums]\n")
    catalog = load_catalog([tasks_dir])
    assert [t.name for t in catalog.get(["sums"])] == ["sums_a", "sums_b"]
    assert {t.group for t in catalog.get(["arithmetic"])} == {"arithmetic"}


def test_hub_datasets_need_the_flag(tasks_dir: Path) -> None:
    write(
        tasks_dir,
        "hub.yaml",
        "include: _base.yml.inc\ntask: hub\ndataset_path: allenai/ai2_arc\ndataset_kwargs: null\n",
    )
    with pytest.raises(BadInput, match="pass --hf-datasets"):
        task_of(tasks_dir, "hub").examples(NONE)


def test_cli_names_the_bad_key_in_one_line(tasks_dir: Path) -> None:
    write(tasks_dir, "bad.yaml", "include: _base.yml.inc\ntask: bad\nuse_prompt: x\n")
    proc = subprocess.run(
        [sys.executable, "-m", "regress.cli", "eval", "-m", "smollm2-135m", "-t", "bad",
         "--include-path", str(tasks_dir)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1
    assert "key 'use_prompt' is not supported" in proc.stderr


def test_tasks_lists_loaded_and_builtin_tasks(tasks_dir: Path) -> None:
    write(tasks_dir, "sums.yaml", "include: _base.yml.inc\ntask: sums\n")
    golden = tasks_dir / "must.jsonl"
    golden.write_text(json.dumps({"id": "a", "input": "2 + 2 =", "expected": "4"}) + "\n")
    catalog = load_catalog([tasks_dir], [golden])
    rows = {r.name: r for r in list_tasks(catalog, ListOptions(source=NONE))}
    assert rows["sums"].source.endswith("sums.yaml") and rows["sums"].size == 3
    assert (rows["sums"].output_type, rows["sums"].metrics) == (
        "multiple_choice",
        ("acc", "acc_norm"),
    )
    assert rows["golden_must"].metrics == ("pass", "must_pass") and rows["golden_must"].size == 1
    # Without data a built-in task is listed with no size and the reason.
    assert rows["arc_easy"].source == "built-in" and rows["arc_easy"].size is None
    assert "--data-dir" in rows["arc_easy"].note
    proc = subprocess.run(
        [sys.executable, "-m", "regress.cli", "tasks", "--include-path", str(tasks_dir),
         "--golden", str(golden), "sums", "golden_must"],
        capture_output=True, text=True, check=False, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "│ sums " in proc.stdout and "│ golden_must " in proc.stdout


def test_a_suite_names_task_files_and_golden_sets(tasks_dir: Path) -> None:
    write(tasks_dir, "tasks/sums.yaml", "include: ../_base.yml.inc\ntask: sums\n")
    write(tasks_dir, "golden/must.jsonl", json.dumps({"id": "a", "input": "x", "expected": "y"}))
    suite_path = write(
        tasks_dir,
        "suite.yaml",
        "name: ours\ntasks:\n  - {task: tasks/sums.yaml, limit: 2}\n  - golden/must.jsonl\n"
        "  - {task: builtin_dates, limit: 3}\n",
    )
    suite = load_suite(suite_path)
    specs = suite_specs(suite, task_catalog((), (), suite))
    assert [(s.task.name, s.limit) for s in specs] == [
        ("sums", 2),
        ("golden_must", None),
        ("builtin_dates", 3),
    ]
    # The same file given twice (suite entry and --golden) is one task, not a clash.
    again = task_catalog((), (tasks_dir / "golden" / "must.jsonl",), suite)
    assert [t.name for t in again.get(["golden_must"])] == ["golden_must"]


def test_limit_and_shots_on_the_command_line_apply_to_every_task_of_a_suite(tmp_path):
    """`--suite s.yaml --limit 20` evaluates 20 documents per task, as `--tasks` would; a
    suite's own settings hold where the command line gives none."""
    path = tmp_path / "s.yaml"
    path.write_text("name: s\ntasks:\n  - {task: builtin, limit: 50, num_fewshot: 2}\n  - boolq\n")
    given = chosen_suite(None, path, None, 20, ())
    assert [(e.task, e.limit, e.num_fewshot) for e in given.tasks] == [
        ("builtin", 20, 2),
        ("boolq", 20, None),
    ]
    assert chosen_suite(None, path, 0, None, ()).tasks[0].num_fewshot == 0
    assert chosen_suite(None, path, None, None, ()) == load_suite(path)
