"""Bad input gives one clear line naming the file, the line and the task (BadInput, exit 2)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from regress.core.errors import BadInput, ExitCode
from regress.tasks import DataSource, get_tasks, resolve_source


def write(root: Path, relative: str, text: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_missing_data_folder_is_named(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match=f"data folder {tmp_path / 'nope'} does not exist") as err:
        resolve_source(tmp_path / "nope")
    assert err.value.exit_code == ExitCode.BAD_INPUT


def test_no_data_folder_says_how_to_give_one() -> None:
    [arc] = get_tasks(["arc_easy"])
    with pytest.raises(BadInput, match=r"task arc_easy needs benchmark data: pass --data-dir"):
        arc.examples(DataSource())


def test_missing_file_names_path_and_task(tmp_path: Path) -> None:
    [gsm8k] = get_tasks(["gsm8k"])
    expected = tmp_path / "gsm8k" / "test.jsonl"
    with pytest.raises(BadInput, match=f"task gsm8k needs {expected}, which does not exist"):
        gsm8k.examples(DataSource(tmp_path))


def test_malformed_csv_row_names_file_and_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "mmlu/test/anatomy_test.csv",
        'Q1,a,b,c,d,A\n"Q2, with a comma",a,b,c,d,B\nQ3,a,b,c,D\n',
    )
    [anatomy] = get_tasks(["mmlu_anatomy"])
    with pytest.raises(BadInput, match=f"{path}:3: expected 6 columns, got 5"):
        anatomy.examples(DataSource(tmp_path))
    write(tmp_path, "mmlu/test/anatomy_test.csv", "Q1,a,b,c,d,A\nQ2,a,b,c,d,E\n")
    with pytest.raises(BadInput, match=r"row 2: answer 'E' is not one of A, B, C, D"):
        anatomy.examples(DataSource(tmp_path))


def test_malformed_jsonl_line_names_file_and_line(tmp_path: Path) -> None:
    good = '{"question": "1+1?", "answer": "#### 2"}\n'
    path = write(tmp_path, "gsm8k/test.jsonl", good + "\n" + '{"question": "2+2?", "answ\n')
    [gsm8k] = get_tasks(["gsm8k"])
    with pytest.raises(BadInput, match=f"{path}:3: not valid JSON"):
        gsm8k.examples(DataSource(tmp_path), num_fewshot=0)
    write(tmp_path, "gsm8k/test.jsonl", good + '{"question": "2+2?"}\n')
    with pytest.raises(BadInput, match="record 2: needs string fields question and answer"):
        gsm8k.examples(DataSource(tmp_path), num_fewshot=0)


def test_arc_record_without_its_answer_label(tmp_path: Path) -> None:
    row = '{"id": "q", "question": {"stem": "?", "choices": [{"text": "x", "label": "A"}]}, '
    write(tmp_path, "arc/ARC-Easy/ARC-Easy-Test.jsonl", row + '"answerKey": "B"}\n')
    [arc] = get_tasks(["arc_easy"])
    with pytest.raises(BadInput, match=r"record 1: answerKey 'B' not a label"):
        arc.examples(DataSource(tmp_path))


def test_piqa_labels_must_match_rows(tmp_path: Path) -> None:
    write(tmp_path, "piqa/valid.jsonl", '{"goal": "g", "sol1": "a", "sol2": "b"}\n')
    labels = write(tmp_path, "piqa/valid-labels.lst", "0\n1\n")
    [piqa] = get_tasks(["piqa"])
    with pytest.raises(BadInput, match=f"has 1 rows but {labels} has 2 labels"):
        piqa.examples(DataSource(tmp_path))


def test_too_many_or_negative_shots(data_dir: Path) -> None:
    [anatomy] = get_tasks(["mmlu_anatomy"])
    with pytest.raises(BadInput, match="6 shots asked, the dev split has 5"):
        anatomy.examples(DataSource(data_dir), num_fewshot=6)
    with pytest.raises(BadInput, match="num_fewshot must be 0 or more"):
        anatomy.examples(DataSource(data_dir), num_fewshot=-1)


def test_hub_without_datasets_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "datasets", None)  # makes `import datasets` fail
    [boolq] = get_tasks(["boolq"])
    with pytest.raises(BadInput, match=r"task boolq: --hf needs the `datasets` package"):
        boolq.examples(DataSource(hf=True))


def test_hub_load_failure_is_bad_input(monkeypatch: pytest.MonkeyPatch) -> None:
    def offline(*args: object, **kwargs: object) -> None:
        raise ConnectionError("no network")

    fake = type(sys)("datasets")
    fake.load_dataset = offline
    monkeypatch.setitem(sys.modules, "datasets", fake)
    [wikitext] = get_tasks(["wikitext"])
    with pytest.raises(
        BadInput, match=r"cannot load EleutherAI/wikitext_document_level/.*no network"
    ):
        wikitext.examples(DataSource(hf=True))


ARC_ROW = (
    '{"id": "q", "question": {"stem": STEM, "choices": [{"text": "x", "label": "A"}, '
    '{"text": "y", "label": "B"}]}, "answerKey": "A"}\n'
)


def test_arc_stem_that_is_a_number(tmp_path: Path) -> None:
    path = write(tmp_path, "arc/ARC-Easy/ARC-Easy-Test.jsonl", ARC_ROW.replace("STEM", "12345"))
    [arc] = get_tasks(["arc_easy"])
    with pytest.raises(BadInput, match=f"{path}: record 1: question stem, .* must be strings"):
        arc.examples(DataSource(tmp_path))


def test_multiple_choice_row_of_the_wrong_type(tmp_path: Path) -> None:
    write(tmp_path, "piqa/valid.jsonl", '{"goal": "g", "sol1": 7, "sol2": "b"}\n')
    write(tmp_path, "piqa/valid-labels.lst", "0\n")
    [piqa] = get_tasks(["piqa"])
    with pytest.raises(BadInput, match=r"piqa: document 0: needs a text prompt, a list of text"):
        piqa.examples(DataSource(tmp_path))


@pytest.mark.parametrize(
    ("task", "relative", "content", "line"),
    [
        ("arc_easy", "arc/ARC-Easy/ARC-Easy-Test.jsonl", ARC_ROW.replace("STEM", '"?"'), 2),
        ("mmlu_anatomy", "mmlu/test/anatomy_test.csv", "Q1,a,b,c,d,A\n", 2),
        ("wikitext", "wikitext-2/wikitext-2-raw/wiki.test.raw", " = T = \n\n text\n", 4),
        ("piqa", "piqa/valid-labels.lst", "0\n", 2),
    ],
)
def test_data_file_that_is_not_utf8(
    tmp_path: Path, task: str, relative: str, content: str, line: int
) -> None:
    write(tmp_path, "piqa/valid.jsonl", '{"goal": "g", "sol1": "a", "sol2": "b"}\n' * 2)
    write(tmp_path, "piqa/valid-labels.lst", "0\n0\n")
    path = write(tmp_path, relative, content)
    path.write_bytes(path.read_bytes() + b"caf\xe9\n")  # Latin-1, as an old export writes it
    [found] = get_tasks([task])
    with pytest.raises(BadInput, match=f"{path}:{line}: not UTF-8 text") as err:
        found.examples(DataSource(tmp_path), num_fewshot=0)
    assert err.value.exit_code == ExitCode.BAD_INPUT
