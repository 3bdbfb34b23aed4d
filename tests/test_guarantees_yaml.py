"""Suite and policy files a PR can change: alias bombs, huge or non-UTF-8 files, odd values."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from conftest import REPO

from regress.cli import cli
from regress.core import safe_yaml
from regress.core.errors import BadInput, ExitCode
from regress.gate.policy import load_policy
from regress.run.suite import load_suite

# 298 bytes whose aliases stand for 9**9 (387 million) strings.
BOMB = "".join(
    f"{name}: &{name} [{','.join([f'*{prev}'] * 9)}]\n"
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True)
)
BOMB = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + BOMB


def test_bomb_is_small_and_would_expand() -> None:
    assert len(BOMB.encode()) < 400
    assert yaml.safe_load(BOMB)["i"][0][0][0][0][0][0][0][0][0] == "lol"  # what it stands for


@pytest.mark.parametrize("loader", [load_suite, load_policy], ids=["suite", "policy"])
def test_alias_bomb_is_refused_fast_with_a_short_message(tmp_path: Path, loader) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB)
    start = time.perf_counter()
    with pytest.raises(BadInput, match="aliases expand to more than 200000 values") as err:
        loader(path)
    assert time.perf_counter() - start < 2.0
    assert len(str(err.value)) < 300 and "lol" not in str(err.value)


def test_recursive_alias_and_oversized_file(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("tasks: &t [*t]\n")
    with pytest.raises(BadInput, match="recursive alias"):
        load_suite(path)
    path.write_text("name: x\n# " + "x" * safe_yaml.MAX_BYTES + "\n")
    with pytest.raises(BadInput, match="more than the 1048576 a configuration file may be"):
        load_suite(path)


def test_aliases_within_bounds_still_work(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("tasks:\n  - &arc {task: arc_easy, limit: 5}\n  - {task: piqa, limit: 5}\n")
    assert [e.task for e in load_suite(path).tasks] == ["arc_easy", "piqa"]
    shipped = (REPO / "suites" / "proxy.yaml").read_text()
    assert safe_yaml.load(shipped) == yaml.safe_load(shipped)


def test_non_utf8_suite(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_bytes(b"name: caf\xe9\ntasks: [arc_easy]\n")
    with pytest.raises(BadInput, match=r"s.yaml: not UTF-8 text \(byte 9\)"):
        load_suite(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("tasks: arc_easy\n", "`tasks:` must be a list, got 'arc_easy'"),
        ("tasks: [{task: [1, 2]}]\n", r"tasks\[0\].task: expected a name, got list"),
        ("tasks: [arc_easy]\nbackend: {a: 1}\n", "backend: expected a name, got dict"),
        ("tasks: [{task: boolq, limit: [" + "1, " * 500 + "1]}]\n", "got list$"),
    ],
)
def test_suite_values_of_the_wrong_type(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    with pytest.raises(BadInput, match=message) as err:
        load_suite(path)
    assert len(str(err.value)) < 300


def test_cli_alias_bomb_suite_exits_2_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB)
    result = CliRunner().invoke(cli, ["eval", "-m", "smollm2-135m", "--suite", str(path)])
    assert result.exit_code == ExitCode.BAD_INPUT
    assert result.output.startswith("regress: error: ") and result.output.count("\n") == 1
