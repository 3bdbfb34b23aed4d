"""Perplexity, KL divergence and same-top-token rate of a candidate against its source over the
same WikiText-2 tokens, with llama-perplexity's definitions (llama.cpp tools/perplexity).

The test file is tokenized once (BOS first when the model adds one) and cut into chunks of
`n_ctx` tokens; each chunk is evaluated from an empty KV cache with its first token replaced
by BOS, and only the second half is scored (positions n_ctx/2 .. n_ctx-2 predict the next
token), so every scored token has at least n_ctx/2 tokens of context. Per scored token:

- NLL = -log q(next token) (the candidate's q, the source's p); PPL = exp(mean NLL);
- KLD = sum over the vocabulary of p * (log p - log q);
- same top = whether argmax p == argmax q.

llama-perplexity stores the source's log-probs as 16-bit values and skips terms with
log p < -16; here both models are loaded in one process and the sum runs over the whole
vocabulary in float64, so nothing of n_tokens x vocab is kept: per chunk, the two models'
logits of its scored half (n_ctx/2 x vocab float32 each: 268 MB for Gemma 3's 262k
vocabulary at n_ctx 512) are reduced to three numbers per token in blocks of rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from regress.core.errors import BadInput
from regress.tasks.base import DataSource
from regress.tasks.loaders import data_file, read_text

WIKITEXT_TEST = "wikitext-2/wikitext-2-raw/wiki.test.raw"
_ROWS = 32
"""Rows of logits turned into float64 log-probs at a time (bounded memory for big vocabularies)."""


@dataclass(frozen=True)
class DivergenceOptions:
    """Which tokens and how the models are loaded."""

    n_ctx: int = 512
    """Chunk length (llama-perplexity -c); half of each chunk is scored."""
    n_chunks: int = 4
    """Chunks from the start of the test file (llama-perplexity --chunks)."""
    threads: int | None = None


@dataclass(frozen=True)
class TokenValues:
    """Per scored token, in corpus order."""

    nll_base: np.ndarray
    """-log p(next token) under the source."""
    nll: np.ndarray
    """-log q(next token) under the candidate."""
    kld: np.ndarray
    """KL(p || q) of the next-token distributions."""
    same_top: np.ndarray
    """argmax p == argmax q (bool)."""

    def save(self, path: Path) -> None:
        """Write as a .npz, atomically (a temporary file renamed into place)."""
        tmp = path.with_name(f".{path.name}.tmp")
        with tmp.open("wb") as handle:
            np.savez(
                handle, nll_base=self.nll_base, nll=self.nll, kld=self.kld, same_top=self.same_top
            )
        tmp.replace(path)

    @classmethod
    def load(cls, path: Path) -> TokenValues:
        """Read what `save` wrote."""
        with np.load(path) as data:
            return cls(data["nll_base"], data["nll"], data["kld"], data["same_top"])


@dataclass(frozen=True)
class Divergence:
    """llama-perplexity's summary of TokenValues (uncertainties are standard errors)."""

    n_tokens: int
    ppl: float
    ppl_se: float
    """Delta method: ppl * sd(NLL) / sqrt(n - 1)."""
    ppl_base: float
    ln_ppl_ratio: float
    """mean(NLL - NLL_base) = ln(PPL / PPL_base)."""
    ln_ppl_ratio_se: float
    kld_mean: float
    kld_se: float
    kld_median: float
    kld_p99: float
    kld_max: float
    same_top: float
    same_top_se: float


def _se(values: np.ndarray) -> float:
    n = len(values)
    return float(values.std() / np.sqrt(n - 1)) if n > 1 else float("nan")


