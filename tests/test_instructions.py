"""Issue 29, item 2: the user's own paraphrases of a task's instruction
(docs/tasks.md#your-own-instructions). `TASK@insKEY` replaces the task's description with the
text keyed KEY; a suite lists the texts; the manifest keeps them so a rerun rebuilds the same
prompts; the spread and the pooled test count them as formats.
tests/test_formats_model.py gates them on a real model."""

from __future__ import annotations

import dataclasses
import hashlib
import json

import numpy as np
import pytest
from test_compare import info, record, run

from regress.core.errors import BadInput
from regress.core.hashes import instruction_key
from regress.core.manifest import Manifest
from regress.gate.compare import compare
from regress.gate.format_spread import format_spreads
from regress.gate.policy import Policy
from regress.run.runner import baseline_specs, suite_specs
from regress.run.suite import load_suite
from regress.tasks import DataSource
from regress.tasks.catalog import BUILTIN, load_catalog
from regress.tasks.formats import prompt_format
from regress.tasks.instructions import instructions_of
from regress.tasks.variants import label_order, variant_of

TEXT = "Work it out, then give the answer."
KEY = hashlib.sha256(TEXT.encode()).hexdigest()[:8]
OURS = BUILTIN.with_instructions({KEY: TEXT})


def _contexts(name: str, catalog=OURS) -> list[str]:
    [task] = catalog.get([name])
    return [e.requests[0].context for e in task.examples(DataSource(), None, 5)]


def test_an_instruction_replaces_the_description_and_changes_nothing_else():
    assert instruction_key(TEXT) == KEY
    plain, ours = _contexts("builtin_arithmetic"), _contexts(f"builtin_arithmetic@ins{KEY}")
    # The built-in set has no description: the text and a blank line go before the prompt.
    assert ours == [TEXT + "\n\n" + context for context in plain]
    [task] = OURS.get([f"builtin_arithmetic@ins{KEY}"])
    assert task.name == f"builtin_arithmetic@ins{KEY}" and task.group == f"builtin@ins{KEY}"
    assert task.config()["description"] == TEXT + "\n\n"
    assert task.config()["regress_instruction"] == KEY
    # A text ending in whitespace is used as written.
    own = "Answer:\n"
    catalog = BUILTIN.with_instructions({instruction_key(own): own})
    assert _contexts(f"builtin_arithmetic@ins{instruction_key(own)}", catalog) == [
        own + context for context in plain
    ]


def test_an_instruction_replaces_a_task_yamls_description(tmp_path):
    (tmp_path / "t.yaml").write_text(
        "task: mine\ndataset_path: json\ndataset_kwargs: {data_files: {test: d.jsonl}}\n"
        'test_split: test\noutput_type: multiple_choice\ndescription: "Old words.\\n\\n"\n'
        "doc_to_text: '{{q}}'\ndoc_to_choice: c\ndoc_to_target: a\n"
    )
    (tmp_path / "d.jsonl").write_text('{"q": "Two?", "c": ["1", "2"], "a": 1}\n')
    catalog = load_catalog([tmp_path]).with_instructions({KEY: TEXT})
    source = DataSource()
    [plain] = catalog.get(["mine"])
    [ours] = catalog.get([f"mine@ins{KEY}"])
    assert plain.examples(source)[0].requests[0].context == "Old words.\n\nTwo?"
    assert ours.examples(source)[0].requests[0].context == TEXT + "\n\nTwo?"


def test_formats_go_over_instructions_and_mistakes_are_named():
    [task] = OURS.get([f"builtin_arithmetic@ins{KEY}@fmt1"])
    assert task.name == f"builtin_arithmetic@ins{KEY}@fmt1"
    assert task.group == f"builtin@ins{KEY}@fmt1"
    context = task.examples(DataSource(), None, 1)[0].requests[0].context
    assert context == prompt_format(1).text(_contexts(f"builtin_arithmetic@ins{KEY}")[0])
    assert context.startswith(TEXT + "\n\nQ: ")
    assert instructions_of([task]) == {KEY: TEXT}
    assert OURS.has(f"builtin_dates@ins{KEY}@fmt3") and not OURS.has(f"none@ins{KEY}")
    with pytest.raises(BadInput, match="no instruction has the key 00000000"):
        OURS.get(["builtin_arithmetic@ins00000000"])
    with pytest.raises(BadInput, match="before its format"):
        OURS.get([f"builtin_arithmetic@fmt1@ins{KEY}"])
    with pytest.raises(BadInput, match="json_extraction: an instruction replaces"):
        OURS.get([f"json_extraction@ins{KEY}"])


