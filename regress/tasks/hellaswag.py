"""HellaSwag (Zellers et al. 2019, arXiv:1905.07830): pick the most plausible of four endings
of an ActivityNet caption or a WikiHow step.

lm-eval's `hellaswag`: the query is `preprocess(activity_label + ": " + ctx_a + " " +
ctx_b.capitalize())`, each preprocessed ending is a continuation, the validation split is
scored, and acc_norm is the headline metric. Documents become lm-eval's processed form
`{query, choices, gold}` from either source:

- `hellaswag/hellaswag_val.jsonl` (the original release): exactly lm-eval's processing.
- `hellaswag/derived-llamacpp-format/hellaswag_val_full.txt` (llama.cpp's text format, 6 lines
  per task: "activity_label: ctx", gold, 4 endings; validation only). Its converter removed
  only the [header]/[step]/[substeps]/[title] tags, wrote `ctx` (ctx_a + " " + ctx_b) without
  capitalising ctx_b, and dropped ind, source_id, split_type and the ctx_a/ctx_b boundary.
  We rebuild the query by capitalising ctx_b, found as the text after the context's last
  sentence end when it starts in lower case (ActivityNet's ctx_b always does; WikiHow's
  ctx_b is empty and its contexts end on a full stop), then apply lm-eval's preprocess,
  which also removes the [bracketed] text the converter kept. Still different from lm-eval:
  a ctx_b that starts with a digit or a quote and holds capitals later (capitalize() would
  lower them), a ctx_b with a sentence end inside it, and an ending that began with a tag,
  where lm-eval keeps a leading space that the converter stripped.
"""

from __future__ import annotations

import re
from pathlib import Path

from regress.core.errors import BadInput
from regress.tasks.base import DataSource
from regress.tasks.loaders import Doc, data_file, load_hf, read_jsonl, read_lines
from regress.tasks.multiple_choice import MultipleChoiceTask, accuracy_norm_first

ORIGINAL = {
    "validation": "hellaswag/hellaswag_val.jsonl",
    "train": "hellaswag/hellaswag_train.jsonl",
}
DERIVED = "hellaswag/derived-llamacpp-format/hellaswag_val_full.txt"
_LINES_PER_TASK = 6
# The unfinished sentence closing an ActivityNet context: after the last ". ", "! " or "? ".
_CTX_B = re.compile(r"(?<=[.!?] )([^.!?]*)$")


def preprocess(text: str) -> str:
    """lm-eval's cleanup of WikiHow markup: [title] becomes a full stop, other [tags] go."""
    text = text.strip().replace(" [title]", ". ")
    text = re.sub(r"\[.*?\]", "", text)
    return text.replace("  ", " ")


def process_original(row: dict) -> Doc:
    """lm-eval's `process_docs` on one row of the original release (or Rowan/hellaswag)."""
    ctx = row["ctx_a"] + " " + row["ctx_b"].capitalize()
    return {
        "query": preprocess(row["activity_label"] + ": " + ctx),
        "choices": [preprocess(ending) for ending in row["endings"]],
        "gold": int(row["label"]),
    }


def rebuild_query(line: str) -> str:
    """lm-eval's query from llama.cpp's "activity_label: ctx" line (see module docstring)."""
    ctx_b = _CTX_B.search(line)
    if ctx_b and ctx_b.group(1)[:1].islower():
        line = line[: ctx_b.start(1)] + ctx_b.group(1).capitalize()
    return preprocess(line)


def load(source: DataSource, split: str) -> list[Doc]:
    """The split as lm-eval's processed documents: query, choices, gold."""
    if source.hf:
        return [
            process_original(row) for row in load_hf("Rowan/hellaswag", None, split, "hellaswag")
        ]
    original = ORIGINAL[split]
    if split == "train" or (source.data_dir and (Path(source.data_dir) / original).is_file()):
        return _load_original(data_file(source, original, "hellaswag"))
    return _load_derived(data_file(source, DERIVED, "hellaswag"))


def _load_original(path: Path) -> list[Doc]:
    docs = []
    for number, row in enumerate(read_jsonl(path), start=1):
        try:
            docs.append(process_original(row))
        except (KeyError, TypeError, ValueError) as exc:
            raise BadInput(f"{path}: record {number}: bad or missing field ({exc})") from exc
    return docs


def _load_derived(path: Path) -> list[Doc]:
    lines = read_lines(path)
    if len(lines) % _LINES_PER_TASK:
        raise BadInput(f"{path}: {len(lines)} lines is not a multiple of {_LINES_PER_TASK}")
    docs = []
    for start in range(0, len(lines), _LINES_PER_TASK):
        context, gold, *endings = lines[start : start + _LINES_PER_TASK]
        if gold not in ("0", "1", "2", "3"):
            raise BadInput(f"{path}:{start + 2}: gold label {gold!r} is not 0-3")
        docs.append(
            {
                "query": rebuild_query(context),
                "choices": [preprocess(ending) for ending in endings],
                "gold": int(gold),
            }
        )
    return docs


def hellaswag_task() -> MultipleChoiceTask:
    """The `hellaswag` task (primary metric acc_norm)."""
    return MultipleChoiceTask(
        name="hellaswag",
        load=load,
        eval_split="validation",
        doc_to_text=lambda doc: doc["query"],
        doc_to_choice=lambda doc: doc["choices"],
        doc_to_target=lambda doc: doc["gold"],
        lm_eval_config={
            "tag": ["multiple_choice"],
            "dataset_path": "Rowan/hellaswag",
            "training_split": "train",
            "validation_split": "validation",
            "process_docs": "utils.process_docs",
            "doc_to_text": "{{query}}",
            "doc_to_target": "{{label}}",
            "doc_to_choice": "choices",
        },
        fewshot_split="train",
        # lm-eval's fewshot_split and test_split are both unset, hence "equal".
        exclude_eval_doc=True,
        primary_metric="acc_norm",
        scorer=accuracy_norm_first,
        version=1.0,
    )
