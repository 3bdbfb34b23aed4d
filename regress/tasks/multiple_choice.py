"""A generic multiple-choice task, lm-eval's `output_type: multiple_choice`, built from small
functions: load a split, render a document's text, list its choices, name its gold index.

Each choice is one loglikelihood request, `(context, " " + choice)`. `acc` takes the argmax
of the summed log-likelihoods; `acc_norm` divides each by the choice's length in characters
(the choice text without the leading delimiter, as lm-eval counts it). Ties go to the first
choice, like numpy's argmax in lm-eval.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from regress.core.errors import BadInput
from regress.core.requests import LoglikelihoodRequest, LoglikelihoodResult, RequestKind, Result
from regress.tasks.base import DataSource, Example, Scored
from regress.tasks.fewshot import (
    FEWSHOT_DELIMITER,
    TARGET_DELIMITER,
    FewshotSampler,
    SamplerKind,
    render_context,
)
from regress.tasks.loaders import Doc
from regress.tasks.metrics import mean_with_stderr

Loader = Callable[[DataSource, str], list[Doc]]
"""(source, split name) -> documents in the split's order."""


@dataclass(frozen=True)
class ChoiceScores:
    """What the model said about each choice of one document."""

    loglik: list[float]
    is_greedy: list[bool]
    chars: list[int]

    def as_dict(self) -> dict[str, list[Any]]:
        """The record's `scores` field."""
        return {"loglik": self.loglik, "is_greedy": self.is_greedy, "chars": self.chars}


Scorer = Callable[[Doc, int, ChoiceScores], tuple[int, dict[str, float]]]
"""(doc, gold index, scores) -> (predicted index, per-example metrics)."""


def accuracy(doc: Doc, gold: int, scores: ChoiceScores) -> tuple[int, dict[str, float]]:
    """lm-eval's `acc` and `acc_norm`; the prediction is the plain argmax."""
    pred, pred_norm = argmax_choices(scores)
    return pred, {"acc": float(pred == gold), "acc_norm": float(pred_norm == gold)}


def accuracy_norm_first(doc: Doc, gold: int, scores: ChoiceScores) -> tuple[int, dict[str, float]]:
    """As `accuracy`, predicting the length-normalised argmax (tasks whose metric is acc_norm)."""
    pred, pred_norm = argmax_choices(scores)
    return pred_norm, {"acc": float(pred == gold), "acc_norm": float(pred_norm == gold)}


def argmax_choices(scores: ChoiceScores) -> tuple[int, int]:
    """Index of the best choice by summed log-likelihood, and by log-likelihood per character."""
    loglik = np.asarray(scores.loglik, dtype=float)
    # An empty choice divides by zero; numpy's inf/nan ordering then decides, as in lm-eval.
    with np.errstate(divide="ignore", invalid="ignore"):
        normed = loglik / np.asarray(scores.chars, dtype=float)
    return int(np.argmax(loglik)), int(np.argmax(normed))


