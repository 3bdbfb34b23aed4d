"""The house: every module in the wing of its stage of the data flow, the layers enforced by
import-linter, a command line that imports a command only when it runs, a typed public API."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import click
import pytest

import regress
from regress.cli import COMMANDS, cli

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "regress"
WINGS = {"stats", "core", "run", "gate", "checks", "proxy", "sweep", "tasks", "backends", "bench",
         "report", "cli"}  # fmt: skip
DOORS = ("stats", "checks")
"""Wings whose `__init__` names what other wings may import."""


def test_every_module_sits_in_a_wing() -> None:
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert top == ["__init__.py"], f"flat modules outside the wings: {top}"
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == WINGS
    for wing in WINGS:
        assert (PACKAGE / wing / "__init__.py").is_file()


@pytest.mark.parametrize("wing", DOORS)
def test_other_wings_come_in_through_the_door(wing: str) -> None:
    """Other wings import `regress.WING`, never its modules, so a wing can be rearranged
    inside without touching its users; and the door names only what exists."""
    through_side_doors = []
    for path in PACKAGE.rglob("*.py"):
        if path.parent.name == wing:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                f"regress.{wing}."
            ):
                through_side_doors.append(f"{path.relative_to(REPO)}: {node.module}")
            if isinstance(node, ast.Import):
                through_side_doors += [
                    f"{path.relative_to(REPO)}: {a.name}"
                    for a in node.names
                    if a.name.startswith(f"regress.{wing}.")
                ]
    assert through_side_doors == []
    door = importlib.import_module(f"regress.{wing}")
    assert door.__all__ and all(getattr(door, name) is not None for name in door.__all__)


def test_import_linter_layers_hold() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from importlinter.cli import lint_imports_command; lint_imports_command()",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 kept, 0 broken" in done.stdout


def test_the_command_list_imports_no_command() -> None:
    code = (
        "import sys\nfrom click.testing import CliRunner\nfrom regress.cli import cli\n"
        "r = CliRunner().invoke(cli, ['--help'])\nassert r.exit_code == 0, r.output\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('numpy', 'scipy', 'rich', 'yaml', 'jinja2', 'llama_cpp', 'torch'))\n"
        "ours = sorted(m for m in sys.modules if m.startswith('regress.'))\n"
        "print(heavy, ours)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[] ['regress.cli']"


def test_each_listed_summary_is_the_commands_own() -> None:
    ctx = click.Context(cli)
    for name, (_, summary) in COMMANDS.items():
        command = cli.get_command(ctx, name)
        assert command is not None and command.name == name
        listed = click.Command(name, help=summary).get_short_help_str(80)
        assert command.get_short_help_str(80) == listed, name


def test_the_public_api_loads_lazily_and_completely() -> None:
    for name in regress.__all__:
        assert getattr(regress, name) is not None, name
    code = "import sys, regress; print(sorted(m for m in sys.modules if m.startswith('regress')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "['regress']"
    assert (PACKAGE / "py.typed").is_file()


def test_mypy_is_clean_on_the_whole_package() -> None:
    """Every module, not only the public API (which once left 42 errors in 21 files unseen)."""
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "regress"], cwd=REPO, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout[-3000:]
