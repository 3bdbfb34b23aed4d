"""How a run generates: lm-eval's `--gen_kwargs` overrides, repeated samples, thinking.

A task renders `GenerateRequest`s with its own generation settings (lm-eval's
`generation_kwargs`). `GenerationSettings` is what the run changes on top of them: sampling
overrides, `repeats` samples per document (seeds `seed`, `seed + 1`, ...), and how a
reasoning model's thinking is read: with `think_end_token` set, generation does not stop at
the task's stop strings (they may appear inside the thinking), and the answer is the text
after the last `think_end_token`, cut at the first stop string (lm-eval's
`postprocess_generated_text`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from regress.core import safe_regex
from regress.core.errors import BadInput
from regress.core.requests import GenerateRequest, cut_at_stop

REASONING_CAPS = {"standard": 2000, "complex": 8000}
"""Reasoning tokens allowed before a generation counts as a Timeout/Loop (seed 002)."""
OUTPUT_CAPS = {"standard": 1000, "complex": 4000}
"""Final-answer tokens allowed before a generation counts as Incomplete (seed 002)."""

DEFAULT_REFUSALS = (
    r"\bI (?:cannot|can't|can not|won't|am unable to|am not able to) (?:help|assist|"
    r"answer|provide|comply|fulfil+)",
    r"\bI'm (?:sorry|afraid),? (?:but )?I (?:cannot|can't|won't)",
    r"\bAs an AI(?: language model)?, I (?:cannot|can't|don't)",
)
"""Refusal phrasings (case-insensitive regexes); `--refusal-pattern` replaces them."""

_KWARGS: dict[str, type] = {
    "temperature": float,
    "top_p": float,
    "top_k": int,
    "min_p": float,
    "seed": int,
    "max_gen_toks": int,
    "do_sample": bool,
}


def parse_gen_kwargs(text: str) -> dict[str, Any]:
    """lm-eval's `--gen_kwargs temperature=0.8,top_p=0.95,seed=1` as typed values."""
    out: dict[str, Any] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or key not in _KWARGS:
            known = ", ".join(_KWARGS)
            raise BadInput(f"--gen-kwargs: {item!r} is not key=value with a key among {known}")
        out[key] = _typed(key, value.strip())
    return out


def _typed(key: str, value: Any) -> Any:
    kind = _KWARGS[key]
    try:
        if kind is bool:
            if isinstance(value, bool):
                return value
            if str(value).lower() not in ("true", "false"):
                raise ValueError(value)
            return str(value).lower() == "true"
        number = kind(value)
    except (TypeError, ValueError):
        raise BadInput(f"gen_kwargs: {key} must be {kind.__name__}, got {value!r}") from None
    if number < 0 or (key in ("top_p", "min_p") and number > 1):
        raise BadInput(f"gen_kwargs: {key} = {number} is out of range")
    if key == "max_gen_toks" and number < 1:
        raise BadInput("gen_kwargs: max_gen_toks must be at least 1")
    return number


def check_gen_kwargs(values: Mapping[str, Any], where: str) -> dict[str, Any]:
    """A suite's `gen_kwargs:` mapping, typed and checked like the command line's."""
    unknown = set(values) - set(_KWARGS)
    if unknown:
        known = ", ".join(_KWARGS)
        raise BadInput(f"{where}: unknown gen_kwargs {sorted(unknown)}; known: {known}")
    return {key: _typed(key, value) for key, value in values.items()}


