"""Deterministic checks of generated text: JSON Schema, regex, numeric tolerance and
multi-constraint instruction adherence.

Each validator is a frozen dataclass with `check(text) -> ValidatorResult`. They are built
from plain specs (a YAML or JSON mapping with a `type:`), so a team can write its own:

```yaml
- {type: json_schema, schema: {type: object, required: [name], properties: {name: {const: Ana}}}}
- {type: regex, pattern: "\\bParis\\b", ignore_case: true}
- {type: not_regex, pattern: "(?i)as an ai"}
- {type: numeric, answer: 42.0, abs_tol: 0.5, rel_tol: 0.01}
- {type: instructions, constraints: [{word_count: {min: 5, max: 20}}, {include: [sea]},
                                     {exclude: [ocean]}, {starts_with: The}, {lowercase: true}]}
```

A malformed spec is a BadInput naming the key at fault.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from regress.core import safe_regex, safe_yaml
from regress.core.errors import BadInput

_FENCED = re.compile(r"```(?:json)?\s*\n(.*?)```", re.DOTALL)
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?|-?\.\d+")
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+\S", re.MULTILINE)
_WORD = re.compile(r"[A-Za-z0-9']+")


@dataclass(frozen=True)
class ValidatorResult:
    """One validator's verdict on one text."""

    passed: bool
    reason: str
    """Why it failed (empty when it passed)."""
    score: float
    """1.0 or 0.0, or for instructions the fraction of constraints met."""


def _verdict(passed: bool, reason: str) -> ValidatorResult:
    return ValidatorResult(passed, "" if passed else reason, float(passed))


def extract_json(text: str) -> Any:
    """The JSON value a text holds: the first ```json (or bare ```) fenced block that parses,
    else the first `{` from which a whole JSON object decodes (so prose around it and
    braces inside strings do no harm); None when there is none."""
    for block in _FENCED.findall(text):
        try:
            return json.loads(block)
        except json.JSONDecodeError:
            continue
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            continue
        return value
    return None


@dataclass(frozen=True)
class JsonSchemaValidator:
    """The text holds a JSON object (see `extract_json`) valid under `schema`."""

    schema: Mapping[str, Any]

    def check(self, text: str) -> ValidatorResult:
        """Extract the JSON, then validate it (the first error is the reason)."""
        value = extract_json(text)
        if value is None:
            return _verdict(False, "no JSON object found")
        import jsonschema  # a tenth of a second to import: only where a schema is checked

        error = jsonschema.exceptions.best_match(
            jsonschema.Draft202012Validator(self.schema).iter_errors(value)
        )
        if error is None:
            return _verdict(True, "")
        where = "/".join(str(p) for p in error.absolute_path) or "(root)"
        return _verdict(False, f"{where}: {error.message}")


@dataclass(frozen=True)
class RegexValidator:
    """The text matches `pattern` somewhere (`must_match`), or nowhere (not)."""

    pattern: str
    must_match: bool = True
    ignore_case: bool = False

    def check(self, text: str) -> ValidatorResult:
        """re.search, with IGNORECASE when asked."""
        found = safe_regex.search(self.pattern, text, self.ignore_case)
        if self.must_match:
            return _verdict(found is not None, f"no match for {self.pattern!r}")
        return _verdict(found is None, f"forbidden match {found.group(0)!r}" if found else "")


@dataclass(frozen=True)
class NumericValidator:
    """The last number in the text is within `abs_tol` or `rel_tol` of `answer`."""

    answer: float
    abs_tol: float = 0.0
    rel_tol: float = 0.0

    def check(self, text: str) -> ValidatorResult:
        """Commas inside numbers are thousands separators ("1,200" is 1200)."""
        numbers = _NUMBER.findall(text)
        if not numbers:
            return _verdict(False, "no number found")
        value = float(numbers[-1].replace(",", ""))
        close = math.isclose(value, self.answer, rel_tol=self.rel_tol, abs_tol=self.abs_tol)
        return _verdict(close, f"{value:g} is not within tolerance of {self.answer:g}")


def _words(text: str) -> list[str]:
    return _WORD.findall(text)


def _has_word(text: str, word: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(word)}(?!\w)", text, re.IGNORECASE) is not None


def _in_range(value: int, bounds: Mapping[str, int]) -> bool:
    return bounds.get("min", value) <= value <= bounds.get("max", value)


CONSTRAINTS: dict[str, Callable[[str, Any], bool]] = {
    "word_count": lambda text, b: _in_range(len(_words(text)), b),
    "include": lambda text, words: all(_has_word(text, w) for w in words),
    "exclude": lambda text, words: not any(_has_word(text, w) for w in words),
    "starts_with": lambda text, s: text.strip().lower().startswith(s.lower()),
    "ends_with": lambda text, s: text.strip().lower().endswith(s.lower()),
    "bullets": lambda text, b: _in_range(len(_BULLET.findall(text)), b),
    "sentences": lambda text, b: _in_range(len(re.findall(r"[.!?]+(?=\s|$)", text.strip())), b),
    "lowercase": lambda text, on: (text == text.lower()) == on,
    "uppercase": lambda text, on: (text == text.upper()) == on,
    "no_commas": lambda text, on: ("," not in text) == on,
}
"""Constraint kind -> check(text, value). Case-insensitive whole words for include/exclude;
`word_count`, `bullets` (lines starting "-", "*", "•" or "1.") and `sentences` take
{min, max}; the last three take true/false."""
_RANGE_KINDS = {"word_count", "bullets", "sentences"}
_LIST_KINDS = {"include", "exclude"}
_TEXT_KINDS = {"starts_with", "ends_with"}


