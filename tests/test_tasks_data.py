"""Every loader on the real benchmark files: document counts and what a document holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from regress.tasks import DataSource, get_tasks
from regress.tasks.wikitext import count_words, detokenize


@pytest.fixture(scope="module")
def source(data_dir: Path) -> DataSource:
    return DataSource(data_dir=data_dir)


@pytest.mark.parametrize(
    ("task", "n"),
    [
        ("arc_easy", 2376),
        ("arc_challenge", 1172),
        ("piqa", 1838),
        ("boolq", 3270),
        ("hellaswag", 10042),
        ("truthfulqa_mc1", 817),
        ("truthfulqa_mc2", 817),
        ("gsm8k", 1319),
        ("wikitext", 62),
    ],
)
def test_document_counts(source: DataSource, task: str, n: int) -> None:
    [t] = get_tasks([task])
    examples = t.examples(source, num_fewshot=0)
    assert len(examples) == n
    assert [e.doc_id for e in examples[:3]] == [0, 1, 2]


def test_mmlu_test_and_dev_counts(source: DataSource) -> None:
    tasks = get_tasks(["mmlu"])
    assert sum(len(t.load(source, "test")) for t in tasks) == 14042
    assert sum(len(t.load(source, "dev")) for t in tasks) == 285
    anatomy = tasks[[t.name for t in tasks].index("mmlu_anatomy")].load(source, "test")
    assert len(anatomy) == 135
    assert anatomy[0]["answer"] == 0 and anatomy[0]["subject"] == "anatomy"


def test_limit_keeps_the_first_documents(source: DataSource) -> None:
    [arc] = get_tasks(["arc_challenge"])
    assert [e.doc for e in arc.examples(source, limit=3)] == [
        e.doc for e in arc.examples(source)[:3]
    ]


def test_arc_numeric_labels_map_to_choice_indexes(source: DataSource) -> None:
    [arc] = get_tasks(["arc_challenge"])
    numeric = [e for e in arc.examples(source) if e.doc["choices"]["label"][0] == "1"]
    assert len(numeric) == 22  # the NYSEDREGENTS questions
    for e in numeric:
        assert e.doc["choices"]["label"][e.target] == e.doc["answerKey"]


def test_boolq_labels_and_passage_titles(source: DataSource) -> None:
    [boolq] = get_tasks(["boolq"])
    examples = boolq.examples(source)
    assert sum(e.target for e in examples) == 2033  # 2033 true, 1237 false
    assert examples[0].doc["passage"].startswith("Ethanol fuel -- All biomass goes through")


def test_wikitext_pages_and_their_counts(source: DataSource) -> None:
    [wikitext] = get_tasks(["wikitext"])
    examples = wikitext.examples(source)
    pages = [e.doc["page"] for e in examples]
    assert pages[0].startswith(" = Robert Boulter = \n \n Robert Boulter is an English film ,")
    assert pages[-1].startswith(" = The Hustler ( film ) = \n")
    # lm-eval counts words and bytes on the page before detokenising.
    assert (count_words(pages[0]), len(pages[0].encode())) == (1093, 5667)
    assert sum(count_words(p) for p in pages) == 241335
    assert sum(len(p.encode()) for p in pages) == 1290527
    text = examples[0].requests[0].text
    assert text == detokenize(pages[0])
    assert text.startswith(
        " = Robert Boulter =\n\nRobert Boulter is an English film, television and theatre actor."
        " He had a guest-starring role on the television series The Bill in 2000."
    )
    assert len(text) == 5419
