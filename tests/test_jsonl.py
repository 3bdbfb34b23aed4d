"""The one JSON Lines reader (regress.core.jsonl): its torn-line rule, blank lines, bad JSON."""

from __future__ import annotations

import json

import pytest

from regress.core.errors import BadInput
from regress.core.jsonl import Tail, is_torn, json_object, read_lines, split_lines

WHOLE = b'{"a": 1}\n{"a": 2}\n'


def _texts(data: bytes, **kwargs: object) -> list[str]:
    return [line.text for line in split_lines(data, "f.jsonl", **kwargs)]  # type: ignore[arg-type]


@pytest.mark.parametrize("tail", list(Tail))
def test_a_file_that_ends_with_its_newline_reads_the_same_under_every_tail(tail: Tail) -> None:
    assert _texts(WHOLE, tail=tail) == ['{"a": 1}', '{"a": 2}']
    assert _texts(b"", tail=tail) == []


def test_torn_last_line_is_skipped_by_a_log_refused_by_a_whole_file_read_by_a_hand_file() -> None:
    torn = WHOLE + b'{"a": 3, "b'
    assert _texts(torn, tail=Tail.SKIP_TORN) == ['{"a": 1}', '{"a": 2}']
    with pytest.raises(BadInput, match=r"^f.jsonl:3: truncated line \(no newline at end\)$"):
        split_lines(torn, "f.jsonl", tail=Tail.REFUSE)
    lines = split_lines(torn, "f.jsonl", tail=Tail.READ)
    with pytest.raises(BadInput, match=r"^f.jsonl:3: not valid JSON \("):
        json_object(lines[-1])


def test_whole_last_line_without_its_newline_is_read_unless_the_file_is_written_whole() -> None:
    unended = WHOLE + b'{"a": 3}'
    assert _texts(unended, tail=Tail.SKIP_TORN)[-1] == '{"a": 3}'
    assert _texts(unended, tail=Tail.READ)[-1] == '{"a": 3}'
    with pytest.raises(BadInput, match=r"f.jsonl:3: truncated line"):
        split_lines(unended, "f.jsonl", tail=Tail.REFUSE)


def test_a_tail_torn_inside_a_character_is_torn_not_bad_text() -> None:
    cut = WHOLE + '{"a": "é'.encode()[:-1]
    assert is_torn(cut[len(WHOLE) :])
    assert _texts(cut, tail=Tail.SKIP_TORN) == ['{"a": 1}', '{"a": 2}']
    at = len(WHOLE) + len('{"a": "')  # the first byte of the cut character
    with pytest.raises(BadInput, match=rf"^f.jsonl:3: not UTF-8 text \(byte {at}\)$"):
        split_lines(cut, "f.jsonl", tail=Tail.READ)


def test_a_torn_middle_line_is_bad_json_under_every_tail() -> None:
    data = b'{"a": 1}\n{"a": 2\n{"a": 3}\n'
    for tail in Tail:
        lines = split_lines(data, "f.jsonl", tail=tail)
        assert json_object(lines[0]) == {"a": 1}
        with pytest.raises(BadInput, match=r"^f.jsonl:2: not valid JSON \("):
            json_object(lines[1])


def test_blank_lines_are_skipped_but_counted() -> None:
    data = b'\n{"a": 1}\n  \n\n{"a": 2}\n'
    lines = split_lines(data, "f.jsonl")
    assert [(line.number, line.where) for line in lines] == [(2, "f.jsonl:2"), (5, "f.jsonl:5")]
    kept = split_lines(data, "f.jsonl", blank=True)
    assert [line.blank for line in kept] == [True, False, True, True, False]


def test_a_line_ends_at_a_newline_only() -> None:
    """U+2028, a form feed and a lone CR are inside a JSON string, not line ends."""
    row = {"text": "one\u2028two\x0cthree\rfour"}
    data = json.dumps(row, ensure_ascii=False).encode() + b"\n"
    (line,) = split_lines(data, "f.jsonl")
    assert json_object(line) == row


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[1, 2]", "expected a JSON object"),
        ("null", "expected a JSON object"),
        ('{"a": 1, "a": 2}', 'not valid JSON (key "a" repeated)'),
        ("{not json}", "not valid JSON (Expecting property name"),
    ],
)
def test_bad_json_names_the_line(text: str, message: str) -> None:
    (line,) = split_lines(f"\n{text}\n".encode(), "f.jsonl")
    with pytest.raises(BadInput) as err:
        json_object(line)
    assert str(err.value).startswith(f"f.jsonl:2: {message}")


def test_read_lines_names_the_file(tmp_path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_bytes(WHOLE)
    assert [line.where for line in read_lines(path)] == [f"{path}:1", f"{path}:2"]
    assert [line.where for line in read_lines(path, "--x rows")] == ["--x rows:1", "--x rows:2"]
