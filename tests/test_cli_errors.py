"""Exit codes keep their contract: 1 means regression and nothing else.

An unexpected exception is exit 3 with one line (a traceback only with --debug), a missing
optional dependency names the extra to install, and backend settings are checked before they
reach C (a negative n_batch used to crash llama.cpp with a segfault).
"""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest
from click.testing import CliRunner
from conftest import REPO

from regress.cli import cli
from regress.core.errors import ExitCode


class _Boom:
    def __init__(self, *args: object) -> None:
        raise RuntimeError("boom")


def test_an_unexpected_error_is_exit_3_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    # The group loads a command's module on first use; patch the module itself.
    monkeypatch.setattr(importlib.import_module("regress.cli.check"), "Store", _Boom)
    result = CliRunner().invoke(cli, ["check", "-b", "main", "-m", "x.gguf"])
    assert result.exit_code == ExitCode.RUN_FAILED
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("regress: error: unexpected RuntimeError: boom")
    assert "Traceback" not in result.output and "--debug" in lines[0]
    debug = CliRunner().invoke(cli, ["--debug", "check", "-b", "main", "-m", "x.gguf"])
    assert isinstance(debug.exception, RuntimeError)


@pytest.mark.model  # resolves a packaged model
@pytest.mark.parametrize(
    ("module", "backend", "extra"),
    [("llama_cpp", "llama_cpp", "llama"), ("torch", "hf", "hf"), ("httpx", "openai", "openai")],
)
def test_a_missing_extra_names_what_to_install(module: str, backend: str, extra: str) -> None:
    # A finder that refuses the module: as if it were not installed.
    server = ["--model-args", "base_url=http://127.0.0.1:9/v1"]
    code = (
        "import importlib.abc, sys\n"
        "class Missing(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name.split('.')[0] == {module!r}:\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, Missing())\n"
        "from regress.cli import main\n"
        f"sys.argv = ['regress', 'eval', '-m', 'smollm2-135m', '--backend', {backend!r},\n"
        "            '-t', 'builtin_arithmetic', '--limit', '1', '--no-cache',\n"
        f"            *{server if backend == 'openai' else []!r}]\n"
        "main()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == ExitCode.BAD_INPUT, done.stderr
    assert f"pip install 'regress-gate[{extra}]'" in done.stderr and module in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.model  # resolves a packaged model
@pytest.mark.parametrize(
    ("args", "message"),
    [
        ("n_batch=-5", "n_batch must be >= 1"),
        ("n_ctx=abc", "n_ctx must be int"),
        ("threads=0", "threads must be >= 1"),
    ],
)
def test_backend_settings_are_checked_before_they_reach_llama_cpp(args: str, message: str) -> None:
    command = ["eval", "-m", "smollm2-135m", "-t", "builtin_arithmetic", "--limit", "1"]
    result = CliRunner().invoke(cli, [*command, "--no-cache", "--model-args", args])
    assert result.exit_code == ExitCode.BAD_INPUT, result.output
    assert message in result.output


def test_a_report_path_that_is_a_folder_is_bad_input(tmp_path) -> None:
    # Gating the committed baseline against itself runs no model.
    baselines = str(REPO / "baselines")
    result = CliRunner().invoke(
        cli,
        ["check", "-b", "main", "--store", baselines, "--candidate-run", baselines + "/main"]
        + ["--report-md", str(tmp_path)],
    )
    assert result.exit_code == ExitCode.BAD_INPUT, result.output
    assert f"cannot write the report to {tmp_path}" in result.output


def test_an_unknown_model_alias_is_one_line_and_no_progress() -> None:
    result = CliRunner().invoke(cli, ["eval", "-m", "smollm9-135m", "-t", "builtin_dates"])
    assert result.exit_code == ExitCode.BAD_INPUT
    assert result.output.splitlines() == [
        "regress: error: model 'smollm9-135m' not found (a .gguf path, a model folder, or one "
        "of: smollm2-135m, gemma3-270m)"
    ]
