"""The built-in generation sets: data, judges on crafted outputs, and a real model end to end."""

from __future__ import annotations

from pathlib import Path

import pytest

from regress.backends import load_backend
from regress.core.errors import BadInput, RunFailed
from regress.core.requests import GenerateResult
from regress.run.engine import TaskSpec, evaluate
from regress.tasks import DataSource, get_tasks
from regress.tasks import python_functions as pf
from regress.tasks.constrained_writing import judge as judge_writing
from regress.tasks.generative import read_items
from regress.tasks.json_extraction import judge as judge_json
from regress.tasks.scoring import confinement, sandbox
from regress.tasks.scoring.sandbox import SandboxLimits, run_python
from regress.tasks.scoring.validators import extract_json, parse_validator

NAMES = ["json_extraction", "constrained_writing", "python_functions"]


def test_each_set_has_thirty_items_with_unique_ids() -> None:
    for task in get_tasks(NAMES):
        examples = task.examples(DataSource(), 0)
        assert len(examples) == 30
        assert len({e.target for e in examples}) == 30
        assert task.binary and task.primary_metric in task.higher_is_better
        assert task.config()["generation_kwargs"]["do_sample"] is False


def test_every_reference_solution_passes_its_hidden_tests() -> None:
    for doc in pf.load():
        scored = pf.judge(doc, doc["solution"])
        assert scored.correct == 1, (doc["id"], scored.scores)
        assert scored.metrics == {"pass": 1.0, "tests_passed": 1.0}


def test_python_prompt_stops_where_humaneval_stops() -> None:
    (task,) = get_tasks(["python_functions"])
    (request,) = task.examples(DataSource(), limit=1)[0].requests
    assert request.until == ("\ndef ", "\nclass ", "\nif __name__", "\nprint(", "\n#")
    assert request.context.endswith('"""Return the sum of a and b."""')


@pytest.mark.parametrize(
    ("completion", "outcome", "tests_passed"),
    [
        ("\n    return a - b", "failed", 1 / 3),
        ("\n    return a +", "syntax_error", 0.0),
        ("\n    while True:\n        pass", "timeout", 0.0),
        (
            "\n    import os\n    return int(os.environ.get('REGRESS_FAKE_SECRET', '0'))",
            "failed",
            2 / 3,
        ),
    ],
)
def test_python_judge_records_the_sandbox_outcome(
    completion: str, outcome: str, tests_passed: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REGRESS_FAKE_SECRET", "5")
    monkeypatch.setattr(pf, "LIMITS", SandboxLimits(cpu_seconds=1, wall_seconds=2))
    scored = pf.judge(pf.load()[0], completion)
    assert scored.correct == 0
    assert scored.scores["sandbox"] == [outcome]
    assert scored.metrics["tests_passed"] == pytest.approx(tests_passed)


def test_json_judge() -> None:
    doc = {"id": "x", "text": "", "expected": {"name": "Ana", "age": 34, "member": True}}
    right = judge_json(doc, ' {"name": "Ana", "age": 34, "member": true}\nmore text')
    assert right.correct == 1 and right.metrics["fields_correct"] == 1.0
    typed_wrong = judge_json(doc, ' {"name": "Ana", "age": "34", "member": 1}')
    assert typed_wrong.metrics == {
        "json_match": 0.0, "schema_valid": 0.0, "json_found": 1.0, "fields_correct": 1 / 3
    }  # fmt: skip
    assert judge_json(doc, " Ana is 34.").metrics["json_found"] == 0.0


def test_writing_judge() -> None:
    doc = {"id": "x", "instruction": "", "constraints": [{"include": ["sea"]}, {"lowercase": True}]}
    assert judge_writing(doc, " the sea\n").metrics == {"all_constraints": 1.0, "adherence": 1.0}
    half = judge_writing(doc, " The sea")
    assert half.metrics["adherence"] == 0.5 and half.scores == {"unmet": ["lowercase"]}
    assert half.pred == "1/2"


def test_bad_task_files_are_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "items.jsonl"
    path.write_text('{"id": "a", "prompt": "x"}\n{"id": "a", "prompt": "y"}\n')
    with pytest.raises(BadInput, match=r"items.jsonl:2: duplicate id 'a'"):
        read_items(path, {"id": str, "prompt": str})
    with pytest.raises(BadInput, match=r"items.jsonl:1: field 'tests' is missing"):
        read_items(path, {"id": str, "tests": list})
    (task,) = get_tasks(["constrained_writing"])
    with pytest.raises(BadInput, match="num_fewshot must be 0"):
        task.examples(DataSource(), 3)


@pytest.mark.model
def test_real_model_records_match_revalidated_generations() -> None:
    """SmolLM2 greedy, 3 items per set: each record's verdict equals validating the
    generated text again here, with the validators and sandbox called directly."""
    backend = load_backend("llama_cpp", "smollm2-135m", {"n_ctx": 2048})
    runs = evaluate([TaskSpec(t, limit=3) for t in get_tasks(NAMES)], backend, DataSource())
    for run in runs:
        for example, results, record in zip(run.examples, run.results, run.records, strict=True):
            (result,) = results
            assert isinstance(result, GenerateResult)
            text, doc = result.text, example.doc
            if run.task.name == "json_extraction":
                found = extract_json(text)
                right = isinstance(found, dict) and all(
                    found.get(k) == v for k, v in doc["expected"].items()
                )
                assert record.correct == int(right)
            elif run.task.name == "constrained_writing":
                spec = {"type": "instructions", "constraints": doc["constraints"]}
                verdict = parse_validator(spec).check(text.strip())
                assert record.metrics["adherence"] == verdict.score
                assert record.correct == int(verdict.passed)
            else:
                sandboxed = run_python(doc["prompt"].rstrip() + text, doc["tests"], pf.LIMITS)
                assert record.scores["sandbox"] == [sandboxed.outcome.value]
                assert record.correct == int(sandboxed.passed)


def test_a_refused_sandbox_stops_the_run_unless_opted_out(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_libseccomp() -> bytes:
        raise confinement.Unavailable("libseccomp is not available: (test)")

    monkeypatch.setattr(confinement, "seccomp_program", no_libseccomp)
    doc = pf.load()[0]
    with pytest.raises(RunFailed, match="REGRESS_SANDBOX_OPTIONAL"):
        pf.judge(doc, doc["solution"])
    monkeypatch.setenv(sandbox.OPTIONAL_ENV, "seccomp")
    assert pf.judge(doc, doc["solution"]).correct == 1


def test_without_bubblewrap_a_code_unit_is_an_error_not_a_zero(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    doc = pf.load()[0]
    with pytest.raises(RunFailed, match="apt-get install bubblewrap"):
        pf.judge(doc, doc["solution"])
