"""A judge: a model, on any backend, asked to compare two answers to the same question.

Pairwise mode judges every example twice, once with the baseline's answer shown first (as A)
and once with the candidate's first, because judges favour a position (GPT-4 was consistent
on only 65% of swapped pairs, MT-Bench Table 2). The two verdicts, turned back into "which
side won", agree or they do not:

- both prefer the candidate: a win; both prefer the baseline: a loss;
- they disagree, or either calls a tie: a tie (FastChat's rule);
- either reply names no verdict: a judge error, kept as data with both replies, never
  dropped and never read as a tie.

An example whose answer failed on one side (an error or a timeout) is not sent to the judge:
the failed side loses it, as a failed example is wrong in every other unit.

The judge is fingerprinted (`JudgeSpec.identity`: its model file's sha256, backend, settings,
template sha256, temperature, seed, token limit and how verdicts are read). The identity is
part of every cache key, so a changed judge never replays an old verdict, and of every
judgement, so runs judged under different judges are never compared.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from pathlib import Path
from typing import Any

from regress.backends import dispatch, load_backend
from regress.backends.models import ModelFile, resolve_model
from regress.core.fingerprint import result_params
from regress.core.judgements import Judged, Judgement, Mode, Outcome, judge_id, outcome_of
from regress.core.requests import (
    AnyResult,
    FailedResult,
    GenerateRequest,
    GenerateResult,
    LoglikelihoodRequest,
    LoglikelihoodResult,
    Request,
)
from regress.run.cache import ResultCache, cached_execute, model_key
from regress.tasks.judge_templates import (
    CHOICES,
    CLOSING,
    OPENING,
    JudgeTemplate,
    judge_template,
)


class Read(StrEnum):
    """How a verdict is read from the judge."""

    AUTO = "auto"
    """Log-probs in process (llama_cpp, hf), the reply's text from a server."""
    LOGPROBS = "logprobs"
    TEXT = "text"


@dataclass(frozen=True)
class JudgeSpec:
    """The policy's `judge:` block: which model judges, how it is asked, and what it judges."""

    model: str
    """A .gguf path, a packaged short name, or a served model's name."""
    backend: str = "llama_cpp"
    model_args: Mapping[str, Any] = field(default_factory=dict)
    """Backend settings (a server's base_url, concurrency, model_sha256, ...)."""
    template: str = "pairwise"
    """A built-in template (pairwise, pairwise_reference, single, rubric) or a file."""
    mode: Mode | None = None
    """A template file's mode (default pairwise); a built-in template knows its own."""
    temperature: float = 0.0
    seed: int = 0
    max_tokens: int = 256
    read: Read = Read.AUTO
    min_consistency: float = 0.6
    """A judge whose two orders agree on fewer pairs than this leaves the unit INCONCLUSIVE."""
    units: tuple[str, ...] = ()
    """Units to judge besides those only a judge can score (primary metric `judged`)."""

    def loaded_template(self) -> JudgeTemplate:
        return judge_template(self.template, self.mode)

    @property
    def reads_logprobs(self) -> bool:
        if self.read is Read.AUTO:
            return self.backend != "openai"
        return self.read is Read.LOGPROBS

    @cached_property
    def resolved_model(self) -> str | ModelFile:
        """The judge's model resolved once, for its sha256 and its backend alike (a served
        model's name as it is)."""
        return self.model if self.backend == "openai" else resolve_model(self.model)

    def model_sha256(self) -> str:
        """The judge's weights: the file's sha256, or what the user says a server serves."""
        if isinstance(self.resolved_model, ModelFile):
            return self.resolved_model.info.sha256
        return str(self.model_args.get("model_sha256", ""))

    def identity(self) -> dict[str, Any]:
        """Everything that decides a verdict; its digest is the judge's id. The model's path
        or served name is part of it only when its weights' sha256 is unknown: the same file
        moved, or served under another name, is the same judge."""
        template = self.loaded_template()
        sha = self.model_sha256()
        return {
            **({} if sha else {"model": self.model}),
            "model_sha256": sha,
            "backend": self.backend,
            "model_args": result_params(dict(self.model_args)),
            "template": template.name,
            "template_sha256": template.sha256,
            "mode": str(template.mode),
            "temperature": self.temperature,
            "seed": self.seed,
            "max_tokens": self.max_tokens,
            "read": "logprobs" if self.reads_logprobs else "text",
        }

    def to_dict(self) -> dict[str, Any]:
        """The block as the policy file spells it."""
        return {
            "model": self.model,
            "backend": self.backend,
            "model_args": dict(self.model_args),
            "template": self.template,
            **({"mode": str(self.mode)} if self.mode is not None else {}),
            "temperature": self.temperature,
            "seed": self.seed,
            "max_tokens": self.max_tokens,
            "read": str(self.read),
            "min_consistency": self.min_consistency,
            **({"units": list(self.units)} if self.units else {}),
        }


