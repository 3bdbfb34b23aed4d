"""open_answers: short open questions whose answers no code can check, for a judge to compare.

Written for regress (40 items, `data/open_answers.jsonl`: `id`, `question`, and `reference`,
a short good answer a reference-guided judge template may show). The prompt gives one worked
exemplar, then "Question: ...\\nAnswer:"; the answer is the reply as written, stripped.

No per-example metric says whether an answer is good: the primary metric is `judged`, which
only a judge (the policy's `judge:` block, docs/judge.md) gives, and the gate leaves the unit
out when no judge is configured. `answer_chars` (the answer's length) is reported, because a
judge's preference tracks length (AlpacaEval's length-controlled win rate exists for that).
"""

from __future__ import annotations

from regress.tasks.base import Scored
from regress.tasks.generative import GenerativeTask, data_path, read_items
from regress.tasks.loaders import Doc

JUDGED = "judged"
"""The primary metric of a task only a judge can score: no record holds it."""
EXEMPLAR = (
    "Question: Why do leaves change colour in autumn?\n"
    "Answer: As days shorten, trees stop making green chlorophyll, revealing the yellow and "
    "orange pigments that were there all along.\n\n"
)
UNTIL = ("\n\n", "\nQuestion:")
MAX_TOKENS = 64


def load() -> list[Doc]:
    """The shipped items."""
    return read_items(
        data_path("open_answers.jsonl"), {"id": str, "question": str, "reference": str}
    )


def render(doc: Doc) -> str:
    """The exemplar, then the question."""
    return f"{EXEMPLAR}Question: {doc['question']}\nAnswer:"


def judge(doc: Doc, text: str) -> Scored:
    """The answer as written; its quality is left to a judge (`correct` is None)."""
    answer = text.strip()
    return Scored(answer, None, {"answer_chars": float(len(answer))})


def open_answers_task() -> GenerativeTask:
    """The built-in `open_answers` set."""
    return GenerativeTask(
        name="open_answers",
        load=load,
        render=render,
        judge=judge,
        until=UNTIL,
        max_tokens=MAX_TOKENS,
        primary_metric=JUDGED,
        metric_names=("answer_chars",),
        description="Answer a short open question; only a judge can say how well (docs/judge.md).",
        binary=False,
    )
