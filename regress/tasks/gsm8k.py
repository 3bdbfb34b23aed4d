"""GSM8K (Cobbe et al. 2021, arXiv:2110.14168): grade-school math word problems whose worked
answers end in "#### <number>".

lm-eval's `gsm8k`: "Question: {question}\\nAnswer:" with 5 shots drawn at random from train
(the shot's full worked answer follows it), greedy generation until "Question:", "</s>" or
"<|im_end|>". Two filters read the number out of the generation: strict-match takes the
first "#### <number>", flexible-extract the last number anywhere. exact_match compares it with
the gold number after removing commas, "$", everything up to "#### " and a final ".", ignoring
case. `exact_match` here is lm-eval's "exact_match,strict-match" (the primary metric) and
`exact_match_flexible` its "exact_match,flexible-extract".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from regress.core.errors import BadInput
from regress.core.requests import GenerateRequest, GenerateResult, RequestKind, Result
from regress.tasks.base import DataSource, Example, Scored
from regress.tasks.fewshot import (
    FEWSHOT_DELIMITER,
    TARGET_DELIMITER,
    FewshotSampler,
    render_context,
)
from regress.tasks.loaders import Doc, data_file, load_hf, read_jsonl
from regress.tasks.metrics import mean_with_stderr

UNTIL = ("Question:", "</s>", "<|im_end|>")
MAX_TOKENS = 256
"""lm-eval's default `max_gen_toks`."""
STRICT = re.compile(r"#### (\-?[0-9\.\,]+)")
FLEXIBLE = re.compile(r"(-?[$0-9.,]{2,})|(-?[0-9]+)")
INVALID = "[invalid]"
_IGNORED = (",", r"\$", r"(?s).*#### ", r"\.$")
METRICS = ("exact_match", "exact_match_flexible")


def load(source: DataSource, split: str) -> list[Doc]:
    """A split as openai/gsm8k rows: question, answer (worked solution ending "#### n")."""
    if source.hf:
        return load_hf("openai/gsm8k", "main", split, "gsm8k")
    path = data_file(source, f"gsm8k/{split}.jsonl", "gsm8k")
    docs = []
    for number, row in enumerate(read_jsonl(path), start=1):
        if not isinstance(row.get("question"), str) or not isinstance(row.get("answer"), str):
            raise BadInput(f"{path}: record {number}: needs string fields question and answer")
        docs.append({"question": row["question"], "answer": row["answer"]})
    return docs


def doc_to_text(doc: Doc) -> str:
    """ "Question: ...\\nAnswer:"."""
    return f"Question: {doc['question']}\nAnswer:"


def extract(text: str, pattern: re.Pattern[str], last: bool) -> str:
    """lm-eval's regex filter: the first (or last) match, its first non-empty group, stripped."""
    matches = pattern.findall(text)
    if not matches:
        return INVALID
    match = matches[-1] if last else matches[0]
    if isinstance(match, tuple):
        match = next((group for group in match if group), INVALID)
    return match.strip()


def normalize(text: str) -> str:
    """exact_match's view of an answer: the regexes removed, lower-cased."""
    for pattern in _IGNORED:
        text = re.sub(pattern, "", text)
    return text.lower()


# eq=False: a task is an identity (hashable, usable as a key), not a value.
@dataclass(frozen=True, eq=False)
class Gsm8kTask:
    """lm-eval's `gsm8k` (generate_until, 5-shot by default)."""

    name: str = "gsm8k"
    group: str | None = None
    output_type: RequestKind = "generate_until"
    primary_metric: str = "exact_match"
    higher_is_better: dict[str, bool] = field(default_factory=lambda: dict.fromkeys(METRICS, True))
    binary: bool = True
    default_fewshot: int = 5
    version: float = 3.0

    def effective_fewshot(self, num_fewshot: int | None) -> int:
        """The asked shots, or the default (lm-eval's 5) when none are asked."""
        return self.default_fewshot if num_fewshot is None else num_fewshot

    def examples(
        self, source: DataSource, num_fewshot: int | None = None, limit: int | None = None
    ) -> list[Example]:
        """Test questions, each after its random train shots."""
        shots_per_doc = self.effective_fewshot(num_fewshot)
        if shots_per_doc < 0:
            raise BadInput(f"{self.name}: num_fewshot must be 0 or more, got {shots_per_doc}")
        docs = load(source, "test")[:limit]
        sampler = FewshotSampler(load(source, "train")) if shots_per_doc else None
        examples = []
        for doc_id, doc in enumerate(docs):
            shots = sampler.sample(shots_per_doc, doc) if sampler else []
            context = render_context(
                "", [(doc_to_text(s), s["answer"]) for s in shots], doc_to_text(doc)
            )
            request = GenerateRequest(context, until=UNTIL, max_tokens=MAX_TOKENS)
            examples.append(Example(doc_id, doc, (request,), normalize(doc["answer"])))
        return examples

    def score(self, example: Example, results: Sequence[Result]) -> Scored:
        """Extract the answer both ways and compare each with the gold number."""
        (result,) = results
        if not isinstance(result, GenerateResult):
            raise ValueError(f"{self.name}: expected a generation result")
        strict = extract(result.text, STRICT, last=False)
        flexible = extract(result.text, FLEXIBLE, last=True)
        metrics = {
            "exact_match": float(normalize(strict) == example.target),
            "exact_match_flexible": float(normalize(flexible) == example.target),
        }
        return Scored(pred=strict, correct=int(metrics["exact_match"]), metrics=metrics)

    def aggregate(self, scored: Sequence[Scored]) -> dict[str, float]:
        """Mean and stderr of both exact-match metrics."""
        out: dict[str, float] = {}
        for metric in METRICS:
            out |= mean_with_stderr(metric, [s.metrics[metric] for s in scored])
        return out

    def config(self) -> dict[str, Any]:
        """The task's settings, shaped like an entry of lm-eval's results `configs`."""
        return {
            "task": self.name,
            "tag": ["math_word_problems"],
            "dataset_path": "openai/gsm8k",
            "dataset_name": "main",
            "training_split": "train",
            "test_split": "test",
            "fewshot_split": "train",
            "doc_to_text": "Question: {{question}}\nAnswer:",
            "doc_to_target": "{{answer}}",
            "target_delimiter": TARGET_DELIMITER,
            "fewshot_delimiter": FEWSHOT_DELIMITER,
            "num_fewshot": self.default_fewshot,
            "output_type": "generate_until",
            "generation_kwargs": {
                "until": list(UNTIL),
                "do_sample": False,
                "temperature": 0.0,
                "max_gen_toks": MAX_TOKENS,
            },
            "metric_list": [
                {
                    "metric": "exact_match",
                    "aggregation": "mean",
                    "higher_is_better": True,
                    "ignore_case": True,
                    "ignore_punctuation": False,
                    "regexes_to_ignore": list(_IGNORED),
                }
            ],
            "filter_list": [
                {
                    "name": "strict-match",
                    "filter": [
                        {"function": "regex", "regex_pattern": STRICT.pattern},
                        {"function": "take_first"},
                    ],
                },
                {
                    "name": "flexible-extract",
                    "filter": [
                        {
                            "function": "regex",
                            "group_select": -1,
                            "regex_pattern": FLEXIBLE.pattern,
                        },
                        {"function": "take_first"},
                    ],
                },
            ],
            "metadata": {"version": self.version},
        }
