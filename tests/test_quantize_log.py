"""`regress quantize` keeps llama.cpp's log to its errors unless --verbose (issue #52, item 9).

SmolLM2-135M's 576-wide matrices cannot take a 256-block type, so a Q4_K_M makes llama.cpp warn
once per such tensor: the quiet run must print none of it, the verbose run all of it, and an
error (IQ2_XXS without an importance matrix) must reach stderr either way.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from regress.cli.quantize import quantize

pytestmark = pytest.mark.model


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(quantize, ["smollm2-135m", *args])
    return result.exit_code, result.stdout, result.stderr


def test_quiet_by_default_and_the_whole_log_with_verbose(tmp_path: Path) -> None:
    code, out, err = _run("--type", "Q4_K_M", "-o", str(tmp_path / "q.gguf"))
    assert code == 0, err
    assert out.startswith("wrote ") and out.count("\n") == 1
    assert err == ""
    code, _, err = _run("--type", "Q4_K_M", "-o", str(tmp_path / "v.gguf"), "--verbose")
    assert code == 0
    # The warnings quiet mode hid: one per fallen-back tensor, each with its fallback type.
    fallbacks = [line for line in err.splitlines() if "falling back to" in line]
    assert len(fallbacks) > 10
    assert (tmp_path / "q.gguf").read_bytes() == (tmp_path / "v.gguf").read_bytes()


def test_an_error_still_shows_without_verbose(tmp_path: Path) -> None:
    code, _, err = _run("--type", "IQ2_XXS", "-o", str(tmp_path / "x.gguf"))
    assert code == 3
    lines = err.splitlines()
    # llama.cpp's own error lines, then regress's one line.
    assert any(line.startswith("llama_model_quantize: failed to quantize") for line in lines)
    assert lines[-1].startswith("regress: error: llama.cpp could not quantize")
    assert not (tmp_path / "x.gguf").exists()
