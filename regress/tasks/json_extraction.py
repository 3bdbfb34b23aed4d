"""json_extraction: read a one-sentence text and answer with a JSON object of given fields.

Written for regress (30 items, `data/json_extraction.jsonl`: `id`, `text`, `expected` an
object whose keys are the fields asked for, in order, and whose values are the answers). The
prompt lists each field with its JSON type after two worked exemplars. The answer is the
JSON in the generation (`validators.extract_json`: a fenced block, else the first object
that decodes), judged by two JSON Schemas built from `expected`: the structure (every field
present with its type) and the values (`const`). A few answers need more than copying
(`"Mondays"` -> `"Monday"`, `"has not shipped"` -> `false`).

Metrics: `json_match` (primary, 0/1: the structure and every value right), `schema_valid`,
`json_found` and `fields_correct` (the fraction of fields with the right value).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from regress.core.errors import BadInput
from regress.tasks.base import Scored
from regress.tasks.generative import GenerativeTask, data_path, read_items
from regress.tasks.loaders import Doc
from regress.tasks.scoring.validators import JsonSchemaValidator, extract_json

EXEMPLARS = (
    "Text: Maria Lopez is 41 and works as a nurse in Porto.\n"
    "Fields: name (string), age (integer), city (string)\n"
    'JSON: {"name": "Maria Lopez", "age": 41, "city": "Porto"}\n\n'
    "Text: The silver watch costs 120 dollars and is sold out.\n"
    "Fields: item (string), price (integer), in_stock (boolean)\n"
    'JSON: {"item": "watch", "price": 120, "in_stock": false}\n\n'
)
UNTIL = ("\n\n", "\nText:")
MAX_TOKENS = 96
METRICS = ("json_match", "schema_valid", "json_found", "fields_correct")
_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array"}


def json_type(value: Any) -> str:
    """The JSON Schema type of a Python value (bool before int: True is an int)."""
    return _TYPES[type(value)]


def load() -> list[Doc]:
    """The shipped items."""
    path = data_path("json_extraction.jsonl")
    rows = read_items(path, {"id": str, "text": str, "expected": dict})
    for number, row in enumerate(rows, start=1):
        for value in row["expected"].values():
            if type(value) not in _TYPES:
                raise BadInput(f"{path}:{number}: field value {value!r} is not a JSON scalar")
    return rows


def render(doc: Doc) -> str:
    """The exemplars, then the text and its fields with their types."""
    fields = ", ".join(f"{k} ({json_type(v)})" for k, v in doc["expected"].items())
    return f"{EXEMPLARS}Text: {doc['text']}\nFields: {fields}\nJSON:"


def schemas(expected: dict[str, Any]) -> tuple[JsonSchemaValidator, JsonSchemaValidator]:
    """(structure, values): every field with its type; every field equal to its answer."""

    def schema(rule: Callable[[Any], dict[str, Any]]) -> JsonSchemaValidator:
        properties = {k: rule(v) for k, v in expected.items()}
        return JsonSchemaValidator(
            {"type": "object", "required": list(expected), "properties": properties}
        )

    return schema(lambda v: {"type": json_type(v)}), schema(lambda v: {"const": v})


def judge(doc: Doc, text: str) -> Scored:
    """Extract the JSON once, then both schemas and the per-field values."""
    expected = doc["expected"]
    structure, values = schemas(expected)
    found = extract_json(text)
    shape, match = structure.check(text), values.check(text)
    # As JSON Schema's `const`: 2 equals 2.0, but true does not equal 1.
    right = sum(
        isinstance(found, dict) and k in found and found[k] == v
        and isinstance(found[k], bool) == isinstance(v, bool)
        for k, v in expected.items()
    )  # fmt: skip
    metrics = {
        "json_match": float(shape.passed and match.passed),
        "schema_valid": float(shape.passed),
        "json_found": float(found is not None),
        "fields_correct": right / len(expected),
    }
    pred = json.dumps(found, sort_keys=True) if found is not None else None
    reasons = [r.reason for r in (shape, match) if r.reason]
    return Scored(pred, int(metrics["json_match"]), metrics, {"validators": reasons})


def json_extraction_task() -> GenerativeTask:
    """The built-in `json_extraction` set."""
    return GenerativeTask(
        name="json_extraction",
        load=load,
        render=render,
        judge=judge,
        until=UNTIL,
        max_tokens=MAX_TOKENS,
        primary_metric="json_match",
        metric_names=METRICS,
        description="Extract the named fields of a sentence as a JSON object (JSON Schema).",
    )
