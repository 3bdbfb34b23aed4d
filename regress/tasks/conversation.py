"""Conversations: multi-turn tasks, one JSON object per line, gated per conversation.

```json
{"id": "capital", "system": "Keep your answers short.", "tags": ["correction"],
 "turns": [{"user": "What is the capital of France?", "check": {"expected": "Paris",
            "match": "contains"}},
           {"user": "I think it is Lyon, isn't it?", "check": {"expected": "Paris",
            "match": "contains"}}]}
```

An item has an `id`, optional `system`, `tags`, `must_pass` and `history`, and two to fifty
`turns` (MAX_TURNS). A set with must-pass conversations is also a golden set for the gate: a
must-pass conversation the baseline passed may not fail, and the pass rate may not drop by more
than the policy's relative limit (docs/tasks.md#golden-sets). A turn has a `user` message and
optionally:

- `check`: how the reply is judged, with any of `expected` (with `match` and `ignore_case`,
  exactly as a golden set's), `validators` (a list of validator specs: json_schema, regex,
  not_regex, numeric, instructions) and `tests` (assert statements run in the code sandbox
  against the reply's code) and `judge` (`{"min": 7}`, optionally with a `reference`: the
  policy's grading judge scores the reply in context at check time, and it passes at `min` or
  above); the turn passes when every one passes. A turn without a check is context only;
- `max_tokens` (default 64, as a golden set's) and `until` (stop strings; default none:
  the chat template's end of turn stops it);
- `assistant`: the reference reply, used with `history: reference`.

With `history: own` (the default) each turn's prompt holds the model's own earlier replies
through its chat template, so a wrong turn can derail the rest. `history: reference` puts the
given `assistant` replies there instead (every turn but the last needs one), so each turn's
skill is measured alone.

Results per conversation: `conv_pass` (primary, 0/1: every checked turn passed),
`turn_pass` (the share of checked turns passed) and `turns_before_failure` (turns answered
before the first failed check; all turns when none failed). The task adds per-turn accuracy
with an interval clustered by conversation (turns of one conversation are not
independent) and the accuracy at each turn position.

A set with a judged turn is scored only by a judge (primary metric `judged`, as
`open_answers`): `eval` reports what code can check, and `check` gates each conversation on
every check once the judge has scored its judged turns (regress.gate.judged).

Every turn's text (system and user messages, reference replies) is in the prompt hash, and
the item (checks and flags included) in the doc hash, so a changed conversation is refused
like a changed prompt.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from regress.core.errors import BadInput, RunFailed
from regress.core.requests import GenerateRequest, GenerateResult, Message, RequestKind, Result
from regress.tasks.base import DataSource, Example, Scored
from regress.tasks.generative import data_path
from regress.tasks.golden import (
    generation_limits,
    item_flags,
    match_rule,
    matches,
    must_pass_rate,
    read_set,
    set_rows,
)
from regress.tasks.loaders import Doc
from regress.tasks.metrics import mean_with_stderr
from regress.tasks.open_answers import JUDGED
from regress.tasks.scoring.hidden_tests import parse_test
from regress.tasks.scoring.sandbox import (
    HINT,
    Outcome,
    SandboxLimits,
    optional_layers_from_env,
    run_python,
)
from regress.tasks.scoring.validators import parse_validator

HISTORIES = ("own", "reference")
MAX_TURNS = 50
"""Turns one conversation may have. Each turn's prompt holds every earlier message, so the
requests of n turns hold about n^2 messages: 10^5 one-word turns (a 2.2 MB file) once asked
for 21 GiB. Fifty is more than any chat benchmark uses and keeps a whole set's prompts
within a few hundred MB (with golden.MAX_SET_BYTES)."""
METRICS = ("conv_pass", "turn_pass", "turns_before_failure")
_ITEM_KEYS = {"id", "system", "turns", "tags", "must_pass", "history"}
_TURN_KEYS = {"user", "check", "assistant", "max_tokens", "until"}
_CHECK_KEYS = {"expected", "match", "ignore_case", "validators", "tests", "judge"}
_JUDGE_KEYS = {"min", "reference"}
JUDGE_PENDING = "left to the judge"
"""A judged turn's reason at run time: its verdict is made at check time."""
_SANDBOX = SandboxLimits(cpu_seconds=5, wall_seconds=10.0)
_FENCED = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL)


