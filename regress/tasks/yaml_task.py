"""A task defined by an lm-evaluation-harness 0.4 YAML file (see `yaml_config` for the keys).

Requests, prompts and scores follow lm-eval's `ConfigurableTask` without a chat template:

- the prompt is the description, each shot as `text + target_delimiter + answer +
  fewshot_delimiter`, then the document's text (`doc_to_*` is a field name when the
  evaluation split has such a column, else a Jinja template; a rendered target or text that
  is all digits is an index when the task has choices, one that looks like a list is a list);
- `multiple_choice`: one loglikelihood request per choice, continuation `target_delimiter +
  choice`; acc, acc_norm (per character), acc_bytes, exact_match (the gold choice is the
  greedy continuation), brier_score, and the corpus metrics f1 and mcc;
- `loglikelihood`: (prompt, target): acc (greedy) and perplexity;
- `loglikelihood_rolling`: the target's rolling log-likelihood: word and byte perplexity and
  bits per byte, corpus-level;
- `generate_until`: `repeats` generations (greedy unless `do_sample`), each filter pipeline's
  answer scored by exact_match with lm-eval's options.

Shots: the few-shot split, else the YAML's `fewshot_config.samples`, else training,
validation, then test; `first_n` takes them in order, `default` draws with lm-eval's seeded
generator (and drops the evaluated document when the few-shot split is the test split, both
unset included). A YAML `num_fewshot: 0` pins the
task to zero shots, as lm-eval does.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from regress.core.errors import BadInput
from regress.core.requests import (
    GenerateRequest,
    GenerateResult,
    LoglikelihoodRequest,
    LoglikelihoodResult,
    Request,
    RequestKind,
    Result,
    RollingLoglikelihoodRequest,
    RollingResult,
)
from regress.tasks.base import DataSource, Example, Scored
from regress.tasks.datafiles import Dataset, dataset_of
from regress.tasks.fewshot import FewshotSampler, render_context
from regress.tasks.filters import Pipeline, pipelines
from regress.tasks.loaders import Doc
from regress.tasks.metrics import corpus_perplexity, mean_with_stderr
from regress.tasks.multiple_choice import ChoiceScores, argmax_choices
from regress.tasks.templates import literal, render
from regress.tasks.yaml_config import TaskFile

# Per output type: metric -> (per example or corpus, higher is better), lm-eval's registry.
_METRICS: dict[str, dict[str, tuple[str, bool]]] = {
    "multiple_choice": {
        "acc": ("mean", True),
        "acc_norm": ("mean", True),
        "acc_bytes": ("mean", True),
        "exact_match": ("mean", True),
        "brier_score": ("brier_score", False),
        "f1": ("f1", True),
        "mcc": ("matthews_corrcoef", True),
    },
    "loglikelihood": {"acc": ("mean", True), "perplexity": ("perplexity", False)},
    "loglikelihood_rolling": {
        "word_perplexity": ("weighted_perplexity", False),
        "byte_perplexity": ("weighted_perplexity", False),
        "bits_per_byte": ("bits_per_byte", False),
    },
    "generate_until": {"exact_match": ("mean", True)},
}
_DEFAULT_METRICS = {
    "multiple_choice": ("acc", "acc_norm"),
    "loglikelihood": ("perplexity", "acc"),
    "loglikelihood_rolling": ("word_perplexity", "byte_perplexity", "bits_per_byte"),
    "generate_until": ("exact_match",),
}
_BINARY = frozenset({"acc", "acc_norm", "acc_bytes", "exact_match"})
_EXACT_MATCH_OPTIONS = frozenset(
    {"regexes_to_ignore", "ignore_case", "ignore_punctuation", "ignore_numbers"}
)
_GENERATION_KEYS = frozenset(
    {"until", "max_gen_toks", "do_sample", "temperature", "top_p", "top_k", "min_p"}
)
SCORING_KEYS = ("filter_list", "doc_to_target", "doc_to_choice", "target_delimiter")
"""Settings that decide a score as written (the defaults are regress's code): in the scoring
hash. `target_delimiter` is cut from each choice before acc_norm counts its characters."""
MAX_GEN_TOKS = 256
"""lm-eval's default `max_gen_toks`."""
SEED = 1234


@dataclass(frozen=True)
class Metric:
    """One `metric_list` entry."""

    name: str
    higher_is_better: bool
    options: Mapping[str, Any] = field(default_factory=dict)
    """exact_match's regexes_to_ignore, ignore_case, ignore_punctuation, ignore_numbers."""


@dataclass(frozen=True)
class Generation:
    """`generation_kwargs` as a request's settings."""

    until: tuple[str, ...]
    max_tokens: int
    temperature: float
    top_p: float
    top_k: int = 0
    min_p: float = 0.0


# eq=False: a task is an identity (hashable, usable as a key), not a value.
@dataclass(frozen=True, eq=False)
class YamlTask:
    """A task from a YAML file; build one with `yaml_task`."""

    name: str
    path: Path
    """The YAML file that defines it."""
    settings: Mapping[str, Any]
    """The merged YAML (includes resolved)."""
    dataset: Dataset
    kind: str
    """lm-eval's output_type (`multiple_choice` is loglikelihood requests)."""
    metrics: tuple[Metric, ...]
    filters: tuple[Pipeline, ...]
    generation: Generation | None
    repeats: int
    primary_metric: str
    group: str | None = None
    """The gated unit it belongs to (a group file that lists it), or None."""
    tags: tuple[str, ...] = ()
    default_fewshot: int = 0
    fixed_fewshot: bool = False
    version: float = 0.0

    @property
    def output_type(self) -> RequestKind:
        """The request kind the backend answers."""
        return "loglikelihood" if self.kind == "multiple_choice" else self.kind  # type: ignore[return-value]

    @property
    def binary(self) -> bool:
        """Whether the primary metric is 0/1 per example."""
        return self.primary_metric in _BINARY

    @property
    def higher_is_better(self) -> dict[str, bool]:
        """Every metric's direction, filter-suffixed names included."""
        return {name: m.higher_is_better for m, name in self._metric_names()}

    def effective_fewshot(self, num_fewshot: int | None) -> int:
        """The asked shots, or the YAML's (0 when unset); a YAML `num_fewshot: 0` pins it."""
        if num_fewshot is None or self.fixed_fewshot:
            return self.default_fewshot
        return num_fewshot

    # -- documents -------------------------------------------------------------------------

    def _split(self, key: str) -> str | None:
        value = self.settings.get(key)
        return value if isinstance(value, str) and value else None

    @property
    def eval_split(self) -> str:
        """lm-eval's evaluation split: test, else validation."""
        split = self._split("test_split") or self._split("validation_split")
        if split is None:
            raise BadInput(f"{self.path}: task {self.name} needs a test_split or validation_split")
        return split

    def docs(self, source: DataSource) -> list[Doc]:
        """The evaluation split's documents, in order."""
        return self.dataset.load(source, self.eval_split, self.name)

    def size(self, source: DataSource) -> int:
        """How many documents the evaluation split has (counted, not loaded, where it can)."""
        return self.dataset.count(source, self.eval_split, self.name)

    def _fewshot_split(self) -> str | None:
        fewshot = self.settings.get("fewshot_config") or {}
        return fewshot.get("split") or self._split("fewshot_split")

    def _fewshot_docs(self, source: DataSource) -> list[Doc]:
        """lm-eval's order: the few-shot split, else `fewshot_config.samples` (documents
        written in the YAML, as GSM8K-CoT's eight exemplars), else training, validation, test."""
        samples = (self.settings.get("fewshot_config") or {}).get("samples")
        if self._fewshot_split() is None and samples is not None:
            return [dict(s) for s in samples]
        split = (
            self._fewshot_split()
            or self._split("training_split")
            or self._split("validation_split")
            or self._split("test_split")
        )
        if split is None:
            raise BadInput(f"{self.path}: task {self.name} has no split to draw shots from")
        return self.dataset.load(source, split, self.name)

    def examples(
        self, source: DataSource, num_fewshot: int | None = None, limit: int | None = None
    ) -> list[Example]:
        """Load the evaluation split and render each document's requests (shots included)."""
        shots_per_doc = self.effective_fewshot(num_fewshot)
        if shots_per_doc < 0:
            raise BadInput(f"{self.name}: num_fewshot must be 0 or more, got {shots_per_doc}")
        all_docs = self.docs(source)
        features = frozenset(key for doc in all_docs for key in doc)
        docs = all_docs[:limit]
        sampler = None
        if shots_per_doc:
            pool = self._fewshot_docs(source)
            # lm-eval compares the configured names, so two unset splits count as equal.
            exclude = self._fewshot_split() == self._split("test_split")
            if shots_per_doc + exclude > len(pool):
                raise BadInput(
                    f"{self.name}: {shots_per_doc} shots asked, the few-shot split has {len(pool)}"
                )
            kind = (self.settings.get("fewshot_config") or {}).get("sampler", "default")
            sampler = FewshotSampler(pool, kind, exclude)
        examples = []
        for doc_id, doc in enumerate(docs):
            shots = sampler.sample(shots_per_doc, doc) if sampler else []
            context = render_context(
                self._description(doc),
                [(self._text(s, features), self._shot_answer(s, features)) for s in shots],
                self._text(doc, features),
                self._delimiter("target_delimiter", " "),
                self._delimiter("fewshot_delimiter", "\n\n"),
            )
            requests, target = self._requests(doc, features, context)
            examples.append(Example(doc_id, doc, requests, target))
        return examples

    # -- templates -------------------------------------------------------------------------

    def _where(self, key: str) -> str:
        return f"{self.path}: task {self.name}: {key}"

    def _delimiter(self, key: str, default: str) -> str:
        value = self.settings.get(key, default)
        if not isinstance(value, str):
            raise BadInput(f"{self._where(key)} must be a string")
        return value

    def _description(self, doc: Doc) -> str:
        description = self.settings.get("description") or ""
        if description in doc:
            return str(doc[description])
        return render(description, doc, self._where("description")) if description else ""

    def _resolve(self, key: str, doc: Doc, features: frozenset[str]) -> Any:
        """lm-eval's doc_to_text / doc_to_target: a number, a list, a field, or a template."""
        spec = self.settings.get(key)
        if spec is None:
            raise BadInput(f"{self._where(key)} is not set")
        if isinstance(spec, int | list) and not isinstance(spec, bool):
            return spec
        if not isinstance(spec, str):
            raise BadInput(f"{self._where(key)} must be a field name, a template or a number")
        if spec in features:
            return doc[spec]
        text = render(spec, doc, self._where(key))
        has_choices = self.settings.get("doc_to_choice") is not None
        if text.isdigit() and has_choices:
            return int(text)
        if key == "doc_to_target" and len(text) >= 2 and text[0] == "[" and text[-1] == "]":
            try:
                return literal(text, self._where(key))
            except BadInput:
                return text
        return text

    def _text(self, doc: Doc, features: frozenset[str]) -> str:
        text = self._resolve("doc_to_text", doc, features)
        if not isinstance(text, str):
            raise BadInput(
                f"{self._where('doc_to_text')} gave {type(text).__name__}, not text (lm-eval's "
                "multiple-input form, as in winogrande, is not supported)"
            )
        return text

    def _choices(self, doc: Doc, features: frozenset[str]) -> list[str]:
        spec = self.settings.get("doc_to_choice")
        where = self._where("doc_to_choice")
        if isinstance(spec, dict):
            choices: Any = list(spec.values())
        elif isinstance(spec, list):
            choices = spec
        elif isinstance(spec, str):
            choices = doc[spec] if spec in features else literal(render(spec, doc, where), where)
        else:
            raise BadInput(f"{where} must be a field, a template or a list")
        if not isinstance(choices, list) or not choices:
            raise BadInput(f"{where} gave {type(choices).__name__}, not a non-empty list")
        return [str(c) for c in choices]

    def _gold(self, doc: Doc, features: frozenset[str]) -> Any:
        """The target as lm-eval scores it: a choice index (or indices), or answer text."""
        target = self._resolve("doc_to_target", doc, features)
        if self.settings.get("doc_to_choice") is None:
            return target if isinstance(target, list) else str(target)
        choices = self._choices(doc, features)
        golds = target if isinstance(target, list) else [target]
        indices = []
        for gold in golds:
            index = choices.index(gold) if isinstance(gold, str) and gold in choices else gold
            if not isinstance(index, int) or isinstance(index, bool):
                raise BadInput(f"{self._where('doc_to_target')}: {gold!r} is not a choice")
            if not 0 <= index < len(choices):
                raise BadInput(
                    f"{self._where('doc_to_target')}: index {index} is not among "
                    f"{len(choices)} choices"
                )
            indices.append(index)
        return indices if isinstance(target, list) else indices[0]

    def _shot_answer(self, doc: Doc, features: frozenset[str]) -> str:
        target = self._resolve("doc_to_target", doc, features)
        if self.settings.get("doc_to_choice") is not None and isinstance(target, int):
            return self._choices(doc, features)[target]
        if isinstance(target, list):
            target = target[0] if target else ""
        if not isinstance(target, str):
            raise BadInput(f"{self._where('doc_to_target')} gave {target!r} for a shot's answer")
        return target

    # -- requests and scores ---------------------------------------------------------------

    def _requests(
        self, doc: Doc, features: frozenset[str], context: str
    ) -> tuple[tuple[Request, ...], Any]:
        delimiter = self._delimiter("target_delimiter", " ")
        if self.kind == "multiple_choice":
            choices = self._choices(doc, features)
            gold = self._gold(doc, features)
            return tuple(LoglikelihoodRequest(context, delimiter + c) for c in choices), gold
        if self.kind == "loglikelihood":
            target = self._resolve("doc_to_target", doc, features)
            if not isinstance(target, str):
                raise BadInput(f"{self._where('doc_to_target')} must give text")
            return (LoglikelihoodRequest(context, target),), target
        if self.kind == "loglikelihood_rolling":
            text = self._resolve("doc_to_target", doc, features)
            if not isinstance(text, str):
                raise BadInput(f"{self._where('doc_to_target')} must give text")
            return (RollingLoglikelihoodRequest(text),), None
        assert self.generation is not None
        gen = self.generation
        requests = tuple(
            GenerateRequest(
                context,
                gen.until,
                gen.max_tokens,
                gen.temperature,
                gen.top_p,
                SEED + i,
                top_k=gen.top_k,
                min_p=gen.min_p,
            )
            for i in range(self.repeats)
        )
        gold = self._gold(doc, features)
        if self.settings.get("doc_to_choice") is not None:
            choices = self._choices(doc, features)
            gold = [choices[g] for g in gold] if isinstance(gold, list) else choices[gold]
        return requests, gold

    def _metric_names(self) -> list[tuple[Metric, str]]:
        """(metric, record key): generation metrics repeat per filter after the first."""
        if self.kind != "generate_until":
            return [(m, m.name) for m in self.metrics]
        names = []
        for i, pipeline in enumerate(self.filters):
            suffix = "" if i == 0 else "_" + re.sub(r"\W+", "_", pipeline.name)
            names += [(m, m.name + suffix) for m in self.metrics]
        return names

    def score(self, example: Example, results: Sequence[Result]) -> Scored:
        """Score one example from its requests' results (in request order)."""
        if self.kind == "multiple_choice":
            return self._score_choices(example, results)
        if self.kind == "loglikelihood":
            (result,) = results
            assert isinstance(result, LoglikelihoodResult)
            metrics = {"loglik": result.logprob, "acc": float(result.is_greedy)}
            keep = {m.name for m in self.metrics} | {"loglik"}
            metrics = {k: v for k, v in metrics.items() if k in keep}
            correct = int(metrics["acc"]) if self.primary_metric == "acc" else None
            return Scored(pred=int(result.is_greedy), correct=correct, metrics=metrics)
        if self.kind == "loglikelihood_rolling":
            (result,) = results
            assert isinstance(result, RollingResult)
            text = example.requests[0].text  # type: ignore[union-attr]
            words, n_bytes = len(re.split(r"\s+", text)), len(text.encode("utf-8"))
            metrics = {"loglik": result.logprob, "n_words": float(words), "n_bytes": float(n_bytes)}
            metrics |= corpus_perplexity([result.logprob], [words], [n_bytes])
            return Scored(pred=None, correct=None, metrics=metrics)
        return self._score_generation(example, results)

    def _score_choices(self, example: Example, results: Sequence[Result]) -> Scored:
        if not all(isinstance(r, LoglikelihoodResult) for r in results):
            raise ValueError(f"{self.name}: expected loglikelihood results")
        choices = [r.continuation for r in example.requests]  # type: ignore[union-attr]
        delimiter = self._delimiter("target_delimiter", " ")
        texts = [c[len(delimiter) :] for c in choices]
        scores = ChoiceScores(
            loglik=[r.logprob for r in results],  # type: ignore[union-attr]
            is_greedy=[r.is_greedy for r in results],  # type: ignore[union-attr]
            chars=[len(t) for t in texts],
        )
        pred, pred_norm = argmax_choices(scores)
        loglik = np.asarray(scores.loglik, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):  # an empty choice, as in lm-eval
            pred_bytes = int(
                np.argmax(loglik / np.asarray([len(t.encode()) for t in texts], float))
            )
        golds = example.target if isinstance(example.target, list) else [example.target]
        probs = np.exp(loglik - loglik.max())
        probs /= probs.sum()
        onehot = np.eye(len(texts))[golds[0]]
        values = {
            "acc": float(pred in golds),
            "acc_norm": float(pred_norm in golds),
            "acc_bytes": float(pred_bytes in golds),
            "exact_match": float(any(scores.is_greedy[g] for g in golds)),
            "brier_score": float(np.sum((probs - onehot) ** 2)),
        }
        metrics = {m.name: values[m.name] for m in self.metrics if m.name in values}
        chosen = {"acc_norm": pred_norm, "acc_bytes": pred_bytes}.get(self.primary_metric, pred)
        correct = int(metrics[self.primary_metric]) if self.binary else None
        kept = scores.as_dict()
        if any(m.name in ("f1", "mcc") for m in self.metrics):
            kept["gold"] = [golds[0]]  # f1 and mcc are computed over (gold, pred) pairs
        return Scored(pred=chosen, correct=correct, metrics=metrics, scores=kept)

    def _score_generation(self, example: Example, results: Sequence[Result]) -> Scored:
        if not all(isinstance(r, GenerateResult) for r in results):
            raise ValueError(f"{self.name}: expected generation results")
        texts = [r.text for r in results]  # type: ignore[union-attr]
        golds = example.target if isinstance(example.target, list) else [example.target]
        metrics: dict[str, float] = {}
        preds = []
        for i, pipeline in enumerate(self.filters):
            answer = pipeline.apply(texts, self._where(f"filter {pipeline.name}"))
            preds.append(answer)
            suffix = "" if i == 0 else "_" + re.sub(r"\W+", "_", pipeline.name)
            for metric in self.metrics:
                metrics[metric.name + suffix] = float(
                    any(exact_match(str(answer), str(g), metric.options) for g in golds)
                )
        correct = int(metrics[self.primary_metric])
        return Scored(pred=preds[0], correct=correct, metrics=metrics)

    def aggregate(self, scored: Sequence[Scored]) -> dict[str, float]:
        """Task-level metrics: means with stderr, corpus perplexities, f1 and mcc."""
        out: dict[str, float] = {}
        if self.kind == "loglikelihood_rolling":
            return corpus_perplexity(
                [s.metrics["loglik"] for s in scored],
                [int(s.metrics["n_words"]) for s in scored],
                [int(s.metrics["n_bytes"]) for s in scored],
            )
        for metric, key in self._metric_names():
            if metric.name == "perplexity":
                out["perplexity"] = math.exp(-float(np.mean([s.metrics["loglik"] for s in scored])))
            elif metric.name in ("f1", "mcc"):
                golds = [int(s.scores["gold"][0]) for s in scored]
                preds = [int(s.pred) for s in scored]
                out[metric.name] = (f1 if metric.name == "f1" else mcc)(golds, preds)
            else:
                out |= mean_with_stderr(key, [s.metrics[key] for s in scored])
        return out

    def config(self) -> dict[str, Any]:
        """The task's settings, as lm-eval's results JSON lists them under `configs`."""
        return {**dict(self.settings), "task": self.name}

    def scoring(self) -> dict[str, Any]:
        """What decides this task's scores beyond its documents and prompts, which the
        dataset and prompt hashes already pin: the output type, the metrics with their
        options, the filters, the target and choices the answers are held to, and the
        repeats. A one-line edit to any of them once turned a REGRESSION into a PASS."""
        return {
            "output_type": self.kind,
            "metrics": [
                {"metric": m.name, "higher_is_better": m.higher_is_better, "options": m.options}
                for m in self.metrics
            ],
            "primary_metric": self.primary_metric,
            **{key: self.settings.get(key) for key in SCORING_KEYS},
            "repeats": self.repeats,
        }


def exact_match(prediction: str, reference: str, options: Mapping[str, Any]) -> bool:
    """lm-eval's exact_match (Hugging Face evaluate's) with its normalising options."""
    for pattern in options.get("regexes_to_ignore") or ():
        prediction, reference = re.sub(pattern, "", prediction), re.sub(pattern, "", reference)
    if options.get("ignore_case"):
        prediction, reference = prediction.lower(), reference.lower()
    for flag, characters in (
        ("ignore_punctuation", string.punctuation),
        ("ignore_numbers", string.digits),
    ):
        if options.get(flag):
            table = str.maketrans("", "", characters)
            prediction, reference = prediction.translate(table), reference.translate(table)
    return prediction == reference


def f1(golds: Sequence[int], preds: Sequence[int]) -> float:
    """Binary F1 of class 1, as scikit-learn's default `f1_score` (0 when undefined)."""
    tp = sum(g == 1 and p == 1 for g, p in zip(golds, preds, strict=True))
    fp = sum(g != 1 and p == 1 for g, p in zip(golds, preds, strict=True))
    fn = sum(g == 1 and p != 1 for g, p in zip(golds, preds, strict=True))
    return 2 * tp / (2 * tp + fp + fn) if tp else 0.0


def mcc(golds: Sequence[int], preds: Sequence[int]) -> float:
    """Matthews correlation coefficient over any number of classes (scikit-learn's)."""
    labels = sorted(set(golds) | set(preds))
    index = {label: i for i, label in enumerate(labels)}
    confusion = np.zeros((len(labels), len(labels)))
    for g, p in zip(golds, preds, strict=True):
        confusion[index[g], index[p]] += 1
    t, p = confusion.sum(axis=1), confusion.sum(axis=0)
    c, s = np.trace(confusion), confusion.sum()
    denominator = math.sqrt((s * s - p @ p) * (s * s - t @ t))
    return float((c * s - t @ p) / denominator) if denominator else 0.0


def yaml_task(file: TaskFile, group: str | None = None) -> YamlTask:
    """The task one YAML file defines; every unsupported setting is a BadInput naming it."""
    config, path = file.config, file.path
    where = f"{path}: task {file.name}"
    kind = config.get("output_type", "generate_until")
    dataset = dataset_of(
        config.get("dataset_path"),
        config.get("dataset_name"),
        config.get("dataset_kwargs"),
        path.parent,
        where,
    )
    metrics = _metrics(config.get("metric_list"), kind, where)
    binary = [m.name for m in metrics if m.name in _BINARY]
    if kind == "loglikelihood_rolling":
        primary = metrics[0].name
    elif binary:
        primary = binary[0]
    else:
        # The gate pairs examples on a 0/1 outcome; brier_score, f1, mcc or perplexity alone
        # give it nothing to pair.
        raise BadInput(
            f"{where}: metric_list needs a 0/1 metric to gate on ({', '.join(sorted(_BINARY))})"
        )
    repeats = config.get("repeats", 1)
    if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 1:
        raise BadInput(f"{where}: repeats must be a whole number >= 1")
    if repeats > 1 and kind != "generate_until":
        raise BadInput(f"{where}: repeats > 1 needs output_type generate_until")
    filters = pipelines(config.get("filter_list"), where)
    for entry in config.get("filter_list") or ():
        for function in entry["filter"] or ():
            k = function.get("k", 0) if function["function"] == "take_first_k" else 0
            if isinstance(k, int) and k > repeats:
                # lm-eval stops on this too: a vote over fewer samples than named is not maj@k.
                raise BadInput(
                    f"{where}: filter {entry['name']!r} takes the first {k} of {repeats} "
                    "generations; raise repeats"
                )
    if config.get("filter_list") is not None and kind != "generate_until":
        raise BadInput(f"{where}: filter_list applies to generate_until tasks only")
    generation = None
    if kind == "generate_until":
        generation = _generation(config, where)
    elif config.get("generation_kwargs") is not None:
        raise BadInput(f"{where}: generation_kwargs applies to generate_until tasks only")
    if kind == "multiple_choice" and config.get("doc_to_choice") is None:
        raise BadInput(f"{where}: a multiple_choice task needs doc_to_choice")
    shots = config.get("num_fewshot")
    if shots is not None and (not isinstance(shots, int) or isinstance(shots, bool) or shots < 0):
        raise BadInput(f"{where}: num_fewshot must be a whole number >= 0")
    version = (config.get("metadata") or {}).get("version", 0.0)
    tags = config.get("tag") or config.get("group") or ()
    return YamlTask(
        name=file.name,
        path=path,
        settings=config,
        dataset=dataset,
        kind=kind,
        metrics=metrics,
        filters=filters,
        generation=generation,
        repeats=repeats,
        primary_metric=primary,
        group=group,
        tags=(tags,) if isinstance(tags, str) else tuple(str(t) for t in tags),
        default_fewshot=shots or 0,
        fixed_fewshot=shots == 0,
        version=float(version) if isinstance(version, int | float) else 0.0,
    )


def _metrics(spec: Any, kind: str, where: str) -> tuple[Metric, ...]:
    known = _METRICS[kind]
    if spec is None:
        return tuple(Metric(name, known[name][1]) for name in _DEFAULT_METRICS[kind])
    if not isinstance(spec, list) or not spec:
        raise BadInput(f"{where}: metric_list must be a list of {{metric: name, ...}}")
    metrics = []
    for i, entry in enumerate(spec):
        if not isinstance(entry, dict) or not isinstance(entry.get("metric"), str):
            raise BadInput(f"{where}: metric_list[{i}] needs `metric: <name>`")
        name = entry["metric"]
        if name not in known:
            raise BadInput(
                f"{where}: metric {name!r} is not supported for {kind} "
                f"(supported: {', '.join(known)})"
            )
        aggregation, better = known[name]
        extra = set(entry) - {"metric", "aggregation", "higher_is_better"}
        allowed = _EXACT_MATCH_OPTIONS if name == "exact_match" else frozenset()
        if extra - allowed:
            raise BadInput(f"{where}: metric_list[{i}]: option {sorted(extra - allowed)[0]!r} "
                           f"is not supported for {name}")  # fmt: skip
        if entry.get("aggregation", aggregation) != aggregation:
            raise BadInput(
                f"{where}: metric_list[{i}]: {name} aggregates by {aggregation}, not "
                f"{entry['aggregation']!r}"
            )
        if not isinstance(entry.get("higher_is_better", better), bool):
            raise BadInput(f"{where}: metric_list[{i}].higher_is_better must be true or false")
        options = {k: entry[k] for k in extra}
        metrics.append(Metric(name, entry.get("higher_is_better", better), options))
    return tuple(metrics)


def _generation(config: Mapping[str, Any], where: str) -> Generation:
    delimiter = config.get("fewshot_delimiter", "\n\n")
    kwargs = config.get("generation_kwargs") or {}
    if not isinstance(kwargs, dict):
        raise BadInput(f"{where}: generation_kwargs must be a mapping")
    unknown = sorted(set(kwargs) - _GENERATION_KEYS)
    if unknown:
        raise BadInput(
            f"{where}: generation_kwargs.{unknown[0]} is not supported "
            f"({', '.join(sorted(_GENERATION_KEYS))})"
        )
    until = kwargs.get("until", [delimiter])
    until = [until] if isinstance(until, str) else until
    if not isinstance(until, list) or not all(isinstance(u, str) for u in until):
        raise BadInput(f"{where}: generation_kwargs.until must be a string or a list of them")
    sampling = bool(kwargs.get("do_sample", False))
    try:
        temperature = float(kwargs.get("temperature", 1.0)) if sampling else 0.0
        top_p = float(kwargs.get("top_p", 1.0))
        top_k = int(kwargs.get("top_k", 0))
        min_p = float(kwargs.get("min_p", 0.0))
        max_tokens = int(kwargs.get("max_gen_toks", MAX_GEN_TOKS))
    except (TypeError, ValueError) as exc:
        raise BadInput(f"{where}: generation_kwargs: {exc}") from exc
    return Generation(tuple(until), max_tokens, temperature, top_p, top_k, min_p)
