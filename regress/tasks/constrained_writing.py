"""constrained_writing: short writing instructions carrying two or three checkable constraints.

Written for regress (30 items, `data/constrained_writing.jsonl`: `id`, `instruction`, and
`constraints`, a list in the `instructions` validator's spec format, e.g.
`[{"include": ["boat"]}, {"word_count": {"max": 15}}, {"sentences": {"max": 1}}]`). The prompt
gives two worked exemplars, then "Instruction: ...\\nResponse:"; the response is judged as
written, stripped of surrounding whitespace.

Metrics: `all_constraints` (primary, 0/1: every constraint met) and `adherence` (seed 002's
instruction adherence rate: constraints met / total for the item).
"""

from __future__ import annotations

from regress.tasks.base import Scored
from regress.tasks.generative import GenerativeTask, data_path, read_items
from regress.tasks.loaders import Doc
from regress.tasks.scoring.validators import InstructionsValidator, parse_validator

EXEMPLARS = (
    'Instruction: Write one sentence about a lake. Use the word "calm".\n'
    "Response: The lake was calm and still at dawn.\n\n"
    "Instruction: List two vegetables as a bulleted list, one per line.\n"
    "Response:\n- carrot\n- spinach\n\n"
)
UNTIL = ("\n\n", "\nInstruction:")
MAX_TOKENS = 128
METRICS = ("all_constraints", "adherence")


def validator(doc: Doc) -> InstructionsValidator:
    """The item's constraints as an `instructions` validator."""
    spec = {"type": "instructions", "constraints": doc["constraints"]}
    return parse_validator(spec, f"constrained_writing item {doc['id']}")  # type: ignore[return-value]


def load() -> list[Doc]:
    """The shipped items (every constraint checked on loading)."""
    rows = read_items(
        data_path("constrained_writing.jsonl"),
        {"id": str, "instruction": str, "constraints": list},
    )
    for row in rows:
        validator(row)
    return rows


def render(doc: Doc) -> str:
    """The exemplars, then the instruction."""
    return f"{EXEMPLARS}Instruction: {doc['instruction']}\nResponse:"


def judge(doc: Doc, text: str) -> Scored:
    """Every constraint on the stripped response."""
    check = validator(doc)
    response = text.strip()
    result = check.check(response)
    metrics = {"all_constraints": float(result.passed), "adherence": result.score}
    unmet = [c.kind for c in check.constraints if not c.met(response)]
    met = len(check.constraints) - len(unmet)
    return Scored(f"{met}/{len(check.constraints)}", int(result.passed), metrics, {"unmet": unmet})


def constrained_writing_task() -> GenerativeTask:
    """The built-in `constrained_writing` set."""
    return GenerativeTask(
        name="constrained_writing",
        load=load,
        render=render,
        judge=judge,
        until=UNTIL,
        max_tokens=MAX_TOKENS,
        primary_metric="all_constraints",
        metric_names=METRICS,
        description="Follow a short writing instruction with 2-3 checkable constraints.",
    )
