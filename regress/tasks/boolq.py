"""BoolQ (Clark et al. 2019, arXiv:1905.10044): yes/no questions about a Wikipedia passage.

lm-eval's `boolq` (SuperGLUE copy): "{passage}\\nQuestion: {question}?\\nAnswer:" with
continuations " no" and " yes", validation split, shots from train. SuperGLUE's passage is
the original's "title -- passage", which is how the original `boolq/dev.jsonl` (question,
title, answer, passage) is turned into lm-eval's documents.
"""

from __future__ import annotations

from regress.core.errors import BadInput
from regress.tasks.base import DataSource
from regress.tasks.loaders import Doc, data_file, load_hf, read_jsonl
from regress.tasks.multiple_choice import MultipleChoiceTask

_FILE_SPLIT = {"validation": "dev", "train": "train"}


def load(source: DataSource, split: str) -> list[Doc]:
    """A split as aps/super_glue boolq rows: question, passage, idx, label (1 = yes)."""
    if source.hf:
        return load_hf("aps/super_glue", "boolq", split, "boolq")
    path = data_file(source, f"boolq/{_FILE_SPLIT[split]}.jsonl", "boolq")
    docs = []
    for idx, row in enumerate(read_jsonl(path)):
        try:
            passage = f"{row['title']} -- {row['passage']}"
            docs.append(
                {
                    "question": row["question"],
                    "passage": passage,
                    "idx": idx,
                    "label": int(row["answer"]),
                }
            )
        except KeyError as exc:
            raise BadInput(f"{path}: record {idx + 1}: missing field {exc}") from exc
    return docs


def boolq_task() -> MultipleChoiceTask:
    """The `boolq` task."""
    return MultipleChoiceTask(
        name="boolq",
        load=load,
        eval_split="validation",
        doc_to_text=lambda doc: f"{doc['passage']}\nQuestion: {doc['question']}?\nAnswer:",
        doc_to_choice=lambda doc: ["no", "yes"],
        doc_to_target=lambda doc: doc["label"],
        lm_eval_config={
            "tag": ["super-glue-lm-eval-v1"],
            "dataset_path": "aps/super_glue",
            "dataset_name": "boolq",
            "training_split": "train",
            "validation_split": "validation",
            "doc_to_text": "{{passage}}\nQuestion: {{question}}?\nAnswer:",
            "doc_to_target": "label",
            "doc_to_choice": ["no", "yes"],
        },
        fewshot_split="train",
        # lm-eval's fewshot_split and test_split are both unset, hence "equal".
        exclude_eval_doc=True,
        metrics=("acc",),
        version=2.0,
    )
