"""Validators on crafted outputs, and malformed specs as one-line BadInput errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from regress.core.errors import BadInput
from regress.tasks.scoring.validators import extract_json, load_validators, parse_validator

SCHEMA = {
    "type": "object",
    "required": ["name", "age"],
    "properties": {"name": {"const": "Ana"}, "age": {"type": "integer"}},
}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ('Here it is: {"a": "}{", "b": [1, 2]} -- done {not json}', {"a": "}{", "b": [1, 2]}),
        ('{broken {"a": 1}', {"a": 1}),
        ('prose {"a": 0}\n```json\n{"a": 2}\n```', {"a": 2}),
        ("```\n[1, 2]\n```", [1, 2]),
        ("no json here", None),
    ],
)
def test_extract_json(text: str, expected: object) -> None:
    assert extract_json(text) == expected


def test_json_schema() -> None:
    validator = parse_validator({"type": "json_schema", "schema": SCHEMA})
    assert validator.check('Answer: {"name": "Ana", "age": 34}').passed
    wrong = validator.check('{"name": "Bob", "age": 34}')
    assert not wrong.passed and wrong.reason.startswith("name:")
    assert validator.check('{"name": "Ana", "age": "34"}').reason.startswith("age:")
    assert validator.check("I cannot help").reason == "no JSON object found"


def test_regex_must_and_must_not() -> None:
    must = parse_validator({"type": "regex", "pattern": r"\bparis\b", "ignore_case": True})
    assert must.check("It is Paris.").passed and not must.check("Lyon").passed
    never = parse_validator({"type": "not_regex", "pattern": r"(?i)as an ai"})
    result = never.check("As an AI, I cannot.")
    assert not result.passed and "As an AI" in result.reason
    assert never.check("Sure.").passed


@pytest.mark.parametrize(
    ("text", "passed"),
    [("The total is 1,200.", True), ("about 1215", False), ("=1188.5", True), ("none", False)],
)
def test_numeric_tolerance(text: str, passed: bool) -> None:
    validator = parse_validator({"type": "numeric", "answer": 1200, "rel_tol": 0.01})
    assert validator.check(text).passed is passed


def test_instruction_adherence_rate() -> None:
    spec = {
        "type": "instructions",
        "constraints": [
            {"word_count": {"min": 3, "max": 8}},
            {"include": ["sea"]},
            {"exclude": ["ocean"]},
            {"starts_with": "the"},
            {"ends_with": "."},
            {"lowercase": True},
            {"bullets": {"min": 2}},
            {"no_commas": True},
        ],
    }
    validator = parse_validator(spec)
    result = validator.check("the sea, calm and grey.")
    assert result.score == 6 / 8 and not result.passed
    assert result.reason == "unmet: bullets, no_commas"
    two = [{"bullets": {"min": 2, "max": 2}}, {"sentences": {"max": 1}}]
    bullets = parse_validator({"type": "instructions", "constraints": two})
    assert bullets.check("- one\n* two").passed
    assert bullets.check("1. one\n2) two\n- three").score == 0.5
    assert parse_validator(spec).check("the sea is seaside.").score == 7 / 8
    sea = parse_validator({"type": "instructions", "constraints": [{"include": ["sea"]}]})
    assert not sea.check("seaside").passed


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"type": "json_schema"}, "missing key"),
        ({"type": "json_schema", "schema": {"type": "objekt"}}, "invalid JSON Schema"),
        ({"type": "regex", "pattern": "("}, "invalid pattern"),
        ({"type": "regex", "pattern": "a", "flags": "i"}, "unknown key"),
        ({"type": "numeric", "answer": "7"}, "must be numbers"),
        ({"type": "instructions", "constraints": []}, "non-empty"),
        ({"type": "instructions", "constraints": [{"rhymes": True}]}, "unknown constraint"),
        ({"type": "instructions", "constraints": [{"word_count": 5}]}, "bad value"),
        ({"type": "llm_judge"}, "unknown validator type"),
        (["regex"], "a mapping"),
    ],
)
def test_malformed_specs_are_bad_input(spec: object, message: str) -> None:
    with pytest.raises(BadInput, match=message):
        parse_validator(spec)


def test_load_validators_from_yaml(tmp_path: Path) -> None:
    path = tmp_path / "checks.yaml"
    path.write_text("- {type: regex, pattern: ok}\n- {type: numeric, answer: 3, abs_tol: 0.1}\n")
    first, second = load_validators(path)
    assert first.check("ok").passed and second.check("3.05").passed
    path.write_text("- {type: regex}\n")
    with pytest.raises(BadInput, match=r"checks.yaml: validator 0: missing key\(s\) \['pattern'\]"):
        load_validators(path)
    path.write_text("type: regex\n")
    with pytest.raises(BadInput, match="expected a list"):
        load_validators(path)
