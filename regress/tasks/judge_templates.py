"""The judge's prompts and the verdicts they ask for.

A template is a text with placeholders (`{question}`, `{reference}`, `{answer}`,
`{answer_a}`, `{answer_b}`) and a mode that fixes what the judge must answer:

- `pairwise`: which of two answers is better, `[[A]]`, `[[B]]` or `[[C]]` for a tie
  (FastChat's MT-Bench format);
- `single`: one answer graded 1-10 as `[[7]]`;
- `rubric`: one answer scored 1-5 against a rubric as `[RESULT] 4` (Prometheus' format).

A verdict is read in one of two ways. From the reply by a strict pattern: the reply must
name exactly one verdict, anything else (none, two different ones, a score out of range) is a
judge error, a failure kept as data. Or, when the judge runs in process, from log-probs: the
prompt ends with the verdict's opening (`[[`, `[RESULT] `) and each possible verdict is scored
as a continuation; the most likely one is the verdict. That cannot fail to parse, and a tiny
judge that would ramble gives its preference all the same.

The four built-in templates were written for regress. A user's template is a UTF-8 file; its
sha256 is part of the judge's fingerprint, so editing it changes every cache key.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from regress.core.errors import BadInput
from regress.core.judgements import Mode

PLACEHOLDERS = ("question", "reference", "answer", "answer_a", "answer_b")
_PLACEHOLDER = re.compile(r"\{(" + "|".join(PLACEHOLDERS) + r")\}")
_NEEDS = {
    Mode.PAIRWISE: ("question", "answer_a", "answer_b"),
    Mode.SINGLE: ("question", "answer"),
    Mode.RUBRIC: ("question", "answer"),
}
OPENING = {Mode.PAIRWISE: "[[", Mode.SINGLE: "[[", Mode.RUBRIC: "[RESULT] "}
"""What the judge writes just before its verdict; log-prob reading ends the prompt with it."""
CHOICES = {
    Mode.PAIRWISE: ("A", "B", "C"),
    Mode.SINGLE: tuple(str(k) for k in range(1, 11)),
    Mode.RUBRIC: tuple(str(k) for k in range(1, 6)),
}
"""Every verdict a mode allows, as the judge writes it after its opening."""
CLOSING = {Mode.PAIRWISE: "", Mode.SINGLE: "]]", Mode.RUBRIC: ""}
"""What log-prob reading scores after each verdict: a 1-10 grade with its closing `]]`, since
tokenizers that split digits (Gemma's, SmolLM2's) make `10` the token `1` then `0`, and
without the brackets "1" would take 10's probability and 10 could never be read."""
_PATTERNS = {
    Mode.PAIRWISE: re.compile(r"\[\[([ABC])\]\]"),
    Mode.SINGLE: re.compile(r"\[\[(\d+(?:\.\d+)?)\]\]"),
    Mode.RUBRIC: re.compile(r"\[RESULT\]\s*(\d+)"),
}

_PAIRWISE = """\
Please act as an impartial judge and compare two answers to the question below. Decide which \
answer is more helpful, correct and clear. Do not let the order in which the answers appear, \
their length or their style influence you. Give a one-sentence reason, then your verdict on \
its own line: [[A]] if answer A is better, [[B]] if answer B is better, [[C]] for a tie.

[Question]
{question}

[Answer A]
{answer_a}

[Answer B]
{answer_b}

Verdict: """

_PAIRWISE_REFERENCE = """\
Please act as an impartial judge and compare two answers to the question below against the \
reference answer. Prefer the answer that agrees with the reference and is clear; an answer \
that contradicts the reference is worse. Do not let the order in which the answers appear, \
their length or their style influence you. Give a one-sentence reason, then your verdict on \
its own line: [[A]] if answer A is better, [[B]] if answer B is better, [[C]] for a tie.

[Question]
{question}

[Reference answer]
{reference}

[Answer A]
{answer_a}

[Answer B]
{answer_b}

Verdict: """