@dataclass(frozen=True)
class GenerationSettings:
    """What a run changes about a task's generations, and how it reads them."""

    gen_kwargs: Mapping[str, Any] = field(default_factory=dict)
    """Overrides of the task's own settings (`parse_gen_kwargs`)."""
    repeats: int = 1
    """Samples per document; more than one needs sampling (temperature > 0)."""
    think_end_token: str | None = None
    """Marks the end of a reasoning model's thinking; None: the model does not think."""
    think_start_token: str = "<think>"
    budget: str = "standard"
    """Which of seed 002's caps apply to thinking runs: standard or complex."""
    refusals: tuple[str, ...] = DEFAULT_REFUSALS
    """Regexes (case-insensitive) that make an answer a refusal."""

    def __post_init__(self) -> None:
        if self.repeats < 1:
            raise BadInput(f"repeats must be at least 1, got {self.repeats}")
        if self.budget not in REASONING_CAPS:
            raise BadInput(f"budget must be one of {sorted(REASONING_CAPS)}, got {self.budget!r}")
        if self.think_end_token == "":
            raise BadInput("think_end_token must not be empty")
        for pattern in self.refusals:
            safe_regex.check(pattern, "refusal pattern")

    @property
    def is_default(self) -> bool:
        """Whether the task's own settings run unchanged."""
        return self == GenerationSettings()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, for a manifest's task entry."""
        return {
            "gen_kwargs": dict(sorted(self.gen_kwargs.items())),
            "repeats": self.repeats,
            "think_end_token": self.think_end_token,
            "think_start_token": self.think_start_token,
            "budget": self.budget,
            **({"refusals": list(self.refusals)} if self.refusals != DEFAULT_REFUSALS else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GenerationSettings:
        """The settings a manifest recorded."""
        return cls(
            gen_kwargs=check_gen_kwargs(data.get("gen_kwargs", {}), "manifest generation"),
            repeats=int(data.get("repeats", 1)),
            think_end_token=data.get("think_end_token"),
            think_start_token=data.get("think_start_token", "<think>"),
            budget=data.get("budget", "standard"),
            refusals=tuple(data.get("refusals", DEFAULT_REFUSALS)),
        )

    def over(self, other: GenerationSettings) -> GenerationSettings:
        """These settings where they say something, else `other`'s (the command line over
        a suite entry)."""
        default = GenerationSettings()
        return GenerationSettings(
            gen_kwargs={**other.gen_kwargs, **self.gen_kwargs},
            repeats=self.repeats if self.repeats != default.repeats else other.repeats,
            think_end_token=self.think_end_token or other.think_end_token,
            think_start_token=self.think_start_token
            if self.think_start_token != default.think_start_token
            else other.think_start_token,
            budget=self.budget if self.budget != default.budget else other.budget,
            refusals=self.refusals if self.refusals != default.refusals else other.refusals,
        )

    @property
    def reasoning_cap(self) -> int | None:
        """Reasoning tokens allowed, when the model thinks."""
        return REASONING_CAPS[self.budget] if self.think_end_token else None

    @property
    def output_cap(self) -> int | None:
        """Final-answer tokens allowed, when the model thinks (else the task's max_gen_toks)."""
        return OUTPUT_CAPS[self.budget] if self.think_end_token else None

    def apply(self, request: GenerateRequest) -> GenerateRequest:
        """The request with this run's overrides (lm-eval: do_sample=False means greedy)."""
        kw = dict(self.gen_kwargs)
        changes: dict[str, Any] = {}
        for name in ("temperature", "top_p", "top_k", "min_p", "seed"):
            if name in kw:
                changes[name] = kw[name]
        if kw.get("do_sample") is False:
            changes["temperature"] = 0.0
        if "max_gen_toks" in kw:
            changes["max_tokens"] = kw["max_gen_toks"]
        if self.think_end_token:
            # Thinking may contain the stop strings: stop only at end of sequence or the
            # total budget, and cut the answer afterwards (`answer_text`).
            cap = self.output_cap or 0
            changes |= {"until": (), "max_tokens": (self.reasoning_cap or 0) + cap}
        return dataclasses.replace(request, **changes)

    def samples(self, request: GenerateRequest) -> tuple[GenerateRequest, ...]:
        """The `repeats` requests for one generation: seeds seed, seed + 1, ..."""
        applied = self.apply(request)
        if self.repeats > 1 and applied.greedy:
            raise BadInput(
                f"repeats {self.repeats} with greedy decoding gives {self.repeats} identical "
                "answers; set a temperature (--gen-kwargs temperature=0.8)"
            )
        return tuple(
            dataclasses.replace(applied, seed=applied.seed + i) for i in range(self.repeats)
        )


@dataclass(frozen=True)
class ReadAnswer:
    """A generation split into its thinking and its answer."""

    answer: str
    """What the task scores: after the thinking, cut at the first stop string."""
    thinking: str
    """The thinking span ('' when the model did not think)."""
    think_opened: bool
    think_closed: bool


def read_answer(text: str, until: tuple[str, ...], settings: GenerationSettings) -> ReadAnswer:
    """Split a raw generation as lm-eval does with `think_end_token`."""
    end = settings.think_end_token
    if not end:
        return ReadAnswer(text, "", False, False)
    opened = settings.think_start_token in text or end in text
    closed = end in text
    thinking, _, answer = text.rpartition(end) if closed else (text if opened else "", "", "")
    if not opened:
        answer = text
    answer = answer.lstrip()
    return ReadAnswer(cut_at_stop(answer, until)[0], thinking, opened, closed)