@dataclass(frozen=True)
class Answers:
    """One example to judge: the question and both sides' answers (None: that side failed)."""

    task: str
    doc_id: int
    unit: str
    question: str
    reference: str | None
    baseline: str | None
    candidate: str | None
    failed: str = ""
    """Why an answer is missing ("the candidate's run failed: timeout"), '' when none is."""
    turn: int | None = None
    """A conversation turn judged on its own (1-based); None for a whole example."""
    min_score: float | None = None
    """That turn's passing score on the template's scale (its check's `min`)."""


_SIDES = {0: {"A": "baseline", "B": "candidate"}, 1: {"A": "candidate", "B": "baseline"}}


def judge_pairs(
    spec: JudgeSpec,
    items: Sequence[Answers],
    cache_dir: Path | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Judged:
    """Judge every item on the judge's model, loaded once: pairwise in both orders, or (a
    single or rubric template) each side's answer scored on its own.

    With `cache_dir`, verdicts are cached under the judge's identity and compute path, so a
    rerun of the same check asks the judge nothing; a judge with no known weights (a server
    without `model_sha256`) is never cached. `progress(done, total)` counts requests.
    """
    template = spec.loaded_template()
    identity = spec.identity()
    prompts = {
        (k, slot): prompt
        for k, item in enumerate(items)
        for slot, prompt in _prompts(template, item)
    }
    keys = list(prompts)
    requests = [r for key in keys for r in _requests(spec, template, prompts[key])]
    # Equal answers make equal prompts (both sides' in graded mode, both orders' pairwise):
    # the judge is asked each distinct request once.
    distinct = list(dict.fromkeys(requests))
    done = 0

    def tick(n: int) -> None:
        nonlocal done
        done += n
        if progress is not None:
            progress(done, len(distinct))

    said, cached, computed, rejected = (
        _ask(spec, distinct, identity, cache_dir, tick) if distinct else ([], 0, 0, 0)
    )
    position = {request: i for i, request in enumerate(distinct)}
    answers = [said[position[request]] for request in requests]
    per = len(CHOICES[template.mode]) if spec.reads_logprobs else 1
    read = {
        key: _verdict(spec, template, answers[i * per : (i + 1) * per])
        for i, key in enumerate(keys)
    }
    out = tuple(
        _judgement(item, [read.get((k, slot)) for slot in (0, 1)], judge_id(identity), template)
        for k, item in enumerate(items)
    )
    tokens = {
        "prompt": sum(_n(a, "n_context_tokens") for a in said),
        "completion": sum(_n(a, "n_tokens") for a in said if isinstance(a, GenerateResult)),
    }
    return Judged(template.mode, out, identity, len(distinct), tokens, cached, computed, rejected)


def _prompts(template: JudgeTemplate, item: Answers) -> list[tuple[int, str]]:
    """The prompts one item needs, by slot: pairwise, the two orders (none when a side
    failed); graded, each side's answer that exists (slot 0 the baseline's)."""
    question, reference = item.question, item.reference
    if template.mode is Mode.PAIRWISE:
        if item.baseline is None or item.candidate is None:
            return []
        orders = ((item.baseline, item.candidate), (item.candidate, item.baseline))
        return [
            (slot, template.render(question, reference, answer_a=a, answer_b=b))
            for slot, (a, b) in enumerate(orders)
        ]
    return [
        (slot, template.render(question, reference, answer=answer))
        for slot, answer in enumerate((item.baseline, item.candidate))
        if answer is not None
    ]


def _judgement(
    item: Answers,
    read: list[tuple[str | None, str] | None],
    ident: str,
    template: JudgeTemplate,
) -> Judgement:
    """One item's judgement from what the judge said in each slot (None: not asked)."""
    note = f"not judged: {item.failed}"
    replies = tuple(r[1] if r is not None else note for r in read)
    said = [r[0] if r is not None else None for r in read]
    consistent = None
    if item.baseline is None or item.candidate is None:
        # The failed side loses without a judge (both failed: a tie).
        outcome = {
            (True, False): Outcome.LOSS,
            (False, True): Outcome.WIN,
        }.get((item.baseline is not None, item.candidate is not None), Outcome.TIE)
        if template.mode is Mode.PAIRWISE:
            winner = {Outcome.LOSS: "baseline", Outcome.WIN: "candidate"}.get(outcome, "tie")
            said = [winner, winner]
        elif any(r is not None and r[0] is None for r in read):
            outcome = Outcome.JUDGE_ERROR  # the answer that exists has no score to pair
    elif template.mode is Mode.PAIRWISE:
        said = [_SIDES[slot].get(v, "tie") if v else None for slot, v in enumerate(said)]
        outcome, consistent = outcome_of(*said)
    else:
        outcome = _graded_outcome(*said)
    return Judgement(
        item.task,
        item.doc_id,
        item.unit,
        ident,
        item.question,
        item.reference,
        item.baseline or "",
        item.candidate or "",
        (said[0], said[1]),
        (replies[0], replies[1]),
        outcome,
        consistent,
        str(template.mode),
        item.turn,
        item.min_score,
    )


def _graded_outcome(baseline: str | None, candidate: str | None) -> Outcome:
    """A scored pair as the candidate's win, loss or tie; a missing score is a judge error."""
    if baseline is None or candidate is None:
        return Outcome.JUDGE_ERROR
    ours, theirs = int(baseline), int(candidate)
    return Outcome.WIN if theirs > ours else Outcome.LOSS if theirs < ours else Outcome.TIE


def _requests(spec: JudgeSpec, template: JudgeTemplate, prompt: str) -> list[Request]:
    if spec.reads_logprobs:
        context = prompt + OPENING[template.mode]
        closing = CLOSING[template.mode]
        return [
            LoglikelihoodRequest(context, choice + closing) for choice in CHOICES[template.mode]
        ]
    return [
        GenerateRequest(
            prompt, max_tokens=spec.max_tokens, temperature=spec.temperature, seed=spec.seed
        )
    ]


def _ask(
    spec: JudgeSpec,
    requests: list[Request],
    identity: Mapping[str, Any],
    cache_dir: Path | None,
    progress: Callable[[int], None] | None,
) -> tuple[list[AnyResult], int, int, int]:
    """The judge model's answers, through the result cache when its weights are known, with
    the cache's replayed, computed and refused counts."""
    engine = load_backend(spec.backend, spec.resolved_model, dict(spec.model_args))
    cache = None
    try:
        sha = identity["model_sha256"]
        if cache_dir is None or not sha:
            return dispatch(engine, requests, progress), 0, 0, 0
        cache = ResultCache(cache_dir)
        # The judge's identity joins the model key: a new template, seed or reading is a miss.
        prefix = f"judge:{judge_id(identity)}:{model_key(sha, engine.fingerprint())}"
        answers = cached_execute(engine, requests, progress, cache, prefix)
        return answers, cache.hits, cache.misses, cache.rejected
    finally:
        engine.close()
        if cache is not None:
            cache.close()


def _verdict(
    spec: JudgeSpec, template: JudgeTemplate, answers: Sequence[AnyResult]
) -> tuple[str | None, str]:
    """One prompt's verdict (A, B or C; a score; None) and the reply it was read from."""
    failed = [a for a in answers if isinstance(a, FailedResult)]
    if failed:
        return None, f"judge request failed: {failed[0].status}: {failed[0].message}"
    if spec.reads_logprobs:
        scored = [
            (a.logprob, choice)
            for a, choice in zip(answers, CHOICES[template.mode], strict=True)
            if isinstance(a, LoglikelihoodResult)
        ]
        reply = ", ".join(f"{choice} {logprob:.4f}" for logprob, choice in scored)
        return max(scored)[1], f"log-probs: {reply}"
    (answer,) = answers
    text = answer.text if isinstance(answer, GenerateResult) else ""
    return template.read(text), text


def _n(answer: AnyResult, name: str) -> int:
    return int(getattr(answer, name, 0) or 0)
