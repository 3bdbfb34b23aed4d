"""How much a real requantization moves each WikiText-2 document's loss: the noise scale
`regress plan` prices a perplexity unit with.

A perplexity unit tests the corpus log-ratio R = Σ d_i / Σ w_i (d_i: the candidate's extra
loss on document i in nats, w_i: its words); the test's standard error is
sqrt(Σ (d_i - R w_i)²) / Σ w_i (regress.stats.perplexity). A plan from a baseline alone knows
the w_i but not the candidate's residuals e_i = d_i - R w_i, so it needs a model of them
measured on real candidates. Two are fitted here: var(e_i) = τ² w_i (a document's residual is
a sum over its words, each moved independently) and var(e_i) = s² w_i² (a document drifts as a
whole); the slope of log e_i² on log w_i says which the data follow. It runs the packaged
model (the baseline) and requantizations of it (regress's quantize API) over WikiText-2's test
documents, with the result cache, and prints per candidate: the corpus change, the test's
standard error, τ, s and the slope.

    REGRESS_DATA_DIR=/work/shared/data flock /tmp/regress-model.lock \\
      .venv/bin/python experiments/perplexity_noise.py

With `--reference RUN --candidate RUN ...` (run folders, `--save-run`) it reads stored records
instead and runs no model.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import numpy as np
from _common import REPO, cpu_flags, step

from regress.backends.models import resolve_model_path
from regress.core.store import read_run
from regress.stats.perplexity import corpus_shift
from regress.sweep.quantize import quantize_file

DATA = Path(os.environ.get("REGRESS_DATA_DIR", REPO.parent / "shared/data"))
REGRESS = str(REPO / ".venv/bin/regress")


def _run(model: str, out: Path) -> Path:
    step(
        f"wikitext on {Path(model).name}",
        out,
        [REGRESS, "eval", "-m", model, "-t", "wikitext", "--data-dir", str(DATA),
         "--save-run", str(out)],
    )  # fmt: skip
    return out


def _documents(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Each scored document's loglik and words, by doc_id."""
    records = sorted(read_run(path).records["wikitext"], key=lambda r: r.doc_id)
    ok = [r for r in records if r.ok]
    return (
        np.array([r.metrics["loglik"] for r in ok]),
        np.array([r.metrics["n_words"] for r in ok]),
    )


def describe(name: str, reference: Path, candidate: Path) -> str:
    """One Markdown row: the candidate's corpus change and its residuals' scales."""
    base, words = _documents(reference)
    cand, _ = _documents(candidate)
    extra = base - cand
    ratio = extra.sum() / words.sum()
    residual = extra - ratio * words
    tau = float(np.sqrt(np.sum(residual**2) / np.sum(words)))
    s = float(np.sqrt(np.sum(residual**2) / np.sum(words**2)))
    slope = float(np.polyfit(np.log(words), np.log(residual**2 + 1e-300), 1)[0])
    shift = corpus_shift(base, cand, words)
    return (
        f"| {name} | {len(words)} | {np.expm1(ratio) * 100:+.2f}% | {shift.se:.5f} | "
        f"{tau:.4f} | {s:.5f} | {slope:.2f} |"
    )


def main() -> None:
    """Run (or read) the reference and each candidate on WikiText-2; print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m", help="the packaged baseline model")
    parser.add_argument("--types", default="Q8_0,Q4_0,Q2_K,IQ3_S", help="candidate types")
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "ppl-noise")
    parser.add_argument("--reference", type=Path, default=None, help="a stored baseline run")
    parser.add_argument("--candidate", type=Path, action="append", help="a stored candidate run")
    args = parser.parse_args()
    if args.reference:
        reference, candidates = args.reference, [(p.name, p) for p in args.candidate or []]
    else:
        args.out.mkdir(parents=True, exist_ok=True)
        reference = _run(args.model, args.out / "reference")
        candidates = []
        for kind in args.types.split(","):
            gguf = args.out / f"{args.model}-{kind}.gguf"
            if not gguf.exists():
                quantize_file(resolve_model_path(args.model), kind, gguf)
            candidates.append((kind, _run(str(gguf), args.out / kind)))
    print(f"WikiText-2 test, {args.model} Q4_1 as the reference; llama.cpp {cpu_flags()}\n")
    print("| candidate | documents | word perplexity | test's se (log) | τ | s | slope |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, path in candidates:
        print(describe(name, reference, path))


if __name__ == "__main__":
    main()
