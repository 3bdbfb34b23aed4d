"""AI2 Reasoning Challenge (Clark et al. 2018, arXiv:1803.05457): grade-school science
questions, Easy and Challenge sets, 3 to 5 choices labelled A-E or 1-5.

lm-eval's `arc_easy` / `arc_challenge`: "Question: {question}\\nAnswer:" and each choice's text
as the continuation; test split, shots drawn at random from train. Files:
`arc/ARC-Easy/ARC-Easy-{Test,Train,Dev}.jsonl` (and the same for ARC-Challenge).
"""

from __future__ import annotations

from regress.core.errors import BadInput
from regress.tasks.base import DataSource
from regress.tasks.loaders import Doc, data_file, load_hf, read_jsonl
from regress.tasks.multiple_choice import MultipleChoiceTask

_FILE_SPLIT = {"test": "Test", "train": "Train", "validation": "Dev"}


def load(subset: str, task: str, source: DataSource, split: str) -> list[Doc]:
    """A split as allenai/ai2_arc rows: id, question, choices {text, label}, answerKey."""
    if source.hf:
        return load_hf("allenai/ai2_arc", subset, split, task)
    path = data_file(source, f"arc/{subset}/{subset}-{_FILE_SPLIT[split]}.jsonl", task)
    docs = []
    for number, row in enumerate(read_jsonl(path), start=1):
        try:
            choices = row["question"]["choices"]
            doc = {
                "id": row["id"],
                "question": row["question"]["stem"],
                "choices": {
                    "text": [c["text"] for c in choices],
                    "label": [c["label"] for c in choices],
                },
                "answerKey": row["answerKey"],
            }
        except (KeyError, TypeError) as exc:
            raise BadInput(f"{path}: record {number}: missing field {exc}") from exc
        texts = [doc["question"], *doc["choices"]["text"], *doc["choices"]["label"]]
        if not all(isinstance(t, str) for t in [*texts, doc["answerKey"]]):
            raise BadInput(
                f"{path}: record {number}: question stem, choice texts and labels and answerKey "
                "must be strings"
            )
        if doc["answerKey"] not in doc["choices"]["label"]:
            raise BadInput(f"{path}: record {number}: answerKey {doc['answerKey']!r} not a label")
        docs.append(doc)
    return docs


def arc_task(name: str, subset: str) -> MultipleChoiceTask:
    """`arc_easy` (subset ARC-Easy) or `arc_challenge` (ARC-Challenge)."""
    return MultipleChoiceTask(
        name=name,
        load=lambda source, split: load(subset, name, source, split),
        eval_split="test",
        doc_to_text=lambda doc: f"Question: {doc['question']}\nAnswer:",
        doc_to_choice=lambda doc: doc["choices"]["text"],
        doc_to_target=lambda doc: doc["choices"]["label"].index(doc["answerKey"]),
        lm_eval_config={
            "tag": ["ai2_arc"],
            "dataset_path": "allenai/ai2_arc",
            "dataset_name": subset,
            "training_split": "train",
            "validation_split": "validation",
            "test_split": "test",
            "doc_to_text": "Question: {{question}}\nAnswer:",
            "doc_to_target": "{{choices.label.index(answerKey)}}",
            "doc_to_choice": "{{choices.text}}",
        },
        fewshot_split="train",
        version=1.0,
    )
