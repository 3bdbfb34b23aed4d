"""llama.cpp in-process through llama-cpp-python: the default backend.

Requests are scored in an order that puts shared token prefixes next to each other (the
few-shot block of an MMLU subject, the context shared by a question's choices); each one
rewinds the KV cache to the prefix it shares with what is already evaluated and evaluates
only the rest. Logits are computed only at the positions that are scored (llama.cpp's
per-token output flag) rather than for every token (`logits_all`), which skips most of the
vocabulary head's work and its n_ctx x vocab buffer.

A result never depends on which requests came before it or ran beside it, so a rerun that
replays part of its results from the cache, a shard, a subset and a sequential look all equal
a fresh full run. llama.cpp's floats for a position depend on how many tokens shared its
decode call, in two ways measured here (experiments/batch_layout.py): a call of one token
takes other kernels for every model (up to 0.65 logits on SmolLM2), and for K-quant and
i-quant weights (IQ3_S, Q6_K, ...) a call of fewer than `MIN_ROWS` (8) tokens takes ggml-cpu's
vec_dot kernels where a larger one takes its tiled matmul, whose sums round differently (up
to 1.15 logits on an IQ3_S SmolLM2, and 1.3 nats and flipped answers downstream). Every call
of at least eight tokens gives the same floats. So every decode call holds at least
`MIN_ROWS` tokens, unless the whole request is shorter, and the KV cache is reused only as far
as it was computed that way: a request's floats are those of its own fresh pass, with reuse
on or off, whatever ran before it. Generation reuses a prompt's context the same way (the
prompt's last two tokens are evaluated afresh), so the samples of one prompt (repeats,
self-consistency) evaluate the prompt once.
"""

from __future__ import annotations

import itertools
from collections.abc import Container, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from regress.backends.base import Progress, setting
from regress.backends.chat import chat_template as resolve_template
from regress.backends.chat import missing, prompt_tokens
from regress.backends.encoding import Window, encode_pair, fit_window, rolling_windows
from regress.backends.models import ModelFile, resolve_model
from regress.core.errors import BadInput, RunFailed
from regress.core.fingerprint import (
    HardwarePath,
    RuntimeFingerprint,
    default_threads,
    llama_kernels,
    openmp_waiting,
    this_cpu,
)
from regress.core.requests import (
    FailedResult,
    Finish,
    GenerateRequest,
    GenerateResult,
    LoglikelihoodRequest,
    LoglikelihoodResult,
    RollingLoglikelihoodRequest,
    RollingResult,
    cut_at_stop,
)

MIN_ROWS = 8
"""Fewest tokens a decode call holds: ggml-cpu's tiled K/i-quant matmul takes batches of at
least eight rows (`ggml_tiled_min_batch` in the llama.cpp that llama-cpp-python 0.3.36
vendors), and smaller ones fall back to kernels that round differently."""