def summarize(values: TokenValues) -> Divergence:
    """The figures llama-perplexity prints for a KL divergence run."""
    nll, base = values.nll.astype(np.float64), values.nll_base.astype(np.float64)
    kld, same = values.kld.astype(np.float64), values.same_top.astype(np.float64)
    ppl = float(np.exp(nll.mean()))
    p_same = float(same.mean())
    n = len(nll)
    return Divergence(
        n_tokens=n,
        ppl=ppl,
        ppl_se=ppl * _se(nll),
        ppl_base=float(np.exp(base.mean())),
        ln_ppl_ratio=float((nll - base).mean()),
        ln_ppl_ratio_se=_se(nll - base),
        kld_mean=float(kld.mean()),
        kld_se=_se(kld),
        kld_median=float(np.median(kld)),
        kld_p99=float(np.percentile(kld, 99)),
        kld_max=float(kld.max()),
        same_top=p_same,
        same_top_se=float(np.sqrt(p_same * (1 - p_same) / (n - 1))) if n > 1 else float("nan"),
    )


def _log_softmax(rows: np.ndarray) -> np.ndarray:
    rows = rows.astype(np.float64)
    rows -= rows.max(axis=1, keepdims=True)
    rows -= np.log(np.exp(rows).sum(axis=1, keepdims=True))
    return rows


def compare_rows(
    base: np.ndarray, cand: np.ndarray, targets: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(nll_base, nll, kld, same_top) of logits rows (n x vocab) predicting `targets`."""
    out: list[list[np.ndarray]] = [[], [], [], []]
    for start in range(0, len(targets), _ROWS):
        block = slice(start, start + _ROWS)
        lp, lq = _log_softmax(base[block]), _log_softmax(cand[block])
        idx = np.arange(lp.shape[0])
        t = targets[block]
        out[0].append(-lp[idx, t])
        out[1].append(-lq[idx, t])
        out[2].append((np.exp(lp) * (lp - lq)).sum(axis=1))
        out[3].append(lp.argmax(axis=1) == lq.argmax(axis=1))
    nll_base, nll, kld, same = (np.concatenate(parts) for parts in out)
    return nll_base, nll, kld, same


def wikitext_text(source: DataSource) -> str:
    """WikiText-2's raw test file, as llama-perplexity reads it (`-f wiki.test.raw`)."""
    return read_text(data_file(source, WIKITEXT_TEST, "wikitext"))


def token_values(
    source_model: str, candidate_model: str | None, text: str, options: DivergenceOptions
) -> TokenValues:
    """Per-token NLL of both models, KLD and same-top over the first `n_chunks` chunks.

    `candidate_model` None (or the source itself) gives the source against itself: KLD 0.
    """
    from regress.backends.llama_cpp import LlamaCppBackend

    if options.n_ctx < 16 or options.n_chunks < 1:
        raise BadInput("KL divergence: n_ctx must be >= 16 and n_chunks >= 1")
    need = options.n_ctx * options.n_chunks
    base = LlamaCppBackend(source_model, n_ctx=options.n_ctx, threads=options.threads)
    cand = None
    try:
        # A prefix of the text is enough; a long margin keeps the cut far from the last chunk.
        tokens = np.asarray(base.tokenize(text[: need * 12 + 10_000]))
        if len(tokens) < need:
            raise BadInput(
                f"WikiText-2 test has {len(tokens)} tokens, fewer than {options.n_chunks} "
                f"chunks of {options.n_ctx}"
            )
        if candidate_model is not None:
            cand = LlamaCppBackend(candidate_model, n_ctx=options.n_ctx, threads=options.threads)
        first = options.n_ctx // 2
        parts: list[tuple[np.ndarray, ...]] = []
        for i in range(options.n_chunks):
            chunk = tokens[i * options.n_ctx : (i + 1) * options.n_ctx]
            targets = chunk[first + 1 :]
            ids = chunk.tolist()
            p = base.chunk_logits(ids, first)
            q = cand.chunk_logits(ids, first) if cand is not None else p
            parts.append(compare_rows(p, q, targets))
            del p, q
    finally:
        base.close()
        if cand is not None:
            cand.close()
    nll_base, nll, kld, same = (np.concatenate(col) for col in zip(*parts, strict=True))
    return TokenValues(
        nll_base.astype(np.float32), nll.astype(np.float32), kld.astype(np.float32), same
    )
