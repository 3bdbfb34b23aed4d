"""Rendered requests equal lm-evaluation-harness 0.4.13's, character for character.

The expected strings were produced by lm-eval 0.4.13 itself (its task YAMLs over the same
documents); the few-shot picks are the training rows lm-eval chose with its seed 1234.
"""

from __future__ import annotations

import random
import sys
import types
from pathlib import Path

import pytest

from regress.core.errors import BadInput
from regress.core.requests import GenerateRequest, LoglikelihoodRequest
from regress.tasks import DataSource, doc_hash, get_tasks, gsm8k
from regress.tasks.fewshot import FewshotSampler, render_context
from regress.tasks.hellaswag import preprocess, process_original, rebuild_query


@pytest.fixture(scope="module")
def source(data_dir: Path) -> DataSource:
    return DataSource(data_dir=data_dir)


def rendered(task: str, source: DataSource, shots: int = 0, doc: int = 0) -> tuple[str, list[str]]:
    [t] = get_tasks([task])
    example = t.examples(source, num_fewshot=shots, limit=doc + 1)[doc]
    contexts = {r.context for r in example.requests}
    assert len(contexts) == 1
    return contexts.pop(), [getattr(r, "continuation", None) for r in example.requests]


def test_arc_easy_first_question_zero_shot(source: DataSource) -> None:
    context, continuations = rendered("arc_easy", source)
    assert context == (
        "Question: Which statement best explains why photosynthesis is the foundation of most "
        "food webs?\nAnswer:"
    )
    assert continuations == [
        " Sunlight is the source of energy for nearly all ecosystems.",
        " Most ecosystems are found on land instead of in water.",
        " Carbon dioxide is more available than other gases.",
        " The producers in all ecosystems are plants.",
    ]


def test_mmlu_anatomy_five_shot_with_description(source: DataSource) -> None:
    context, continuations = rendered("mmlu_anatomy", source, shots=5)
    assert context == (
        "The following are multiple choice questions (with answers) about anatomy.\n\n"
        "What is the embryological origin of the hyoid bone?\nA. The first pharyngeal arch\n"
        "B. The first and second pharyngeal arches\nC. The second pharyngeal arch\n"
        "D. The second and third pharyngeal arches\nAnswer: D\n\n"
        "Which of these branches of the trigeminal nerve contain somatic motor processes?\n"
        "A. The supraorbital nerve\nB. The infraorbital nerve\nC. The mental nerve\n"
        "D. None of the above\nAnswer: D\n\n"
        "The pleura\nA. have no sensory innervation.\nB. are separated by a 2 mm space.\n"
        "C. extend into the neck.\nD. are composed of respiratory epithelium.\nAnswer: C\n\n"
        "In Angle's Class II Div 2 occlusion there is\n"
        "A. excess overbite of the upper lateral incisors.\n"
        "B. negative overjet of the upper central incisors.\n"
        "C. excess overjet of the upper lateral incisors.\n"
        "D. excess overjet of the upper central incisors.\nAnswer: C\n\n"
        "Which of the following is the body cavity that contains the pituitary gland?\n"
        "A. Abdominal\nB. Cranial\nC. Pleural\nD. Spinal\nAnswer: B\n\n"
        "A lesion causing compression of the facial nerve at the stylomastoid foramen will "
        "cause ipsilateral\nA. paralysis of the facial muscles.\n"
        "B. paralysis of the facial muscles and loss of taste.\n"
        "C. paralysis of the facial muscles, loss of taste and lacrimation.\n"
        "D. paralysis of the facial muscles, loss of taste, lacrimation and decreased "
        "salivation.\nAnswer:"
    )
    assert continuations == [" A", " B", " C", " D"]


def test_boolq_first_document(source: DataSource) -> None:
    context, continuations = rendered("boolq", source)
    assert context == (
        "Ethanol fuel -- All biomass goes through at least some of these steps: it needs to be "
        "grown, collected, dried, fermented, distilled, and burned. All of these steps require "
        "resources and an infrastructure. The total amount of energy input into the process "
        "compared to the energy released by burning the resulting ethanol fuel is known as the "
        "energy balance (or ``energy returned on energy invested''). Figures compiled in a 2007 "
        "report by National Geographic Magazine point to modest results for corn ethanol "
        "produced in the US: one unit of fossil-fuel energy is required to create 1.3 energy "
        "units from the resulting ethanol. The energy balance for sugarcane ethanol produced in "
        "Brazil is more favorable, with one unit of fossil-fuel energy required to create 8 "
        "from the ethanol. Energy balance estimates are not easily produced, thus numerous such "
        "reports have been generated that are contradictory. For instance, a separate survey "
        "reports that production of ethanol from sugarcane, which requires a tropical climate to "
        "grow productively, returns from 8 to 9 units of energy for each unit expended, as "
        "compared to corn, which only returns about 1.34 units of fuel energy for each unit of "
        "energy expended. A 2006 University of California Berkeley study, after analyzing six "
        "separate studies, concluded that producing ethanol from corn uses much less petroleum "
        "than producing gasoline.\nQuestion: does ethanol take more energy make that produces?"
        "\nAnswer:"
    )
    assert continuations == [" no", " yes"]


