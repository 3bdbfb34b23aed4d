"""Samples of one prompt on llama.cpp: the shared prompt evaluated once against every time.

Eight seeded samples (temperature 0.8, 48 tokens at most, stop at a blank line) of each of the
first --questions GSM8K test questions under lm-eval's 8-shot chain-of-thought prompt, on the
packaged SmolLM2, with prefix reuse on and off in one run. The texts must be identical (reuse
gives the floats of a fresh pass); the script prints both wall times and their ratio.

    .venv/bin/python experiments/generation_reuse.py [--questions 3] [--samples 8]
"""

from __future__ import annotations

import argparse
import importlib.resources
import json
import tempfile
import time
from pathlib import Path

from regress.backends.llama_cpp import LlamaCppBackend
from regress.backends.models import resolve_model_path
from regress.core.requests import GenerateRequest
from regress.tasks import DataSource
from regress.tasks.catalog import load_catalog
from regress.tasks.gsm8k import load

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
UPSTREAM = Path(str(importlib.resources.files("lm_eval"))) / "tasks" / "gsm8k" / "gsm8k-cot.yaml"


def prompts(questions: int, source: DataSource) -> list[str]:
    """lm-eval's gsm8k-cot prompts of the first questions, rendered by regress's YAML loader."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        data = root / "test.jsonl"
        data.write_text("".join(json.dumps(d) + "\n" for d in load(source, "test")[:questions]))
        (root / "cot.yaml").write_text(
            f"include: {UPSTREAM}\ntask: cot_local\ndataset_path: json\ndataset_name: null\n"
            f"dataset_kwargs:\n  data_files: {{test: {data}}}\n"
        )
        [task] = load_catalog([root]).get(["cot_local"])
        return [e.requests[0].context for e in task.examples(source)]  # type: ignore[union-attr]


def main() -> None:
    """Time both settings on the same requests and check the texts agree."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=3)
    parser.add_argument("--samples", type=int, default=8)
    args = parser.parse_args()
    requests = [
        GenerateRequest(p, until=("\n\n", "Q:"), max_tokens=48, temperature=0.8, seed=s)
        for p in prompts(args.questions, DataSource(DATA))
        for s in range(args.samples)
    ]
    model = str(resolve_model_path("smollm2-135m"))
    timed, texts = {}, {}
    for reuse in (False, True):
        backend = LlamaCppBackend(model, n_ctx=2048, prefix_reuse=reuse)
        try:
            start = time.perf_counter()
            results = backend.generate(requests)
            timed[reuse] = time.perf_counter() - start
            texts[reuse] = [r.text for r in results]  # type: ignore[union-attr]
            info = backend.fingerprint().build["system_info"]
        finally:
            backend.close()
    assert texts[True] == texts[False], "prefix reuse changed a generated text"
    print(f"{len(requests)} samples ({args.questions} prompts x {args.samples}), same texts")
    print(f"prompt evaluated every time: {timed[False]:.1f} s")
    print(f"shared prompt evaluated once: {timed[True]:.1f} s")
    print(f"speed-up: {timed[False] / timed[True]:.2f}x")
    print(f"llama.cpp: {info}")


if __name__ == "__main__":
    main()