@dataclass(frozen=True)
class Constraint:
    """One instruction, e.g. `Constraint("include", ("sea",))`."""

    kind: str
    value: Any

    def met(self, text: str) -> bool:
        """Whether the text satisfies this constraint."""
        return CONSTRAINTS[self.kind](text, self.value)


@dataclass(frozen=True)
class InstructionsValidator:
    """Multi-constraint instruction adherence: score = constraints met / total (seed 002's
    instruction adherence rate); passes only when all are met."""

    constraints: tuple[Constraint, ...]

    def check(self, text: str) -> ValidatorResult:
        """Every constraint checked; the reason lists the unmet ones."""
        unmet = [c.kind for c in self.constraints if not c.met(text)]
        rate = 1.0 - len(unmet) / len(self.constraints)
        return ValidatorResult(not unmet, f"unmet: {', '.join(unmet)}" if unmet else "", rate)


Validator = JsonSchemaValidator | RegexValidator | NumericValidator | InstructionsValidator


def _keys(spec: Mapping[str, Any], required: set[str], allowed: set[str], where: str) -> None:
    missing = required - set(spec)
    unknown = set(spec) - allowed - required - {"type"}
    if missing:
        raise BadInput(f"{where}: missing key(s) {sorted(missing)}")
    if unknown:
        raise BadInput(f"{where}: unknown key(s) {sorted(unknown)}")


def _constraint(item: Any, where: str) -> Constraint:
    if not isinstance(item, Mapping) or len(item) != 1:
        raise BadInput(f"{where}: a constraint is a one-key mapping like {{include: [word]}}")
    ((kind, value),) = item.items()
    if kind not in CONSTRAINTS:
        raise BadInput(f"{where}: unknown constraint {kind!r}; known: {', '.join(CONSTRAINTS)}")
    if kind in _RANGE_KINDS:
        ok = isinstance(value, Mapping) and bool(value) and set(value) <= {"min", "max"}
        ok = ok and all(isinstance(v, int) for v in value.values())
    elif kind in _LIST_KINDS:
        ok = isinstance(value, list) and bool(value) and all(isinstance(w, str) for w in value)
    elif kind in _TEXT_KINDS:
        ok = isinstance(value, str) and bool(value)
    else:
        ok = isinstance(value, bool)
    if not ok:
        raise BadInput(f"{where}: bad value for {kind}: {value!r}")
    return Constraint(kind, tuple(value) if isinstance(value, list) else value)


def parse_validator(spec: Any, where: str = "validator") -> Validator:
    """A validator from its spec; BadInput naming `where` and the key at fault."""
    if not isinstance(spec, Mapping) or not isinstance(spec.get("type"), str):
        raise BadInput(f"{where}: a validator is a mapping with a `type:`")
    kind = spec["type"]
    if kind == "json_schema":
        _keys(spec, {"schema"}, set(), where)
        import jsonschema

        try:
            jsonschema.Draft202012Validator.check_schema(spec["schema"])
        except jsonschema.SchemaError as e:
            raise BadInput(f"{where}: invalid JSON Schema: {e.message}") from e
        return JsonSchemaValidator(spec["schema"])
    if kind in ("regex", "not_regex"):
        _keys(spec, {"pattern"}, {"ignore_case"}, where)
        safe_regex.check(spec["pattern"], f"{where}: invalid pattern")
        return RegexValidator(spec["pattern"], kind == "regex", bool(spec.get("ignore_case")))
    if kind == "numeric":
        _keys(spec, {"answer"}, {"abs_tol", "rel_tol"}, where)
        values = [spec["answer"], spec.get("abs_tol", 0.0), spec.get("rel_tol", 0.0)]
        if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            raise BadInput(f"{where}: answer, abs_tol and rel_tol must be numbers")
        return NumericValidator(*(float(v) for v in values))
    if kind == "instructions":
        _keys(spec, {"constraints"}, set(), where)
        items = spec["constraints"]
        if not isinstance(items, list) or not items:
            raise BadInput(f"{where}: constraints must be a non-empty list")
        return InstructionsValidator(
            tuple(_constraint(c, f"{where}: constraints[{i}]") for i, c in enumerate(items))
        )
    raise BadInput(f"{where}: unknown validator type {kind!r}; known: json_schema, regex, "
                   "not_regex, numeric, instructions")  # fmt: skip


def load_validators(path: Path) -> list[Validator]:
    """Validators from a YAML or JSON file holding a list of specs."""
    try:
        specs = safe_yaml.load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise BadInput(f"{path}: cannot read ({e})") from e
    except yaml.YAMLError as e:
        raise BadInput(f"{path}: not valid YAML or JSON ({e})".replace("\n", " ")) from e
    if not isinstance(specs, list):
        raise BadInput(f"{path}: expected a list of validator specs")
    return [parse_validator(s, f"{path}: validator {i}") for i, s in enumerate(specs)]
