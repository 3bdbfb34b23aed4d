"""Prompt formats: the same examples in K semantically equal wordings (`--formats K`), so a
gate sees how a model does across formats, not in one (Sclar et al. 2023, FormatSpread: up to
76 accuracy points between equal formats).

A format rewrites the fields a prompt already has, the way FormatSpread's grammar does:

- the field names `Question:` and `Answer:` (at the start of a line) spelled in full or short
  (`Q:`, `A:`), as written, upper or lower case, and followed by `:`, ` :`, ` -` or `::`;
- the line break before a field or a listed choice kept, or replaced by a space or a blank
  line;
- listed choices (`A. text`, as MMLU lists them) labelled `A.`, `(A)` or `A)`.

Stop strings of generations are renamed the same way, so a generation still stops at the
next question. A task whose prompts hold none of these fields is the same in every format.

Format 0 is the task as it is; formats 1, 2, ... are drawn from the grammar in an order fixed
by FORMAT_SEED, so `arc_easy@fmt3` names the same prompts on every machine and version of this
grammar (GRAMMAR_VERSION), and the prompt hashes a baseline stores pin them: a candidate
reruns exactly the baseline's K prompts. `TASK@fmtN` (or `GROUP@fmtN`) is a task of its own,
in unit `UNIT@fmtN`, so the gate tests each format as a unit, Holm-corrected with the rest.
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from regress.core.errors import BadInput
from regress.core.requests import (
    GenerateRequest,
    LoglikelihoodRequest,
    Request,
)
from regress.tasks.base import DataSource, Example
from regress.tasks.variants import TaskVariant

GRAMMAR_VERSION = 1
FORMAT_SEED = 20231017
"""Fixes the order formats 1, 2, ... are drawn in (FormatSpread's arXiv date)."""
MAX_FORMATS = 64
_NAMES = {"full": ("Question", "Answer"), "short": ("Q", "A")}
_CASES = ("as is", "upper", "lower")
_SEPARATORS = (":", " :", " -", "::")
_BREAKS = ("\n", " ", "\n\n")
_LABELS = ("{}.", "({})", "{})")
_FIELD = re.compile(r"(?m)^(Question|Answer):")
_CHOICE = re.compile(r"(?m)^([A-J])\. ")


@dataclass(frozen=True)
class PromptFormat:
    """One wording of a task's fields."""

    names: str = "full"
    case: str = "as is"
    separator: str = ":"
    line_break: str = "\n"
    label: str = "{}."

    def describe(self) -> str:
        """`short names, upper, separator ' -', break ' ', labels (A)`."""
        return (
            f"{self.names} names, {self.case}, separator {self.separator!r}, break "
            f"{self.line_break!r}, labels {self.label.format('A')}"
        )

    def field(self, name: str) -> str:
        """`Question` or `Answer` as this format writes it, separator included."""
        word = _NAMES[self.names][0 if name == "Question" else 1]
        if self.case == "upper":
            word = word.upper()
        elif self.case == "lower":
            word = word.lower()
        return word + self.separator

    def text(self, text: str) -> str:
        """A prompt in this format: choices relabelled and fields renamed where they start a
        line, then the line breaks before them replaced."""
        text = _CHOICE.sub(lambda m: self.label.format(m[1]) + " ", text)
        text = _FIELD.sub(lambda m: self.field(m[1]), text)
        fields = "|".join(re.escape(self.field(name)) for name in ("Question", "Answer"))
        labels = re.escape(self.label.format("@")).replace("@", "[A-J]")
        before = re.compile(rf"\n(?=(?:{fields})|{labels} )")
        return before.sub(lambda _: self.line_break, text)

    def stop(self, text: str) -> str:
        """A stop string with its field renamed (`Question:` -> `Q -`)."""
        return re.sub(r"(Question|Answer):", lambda m: self.field(m[1]), text)

    def request(self, request: Request) -> Request:
        """A request with its prompt (and a generation's stop strings) in this format."""
        if isinstance(request, GenerateRequest):
            if request.messages:
                raise BadInput("prompt formats rewrite one prompt; a conversation has no formats")
            until = tuple(self.stop(u) for u in request.until)
            return replace(request, context=self.text(request.context), until=until)
        if isinstance(request, LoglikelihoodRequest):
            return replace(request, context=self.text(request.context))
        return request  # a rolling (perplexity) request has no fields


def _grammar() -> list[PromptFormat]:
    """Every format but the task's own, in FORMAT_SEED's order; the task's own first."""
    own = PromptFormat()
    others = [
        PromptFormat(*choice)
        for choice in itertools.product(_NAMES, _CASES, _SEPARATORS, _BREAKS, _LABELS)
        if PromptFormat(*choice) != own
    ]
    random.Random(FORMAT_SEED).shuffle(others)
    return [own, *others]


GRAMMAR = _grammar()


def prompt_format(index: int) -> PromptFormat:
    """Format `index` (0: the task's own)."""
    if not 0 <= index < min(len(GRAMMAR), MAX_FORMATS):
        raise BadInput(f"format {index}: formats run from 0 to {MAX_FORMATS - 1}")
    return GRAMMAR[index]


def formatted_names(names: Sequence[str], k: int) -> list[str]:
    """Each task or group name in formats 0..k-1 (`arc_easy@fmt0`, ...)."""
    if not 1 <= k <= MAX_FORMATS:
        raise BadInput(f"--formats: between 1 and {MAX_FORMATS}, got {k}")
    return [f"{name}@fmt{i}" for name in names for i in range(k)]


# eq=False: a task is an identity, as the tasks it wraps.
@dataclass(frozen=True, eq=False)
class FormattedTask(TaskVariant):
    """`task` with every prompt in format `index`; scored exactly as `task`."""

    index: int

    @property
    def format(self) -> PromptFormat:
        return prompt_format(self.index)

    @property
    def suffix(self) -> str:
        return f"fmt{self.index}"

    def examples(
        self, source: DataSource, num_fewshot: int | None = None, limit: int | None = None
    ) -> list[Example]:
        """The task's examples, each request in this format."""
        fmt = self.format
        return [
            replace(e, requests=tuple(fmt.request(r) for r in e.requests))
            for e in self.task.examples(source, num_fewshot, limit)
        ]

    def config(self) -> dict[str, Any]:
        """The task's config, with the format (`regress_format`) it was rendered in."""
        return {
            **super().config(),
            "regress_format": {
                "index": self.index,
                "grammar_version": GRAMMAR_VERSION,
                "format": self.format.describe(),
            },
        }
