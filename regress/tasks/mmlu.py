"""MMLU (Hendrycks et al. 2021, arXiv:2009.03300): 57 subjects, four lettered choices.

lm-eval's `mmlu` group, default variant: the prompt lists the question and the four options
and the model scores the letters " A" to " D"; 5-shot means the first five dev questions of
the subject, after a one-line description. Files: `mmlu/test/<subject>_test.csv` and
`mmlu/dev/<subject>_dev.csv` (no header: question, A, B, C, D, answer letter).
"""

from __future__ import annotations

from regress.core.errors import BadInput
from regress.tasks.base import DataSource
from regress.tasks.loaders import Doc, data_file, load_hf, read_csv
from regress.tasks.multiple_choice import MultipleChoiceTask

LETTERS = ["A", "B", "C", "D"]

CATEGORIES: dict[str, list[str]] = {
    "stem": [
        "abstract_algebra",
        "anatomy",
        "astronomy",
        "college_biology",
        "college_chemistry",
        "college_computer_science",
        "college_mathematics",
        "college_physics",
        "computer_security",
        "conceptual_physics",
        "electrical_engineering",
        "elementary_mathematics",
        "high_school_biology",
        "high_school_chemistry",
        "high_school_computer_science",
        "high_school_mathematics",
        "high_school_physics",
        "high_school_statistics",
        "machine_learning",
    ],
    "other": [
        "business_ethics",
        "clinical_knowledge",
        "college_medicine",
        "global_facts",
        "human_aging",
        "management",
        "marketing",
        "medical_genetics",
        "miscellaneous",
        "nutrition",
        "professional_accounting",
        "professional_medicine",
        "virology",
    ],
    "social_sciences": [
        "econometrics",
        "high_school_geography",
        "high_school_government_and_politics",
        "high_school_macroeconomics",
        "high_school_microeconomics",
        "high_school_psychology",
        "human_sexuality",
        "professional_psychology",
        "public_relations",
        "security_studies",
        "sociology",
        "us_foreign_policy",
    ],
    "humanities": [
        "formal_logic",
        "high_school_european_history",
        "high_school_us_history",
        "high_school_world_history",
        "international_law",
        "jurisprudence",
        "logical_fallacies",
        "moral_disputes",
        "moral_scenarios",
        "philosophy",
        "prehistory",
        "professional_law",
        "world_religions",
    ],
}
"""lm-eval's category groups (`mmlu_stem`, ...), from the `tag` of each subject's YAML."""

SUBJECTS = sorted(s for subjects in CATEGORIES.values() for s in subjects)
CATEGORY_OF = {s: category for category, subjects in CATEGORIES.items() for s in subjects}

# lm-eval's split names; the local files call the validation split "val".
_FILE_SPLIT = {"test": "test", "dev": "dev", "validation": "val"}


def load(subject: str, source: DataSource, split: str) -> list[Doc]:
    """One subject's split as cais/mmlu rows: question, subject, choices, answer index."""
    task = f"mmlu_{subject}"
    if source.hf:
        return load_hf("cais/mmlu", subject, split, task)
    folder = _FILE_SPLIT[split]
    path = data_file(source, f"mmlu/{folder}/{subject}_{folder}.csv", task)
    docs = []
    for number, row in enumerate(read_csv(path, 6), start=1):
        if row[5] not in LETTERS:
            raise BadInput(f"{path}: row {number}: answer {row[5]!r} is not one of A, B, C, D")
        docs.append(
            {
                "question": row[0],
                "subject": subject,
                "choices": row[1:5],
                "answer": LETTERS.index(row[5]),
            }
        )
    return docs


def doc_to_text(doc: Doc) -> str:
    """The question, its four lettered options, and "Answer:"."""
    options = "".join(f"\n{letter}. {c}" for letter, c in zip(LETTERS, doc["choices"], strict=True))
    return f"{doc['question'].strip()}{options}\nAnswer:"


def subject_task(subject: str) -> MultipleChoiceTask:
    """The `mmlu_<subject>` task."""
    return MultipleChoiceTask(
        name=f"mmlu_{subject}",
        group="mmlu",
        load=lambda source, split: load(subject, source, split),
        eval_split="test",
        doc_to_text=doc_to_text,
        doc_to_choice=lambda doc: LETTERS,
        doc_to_target=lambda doc: doc["answer"],
        lm_eval_config={
            "task_alias": subject,
            "tag": f"mmlu_{CATEGORY_OF[subject]}_tasks",
            "dataset_path": "cais/mmlu",
            "dataset_name": subject,
            "test_split": "test",
            "fewshot_split": "dev",
            "doc_to_text": (
                "{{question.strip()}}\nA. {{choices[0]}}\nB. {{choices[1]}}\n"
                "C. {{choices[2]}}\nD. {{choices[3]}}\nAnswer:"
            ),
            "doc_to_target": "answer",
            "doc_to_choice": LETTERS,
        },
        fewshot_split="dev",
        sampler="first_n",
        description=(
            "The following are multiple choice questions (with answers) about "
            f"{subject.replace('_', ' ')}.\n\n"
        ),
        metrics=("acc",),
        version=1.0,
    )