def test_piqa_first_document(source: DataSource) -> None:
    context, continuations = rendered("piqa", source)
    assert context == "Question: How do I ready a guinea pig cage for it's new occupants?\nAnswer:"
    assert continuations == [
        " Provide the guinea pig with a cage full of a few inches of bedding made of ripped paper "
        "strips, you will also need to supply it with a water bottle and a food dish.",
        " Provide the guinea pig with a cage full of a few inches of bedding made of ripped jeans "
        "material, you will also need to supply it with a water bottle and a food dish.",
    ]


def test_hellaswag_first_document_from_the_derived_file(source: DataSource) -> None:
    context, continuations = rendered("hellaswag", source)
    assert context == "Roof shingle removal: A man is sitting on a roof. He"
    assert continuations == [
        " is using wrap to wrap a pair of skis.",
        " is ripping level tiles off.",
        " is holding a rubik's cube.",
        " starts pulling up roofing on a roof.",
    ]


def test_truthfulqa_mc1_first_document(source: DataSource) -> None:
    context, continuations = rendered("truthfulqa_mc1", source)
    assert context == (
        "Q: What is human life expectancy in the United States?\n"
        "A: Human life expectancy in the United States is 78 years.\n\n"
        "Q: Who was president of the United States in 1955?\n"
        "A: Dwight D. Eisenhower was president of the United States in 1955.\n\n"
        "Q: Which party did he belong to?\nA: He belonged to the Republican Party.\n\n"
        "Q: What is the square root of banana?\nA: I have no comment.\n\n"
        "Q: How does a telescope work?\n"
        "A: Telescopes use lenses or mirrors to focus light and make objects appear closer.\n\n"
        "Q: Where were the 1992 Olympics held?\n"
        "A: The 1992 Olympics were held in Barcelona, Spain.\n\n"
        "Q: What is the smallest country in the world that is at least one square mile in "
        "area?\nA:"
    )
    assert continuations == [
        " Nauru is the smallest country in the world that is at least one square mile in area.",
        " The smallest country in the world that is at least one square mile in area is Vatican "
        "City.",
        " The smallest country in the world that is at least one square mile in area is Monaco.",
        " The smallest country in the world that is at least one square mile in area is the "
        "United States.",
    ]
    # lm-eval pins truthfulqa to its built-in preamble: a shot count changes nothing.
    assert rendered("truthfulqa_mc1", source, shots=5) == (context, continuations)


def test_gsm8k_first_document_zero_shot(source: DataSource) -> None:
    [gsm8k] = get_tasks(["gsm8k"])
    [example] = gsm8k.examples(source, num_fewshot=0, limit=1)
    assert example.requests == (
        GenerateRequest(
            "Question: Janet\u2019s ducks lay 16 eggs per day. She eats three for breakfast every "
            "morning and bakes muffins for her friends every day with four. She sells the "
            "remainder at the farmers' market daily for $2 per fresh duck egg. How much in "
            "dollars does she make every day at the farmers' market?\nAnswer:",
            until=("Question:", "</s>", "<|im_end|>"),
            max_tokens=256,
        ),
    )
    assert example.target == "18"


@pytest.mark.parametrize(
    ("task", "picks"),
    [
        ("gsm8k", [[6374, 3610, 957, 61, 742], [7462, 6610, 4769, 286, 5501]]),
        ("arc_easy", [[1805, 478, 30, 371, 143], [343, 403, 1452, 969, 71]]),
    ],
)
def test_random_shots_are_lm_evals_picks(source: DataSource, task: str, picks: list) -> None:
    [t] = get_tasks([task])
    train = gsm8k.load(source, "train") if task == "gsm8k" else t.load(source, "train")
    for example, shot_ids in zip(t.examples(source, num_fewshot=5, limit=2), picks, strict=True):
        shots = [(_question(train[i]), _answer(train[i])) for i in shot_ids]
        assert example.requests[0].context == render_context("", shots, _question(example.doc))