def read_conversations(path: Path) -> list[Doc]:
    """The items of a conversation file, checked and normalised (defaults filled in)."""
    return read_set(path, _item, "conversation set")


def is_conversation_file(path: Path) -> bool:
    """Whether a JSONL file holds conversations (its first item has `turns`)."""
    rows = set_rows(path, "golden set") if path.is_file() else []
    return bool(rows) and "turns" in rows[0]


def _text(row: dict[str, Any], key: str, where: str, required: bool = True) -> str | None:
    value = row.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value:
        raise BadInput(f"{where}: `{key}` must be a non-empty string")
    return value


def _known(row: dict[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(row) - allowed)
    if unknown:
        listed = ", ".join(sorted(allowed))
        raise BadInput(f"{where}: unknown key {unknown[0]!r} (allowed: {listed})")


def _item(row: Any, where: str) -> Doc:
    if not isinstance(row, dict):
        raise BadInput(f"{where}: an item is a JSON object")
    _known(row, _ITEM_KEYS, where)
    flags = item_flags(row, where)
    history = row.get("history", "own")
    if history not in HISTORIES:
        raise BadInput(f"{where}: `history` must be one of {', '.join(HISTORIES)}")
    turns = row.get("turns")
    if not isinstance(turns, list) or len(turns) < 2:
        raise BadInput(f"{where}: `turns` must be a list of two or more turns")
    if len(turns) > MAX_TURNS:
        raise BadInput(
            f"{where}: {len(turns):,} turns, more than the {MAX_TURNS} a conversation may have"
        )
    parsed = [_turn(t, f"{where}: turn {i + 1}") for i, t in enumerate(turns)]
    for i, turn in enumerate(parsed):
        last = i == len(parsed) - 1
        if history == "reference" and not last and "assistant" not in turn:
            raise BadInput(f"{where}: turn {i + 1} needs `assistant` (history: reference)")
        if history == "own" and "assistant" in turn:
            raise BadInput(f"{where}: turn {i + 1}: `assistant` is read with history: reference")
    if not any("check" in t for t in parsed):
        raise BadInput(f"{where}: no turn has a `check`")
    if flags["must_pass"] and any("judge" in t.get("check", {}) for t in parsed):
        # A must-pass rule reads the stored records; a judged turn has no verdict there.
        raise BadInput(f"{where}: a must-pass conversation cannot have a judged turn")
    item: Doc = {"id": _text(row, "id", where), **flags}
    if (system := _text(row, "system", where, required=False)) is not None:
        item["system"] = system
    return item | {"history": history, "turns": parsed}


def _turn(row: Any, where: str) -> Doc:
    if not isinstance(row, dict):
        raise BadInput(f"{where}: a turn is a JSON object with a `user` message")
    _known(row, _TURN_KEYS, where)
    turn: Doc = {"user": _text(row, "user", where)}
    if "assistant" in row:
        turn["assistant"] = _text(row, "assistant", where)
    if "check" in row:
        turn["check"] = _check(row["check"], f"{where}: check")
    return turn | generation_limits(row, where, ())


def _check(spec: Any, where: str) -> Doc:
    if not isinstance(spec, dict) or not spec:
        raise BadInput(f"{where}: a check is an object with expected, validators or tests")
    _known(spec, _CHECK_KEYS, where)
    check: Doc = {}
    if "expected" in spec:
        check |= match_rule(spec, where)
    elif "match" in spec or "ignore_case" in spec:
        raise BadInput(f"{where}: `match` and `ignore_case` go with `expected`")
    if "validators" in spec:
        specs = spec["validators"]
        if not isinstance(specs, list) or not specs:
            raise BadInput(f"{where}: `validators` must be a non-empty list of validator specs")
        for i, v in enumerate(specs):
            parse_validator(v, f"{where}: validators[{i}]")
        check["validators"] = specs
    if "tests" in spec:
        tests = spec["tests"]
        if not isinstance(tests, list) or not tests or not all(isinstance(t, str) for t in tests):
            raise BadInput(f"{where}: `tests` must be a non-empty list of assert statements")
        for statement in tests:
            try:
                parse_test(statement)  # refused now, not when a reply is judged
            except BadInput as exc:
                raise BadInput(f"{where}: {exc}") from None
        check["tests"] = tests
    if "judge" in spec:
        check["judge"] = _judge_check(spec["judge"], f"{where}: judge")
    return check


def _judge_check(spec: Any, where: str) -> Doc:
    if not isinstance(spec, dict):
        raise BadInput(f"{where}: a judge check is an object with `min` (the passing score)")
    _known(spec, _JUDGE_KEYS, where)
    low = spec.get("min")
    if isinstance(low, bool) or not isinstance(low, int | float) or low < 1:
        raise BadInput(f"{where}: `min` must be a score of 1 or more on the judge's scale")
    out: Doc = {"min": low}
    if "reference" in spec:
        out["reference"] = _text(spec, "reference", where)
    return out


def judged_turns(item: Doc) -> list[tuple[int, Doc]]:
    """Each turn of a conversation whose check includes the judge: its 0-based index and its
    judge check (`min`, and `reference` when given)."""
    checks = [t.get("check", {}) for t in item["turns"]]
    return [(i, check["judge"]) for i, check in enumerate(checks) if "judge" in check]


def judge_turn(check: Doc, reply: str) -> tuple[bool, str]:
    """Whether a reply passes its turn's checks that code makes (all but `judge`), and why
    not (empty when it passed)."""
    if "expected" in check and not matches(reply, check):
        return False, f"expected {check['match']} {check['expected'][0]!r}"
    for spec in check.get("validators", ()):
        verdict = parse_validator(spec).check(reply)
        if not verdict.passed:
            return False, verdict.reason
    if "tests" in check:
        limits = SandboxLimits(
            cpu_seconds=_SANDBOX.cpu_seconds,
            wall_seconds=_SANDBOX.wall_seconds,
            optional_layers=optional_layers_from_env(),
        )
        result = run_python(reply_code(reply), check["tests"], limits)
        if result.outcome is Outcome.SANDBOX_ERROR:
            raise RunFailed(
                f"conversation check: the code sandbox refused to run: {result.reason} ({HINT})"
            )
        if not result.passed:
            return False, f"code {result.outcome.value}: {result.reason}"
    return True, ""


def reply_code(reply: str) -> str:
    """The program in a reply: its first fenced code block, else the whole reply."""
    block = _FENCED.search(reply)
    return block[1] if block else reply


def messages(item: Doc, turn: int, replies: Sequence[str] | None = None) -> tuple[Message, ...]:
    """The messages of turn `turn` (0-based): the system message, every earlier exchange and
    this turn's user message. Earlier replies are `replies` (the model's own) or, when None,
    the item's reference replies ('' for own history: a placeholder the run fills in)."""
    out: list[Message] = [("system", item["system"])] if "system" in item else []
    for i, t in enumerate(item["turns"][:turn]):
        reply = replies[i] if replies is not None else t.get("assistant", "")
        out += [("user", t["user"]), ("assistant", reply)]
    return (*out, ("user", item["turns"][turn]["user"]))


def judge_question(item: Doc, upto: int | None = None) -> str:
    """A conversation as a judge reads its question: the system message and each turn's user
    message (the first `upto` turns; all by default), with `history: reference` the given
    reply that followed each but the last shown (the model saw those; with its own history it
    saw its own replies, which are the answers judged)."""
    n = len(item["turns"])
    shown = item["turns"][: upto or n]
    lines = [f"(System message: {item['system']})"] if "system" in item else []
    for i, turn in enumerate(shown, 1):
        lines.append(f"User, turn {i} of {n}: {turn['user']}")
        if item["history"] == "reference" and i < len(shown):
            lines.append(f"(Given assistant reply to turn {i}: {turn['assistant']})")
    return "\n\n".join(lines)


def judge_answer(replies: Sequence[str], first: int = 1) -> str:
    """One side's replies to a conversation, turn by turn (the first one is turn `first`),
    as a judge reads its answer."""
    return "\n\n".join(f"Assistant, turn {i}: {reply}" for i, reply in enumerate(replies, first))


def turn_question(item: Doc, turn: int) -> str:
    """The question a grading judge reads for turn `turn` (0-based): the conversation up to
    that turn's user message, and which reply to grade. With `history: reference` the given
    replies are part of it; with the model's own, they are in the answer (`turn_answer`)."""
    earlier = "" if turn == 0 else "; its earlier replies are context"
    focus = f"(Grade only the assistant's reply to turn {turn + 1}{earlier}.)"
    return f"{judge_question(item, turn + 1)}\n\n{focus}"


def turn_answer(item: Doc, replies: Sequence[str], turn: int) -> str:
    """One side's answer to grade for turn `turn`: with its own history, its replies up to
    and including that turn (the judge must see what the model saw); with reference
    history, that turn's reply alone."""
    if item["history"] == "reference":
        return judge_answer([replies[turn]], first=turn + 1)
    return judge_answer(replies[: turn + 1])


def cluster_interval(passed: Sequence[float], checked: Sequence[float]) -> tuple[float, float]:
    """95% interval of pooled per-turn accuracy (sum passed / sum checked), clustered by
    conversation: a Wilson score interval at the effective number of turns (Korn & Graubard
    1998), their count shrunk by the design effect the conversations' spread shows (the
    ratio estimator's linearised cluster variance, never above the turns themselves), with
    t's quantile on conversations - 1 degrees of freedom. The percentile cluster bootstrap
    it replaced covered 90-93% at 10-30 conversations (issue 50); this one holds 94-96% where
    accuracy is 30-85% (docs/results/conversations.md, `tests/test_conversations.py`)."""
    from scipy import stats  # loaded by the runs that aggregate, not at start

    p, c = np.asarray(passed, dtype=float), np.asarray(checked, dtype=float)
    total = float(c.sum())
    rate = float(p.sum()) / max(total, 1.0)
    if len(p) < 2:
        return rate, rate
    residual = p - rate * c
    variance = len(p) / (len(p) - 1) * float(np.sum(residual**2)) / total**2
    # No spread (every conversation at one rate, or all at 0 or 1): the turns count whole.
    effective = min(total, rate * (1 - rate) / variance) if variance > 0 else total
    z = float(stats.t.ppf(0.975, len(p) - 1))
    scale = 1 + z * z / effective
    middle = (rate + z * z / (2 * effective)) / scale
    half = z * math.sqrt(rate * (1 - rate) / effective + z * z / (4 * effective**2)) / scale
    return max(0.0, middle - half), min(1.0, middle + half)


# eq=False: a task is an identity (hashable, usable as a key), not a value.
@dataclass(frozen=True, eq=False)
class ConversationTask:
    """A conversation set as a task: one example (and one gated outcome) per conversation."""

    name: str
    items: tuple[Doc, ...]
    path: Path | None = None
    """The user's file; None for the built-in set."""
    group: str | None = None
    output_type: RequestKind = "generate_until"
    binary: bool = True
    default_fewshot: int = 0
    version: float = 1.0
    higher_is_better: dict[str, bool] = field(
        default_factory=lambda: {"conv_pass": True, "turn_pass": True, "turns_before_failure": True}
    )

    def effective_fewshot(self, num_fewshot: int | None) -> int:
        """Always 0: a conversation is its own context."""
        return 0

    def examples(
        self, source: DataSource, num_fewshot: int | None = None, limit: int | None = None
    ) -> list[Example]:
        """One example per conversation: a request per turn, earlier replies as placeholders
        (own history) or the reference replies. The run fills in the model's replies turn by
        turn (`turn_request`)."""
        return [
            Example(doc_id, item, self._requests(item), item["id"])
            for doc_id, item in enumerate(self.items[:limit])
        ]

    def _requests(self, item: Doc) -> tuple[GenerateRequest, ...]:
        """A request per turn. Turn t's messages are the first ones of the last turn's, so
        every turn shares the same message objects: n turns hold n^2 references, not n^2
        messages."""
        last = len(item["turns"]) - 1
        chat = messages(item, last)
        return tuple(
            self._request(item, t, chat[: len(chat) - 2 * (last - t)]) for t in range(last + 1)
        )

    def turn_request(self, example: Example, turn: int, replies: Sequence[str]) -> GenerateRequest:
        """Turn `turn`'s request after the model replied `replies` to the earlier turns."""
        item = example.doc
        own = item["history"] == "own"
        return self._request(item, turn, messages(item, turn, replies if own else None))

    @staticmethod
    def _request(item: Doc, turn: int, chat: tuple[Message, ...]) -> GenerateRequest:
        spec = item["turns"][turn]
        return GenerateRequest("", tuple(spec["until"]), spec["max_tokens"], messages=chat)

    @cached_property
    def judged(self) -> bool:
        """Whether a judge scores the set (a turn's check includes `judge`)."""
        return any(judged_turns(item) for item in self.items)

    @property
    def primary_metric(self) -> str:
        """`conv_pass`; `judged` for a set with judged turns, which only a judge can score."""
        return JUDGED if self.judged else "conv_pass"

    def score(self, example: Example, results: Sequence[Result]) -> Scored:
        """Each checked turn judged; the conversation passes when all of them pass. A judged
        turn whose code checks passed is left open (None, JUDGE_PENDING) for the judge at
        check time, and so is the conversation (`correct` None)."""
        turns = example.doc["turns"]
        replies: list[str] = []
        passed: list[int | None] = []
        reasons: list[str] = []
        for turn, result in zip(turns, results, strict=True):
            if not isinstance(result, GenerateResult):
                raise ValueError(f"{self.name}: expected generation results")
            replies.append(result.text)
            if "check" not in turn:
                passed.append(None)
                reasons.append("")
                continue
            ok, why = judge_turn(turn["check"], result.text)
            pending = ok and "judge" in turn["check"]
            passed.append(None if pending else int(ok))
            reasons.append(JUDGE_PENDING if pending else why)
        scores: dict[str, list[Any]] = {"turn_pass": passed, "reason": reasons}
        checked = [p for p in passed if p is not None]
        if self.judged:
            metrics = {"turn_pass": sum(checked) / len(checked)} if checked else {}
            return Scored(replies, None, metrics, scores)
        first_failure = next((i for i, p in enumerate(passed) if p == 0), len(turns))
        metrics = {
            "conv_pass": float(all(checked)),
            "turn_pass": sum(checked) / len(checked),
            "turns_before_failure": float(first_failure),
        }
        if example.doc["must_pass"]:
            # Makes the set a golden set for the gate: its must-pass and relative-drop rules.
            metrics["must_pass"] = 1.0
        return Scored(replies, int(all(checked)), metrics, scores)

    def aggregate(self, scored: Sequence[Scored]) -> dict[str, float]:
        """Conversation pass rate, per-turn accuracy (with its clustered interval and per
        position) and mean turns before the first failure. A judged set has only what code
        checked before the judge: the per-turn figures of the turns it decided."""
        per_conv = [[p for p in s.scores["turn_pass"] if p is not None] for s in scored]
        passed, checked = [sum(p) for p in per_conv], [len(p) for p in per_conv]
        out: dict[str, float] = {}
        if not self.judged:
            out = mean_with_stderr("conv_pass", [s.metrics["conv_pass"] for s in scored])
        if sum(checked):
            decided = [(p, c) for p, c in zip(passed, checked, strict=True) if c]
            out["turn_pass"] = sum(passed) / sum(checked)
            low, high = cluster_interval([p for p, _ in decided], [c for _, c in decided])
            out["turn_pass_ci_low"], out["turn_pass_ci_high"] = low, high
        longest = max(len(s.scores["turn_pass"]) for s in scored)
        for t in range(longest):
            at = [s.scores["turn_pass"][t] for s in scored if len(s.scores["turn_pass"]) > t]
            at = [p for p in at if p is not None]
            if at:
                out[f"turn{t + 1}_pass"] = sum(at) / len(at)
        if self.judged:
            return out
        out["turns_before_failure"] = float(
            np.mean([s.metrics["turns_before_failure"] for s in scored])
        )
        return out | must_pass_rate(scored, "conv_pass")

    def config(self) -> dict[str, Any]:
        """The set's settings, shaped like an lm-eval results `configs` entry."""
        return {
            "task": self.name,
            "dataset_path": str(self.path or "regress/tasks/data/conversations.jsonl"),
            "output_type": self.output_type,
            "num_fewshot": 0,
            "metric_list": [
                {"metric": m, "aggregation": "mean", "higher_is_better": True} for m in METRICS
            ],
            "metadata": {"version": self.version, "format": "regress conversation set"},
        }


def conversation_task(path: Path) -> ConversationTask:
    """The conversation set in `path`, named `conv_<file stem>` (a stem that starts with
    `conv` is the name as it is)."""
    stem = re.sub(r"\W+", "_", path.stem).strip("_").lower() or "set"
    name = stem if stem.startswith("conv") else f"conv_{stem}"
    return ConversationTask(name=name, items=tuple(read_conversations(path)), path=path)


def builtin_conversations() -> ConversationTask:
    """The built-in `conversations` set: 30 conversations of 3-4 turns written for regress
    (state carried across turns, format constraints that persist, and recovery after a
    deliberately wrong correction)."""
    items = read_conversations(data_path("conversations.jsonl"))
    return ConversationTask(name="conversations", items=tuple(items))
