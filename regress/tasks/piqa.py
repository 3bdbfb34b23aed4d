"""PIQA (Bisk et al. 2020, arXiv:1911.11641): physical commonsense, pick the better of two
solutions to a goal.

lm-eval's `piqa`: "Question: {goal}\\nAnswer:" with sol1 and sol2 as continuations, scored on
the validation split (the test labels are hidden); shots from train. Files:
`piqa/valid.jsonl` + `piqa/valid-labels.lst` (and `train.jsonl` + `train-labels.lst` for
few-shot).
"""

from __future__ import annotations

from regress.core.errors import BadInput
from regress.tasks.base import DataSource
from regress.tasks.loaders import Doc, data_file, load_hf, read_jsonl, read_lines
from regress.tasks.multiple_choice import MultipleChoiceTask

_FILE_SPLIT = {"validation": "valid", "train": "train"}


def load(source: DataSource, split: str) -> list[Doc]:
    """A split as baber/piqa rows: goal, sol1, sol2, label."""
    if source.hf:
        return load_hf("baber/piqa", None, split, "piqa")
    stem = _FILE_SPLIT[split]
    path = data_file(source, f"piqa/{stem}.jsonl", "piqa")
    labels_path = data_file(source, f"piqa/{stem}-labels.lst", "piqa")
    rows, labels = read_jsonl(path), read_lines(labels_path)
    if len(rows) != len(labels):
        raise BadInput(f"{path} has {len(rows)} rows but {labels_path} has {len(labels)} labels")
    docs = []
    for number, (row, label) in enumerate(zip(rows, labels, strict=True), start=1):
        if label.strip() not in ("0", "1"):
            raise BadInput(f"{labels_path}:{number}: label {label!r} is not 0 or 1")
        try:
            docs.append(
                {"goal": row["goal"], "sol1": row["sol1"], "sol2": row["sol2"], "label": int(label)}
            )
        except KeyError as exc:
            raise BadInput(f"{path}: record {number}: missing field {exc}") from exc
    return docs


def piqa_task() -> MultipleChoiceTask:
    """The `piqa` task."""
    return MultipleChoiceTask(
        name="piqa",
        load=load,
        eval_split="validation",
        doc_to_text=lambda doc: f"Question: {doc['goal']}\nAnswer:",
        doc_to_choice=lambda doc: [doc["sol1"], doc["sol2"]],
        doc_to_target=lambda doc: doc["label"],
        lm_eval_config={
            "dataset_path": "baber/piqa",
            "training_split": "train",
            "validation_split": "validation",
            "doc_to_text": "Question: {{goal}}\nAnswer:",
            "doc_to_target": "label",
            "doc_to_choice": "{{[sol1, sol2]}}",
        },
        fewshot_split="train",
        # lm-eval's fewshot_split and test_split are both unset, hence "equal".
        exclude_eval_doc=True,
        version=1.0,
    )
