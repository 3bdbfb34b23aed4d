"""Why the requests run together move an i-quant's floats (docs/reproducibility.md).

    .venv/bin/python experiments/batch_layout.py --model smollm2-135m --model iq3_s.gguf

The same tokens are evaluated from an empty KV cache in several layouts and the logits at
the last four positions are compared with one pass of the whole sequence. A layout is a
context of 600 tokens cut so that its last decode call holds `s` tokens (the rest in one
call before it), followed by the same 16-token scored call; so the only thing that changes
is how many tokens shared the decode call of the context's last `s` positions, which is what
prefix reuse changes from one request to the next. Each model runs three times, each in a
fresh process (ggml reads the switch once): as built, with ggml-cpu's tiled K/i-quant matmul
off (`GGML_CPU_TILED_MM=0`), and with it forced on for every batch size
(`GGML_CPU_TILED_MM_FORCE=1`, a switch ggml documents as test-only). Prints the CPU flags
(llama.cpp system info) above the table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

SIZES = (1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 64)
"""Tokens in the decode call holding the context's last positions."""
CONTEXT, SCORED, WANTED = 112, 16, 16
TEXT = (
    "Question: How do you keep bread fresh for longer without a freezer? Answer: Wrap the loaf "
    "in a clean cotton cloth and keep it in a bread box at room temperature, away from the "
    "stove. A paper bag works too, because it lets moisture escape slowly, while plastic traps "
    "it and the crust turns soft within a day. Slice only what you need and store the loaf cut "
    "side down on the board, so the exposed crumb does not dry out. Stale bread is still useful: "
    "toast it, make croutons, or soak it in milk and eggs for a bread pudding that the whole "
    "family will enjoy on a cold winter evening after a long walk through the snowy fields."
)
"""A natural passage: a repeated sentence hides the effect (its rows round alike)."""
SWITCHES = {
    "as built": {},
    "GGML_CPU_TILED_MM=0": {"GGML_CPU_TILED_MM": "0"},
    "GGML_CPU_TILED_MM_FORCE=1": {"GGML_CPU_TILED_MM_FORCE": "1"},
}


def measure(model: str) -> dict[str, float]:
    """Max |logit difference| from one pass, per size of the context's last decode call (run
    in this process: the switches come from its environment)."""
    import llama_cpp
    import numpy as np

    from regress.backends.models import resolve_model_path

    llm = llama_cpp.Llama(
        model_path=str(resolve_model_path(model)),
        n_ctx=1024,
        n_batch=1024,
        n_threads=2,
        n_threads_batch=2,
        logits_all=False,
        verbose=False,
    )
    vocab = llm.n_vocab()
    tokens = llm.tokenize(TEXT.encode(), add_bos=False)[: CONTEXT + SCORED]
    assert len(tokens) == CONTEXT + SCORED, len(tokens)
    wanted = set(range(len(tokens) - WANTED, len(tokens)))

    def decode(chunk: list[int], start: int) -> dict[int, np.ndarray]:
        batch = llm._batch.batch
        batch.n_tokens = len(chunk)
        for i, token in enumerate(chunk):
            batch.token[i], batch.pos[i] = token, start + i
            batch.n_seq_id[i], batch.seq_id[i][0] = 1, 0
            batch.logits[i] = start + i in wanted
        llm._ctx.decode(llm._batch)
        rows = {}
        for i in range(len(chunk)):
            if start + i in wanted:
                pointer = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, i)
                rows[start + i] = np.ctypeslib.as_array(pointer, shape=(vocab,)).copy()
        return rows

    def layout(bounds: list[int]) -> np.ndarray:
        llm._ctx.kv_cache_seq_rm(-1, 0, -1)
        rows: dict[int, np.ndarray] = {}
        for lo, hi in zip(bounds, bounds[1:], strict=False):
            rows.update(decode(tokens[lo:hi], lo))
        return np.stack([rows[p] for p in sorted(rows)])

    reference = layout([0, len(tokens)])
    out = {}
    for size in SIZES:
        got = layout([0, CONTEXT - size, CONTEXT, len(tokens)])
        out[str(size)] = float(np.abs(got - reference).max())
    llm.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", action="append", required=True)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child)))
        return
    import llama_cpp

    print("CPU:", llama_cpp.llama_print_system_info().decode().strip())
    print(f"max |logit - one pass| at the last {WANTED} positions; columns: tokens in the")
    print(f"decode call holding the last positions of a {CONTEXT}-token context\n")
    print("| model | switch | " + " | ".join(str(s) for s in SIZES) + " |")
    print("|---|---|" + "---:|" * len(SIZES))
    for model in args.model:
        for label, switch in SWITCHES.items():
            env = {**os.environ, **switch}
            command = [sys.executable, __file__, "--model", model, "--child", model]
            done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
            row = json.loads(done.stdout.strip().splitlines()[-1])
            cells = " | ".join(f"{row[str(s)]:.3g}" for s in SIZES)
            print(f"| {os.path.basename(model)} | {label} | {cells} |", flush=True)


if __name__ == "__main__":
    main()