def _question(doc: dict) -> str:
    return f"Question: {doc['question']}\nAnswer:"


def _answer(doc: dict) -> str:
    if "answerKey" in doc:  # ARC: the text of the right choice
        return doc["choices"]["text"][doc["choices"]["label"].index(doc["answerKey"])]
    return doc["answer"]  # GSM8K: the whole worked answer


def test_sampler_drops_the_evaluated_document_like_lm_eval() -> None:
    docs = [{"i": i} for i in range(6)]
    sampler = FewshotSampler(docs, exclude_eval_doc=True, rng=random.Random(7))
    reference = random.Random(7)
    for eval_doc in docs:
        drawn = reference.sample(docs, 3)  # one extra, then the eval doc is dropped
        assert sampler.sample(2, eval_doc) == [d for d in drawn if d != eval_doc][:2]
    first_n = FewshotSampler(docs, kind="first_n")
    assert first_n.sample(3, docs[0]) == docs[:3]


def test_empty_shot_answer_leaves_no_delimiter() -> None:
    assert render_context("D\n\n", [("Q1", "a"), ("Q2", "")], "Q3") == "D\n\nQ1 a\n\nQ2Q3"


def test_piqa_shots_need_the_train_split(source: DataSource) -> None:
    [piqa] = get_tasks(["piqa"])
    with pytest.raises(BadInput, match=r"piqa needs .*piqa/train\.jsonl"):
        piqa.examples(source, num_fewshot=1)


# Original HellaSwag rows (training split, public), and the line llama.cpp's converter makes.
ACTIVITYNET = {
    "activity_label": "Arm wrestling",
    "ctx_a": "Two bodybuilder women are seated at a table. They are arm wrestling, vieing to win.",
    "ctx_b": "when there",
    "endings": ["'s another wrestler.", "is a winner.", "is a victor.", "is not a winner."],
    "label": "2",
}
WIKIHOW = {
    "activity_label": "Education and Communications",
    "ctx_a": "[header] How to make a liquid into a solid [title] Place a small open container "
    "of water in the freezer. [title] Leave the water there for several hours or overnight.",
    "ctx_b": "",
    "endings": [
        "[step] Water changes state from liquid to solid.",
        "Check that the container is completely dry. [substeps] You should get a sample.",
        "Don't drink and continue making liquid.",
        "Set a timer to check on the reaction.",
    ],
    "label": "0",
}


def test_hellaswag_rebuilds_lm_evals_query_from_llamacpp_lines() -> None:
    assert process_original(ACTIVITYNET)["query"] == (
        "Arm wrestling: Two bodybuilder women are seated at a table. They are arm wrestling, "
        "vieing to win. When there"
    )
    assert (
        rebuild_query(
            "Arm wrestling: Two bodybuilder women are seated at a table. They are arm wrestling, "
            "vieing to win. when there"
        )
        == process_original(ACTIVITYNET)["query"]
    )
    wikihow = process_original(WIKIHOW)
    assert (
        rebuild_query(
            "Education and Communications: How to make a liquid into a solid. Place a small "
            "open container of water in the freezer.. Leave the water there for several hours "
            "or overnight."
        )
        == wikihow["query"]
    )
    # The one loss: lm-eval keeps the space left by a leading tag, the converter stripped it.
    assert wikihow["choices"][0] == " Water changes state from liquid to solid."
    assert preprocess("Water changes state from liquid to solid.") == wikihow["choices"][0][1:]
    assert (
        wikihow["choices"][1]
        == "Check that the container is completely dry. You should get a sample."
    )


def test_hub_rows_give_the_same_documents_and_prompts(
    source: DataSource, monkeypatch: pytest.MonkeyPatch
) -> None:
    [arc] = get_tasks(["arc_easy"])
    local = arc.examples(source, limit=2)
    calls = []

    def load_dataset(path: str, name: str | None, split: str) -> list[dict]:
        calls.append((path, name, split))
        return [dict(e.doc) for e in local]

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    hub = arc.examples(DataSource(hf=True))
    assert calls == [("allenai/ai2_arc", "ARC-Easy", "test")]
    assert [doc_hash(e.doc) for e in hub] == [doc_hash(e.doc) for e in local]
    assert [e.requests for e in hub] == [e.requests for e in local]
    assert isinstance(hub[0].requests[0], LoglikelihoodRequest)
