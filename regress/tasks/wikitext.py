"""WikiText-2 perplexity (Merity et al. 2016, arXiv:1609.07843), lm-eval's `wikitext`.

Documents are Wikipedia articles as EleutherAI/wikitext_document_level cuts wiki.test.raw:
a line that reads "= Title =" once "= =" runs are joined starts a new page, and a page is its
lines joined by "\\n" (62 pages in the test split). The model scores the detokenised page
with one rolling loglikelihood request; words and bytes are counted on the page as stored,
before detokenising, as lm-eval does. Perplexities aggregate over the whole corpus.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from regress.core.requests import RequestKind, Result, RollingLoglikelihoodRequest, RollingResult
from regress.tasks.base import DataSource, Example, Scored
from regress.tasks.loaders import Doc, data_file, load_hf, read_text
from regress.tasks.metrics import corpus_perplexity

METRICS = ("word_perplexity", "byte_perplexity", "bits_per_byte")
_FILE_SPLIT = {"test": "test", "validation": "valid", "train": "train"}


def split_pages(text: str) -> list[str]:
    """Cut a raw WikiText file into articles, as the document-level dataset does."""
    pages: list[str] = []
    lines: list[str] = []
    for line in text.split("\n"):
        heading = line.replace("= = =", "===").replace("= =", "==").strip()
        if heading.startswith("= ") and heading.endswith(" ="):
            page = "\n".join(lines)
            if page.strip():
                pages.append(page)
            lines = []
        lines.append(line)
    # The dataset keeps the last page even when it is blank.
    pages.append("\n".join(lines))
    return pages


def detokenize(page: str) -> str:
    """lm-eval's `wikitext_detokenizer`: undo WikiText's spaced-out punctuation."""
    s = page.replace("s '", "s'")
    s = re.sub(r"/' [0-9]/", r"/'[0-9]/", s)
    for spaced, joined in ((" @-@ ", "-"), (" @,@ ", ","), (" @.@ ", ".")):
        s = s.replace(spaced, joined)
    for mark in ":;.!?,":
        s = s.replace(f" {mark} ", f"{mark} ")
    s = re.sub(r"\(\s*([^\)]*?)\s*\)", r"(\1)", s)
    s = re.sub(r"\[\s*([^\]]*?)\s*\]", r"[\1]", s)
    s = re.sub(r"{\s*([^}]*?)\s*}", r"{\1}", s)
    s = re.sub(r"\"\s*([^\"]*?)\s*\"", r'"\1"', s)
    s = re.sub(r"'\s*([^']*?)\s*'", r"'\1'", s)
    for spaced, joined in (
        ("= = = =", "===="),
        ("= = =", "==="),
        ("= =", "=="),
        (" \N{DEGREE SIGN} ", "\N{DEGREE SIGN}"),
        (" \n", "\n"),
        ("\n ", "\n"),
        (" N ", " 1 "),
        (" 's", "'s"),
    ):
        s = s.replace(spaced, joined)
    return s


def count_words(page: str) -> int:
    """Words as lm-eval counts them: pieces between whitespace runs of the stored page."""
    return len(re.split(r"\s+", page))


def load(source: DataSource, split: str) -> list[Doc]:
    """The split's pages as `{"page": text}` documents."""
    if source.hf:
        return load_hf("EleutherAI/wikitext_document_level", "wikitext-2-raw-v1", split, "wikitext")
    name = _FILE_SPLIT[split]
    path = data_file(source, f"wikitext-2/wikitext-2-raw/wiki.{name}.raw", "wikitext")
    return [{"page": page} for page in split_pages(read_text(path))]


# eq=False: a task is an identity (hashable, usable as a key), not a value.
@dataclass(frozen=True, eq=False)
class WikitextTask:
    """lm-eval's `wikitext` (loglikelihood_rolling over whole articles)."""

    name: str = "wikitext"
    group: str | None = None
    output_type: RequestKind = "loglikelihood_rolling"
    primary_metric: str = "word_perplexity"
    higher_is_better: dict[str, bool] = field(default_factory=lambda: dict.fromkeys(METRICS, False))
    binary: bool = False
    default_fewshot: int = 0
    version: float = 2.0

    def effective_fewshot(self, num_fewshot: int | None) -> int:
        """Always 0: a perplexity task has no shots (lm-eval accepts and ignores them)."""
        return 0

    def examples(
        self, source: DataSource, num_fewshot: int | None = None, limit: int | None = None
    ) -> list[Example]:
        """One rolling request per page. Like lm-eval, a few-shot count is accepted and has no
        effect: a rolling loglikelihood has no context to put shots in."""
        pages = load(source, "test")[:limit]
        return [
            Example(doc_id, doc, (RollingLoglikelihoodRequest(detokenize(doc["page"])),), None)
            for doc_id, doc in enumerate(pages)
        ]

    def score(self, example: Example, results: Sequence[Result]) -> Scored:
        """The page's log-likelihood with its word and byte counts, and its own perplexities."""
        (result,) = results
        if not isinstance(result, RollingResult):
            raise ValueError(f"{self.name}: expected a rolling loglikelihood result")
        page = example.doc["page"]
        loglik, words, n_bytes = result.logprob, count_words(page), len(page.encode("utf-8"))
        metrics = {"loglik": loglik, "n_words": float(words), "n_bytes": float(n_bytes)}
        metrics |= corpus_perplexity([loglik], [words], [n_bytes])
        return Scored(pred=None, correct=None, metrics=metrics)

    def aggregate(self, scored: Sequence[Scored]) -> dict[str, float]:
        """Corpus-level perplexities: total log-likelihood over total words or bytes."""
        return corpus_perplexity(
            [s.metrics["loglik"] for s in scored],
            [int(s.metrics["n_words"]) for s in scored],
            [int(s.metrics["n_bytes"]) for s in scored],
        )

    def config(self) -> dict[str, Any]:
        """The task's settings, shaped like an entry of lm-eval's results `configs`."""
        return {
            "task": self.name,
            "dataset_path": "EleutherAI/wikitext_document_level",
            "dataset_name": "wikitext-2-raw-v1",
            "training_split": "train",
            "validation_split": "validation",
            "test_split": "test",
            "doc_to_text": "",
            "doc_to_target": "preprocess_wikitext.wikitext_detokenizer",
            "process_results": "preprocess_wikitext.process_results",
            "target_delimiter": " ",
            "fewshot_delimiter": "\n\n",
            "num_fewshot": 0,
            "output_type": "loglikelihood_rolling",
            "metric_list": [
                {"metric": m, "aggregation": agg, "higher_is_better": False}
                for m, agg in zip(
                    METRICS,
                    ("weighted_perplexity", "weighted_perplexity", "bits_per_byte"),
                    strict=True,
                )
            ],
            "metadata": {"version": self.version},
        }
