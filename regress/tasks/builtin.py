"""The built-in suite: small generated multiple-choice tasks that need no files.

Five skills a 135M-parameter model gets right sometimes but not always: arithmetic,
comparing numbers, what comes after or before in a sequence, calendar reasoning and unit
conversion. Questions use ARC's prompt ("Question: ...\\nAnswer:") and are generated from a
seed (default 0): the same seed always gives the same documents. The test split (100
questions) and the train split used for few-shot (100 questions, none repeating a test
question) come from separate random streams.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from regress.tasks.base import DataSource
from regress.tasks.loaders import Doc
from regress.tasks.multiple_choice import MultipleChoiceTask

N_DOCS = 100
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


def arithmetic(rng: random.Random) -> Question:
    """ "What is 7 + 5?" with near misses and the digits run together as wrong answers."""
    op = rng.choice(["+", "-", "times"])
    if op == "+":
        a, b = rng.randint(2, 50), rng.randint(2, 50)
        answer, slip = a + b, a * b
    elif op == "-":
        a = rng.randint(10, 60)
        b = rng.randint(1, a - 1)
        answer, slip = a - b, a + b
    else:
        a, b = rng.randint(2, 12), rng.randint(2, 12)
        answer, slip = a * b, a + b
    wrong = [answer + 1, answer - 1, answer + 2, answer + 10, answer - 10, int(f"{a}{b}"), slip]
    return f"What is {a} {op} {b}?", str(answer), [str(w) for w in wrong if w > 0]


def comparison(rng: random.Random) -> Question:
    """ "Which is larger: 0.7 or 0.25?": decimals of different lengths, integers, negatives."""
    style = rng.choice(["decimal", "integer", "negative"])
    while True:
        if style == "decimal":
            x, y = rng.randint(1, 9) / 10, rng.randint(11, 99) / 100
        elif style == "integer":
            x, y = rng.randint(10, 99), rng.randint(10, 99)
        else:
            x, y = -rng.randint(1, 20), -rng.randint(1, 20)
        if x != y:
            break
    pair = [x, y] if rng.random() < 0.5 else [y, x]
    word, pick = rng.choice([("larger", max), ("smaller", min)])
    answer = pick(pair)
    other = pair[1] if answer == pair[0] else pair[0]
    return f"Which is {word}: {pair[0]} or {pair[1]}?", str(answer), [str(other)]


def ordering(rng: random.Random) -> Question:
    """ "Which day comes after Tuesday?" over days, months, letters and numbers."""
    kind, items = rng.choice(
        [("day", DAYS), ("month", MONTHS), ("letter", LETTERS), ("number", NUMBERS)]
    )
    cyclic = kind in ("day", "month")
    direction = rng.choice(["after", "before"])
    i = rng.randrange(len(items)) if cyclic else rng.randrange(1, len(items) - 1)
    step = 1 if direction == "after" else -1
    answer = items[(i + step) % len(items)]
    nearby = [items[(i + d) % len(items)] for d in (-step, 2 * step, 0)]
    return f"Which {kind} comes {direction} {items[i]}?", answer, nearby


def dates(rng: random.Random) -> Question:
    """Weekday and month arithmetic, and the length of a month (not in a leap year)."""
    style = rng.choice(["weekday", "month", "length"])
    if style == "weekday":
        i, k = rng.randrange(7), rng.randint(2, 13)
        answer = DAYS[(i + k) % 7]
        wrong = [DAYS[(i + k + d) % 7] for d in (-1, 1, 2)]
        return f"If today is {DAYS[i]}, what day will it be in {k} days?", answer, wrong
    if style == "month":
        i, k = rng.randrange(12), rng.randint(2, 11)
        direction, sign = rng.choice([("after", 1), ("before", -1)])
        answer = MONTHS[(i + sign * k) % 12]
        wrong = [MONTHS[(i + sign * k + d) % 12] for d in (-1, 1)]
        wrong += [MONTHS[(i - sign * k) % 12], MONTHS[i]]
        return f"Which month is {k} months {direction} {MONTHS[i]}?", answer, wrong
    i = rng.randrange(12)
    wrong = [str(n) for n in (28, 29, 30, 31) if n != DAYS_IN_MONTH[i]]
    return f"How many days are there in {MONTHS[i]}?", str(DAYS_IN_MONTH[i]), wrong


def units(rng: random.Random) -> Question:
    """ "How many centimeters are in 2 meters?" (or back), wrong answers using another unit's
    factor or adding instead of multiplying."""
    unit, smaller, factor = rng.choice(UNITS)
    others = sorted({f for _, _, f in UNITS} - {factor})
    q = rng.randint(2, 12)
    if rng.random() < 0.5:
        wrong = [q * f for f in others] + [q + factor]
        return f"How many {smaller} are in {q} {unit}?", str(q * factor), [str(w) for w in wrong]
    value = q * factor
    wrong = [value // f for f in others if value % f == 0] + [value * factor, value - factor, value]
    return f"How many {unit} are in {value} {smaller}?", str(q), [str(w) for w in wrong if w > 0]


GENERATORS: dict[str, Callable[[random.Random], Question]] = {
    "arithmetic": arithmetic,
    "comparison": comparison,
    "ordering": ordering,
    "dates": dates,
    "units": units,
}


def generate(kind: str, split: str, seed: int, n: int = N_DOCS) -> list[Doc]:
    """`n` distinct questions of one kind; train never repeats a test question."""
    rng = random.Random(f"builtin_{kind}/{split}/{seed}")
    taken = {d["question"] for d in generate(kind, "test", seed, n)} if split == "train" else set()
    docs: list[Doc] = []
    for _ in range(_MAX_TRIES * n):
        if len(docs) == n:
            break
        question, answer, wrong = GENERATORS[kind](rng)
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