class LlamaCppBackend:
    """A GGUF model loaded in-process. Deterministic: same inputs, same floats."""

    name = "llama_cpp"

    def __init__(
        self,
        model: str | ModelFile,
        n_ctx: int = 2048,
        threads: int | None = None,
        n_batch: int = 512,
        prefix_reuse: bool | None = None,
        add_bos_token: bool | None = None,
        chat_template: str | None = None,
    ) -> None:
        import llama_cpp

        setting("n_ctx", n_ctx, int, 16)
        setting("n_batch", n_batch, int, 1)
        if threads is not None:
            setting("threads", threads, int, 1)
        file = model if isinstance(model, ModelFile) else resolve_model(model)
        path = file.path
        if path.is_dir():
            raise BadInput(f"{path} is a folder; the llama_cpp backend needs a .gguf file")
        train_ctx = file.context_length
        if train_ctx and n_ctx > train_ctx:
            raise BadInput(f"n_ctx {n_ctx} exceeds {path.name}'s training context of {train_ctx}")
        self._path: Path = path
        self.n_ctx = n_ctx
        self.threads = threads or default_threads()
        try:
            self._llm = llama_cpp.Llama(
                model_path=str(path),
                n_ctx=n_ctx,
                n_threads=self.threads,
                n_threads_batch=self.threads,
                n_batch=n_batch,
                logits_all=False,
                verbose=False,
            )
        except (ValueError, RuntimeError) as exc:
            raise RunFailed(f"llama.cpp could not load {path}: {exc}") from exc
        meta = self._llm.metadata
        arch = meta.get("general.architecture", "")
        # A sliding-window cache drops what lies outside the window, so a prefix rewound
        # past it cannot be reused; reuse stays off there unless asked for. (The 0.15 nats
        # once measured on short Gemma 3 requests were small decode calls, see MIN_ROWS.)
        sliding = f"{arch}.attention.sliding_window" in meta
        self.prefix_reuse = (not sliding) if prefix_reuse is None else prefix_reuse
        self._sliding = sliding
        self.add_bos = (
            meta.get("tokenizer.ggml.add_bos_token", "false") == "true"
            if add_bos_token is None
            else add_bos_token
        )
        bos, eos = self._llm.token_bos(), self._llm.token_eos()
        self._prefix_token = bos if bos >= 0 else eos
        self._chat = resolve_template(chat_template, meta.get("tokenizer.chat_template"), path.name)
        self._formatter: Any = None
        self._version = llama_cpp.__version__
        self._system_info = llama_cpp.llama_print_system_info().decode(errors="replace")
        self.n_batch = n_batch
        self._n_vocab = self._llm.n_vocab()
        self.tokens_evaluated = 0
        """Tokens actually run through the model, generated ones aside (a measure of prefix
        reuse)."""
        self._exact = 0
        """The KV cache's first positions that were computed in decode calls of at least
        `min_rows` tokens: the only ones a request may reuse."""

    # -- tokenisation ------------------------------------------------------------------
    def _encode(self, text: str) -> list[int]:
        return self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)

    def _window(self, request: LoglikelihoodRequest) -> Window:
        context_ids, continuation_ids = encode_pair(
            self._encode, request.context, request.continuation, self._prefix_token
        )
        if self.add_bos and request.context:
            context_ids = [self._prefix_token, *context_ids]
        return fit_window(context_ids, continuation_ids, self.n_ctx)

    # -- scoring -------------------------------------------------------------------------
    def _submit(self, chunk: Sequence[int], first_pos: int, wanted: Container[int]) -> None:
        """Decode one batch (at most n_batch tokens) at positions first_pos.., with logits
        at the `wanted` positions."""
        llm = self._llm
        batch = llm._batch.batch
        batch.n_tokens = len(chunk)
        for i, token in enumerate(chunk):
            batch.token[i] = token
            batch.pos[i] = first_pos + i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = first_pos + i in wanted
        llm._ctx.decode(llm._batch)
        if len(chunk) >= self.min_rows and first_pos <= self._exact:
            self._exact = first_pos + len(chunk)
        else:  # these positions (and every later one) took the small-batch kernels
            self._exact = min(self._exact, first_pos)

    def _row(self, index: int) -> np.ndarray:
        """The logits of output `index` of the last batch (a view: copy it to keep it)."""
        import llama_cpp

        pointer = llama_cpp.llama_get_logits_ith(self._llm._ctx.ctx, index)
        return np.ctypeslib.as_array(pointer, shape=(self._n_vocab,))

    def _decode(self, tokens: list[int], n_past: int, wanted: Container[int]) -> list[np.ndarray]:
        """Evaluate `tokens` at positions n_past.. in batches of at most n_batch; the logits
        of the `wanted` positions, in position order."""
        llm = self._llm
        llm._ctx.kv_cache_seq_rm(-1, n_past, -1)
        self._exact = min(self._exact, n_past)
        rows = []
        bounds = list(range(0, len(tokens), self.n_batch)) + [len(tokens)]
        if len(bounds) > 2 and bounds[-1] - bounds[-2] < self.min_rows:
            bounds[-2] = len(tokens) - self.min_rows  # no small last batch: see the module doc
        for lo, hi in itertools.pairwise(bounds):
            self._submit(tokens[lo:hi], n_past + lo, wanted)
            rows += [self._row(i).copy() for i in range(hi - lo) if n_past + lo + i in wanted]
        llm.input_ids[n_past : n_past + len(tokens)] = tokens
        llm.n_tokens = n_past + len(tokens)
        self.tokens_evaluated += len(tokens)
        return rows

    @property
    def min_rows(self) -> int:
        """Fewest tokens a decode call holds (`MIN_ROWS`; fewer when n_batch leaves no room
        for it, and then the scoring label in the fingerprint says so)."""
        if self.n_batch >= 2 * MIN_ROWS:
            return MIN_ROWS
        return 2 if self.n_batch > 2 else 1

    def _logits(self, input_ids: list[int], first_scored: int) -> np.ndarray:
        """Logits at positions first_scored.. of `input_ids`, reusing the cached context.

        The context (up to a last batch of at least two tokens holding every scored position)
        comes from the KV cache where it matches and was computed in batches of at least
        `min_rows` tokens, which all give the same floats (measured); so the floats are those
        of this request's own fresh pass.
        """
        scored = range(first_scored, len(input_ids))
        if self._single_pass:
            return np.stack(self._decode(input_ids, 0, scored))
        last = self._load_context(input_ids, max(min(first_scored, len(input_ids) - 2), 0))
        return np.stack(self._decode(input_ids[last:], last, scored))

    @property
    def _single_pass(self) -> bool:
        """Whether every request runs from its first token in one pass (a sliding-window model
        without prefix reuse)."""
        return self._sliding and not self.prefix_reuse

    def _load_context(self, input_ids: list[int], last: int) -> int:
        """Make the KV cache hold input_ids[:last'] (reusing what matches) and return last',
        which is `last` unless the context is a single token (then it joins the scored
        batch)."""
        shared = 0
        if self.prefix_reuse:
            cached = self._llm.input_ids[: min(self._llm.n_tokens, self._exact)]
            limit = min(len(cached), last)
            mismatch = np.flatnonzero(cached[:limit] != np.asarray(input_ids[:limit]))
            shared = int(mismatch[0]) if mismatch.size else limit
        if 0 < last - shared < self.min_rows:  # recompute a little, not a small batch
            shared = max(last - self.min_rows, 0)
        if shared == 0 and last == 1:  # a context of one token joins the scored batch
            last = 0
        if shared < last:
            self._decode(input_ids[shared:last], shared, ())
        self._llm.n_tokens = last
        return last

    def _score(self, window: Window) -> tuple[float, bool]:
        rows = self._logits(window.input_ids, len(window.input_ids) - len(window.targets))
        rows = rows.astype(np.float64)
        top = rows.max(axis=1)
        log_z = np.log(np.exp(rows - top[:, None]).sum(axis=1)) + top
        targets = np.asarray(window.targets)
        picked = rows[np.arange(len(targets)), targets] - log_z
        greedy = bool((rows.argmax(axis=1) == targets).all())
        return float(picked.sum()), greedy

    def loglikelihood(
        self, requests: Sequence[LoglikelihoodRequest], progress: Progress | None = None
    ) -> list[LoglikelihoodResult | FailedResult]:
        """Summed log P(continuation | context) and is_greedy, in request order."""
        results: list[LoglikelihoodResult | FailedResult | None] = [None] * len(requests)
        windows: list[tuple[int, Window]] = []
        for i, request in enumerate(requests):
            try:
                windows.append((i, self._window(request)))
            except ValueError as exc:
                results[i] = FailedResult("error", str(exc))
        # Lexicographic token order puts requests sharing a prefix side by side.
        windows.sort(key=lambda item: item[1].input_ids)
        for i, window in windows:
            logprob, greedy = self._score(window)
            results[i] = LoglikelihoodResult(
                logprob=logprob,
                is_greedy=greedy,
                n_tokens=len(window.targets),
                n_context_tokens=len(window.input_ids) - len(window.targets) + 1,
                truncated=window.truncated,
            )
            if progress:
                progress(1)
        if progress and len(windows) < len(requests):
            progress(len(requests) - len(windows))
        return results  # type: ignore[return-value]

    def loglikelihood_rolling(
        self, requests: Sequence[RollingLoglikelihoodRequest], progress: Progress | None = None
    ) -> list[RollingResult]:
        """log P(text) over disjoint windows of n_ctx tokens (lm-eval's rolling scheme)."""
        results = []
        for request in requests:
            ids = self._encode(request.text)
            total = sum(
                self._score(w)[0] for w in rolling_windows(ids, self._prefix_token, self.n_ctx)
            )
            results.append(RollingResult(logprob=total, n_tokens=len(ids)))
            if progress:
                progress(1)
        return results

    def generate(
        self, requests: Sequence[GenerateRequest], progress: Progress | None = None
    ) -> list[GenerateResult | FailedResult]:
        """Greedy or seeded sampling, stopped at a stop string, end of sequence or max_tokens."""
        results: list[GenerateResult | FailedResult] = []
        for request in requests:
            if request.max_tokens >= self.n_ctx:
                results.append(FailedResult("truncated", _no_room(request.max_tokens, self.n_ctx)))
            else:
                results.append(self._generate_one(request))
            if progress:
                progress(1)
        return results

    def _prompt(self, request: GenerateRequest) -> list[int]:
        """A generation's prompt tokens: its context, or its messages in the chat template."""
        if not request.messages:
            return self._llm.tokenize(
                request.context.encode("utf-8"), add_bos=self.add_bos, special=True
            )
        if self._chat is None:
            raise BadInput(missing(self._path.name))
        if self._formatter is None:
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter

            model = self._llm._model
            bos, eos = self._llm.token_bos(), self._llm.token_eos()
            self._formatter = Jinja2ChatFormatter(
                self._chat.text,
                eos_token=model.token_get_text(eos) if eos >= 0 else "",
                bos_token=model.token_get_text(bos) if bos >= 0 else "",
            )
        formatter = self._formatter
        try:
            # The template writes the special tokens (BOS too) itself, as llama.cpp's chat
            # does; the messages' text never does (chat.prompt_tokens).
            return prompt_tokens(
                lambda chat: formatter(messages=chat).prompt,
                request.messages,
                self._tokenize_special,
                self._chat.source,
            )
        except BadInput:
            raise
        except Exception as exc:  # a template's own raise_exception, or a Jinja error
            raise BadInput(f"chat template ({self._chat.source}): {exc}") from exc

    def _tokenize_special(self, text: str, special: bool) -> list[int]:
        """`text` as tokens, control-token text as control tokens only when `special`."""
        return self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=special)

    def _generate_one(self, request: GenerateRequest) -> GenerateResult:
        ids = self._prompt(request)
        # Leave room for the answer by cutting the prompt on the left, as lm-eval does.
        room = max(1, self.n_ctx - request.max_tokens)
        truncated = len(ids) > room
        ids = ids[-room:]
        if self._single_pass:
            self._llm.reset()
        else:
            # Llama.generate evaluates what the cache lacks: the prompt's last two tokens.
            self._load_context(ids, max(len(ids) - 2, 0))
        self.tokens_evaluated += len(ids) - self._llm.n_tokens
        self._llm.set_seed(request.seed)
        sampled = request.temperature > 0
        tokens: list[int] = []
        text = ""
        finish: Finish = "length"
        vocab = self._llm._model.vocab
        for token in self._llm.generate(
            ids,
            temp=request.temperature if sampled else 0.0,
            top_k=request.top_k if sampled else 0,
            top_p=request.top_p if sampled else 1.0,
            min_p=request.min_p if sampled else 0.0,
            repeat_penalty=1.0,
        ):
            if self._is_end(vocab, token):
                finish = "eos"
                break
            tokens.append(token)
            text = self._llm.detokenize(tokens).decode("utf-8", errors="ignore")
            text, stopped = cut_at_stop(text, request.until)
            if stopped:
                finish = "stop"
                break
            if len(tokens) >= request.max_tokens:
                break
        # The prompt's last two tokens and the generated ones went through in small batches
        # (Llama.generate's own decode calls): never reuse their KV.
        self._llm.n_tokens = min(self._llm.n_tokens, len(ids))
        self._exact = min(self._exact, max(len(ids) - 2, 0))
        return GenerateResult(
            text=text,
            n_tokens=len(tokens),
            n_context_tokens=len(ids),
            finish=finish,
            truncated=truncated,
        )

    @staticmethod
    def _is_end(vocab: object, token: int) -> bool:
        import llama_cpp

        return bool(llama_cpp.llama_vocab_is_eog(vocab, token))

    # -- timed paths for `regress bench` ---------------------------------------------------
    @property
    def n_vocab(self) -> int:
        """Size of the model's vocabulary (random benchmark tokens are drawn below it)."""
        return self._n_vocab

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` as a prompt (with the BOS token when the model adds one)."""
        return len(self._encode(text)) + int(self.add_bos)

    def clear_cache(self) -> None:
        """Empty the KV cache, so the next request starts from nothing (llama-bench does this
        before every repetition)."""
        self._llm._ctx.kv_cache_seq_rm(-1, 0, -1)
        self._llm.n_tokens = 0
        self._exact = 0

    def process_prompt(self, tokens: Sequence[int]) -> None:
        """llama-bench's prompt test: `tokens` in n_batch chunks, logits at each chunk's
        last token only; returns when the computation has finished."""
        import llama_cpp

        for start in range(0, len(tokens), self.n_batch):
            chunk = tokens[start : start + self.n_batch]
            self._submit(chunk, start, {start + len(chunk) - 1})
        llama_cpp.llama_synchronize(self._llm._ctx.ctx)

    def generate_tokens(self, tokens: Sequence[int], n_past: int = 0) -> None:
        """llama-bench's generation test: one decode per token, each waited for. The tokens
        are given (llama-bench feeds random ones), so no sampler is timed."""
        import llama_cpp

        for i, token in enumerate(tokens):
            self._submit([token], n_past + i, {n_past + i})
            llama_cpp.llama_synchronize(self._llm._ctx.ctx)

    def stream(self, prompt: str, max_tokens: int) -> Iterator[int]:
        """Greedy continuation of `prompt`, yielding each token id once it is decoded.

        End-of-sequence does not stop it (vLLM's ignore_eos), so every request makes exactly
        `max_tokens` tokens and runs compare. Tokenising is part of the request's time.
        """
        ids = self._encode(prompt)
        if self.add_bos:
            ids = [self._prefix_token, *ids]
        if not ids or len(ids) + max_tokens > self.n_ctx:
            raise BadInput(
                f"a prompt of {len(ids)} tokens + {max_tokens} new does not fit n_ctx "
                f"{self.n_ctx} (raise n_ctx with --model-args or shorten the prompt)"
            )
        self.clear_cache()
        self.process_prompt(ids)
        last = (len(ids) - 1) % self.n_batch
        for k in range(max_tokens):
            token = int(np.argmax(self._row(last)))
            yield token
            if k + 1 < max_tokens:
                self._submit([token], len(ids) + k, {len(ids) + k})
                last = 0
        self.clear_cache()

    def fingerprint(self) -> RuntimeFingerprint:
        """Version, load parameters and the CPU build's kernels: all can change log-probs."""
        chat_params, chat_build = self._chat.recorded() if self._chat else ({}, {})
        return RuntimeFingerprint(
            name=self.name,
            version=self._version,
            params={
                "n_ctx": self.n_ctx,
                "threads": self.threads,
                "n_batch": self.n_batch,
                "add_bos_token": self.add_bos,
                "prefix_reuse": self.prefix_reuse,
                "openmp_waiting": openmp_waiting(),
                **chat_params,
            },
            hardware=HardwarePath(
                kernels=llama_kernels(self._system_info), cpu=this_cpu(), threads=self.threads
            ),
            build={
                "system_info": self._system_info,
                # How a request's tokens are batched decides their floats: every decode call
                # holds at least min_rows tokens ("split-8").
                "scoring": "single-pass" if self._single_pass else f"split-{self.min_rows}",
                **chat_build,
            },
        )

    def close(self) -> None:
        """Free the model and its context now rather than at garbage collection."""
        self._llm.close()

    # -- per-token distributions for `regress sweep` (KL divergence, llama-perplexity) -------
    def tokenize(self, text: str) -> list[int]:
        """`text` as token ids, BOS first when the model adds one (llama-perplexity's input)."""
        return [self._prefix_token] * int(self.add_bos) + self._encode(text)

    def chunk_logits(self, tokens: Sequence[int], first: int) -> np.ndarray:
        """Logits (float32, (len(tokens) - 1 - first) x vocab) at positions first..len-2 of
        `tokens` evaluated from an empty KV cache, the first token replaced by BOS when the
        model adds one: llama-perplexity's evaluation of one chunk."""
        ids = [int(t) for t in tokens]
        if self.add_bos:
            ids[0] = self._prefix_token
        wanted = range(first, len(ids) - 1)
        rows: list[np.ndarray] = []
        self.clear_cache()
        try:
            for start in range(0, len(ids), self.n_batch):
                chunk = ids[start : start + self.n_batch]
                self._submit(chunk, start, wanted)
                rows += [self._row(i).copy() for i in range(len(chunk)) if start + i in wanted]
        finally:
            self.clear_cache()  # the rows are copied out; the next request starts clean
        return np.stack(rows)


def _no_room(max_tokens: int, n_ctx: int) -> str:
    return f"max_tokens {max_tokens} leaves no room for a prompt in n_ctx {n_ctx}"
