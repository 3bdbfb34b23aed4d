"""The built-in suite: small generated multiple-choice tasks that need no files.

Five skills a 135M-parameter model gets right sometimes but not always: arithmetic,
comparing numbers, what comes after or before in a sequence, calendar reasoning and unit
conversion. Questions use ARC's prompt ("Question: ...\\nAnswer:") and are generated from a
seed (default 0): the same seed always gives the same documents. The train split used for
few-shot (100 questions) and the test split come from separate random streams, and no test
question is a train question.

The test split is a pool of 400 per skill (2,000 in all) for the sequential gate. Its first 100
are the embedded default (`suites/builtin.yaml`, `baselines/main`), drawn from the original
ranges; the other 300 continue the same stream with wider ranges (numbers to 999, months
up to 23 ahead, ...), since the original ranges hold too few distinct questions for a pool.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from regress.tasks.base import DataSource
from regress.tasks.loaders import Doc
from regress.tasks.multiple_choice import MultipleChoiceTask

N_DOCS = 400
"""Test questions per skill."""
N_FIRST = 100
"""Test questions per skill from the original ranges: the embedded default."""
N_TRAIN = 100
"""Train questions per skill, the few-shot examples."""
_MAX_TRIES = 50
"""Draws allowed per wanted question before giving up on finding distinct ones."""
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
MONTHS = [
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
]  # fmt: skip
DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
LETTERS = [chr(c) for c in range(ord("A"), ord("Z") + 1)]
NUMBERS = [str(n) for n in range(1, 100)]
WIDE_NUMBERS = [str(n) for n in range(1, 1000)]
# (unit, smaller unit, how many smaller units in one)
UNITS = [
    ("meters", "centimeters", 100),
    ("kilometers", "meters", 1000),
    ("centimeters", "millimeters", 10),
    ("kilograms", "grams", 1000),
    ("liters", "milliliters", 1000),
    ("hours", "minutes", 60),
    ("minutes", "seconds", 60),
    ("days", "hours", 24),
    ("weeks", "days", 7),
    ("feet", "inches", 12),
    ("years", "months", 12),
]

Question = tuple[str, str, list[str]]
"""(question, right answer, three or more wrong answers)."""


def arithmetic(rng: random.Random, wide: bool = False) -> Question:
    """ "What is 7 + 5?" with near misses and the digits run together as wrong answers
    (`wide`: operands twice as large)."""
    scale = 2 if wide else 1
    op = rng.choice(["+", "-", "times"])
    if op == "+":
        a, b = rng.randint(2, 50 * scale), rng.randint(2, 50 * scale)
        answer, slip = a + b, a * b
    elif op == "-":
        a = rng.randint(10, 60 * scale)
        b = rng.randint(1, a - 1)
        answer, slip = a - b, a + b
    else:
        a, b = rng.randint(2, 12 * scale), rng.randint(2, 12 * scale)
        answer, slip = a * b, a + b
    wrong = [answer + 1, answer - 1, answer + 2, answer + 10, answer - 10, int(f"{a}{b}"), slip]
    return f"What is {a} {op} {b}?", str(answer), [str(w) for w in wrong if w > 0]


def comparison(rng: random.Random, wide: bool = False) -> Question:
    """ "Which is larger: 0.7 or 0.25?": decimals of different lengths, integers, negatives
    (`wide`: integers to 999, negatives to -200)."""
    style = rng.choice(["decimal", "integer", "negative"])
    while True:
        if style == "decimal":
            x, y = rng.randint(1, 9) / 10, rng.randint(11, 99) / 100
        elif style == "integer":
            top = 999 if wide else 99
            x, y = rng.randint(10, top), rng.randint(10, top)
        else:
            low = 200 if wide else 20
            x, y = -rng.randint(1, low), -rng.randint(1, low)
        if x != y:
            break
    pair = [x, y] if rng.random() < 0.5 else [y, x]
    word, pick = rng.choice([("larger", max), ("smaller", min)])
    answer = pick(pair)
    other = pair[1] if answer == pair[0] else pair[0]
    return f"Which is {word}: {pair[0]} or {pair[1]}?", str(answer), [str(other)]


def ordering(rng: random.Random, wide: bool = False) -> Question:
    """ "Which day comes after Tuesday?" over days, months, letters and numbers (`wide`:
    numbers to 999)."""
    numbers = WIDE_NUMBERS if wide else NUMBERS
    kind, items = rng.choice(
        [("day", DAYS), ("month", MONTHS), ("letter", LETTERS), ("number", numbers)]
    )
    cyclic = kind in ("day", "month")
    direction = rng.choice(["after", "before"])
    i = rng.randrange(len(items)) if cyclic else rng.randrange(1, len(items) - 1)
    step = 1 if direction == "after" else -1
    answer = items[(i + step) % len(items)]
    nearby = [items[(i + d) % len(items)] for d in (-step, 2 * step, 0)]
    return f"Which {kind} comes {direction} {items[i]}?", answer, nearby


def dates(rng: random.Random, wide: bool = False) -> Question:
    """Weekday and month arithmetic, and the length of a month (not in a leap year; `wide`:
    up to 30 days and 23 months ahead)."""
    style = rng.choice(["weekday", "month", "length"])
    if style == "weekday":
        i, k = rng.randrange(7), rng.randint(2, 30 if wide else 13)
        answer = DAYS[(i + k) % 7]
        wrong = [DAYS[(i + k + d) % 7] for d in (-1, 1, 2)]
        return f"If today is {DAYS[i]}, what day will it be in {k} days?", answer, wrong
    if style == "month":
        # Twelve months on is the same month: no question to ask.
        ahead = [*range(2, 12), *range(13, 24)] if wide else range(2, 12)
        i, k = rng.randrange(12), rng.choice(ahead)
        direction, sign = rng.choice([("after", 1), ("before", -1)])
        answer = MONTHS[(i + sign * k) % 12]
        wrong = [MONTHS[(i + sign * k + d) % 12] for d in (-1, 1)]
        wrong += [MONTHS[(i - sign * k) % 12], MONTHS[i]]
        return f"Which month is {k} months {direction} {MONTHS[i]}?", answer, wrong
    i = rng.randrange(12)
    wrong = [str(n) for n in (28, 29, 30, 31) if n != DAYS_IN_MONTH[i]]
    return f"How many days are there in {MONTHS[i]}?", str(DAYS_IN_MONTH[i]), wrong


def units(rng: random.Random, wide: bool = False) -> Question:
    """ "How many centimeters are in 2 meters?" (or back), wrong answers using another unit's
    factor or adding instead of multiplying (`wide`: up to 60 of the larger unit)."""
    unit, smaller, factor = rng.choice(UNITS)
    others = sorted({f for _, _, f in UNITS} - {factor})
    q = rng.randint(2, 60 if wide else 12)
    if rng.random() < 0.5:
        wrong = [q * f for f in others] + [q + factor]
        return f"How many {smaller} are in {q} {unit}?", str(q * factor), [str(w) for w in wrong]
    value = q * factor
    wrong = [value // f for f in others if value % f == 0] + [value * factor, value - factor, value]
    return f"How many {unit} are in {value} {smaller}?", str(q), [str(w) for w in wrong if w > 0]


GENERATORS: dict[str, Callable[[random.Random, bool], Question]] = {
    "arithmetic": arithmetic,
    "comparison": comparison,
    "ordering": ordering,
    "dates": dates,
    "units": units,
}


def generate(kind: str, split: str, seed: int, n: int | None = None) -> list[Doc]:
    """The first `n` distinct questions of one kind's split (all of it by default: 400 test,
    100 train). No test question is a train question: train skips the first 100 test
    questions, and the test questions after them skip train's."""
    n = (N_DOCS if split == "test" else N_TRAIN) if n is None else n
    rng = random.Random(f"builtin_{kind}/{split}/{seed}")
    taken: set[str] = set()
    if split == "train":
        taken = {d["question"] for d in generate(kind, "test", seed, N_FIRST)}
    elif n > N_FIRST:
        # Skipping train's questions never moves the first 100 test ones: train skips those.
        taken = {d["question"] for d in generate(kind, "train", seed)}
    docs: list[Doc] = []
    for _ in range(_MAX_TRIES * n):
        if len(docs) == n:
            break
        wide = split == "test" and len(docs) >= N_FIRST
        question, answer, wrong = GENERATORS[kind](rng, wide)
        if question in taken:
            continue
        taken.add(question)
        distractors = rng.sample(sorted(set(wrong) - {answer}), min(3, len(set(wrong) - {answer})))
        choices = [answer, *distractors]
        rng.shuffle(choices)
        docs.append(
            {
                "id": f"builtin_{kind}/{split}/{len(docs)}",
                "question": question,
                "choices": choices,
                "answer": choices.index(answer),
            }
        )
    if len(docs) < n:
        raise RuntimeError(f"builtin_{kind}: fewer than {n} distinct {split} questions")
    return docs


def builtin_task(kind: str, seed: int = 0) -> MultipleChoiceTask:
    """`builtin_<kind>` generated from `seed`."""

    def load(source: DataSource, split: str) -> list[Doc]:
        return generate(kind, split, seed)

    return MultipleChoiceTask(
        name=f"builtin_{kind}",
        group="builtin",
        load=load,
        eval_split="test",
        doc_to_text=lambda doc: f"Question: {doc['question']}\nAnswer:",
        doc_to_choice=lambda doc: doc["choices"],
        doc_to_target=lambda doc: doc["answer"],
        lm_eval_config={
            "dataset_path": "regress/builtin",
            "dataset_name": kind,
            "dataset_kwargs": {"seed": seed},
            "training_split": "train",
            "test_split": "test",
            "doc_to_text": "Question: {{question}}\nAnswer:",
            "doc_to_target": "answer",
            "doc_to_choice": "choices",
        },
        fewshot_split="train",
        version=1.0,
    )
