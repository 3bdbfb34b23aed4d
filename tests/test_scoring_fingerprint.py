"""What decides a score is in the fingerprint (issue 47, item 5): a task YAML edit to its
scoring (`metric_list`, `filter_list`, metric options) once turned a REGRESSION into a PASS,
because the manifest hashed the documents and the prompts only.

No model: a scripted backend answers every generation, so the runs are real engine runs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from regress.checks import CandidateModel, CheckOptions, check, scoring_unchecked
from regress.cli import cli
from regress.core.errors import BadInput, ExitCode
from regress.core.fingerprint import RuntimeFingerprint
from regress.core.manifest import Manifest, ModelInfo, Run
from regress.core.requests import GenerateRequest, GenerateResult
from regress.core.store import Store
from regress.gate.compare import compare
from regress.gate.policy import Policy
from regress.gate.results import Verdict
from regress.run.engine import TaskSpec, evaluate
from regress.tasks import DataSource, get_tasks
from regress.tasks.catalog import TaskCatalog, load_catalog, scoring_hash

ROOT = Path(__file__).resolve().parents[1]
N = 400
DOCS = [{"q": f"{i} + 1", "answer": f"Answer {i + 1}"} for i in range(N)]
TASK = (
    "dataset_path: json\ndataset_kwargs: {data_files: {test: data.jsonl}}\n"
    "test_split: test\ntask: sums\noutput_type: generate_until\n"
    'doc_to_text: "Q: {{q}}?\\nA:"\ndoc_to_target: answer\n'
    'generation_kwargs: {until: ["\\n"], max_gen_toks: 8}\n'
)
STRICT = TASK + "metric_list: [{metric: exact_match}]\n"
# The probe's one-line edits, each with a candidate whose wrong answers it makes right.
LOOSE = {
    "ignore_case": (
        TASK + "metric_list: [{metric: exact_match, ignore_case: true}]\n",
        "answer {}",
    ),
    "regexes_to_ignore": (
        TASK + "metric_list: [{metric: exact_match, regexes_to_ignore: ['[A-Za-z ]']}]\n",
        "answer {}",
    ),
    "filter_list": (
        STRICT + "filter_list: [{name: first, filter: [{function: regex, regex_pattern:"
        " '(Answer \\d+)'}, {function: take_first}]}]\n",
        "Answer {}, I think",
    ),
}


class Scripted:
    """Answers each question `Q: i + 1?` with `answer(i)`; counts the requests it sees."""

    name = "scripted"

    def __init__(self, answer) -> None:
        self.answer = answer

    def generate(self, requests: Sequence[GenerateRequest], progress=None) -> list[GenerateResult]:
        return [GenerateResult(self.answer(int(r.context.split()[1])), 3) for r in requests]

    loglikelihood = loglikelihood_rolling = generate


def _tasks(folder: Path, yaml_text: str) -> TaskCatalog:
    (folder / "data.jsonl").write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    (folder / "sums.yaml").write_text(yaml_text)
    return load_catalog([folder])


def _run(name: str, catalog: TaskCatalog, answer) -> Run:
    specs = [TaskSpec(task) for task in catalog.get(["sums"])]
    task_runs = evaluate(specs, Scripted(answer), DataSource())  # type: ignore[arg-type]
    manifest = Manifest(
        name=name,
        created="2026-12-06T00:00:00+00:00",
        regress_version="0.1.0",
        model=ModelInfo(ref=f"{name}.gguf", sha256=("a" if name == "base" else "b") * 64),
        backend=RuntimeFingerprint("llama_cpp", "0.3.16", {"n_ctx": 2048}),
        suite_name="sums",
        tasks={r.info.name: r.info for r in task_runs},
    )
    return Run(manifest, {r.info.name: r.records for r in task_runs})


def _right(i: int) -> str:
    return f"Answer {i + 1}"


def _sloppy(wrong: str):
    """Right in every second question; the others written as `wrong`, which only the
    edited scoring accepts."""
    return lambda i: f"Answer {i + 1}" if i % 2 else wrong.format(i + 1)


@pytest.fixture
def baseline(tmp_path: Path) -> Run:
    return _run("base", _tasks(tmp_path, STRICT), _right)


def test_the_run_records_its_scoring_hash(tmp_path: Path, baseline: Run) -> None:
    info = baseline.manifest.tasks["sums"]
    [task] = _tasks(tmp_path, STRICT).get(["sums"])
    assert info.scoring_hash == scoring_hash(task)
    assert len(info.scoring_hash or "") == 64
    stored = Manifest.from_dict(json.loads(json.dumps(baseline.manifest.to_dict())))
    assert stored.tasks["sums"].scoring_hash == info.scoring_hash


@pytest.mark.parametrize("edit", sorted(LOOSE))
def test_a_scoring_edit_changes_the_hash_and_the_prompt_does_not(tmp_path, baseline, edit):
    """The edit leaves the documents and the prompts as they were: only the scoring says it."""
    text, wrong = LOOSE[edit]
    loose = _run("cand", _tasks(tmp_path, text), _sloppy(wrong))
    ours, theirs = baseline.manifest.tasks["sums"], loose.manifest.tasks["sums"]
    assert (ours.dataset_hash, ours.prompt_hash) == (theirs.dataset_hash, theirs.prompt_hash)
    assert ours.scoring_hash != theirs.scoring_hash


def test_a_change_outside_the_scoring_keeps_the_hash(tmp_path: Path, baseline: Run) -> None:
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    renamed = STRICT + "task_alias: Sums\nmetadata: {note: reworded}\n"
    [task] = _tasks(moved, renamed).get(["sums"])
    assert scoring_hash(task) == baseline.manifest.tasks["sums"].scoring_hash


@pytest.mark.parametrize("edit", sorted(LOOSE))
def test_check_refuses_a_candidate_scored_by_an_edited_yaml(tmp_path, baseline, edit):
    """The probe: the candidate answers half the questions sloppily. Scored as the baseline
    was, that is a REGRESSION; scored by the edited YAML, every answer is right. The edit is
    refused before any model loads (the model named here does not exist)."""
    text, wrong = LOOSE[edit]
    strict = _run("cand", _tasks(tmp_path, STRICT), _sloppy(wrong))
    assert compare(baseline, strict, Policy()).verdict is Verdict.REGRESSION
    edited = _tasks(tmp_path, text)
    loose = _run("cand", edited, _sloppy(wrong))
    assert all(r.correct == 1 for r in loose.records["sums"])
    with pytest.raises(BadInput, match=r"^task sums: scoring hash differs .*metric_list"):
        compare(baseline, loose, Policy())
    with pytest.raises(BadInput, match=r"^task sums: scoring hash differs"):
        check(baseline, CandidateModel(str(tmp_path / "missing.gguf")), CheckOptions(tasks=edited))
    with pytest.raises(BadInput, match=r"^task sums: scoring hash differs"):
        check(baseline, loose, CheckOptions(tasks=edited))


def test_the_cli_refuses_it_in_one_line(tmp_path: Path, baseline: Run) -> None:
    Store(tmp_path / "store").save(baseline)
    _tasks(tmp_path, LOOSE["ignore_case"][0])
    done = CliRunner().invoke(
        cli,
        ["check", "--baseline", "base", "--store", str(tmp_path / "store"), "--model",
         str(tmp_path / "missing.gguf"), "--include-path", str(tmp_path / "sums.yaml")],
    )  # fmt: skip
    assert done.exit_code == ExitCode.BAD_INPUT
    [line] = done.output.strip().splitlines()
    assert "task sums: scoring hash differs" in line


def test_a_baseline_without_scoring_hashes_is_read_and_the_report_says_so(tmp_path, baseline):
    """Manifests written before the scoring hash still load; the check says the scoring was
    not checked, and pairs as before."""
    info = baseline.manifest.tasks["sums"]
    old = baseline.manifest.to_dict()
    del old["tasks"]["sums"]["scoring_hash"]
    read = Manifest.from_dict(json.loads(json.dumps(old)))
    assert read.tasks["sums"] == replace(info, scoring_hash=None)
    assert "scoring_hash" not in read.to_dict()["tasks"]["sums"]
    unhashed = Run(read, baseline.records)
    candidate = _run("cand", _tasks(tmp_path, STRICT), _right)
    result = check(unhashed, candidate, CheckOptions(tasks=_tasks(tmp_path, STRICT)))
    assert result.comparison.verdict is Verdict.PASS
    [warning] = [w for w in result.comparison.warnings if "scoring" in w]
    assert warning.startswith("scoring not checked for 1 task (sums): the baseline stores no")
    hashed = check(baseline, candidate, CheckOptions(tasks=_tasks(tmp_path, STRICT)))
    assert not [w for w in hashed.comparison.warnings if "scoring" in w]


def test_the_committed_baseline_carries_this_codes_scoring_hash() -> None:
    """baselines/main records each task's scoring hash, the one today's builtin tasks give,
    so a check against it compares scoring and warns nothing about it."""
    main = Store(ROOT / "baselines").load("main")
    tasks = {task.name: task for task in get_tasks(sorted(main.manifest.tasks))}
    for name, info in main.manifest.tasks.items():
        assert info.scoring_hash == scoring_hash(tasks[name]), name
    assert scoring_unchecked(main, main) == []


def test_a_malformed_scoring_hash_is_refused(baseline: Run) -> None:
    data = baseline.manifest.to_dict()
    data["tasks"]["sums"]["scoring_hash"] = "<plaintext>"
    with pytest.raises(BadInput, match="tasks.sums.scoring_hash is not 64 lowercase hex"):
        Manifest.from_dict(data)


def test_built_in_tasks_have_a_stable_scoring_hash() -> None:
    """A built-in task's scoring is code: its hash describes the scorer (its family, metrics
    and version), so two loads agree, two tasks scored alike agree, and another scorer
    differs."""
    arc, again = get_tasks(["arc_easy"])[0], get_tasks(["arc_easy"])[0]
    assert scoring_hash(arc) == scoring_hash(again)
    [arithmetic] = get_tasks(["builtin_arithmetic"])  # multiple choice, scored as ARC is
    assert scoring_hash(arithmetic) == scoring_hash(arc)
    [gsm8k] = get_tasks(["gsm8k"])
    assert scoring_hash(gsm8k) != scoring_hash(arc)