_SINGLE = """\
Please act as an impartial judge and rate the answer to the question below for helpfulness, \
correctness and clarity, on a scale of 1 (useless) to 10 (excellent). Give a one-sentence \
reason, then your rating on its own line in the form [[rating]], for example [[6]].

[Question]
{question}

[Answer]
{answer}

Rating: """

_RUBRIC = """\
You are grading an answer against a reference answer and a rubric. Write brief feedback, \
then a score from 1 to 5 on its own line in the form "[RESULT] score".

Rubric: Is the answer correct, complete and clearly written?
1: wrong or off-topic. 2: mostly wrong, or misses the point. 3: partly correct or incomplete. \
4: correct with small gaps. 5: correct, complete and clear, as good as the reference.

[Question]
{question}

[Reference answer]
{reference}

[Answer to grade]
{answer}

Feedback: """


@dataclass(frozen=True)
class JudgeTemplate:
    """A judge prompt, the mode it asks in, and where it came from."""

    name: str
    """A built-in name, or the file it was read from."""
    mode: Mode
    text: str

    @property
    def sha256(self) -> str:
        """The text's sha256: part of the judge's fingerprint and every cache key."""
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    @property
    def needs_reference(self) -> bool:
        return "{reference}" in self.text

    def render(self, question: str, reference: str | None = None, **answers: str) -> str:
        """The prompt for one judgement: `answer=` (single, rubric) or `answer_a=` and
        `answer_b=` (pairwise). Placeholders are replaced literally, so braces in an answer
        are never read as a format field."""
        if self.needs_reference and reference is None:
            raise BadInput(f"judge template {self.name} shows a reference the item lacks")
        values = {"question": question, "reference": reference or "", **answers}
        # One pass: an answer that contains "{answer_b}" is text, not another placeholder.
        return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), self.text)

    def read(self, reply: str) -> str | None:
        """The verdict a reply names by the strict pattern (`A`, `B`, `C`, or a score), or
        None when it names none, several different ones, or a score out of range."""
        found = set(_PATTERNS[self.mode].findall(reply))
        if len(found) != 1:
            return None
        verdict = found.pop()
        if self.mode is not Mode.PAIRWISE:
            verdict = verdict.rstrip("0").rstrip(".") if "." in verdict else verdict
            if verdict not in CHOICES[self.mode]:
                return None
        return verdict


BUILTIN = {
    "pairwise": JudgeTemplate("pairwise", Mode.PAIRWISE, _PAIRWISE),
    "pairwise_reference": JudgeTemplate("pairwise_reference", Mode.PAIRWISE, _PAIRWISE_REFERENCE),
    "single": JudgeTemplate("single", Mode.SINGLE, _SINGLE),
    "rubric": JudgeTemplate("rubric", Mode.RUBRIC, _RUBRIC),
}


def judge_template(name: str, mode: Mode | None = None) -> JudgeTemplate:
    """A built-in template by name, or a template file (its mode given by `mode`, default
    pairwise). A file must hold the placeholders its mode needs."""
    if name in BUILTIN:
        found = BUILTIN[name]
        if mode is not None and mode is not found.mode:
            raise BadInput(f"judge template {name} asks in {found.mode} mode, not {mode}")
        return found
    path = Path(name)
    if not path.is_file():
        known = ", ".join(BUILTIN)
        raise BadInput(f"judge template {name!r} is neither built in ({known}) nor a file")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"judge template {path}: cannot read it as UTF-8 text ({exc})") from exc
    template = JudgeTemplate(str(path), mode or Mode.PAIRWISE, text)
    missing = [p for p in _NEEDS[template.mode] if "{" + p + "}" not in text]
    if missing:
        raise BadInput(
            f"judge template {path}: a {template.mode} template needs "
            + ", ".join("{" + p + "}" for p in missing)
        )
    return template