def test_a_suite_lists_instructions_per_task_and_formats_apply_to_them(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: s\nformats: 2\ntasks: [builtin, arc_easy]\n"
        f"instructions:\n  builtin: ['{TEXT}', 'Answer.']\n"
    )
    suite = load_suite(path)
    other = instruction_key("Answer.")
    assert [e.task for e in suite.tasks] == [
        "builtin@fmt0", "builtin@fmt1", f"builtin@ins{KEY}@fmt0", f"builtin@ins{KEY}@fmt1",
        f"builtin@ins{other}@fmt0", f"builtin@ins{other}@fmt1", "arc_easy@fmt0", "arc_easy@fmt1",
    ]  # fmt: skip
    assert suite.instructions == {KEY: TEXT, other: "Answer."}
    names = [s.task.name for s in suite_specs(suite)]
    assert f"builtin_dates@ins{other}@fmt1" in names and len(names) == 5 * 6 + 2


@pytest.mark.parametrize(
    ("listed", "error"),
    [
        ("['x']", "maps a task or group to a list"),
        ("{builtin: 'x'}", r"instructions\.builtin: expected a list"),
        ("{builtin: ['']}", r"instructions\.builtin\[0\]: expected a non-empty text"),
        ("{builtin: ['x', 'x']}", "a text is listed twice"),
        ("{piqa: ['x'], 3: ['y']}", "'piqa', 3 not in `tasks:`"),
    ],
)
def test_a_suites_instructions_are_checked(tmp_path, listed, error):
    path = tmp_path / "s.yaml"
    path.write_text(f"tasks: [builtin]\ninstructions: {listed}\n")
    with pytest.raises(BadInput, match=error):
        load_suite(path)


def test_the_manifest_keeps_the_texts_and_refuses_an_edited_one():
    base = run("base", {}, [info(f"t@ins{KEY}")])
    manifest = dataclasses.replace(base.manifest, instructions={KEY: TEXT})
    data = json.loads(json.dumps(manifest.to_dict()))
    assert data["instructions"] == {KEY: TEXT}
    assert Manifest.from_dict(data).instructions == {KEY: TEXT}
    assert "instructions" not in base.manifest.to_dict()  # other manifests are unchanged
    data["instructions"] = {KEY: TEXT + " Quickly."}
    with pytest.raises(BadInput, match="instructions: each key must be"):
        Manifest.from_dict(data)
    # A rerun of the baseline knows its texts without being told.
    stored = dataclasses.replace(
        base,
        manifest=dataclasses.replace(
            manifest, tasks={f"builtin_arithmetic@ins{KEY}": info(f"builtin_arithmetic@ins{KEY}")}
        ),
        records={f"builtin_arithmetic@ins{KEY}": []},
    )
    [spec] = baseline_specs(stored)
    assert spec.task.name == f"builtin_arithmetic@ins{KEY}"


def test_labels_name_and_order_the_variants():
    assert variant_of(f"mmlu_anatomy@ins{KEY}@fmt10") == ("mmlu_anatomy", f"ins{KEY}@fmt10")
    assert variant_of("mmlu_anatomy") == ("mmlu_anatomy", "")
    assert variant_of("a@fmt1@fmt2") == ("a@fmt1", "fmt2")
    labels = ["fmt10", f"ins{KEY}", "", "fmt2", f"ins{KEY}@fmt0"]
    assert sorted(labels, key=label_order) == ["", "fmt2", "fmt10", f"ins{KEY}", f"ins{KEY}@fmt0"]


def _records(task, outcomes):
    return [record(task, i, int(x)) for i, x in enumerate(outcomes)]


def test_the_spread_and_the_pooled_test_count_instructions_as_formats():
    rng = np.random.default_rng(3)
    rights = [rng.random(120) < p for p in (0.5, 0.7)]
    names = ["t", f"t@ins{KEY}"]
    infos = [info("t", "u"), info(f"t@ins{KEY}", f"u@ins{KEY}"), info("other", None)]
    records = {n: _records(n, r) for n, r in zip(names, rights, strict=True)}
    records["other"] = _records("other", rights[0])
    [spread] = format_spreads({i.name: i for i in infos}, records)
    assert spread.unit == "u" and spread.formats == ("", f"ins{KEY}")
    assert spread.accuracy == pytest.approx([r.mean() for r in rights])
    result = compare(run("a", records, infos), run("b", records, infos), Policy(pool_formats=True))
    units = {u.name: u for u in result.units}
    assert sorted(units) == ["other", "u", f"u@ins{KEY}", "u@pooled"]
    assert units["u@pooled"].baseline == pytest.approx(np.mean([r.mean() for r in rights]))