# eq=False: a task is an identity (hashable, usable as a key), not a value.
@dataclass(frozen=True, eq=False)
class MultipleChoiceTask:
    """A multiple-choice task; see the module docstring for the request and metric semantics."""

    name: str
    load: Loader
    eval_split: str
    """Split evaluated (lm-eval's test split, or its validation split when there is none)."""
    doc_to_text: Callable[[Doc], str]
    doc_to_choice: Callable[[Doc], list[str]]
    doc_to_target: Callable[[Doc], int]
    lm_eval_config: Mapping[str, Any]
    """lm-eval's dataset and template fields, as its results JSON lists them."""
    group: str | None = None
    fewshot_split: str | None = None
    """Split the shots come from; None when the task has none."""
    sampler: SamplerKind = "default"
    exclude_eval_doc: bool = False
    """lm-eval's `fewshot_split == test_split` (see fewshot.py)."""
    description: str = ""
    metrics: tuple[str, ...] = ("acc", "acc_norm")
    primary_metric: str = "acc"
    scorer: Scorer = accuracy
    binary: bool = True
    """Whether the primary metric is 0/1 per example (False for truthfulqa_mc2's mass)."""
    default_fewshot: int = 0
    fixed_fewshot: bool = False
    """lm-eval's `num_fewshot: 0` in a task's YAML: a requested shot count is ignored."""
    version: float = 1.0
    output_type: RequestKind = field(default="loglikelihood", init=False)

    @property
    def higher_is_better(self) -> dict[str, bool]:
        """Every multiple-choice metric here is better higher."""
        return {metric: True for metric in self.metrics}

    def effective_fewshot(self, num_fewshot: int | None) -> int:
        """The asked shots, or the default when none are asked or the task pins them."""
        if num_fewshot is None or self.fixed_fewshot:
            return self.default_fewshot
        return num_fewshot

    def examples(
        self, source: DataSource, num_fewshot: int | None = None, limit: int | None = None
    ) -> list[Example]:
        """Load the evaluation split and render each document's requests (few-shot included)."""
        shots_per_doc = self.effective_fewshot(num_fewshot)
        docs = self.load(source, self.eval_split)[:limit]
        sampler = self._sampler(source, shots_per_doc)
        examples = []
        for doc_id, doc in enumerate(docs):
            text, choices, target = (
                self.doc_to_text(doc),
                self.doc_to_choice(doc),
                self.doc_to_target(doc),
            )
            self._check_document(doc_id, text, choices, target)
            shots = sampler.sample(shots_per_doc, doc) if sampler else []
            context = render_context(
                self.description,
                [
                    (self.doc_to_text(s), self.doc_to_choice(s)[self.doc_to_target(s)])
                    for s in shots
                ],
                text,
            )
            requests = tuple(
                LoglikelihoodRequest(context, TARGET_DELIMITER + choice) for choice in choices
            )
            examples.append(Example(doc_id, doc, requests, target))
        return examples

    def _check_document(self, doc_id: int, text: Any, choices: Any, target: Any) -> None:
        """A malformed row (a number where text belongs) is bad input, not a crash later."""
        if not (
            isinstance(text, str)
            and isinstance(choices, list)
            and choices
            and all(isinstance(c, str) for c in choices)
            and isinstance(target, int)
            and not isinstance(target, bool)
            and 0 <= target < len(choices)
        ):
            raise BadInput(
                f"{self.name}: document {doc_id}: needs a text prompt, a list of text choices "
                "and a target index among them (check the data file's fields)"
            )

    def _sampler(self, source: DataSource, shots: int) -> FewshotSampler | None:
        if shots < 0:
            raise BadInput(f"{self.name}: num_fewshot must be 0 or more, got {shots}")
        if shots == 0:
            return None
        if self.fewshot_split is None:
            raise BadInput(f"{self.name} has no split to draw few-shot examples from")
        docs = self.load(source, self.fewshot_split)
        if shots + self.exclude_eval_doc > len(docs):
            raise BadInput(
                f"{self.name}: {shots} shots asked, the {self.fewshot_split} split has {len(docs)}"
            )
        return FewshotSampler(docs, self.sampler, self.exclude_eval_doc)

    def score(self, example: Example, results: Sequence[Result]) -> Scored:
        """Score one document from its choices' loglikelihood results, in choice order."""
        choices = self.doc_to_choice(example.doc)
        logliks = [r for r in results if isinstance(r, LoglikelihoodResult)]
        if len(results) != len(choices) or len(logliks) != len(results):
            raise ValueError(f"{self.name}: expected {len(choices)} loglikelihood results")
        scores = ChoiceScores(
            loglik=[r.logprob for r in logliks],
            is_greedy=[r.is_greedy for r in logliks],
            chars=[len(choice) for choice in choices],
        )
        pred, metrics = self.scorer(example.doc, example.target, scores)
        metrics = {name: metrics[name] for name in self.metrics}
        correct = int(metrics[self.primary_metric]) if self.binary else None
        return Scored(pred=pred, correct=correct, metrics=metrics, scores=scores.as_dict())

    def aggregate(self, scored: Sequence[Scored]) -> dict[str, float]:
        """Mean and stderr of every metric over the scored examples."""
        out: dict[str, float] = {}
        for metric in self.metrics:
            out |= mean_with_stderr(metric, [s.metrics[metric] for s in scored])
        return out

    def config(self) -> dict[str, Any]:
        """The task's settings, shaped like an entry of lm-eval's results `configs`."""
        return {
            "task": self.name,
            **({"tag": self.group} if self.group else {}),
            **self.lm_eval_config,
            "description": self.description,
            "target_delimiter": TARGET_DELIMITER,
            "fewshot_delimiter": FEWSHOT_DELIMITER,
            "fewshot_config": {"sampler": self.sampler},
            "num_fewshot": self.default_fewshot,
            "output_type": "multiple_choice",
            "metric_list": [
                {"metric": m, "aggregation": "mean", "higher_is_better": True} for m in self.metrics
            ],
            "metadata": {"version": self.version},
        }
