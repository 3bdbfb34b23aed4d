"""vLLM's start-up on this machine with the flags that cut it; docs/results/vllm.md.

Times `python -m vllm.entrypoints.openai.api_server` of the float32 SmolLM2-135M folder from
launch to a healthy /health, for each flag set in turn, on the cores this process may use
(`taskset -c 0` for the model tier's one core per worker). Run under the model lock:
`flock /tmp/regress-model.lock taskset -c 0 .venv/bin/python experiments/vllm_startup.py`;
numbers after it run only those flag sets (`... vllm_startup.py 3 4`).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests")]

from test_vllm_server import SERVER_ENV, SERVER_FLAGS, served_vllm, vllm_python  # noqa: E402

from regress.backends import hf  # noqa: E402
from regress.backends.models import resolve_model_path  # noqa: E402

LENGTH = ("--max-model-len", "2048")
SMALL_CACHE = {"VLLM_CPU_KVCACHE_SPACE": SERVER_ENV["VLLM_CPU_KVCACHE_SPACE"]}
VARIANTS: list[tuple[str, tuple[str, ...], dict[str, str]]] = [
    ("defaults (torch.compile, KV cache sized from free memory)", LENGTH, {}),
    ("--enforce-eager", (*LENGTH, "--enforce-eager"), {}),
    ("--enforce-eager, VLLM_CPU_KVCACHE_SPACE=1", (*LENGTH, "--enforce-eager"), SMALL_CACHE),
    ("the tests' flags, engine core in a process of its own", SERVER_FLAGS, SMALL_CACHE),
    ("the tests' flags and environment", SERVER_FLAGS, SERVER_ENV),
]


def main() -> None:
    folder = hf._gguf_folder(resolve_model_path("smollm2-135m"))
    python = vllm_python()
    print(f"cores {len(os.sched_getaffinity(0))}")
    chosen = [int(a) for a in sys.argv[1:]] or range(len(VARIANTS))
    for name, flags, env in (VARIANTS[i] for i in chosen):
        start = time.perf_counter()
        with served_vllm(python, folder, "float32", Path("/tmp/vllm-startup.log"), flags, env):
            up = time.perf_counter() - start
        print(f"{name}: {up:.0f} s to healthy ({time.perf_counter() - start:.0f} s with stop)")


if __name__ == "__main__":
    main()
