"""The task registry: names, groups, expansion order, data sources, configs."""

from __future__ import annotations

from pathlib import Path

import pytest

from regress.core.errors import BadInput
from regress.tasks import get_tasks, list_tasks, resolve_source, task_groups
from regress.tasks.mmlu import SUBJECTS


def test_every_listed_task_builds_with_its_own_name() -> None:
    names = list_tasks()
    # MMLU, lm-eval tasks, builtin_*, code-judged sets, open answers, conversations
    assert len(names) == 57 + 9 + 5 + 3 + 1 + 1
    assert [t.name for t in get_tasks(names)] == names


def test_groups_expand_in_place_keeping_order_and_dropping_repeats() -> None:
    names = [t.name for t in get_tasks(["arc_easy", "builtin", "builtin_dates", "arc_easy"])]
    assert names == [
        "arc_easy",
        "builtin_arithmetic",
        "builtin_comparison",
        "builtin_ordering",
        "builtin_dates",
        "builtin_units",
    ]


def test_mmlu_is_57_subjects_and_its_categories_partition_them() -> None:
    groups = task_groups()
    assert len(groups["mmlu"]) == 57 == len(SUBJECTS)
    categories = [groups[f"mmlu_{c}"] for c in ("stem", "other", "social_sciences", "humanities")]
    assert [len(c) for c in categories] == [19, 13, 12, 13]
    assert sorted(sum(categories, [])) == groups["mmlu"]
    assert {t.group for t in get_tasks(["mmlu_stem"])} == {"mmlu"}


def test_unknown_task_names_the_known_ones() -> None:
    with pytest.raises(BadInput, match=r"unknown task 'arc_medium'; known: mmlu, .*arc_easy"):
        get_tasks(["arc_medium"])


def test_unknown_task_names_the_loaded_ones_too() -> None:
    from regress.tasks.catalog import load_catalog

    examples = Path(__file__).resolve().parents[1] / "examples"
    catalog = load_catalog([examples / "tasks"], [examples / "golden" / "assistant.jsonl"])
    with pytest.raises(BadInput, match=r"known: mmlu, .*; loaded: .*golden_assistant.*"):
        catalog.get(["nosuchtask"])


def test_task_attributes_follow_lm_eval() -> None:
    arc, hellaswag, wikitext, gsm8k, mc2 = get_tasks(
        ["arc_easy", "hellaswag", "wikitext", "gsm8k", "truthfulqa_mc2"]
    )
    assert (arc.output_type, arc.primary_metric, arc.default_fewshot) == ("loglikelihood", "acc", 0)
    assert hellaswag.primary_metric == "acc_norm"
    assert wikitext.output_type == "loglikelihood_rolling"
    assert wikitext.higher_is_better == {
        "word_perplexity": False,
        "byte_perplexity": False,
        "bits_per_byte": False,
    }
    assert (gsm8k.output_type, gsm8k.default_fewshot, gsm8k.version) == ("generate_until", 5, 3.0)
    assert (mc2.primary_metric, mc2.version) == ("acc", 3.0)


def test_config_reads_like_an_lm_eval_configs_entry() -> None:
    anatomy, gsm8k = get_tasks(["mmlu_anatomy", "gsm8k"])
    config = anatomy.config()
    assert config["task"] == "mmlu_anatomy"
    assert config["dataset_path"] == "cais/mmlu"
    assert (config["test_split"], config["fewshot_split"]) == ("test", "dev")
    assert config["fewshot_config"] == {"sampler": "first_n"}
    assert config["output_type"] == "multiple_choice"
    assert config["metric_list"] == [
        {"metric": "acc", "aggregation": "mean", "higher_is_better": True}
    ]
    assert config["description"].endswith("about anatomy.\n\n")
    gen = gsm8k.config()
    assert gen["generation_kwargs"]["until"] == ["Question:", "</s>", "<|im_end|>"]
    assert [f["name"] for f in gen["filter_list"]] == ["strict-match", "flexible-extract"]


def test_resolve_source_prefers_the_argument_then_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REGRESS_DATA_DIR", str(tmp_path))
    assert resolve_source(None).data_dir == tmp_path
    other = tmp_path / "other"
    other.mkdir()
    assert resolve_source(other, hf=True) == resolve_source(str(other), hf=True)
    assert resolve_source(other, hf=True).hf
    monkeypatch.delenv("REGRESS_DATA_DIR")
    assert resolve_source(None).data_dir is None


def test_a_fractional_limit_takes_lm_eval_s_share_and_records_the_count() -> None:
    """`--limit 0.1` is lm-eval's: the first ceil(0.1 * n) documents of each task; the run
    records the whole number, so a check reruns exactly those."""
    from regress.run.engine import TaskSpec, prepare
    from regress.run.suite import inline_suite, parse_limit
    from regress.tasks.base import DataSource

    (task,) = get_tasks(["builtin_dates"])
    n = len(task.examples(DataSource(), 0))
    ((spec, examples),) = prepare([TaskSpec(task, 0, 0.1)], DataSource())
    assert spec.limit == len(examples) == -(-n // 10)
    assert [e.doc_id for e in examples] == list(range(spec.limit))
    assert inline_suite("arc_easy", limit=0.25).tasks[0].limit == 0.25
    for bad in (0, 1.5, -0.1, True, "0.1"):
        with pytest.raises(BadInput, match="a fraction between 0 and 1"):
            parse_limit(bad, "limit")
