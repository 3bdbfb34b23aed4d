"""Hugging Face transformers backend: lm-eval's `hf` model semantics on a local folder or GGUF.

A GGUF file is dequantised once by transformers and kept as an ordinary HF folder under
`~/.cache/regress/hf/<sha256 of the GGUF>/`, so later loads take under a second instead of
15-20 s and can never be stale.

Results never depend on how requests are batched: every input is right-padded to a multiple
of `_PAD_MULTIPLE` tokens whether it runs alone or with others, because CPU float32 attention
over a different padded length changes log-probs in the fifth decimal.

With `prefix_cache=true`, a context's text up to its last blank line (the few-shot block of
a k-shot prompt, MMLU's subject line, TruthfulQA's primer) is run once alone and its
key/value cache is shared by every request that starts with it; only the rest runs per
request, padded to a multiple of `_SUFFIX_PAD_MULTIPLE`. The split pass sums in a different
order from one full pass, so log-probs move in the fifth decimal (predictions still match
lm-eval's, see experiments/vs_lm_eval.py) and the setting is part of the fingerprint. Each
request's result still depends on nothing but the request itself. A context without a blank
line runs whole: the choices of a 0-shot question share too little to pay for batches of two
rows instead of length-sorted batches of many.

Logits are computed only at the positions that are scored: the model's body runs over the
whole batch and its output head (a 49k-vocabulary matrix for SmolLM2, a fifth of the compute)
over just those positions, gathered and padded to `_HEAD_ROWS` rows. Small matrix products
take other CPU kernels and differ in the fifth decimal, so the padding keeps them on the
kernel of a full pass; at load a probe checks that the head alone reproduces the model's own
logits bit for bit, and a model where it does not (one that post-processes its logits) keeps
full logits.
"""

from __future__ import annotations

import copy
import fcntl
import gc
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import psutil
import torch
import transformers

from regress.backends.base import Progress, setting
from regress.backends.chat import chat_template as resolve_template
from regress.backends.chat import missing, prompt_tokens
from regress.backends.encoding import Window, encode_pair, fit_window, rolling_windows
from regress.backends.gguf_header import check_gguf
from regress.backends.models import ModelFile, cache_root, file_sha256, resolve_model
from regress.core.errors import BadInput, RunFailed
from regress.core.fingerprint import HardwarePath, RuntimeFingerprint, openmp_waiting, this_cpu
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

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
_MAX_LENGTH_CAP = 2048
_PAD_MULTIPLE = 32
_SUFFIX_PAD_MULTIPLE = 8
"""Padding after a cached prefix: such suffixes are short (a question, a choice)."""
_HEAD_ROWS = 16
"""Row multiple for the output head: from 16 rows on, CPU float32 products equal a full pass's."""
_AUTO_BATCH_MAX = 64
_AUTO_MEMORY_SHARE = 0.25
"""Share of the memory available at load time that one `auto` batch may use."""
_WEIGHT_GLOBS = ("*.safetensors", "pytorch_model*.bin", "*.pt", "*.pth")


class HFBackend:
    """A causal LM run by transformers, answering lm-eval's three request kinds."""

    name = "hf"

    def __init__(
        self,
        model: str | ModelFile,
        *,
        dtype: str = "float32",
        batch_size: int | str = 1,
        max_length: int | None = None,
        add_bos_token: bool | None = None,
        device: str = "cpu",
        trust_remote_code: bool = False,
        threads: int | None = None,
        prefix_cache: bool = False,
        chat_template: str | None = None,
    ) -> None:
        """Load `model` (HF folder, .gguf file or packaged short name, or one resolved).

        `add_bos_token=None` follows lm-eval 0.4.13: BOS exactly when the tokenizer adds it by
        default (Gemma, Llama 3), never for GPT-2 style tokenizers (SmolLM2).
        """
        if dtype not in _DTYPES:
            raise BadInput(f"hf: dtype must be one of {', '.join(_DTYPES)}, got {dtype!r}")
        if batch_size != "auto" and not (isinstance(batch_size, int) and batch_size > 0):
            raise BadInput(
                f"hf: batch_size must be a positive integer or 'auto', got {batch_size!r}"
            )
        if max_length is not None:
            setting("max_length", max_length, int, 2)
        if threads is not None:
            torch.set_num_threads(setting("threads", threads, int, 1))
        # CPU kernels are deterministic already; this warns if one that is not gets used.
        torch.use_deterministic_algorithms(True, warn_only=True)
        transformers.logging.set_verbosity_error()
        transformers.utils.logging.disable_progress_bar()

        self._dtype_name = dtype
        self._device = torch.device(device)
        self._batch_size = batch_size
        self.prefix_cache = prefix_cache
        self._prefix_memo: tuple[tuple[int, ...], Any] | None = None
        """The last shared prefix run and its key/value cache (batches come grouped by prefix)."""
        file = model if isinstance(model, ModelFile) else resolve_model(model)
        folder = _model_folder(file.path)
        self.tokenizer, self.model = _load(folder, _DTYPES[dtype], trust_remote_code)
        self.model.to(self._device).eval()
        self.max_length = max_length or min(_model_positions(self.model.config), _MAX_LENGTH_CAP)
        self.add_bos_token = (
            _tokenizer_adds_bos(self.tokenizer) if add_bos_token is None else add_bos_token
        )
        self._chat = resolve_template(chat_template, self.tokenizer.chat_template, folder.name)
        self._available_memory = psutil.virtual_memory().available
        self._head_only = self._head_reproduces_logits()
        self._bench_kv: Any = None
        """`regress bench`'s key/value cache of the sequence being timed."""

    @property
    def prefix_token_id(self) -> int:
        """Token standing for an empty context (lm-eval: BOS when the vocab has one, else EOS)."""
        bos = self.tokenizer.bos_token_id
        token: int = bos if bos is not None else self.tokenizer.eos_token_id
        return token

    def loglikelihood(
        self, requests: Sequence[LoglikelihoodRequest], progress: Progress | None = None
    ) -> list[LoglikelihoodResult | FailedResult]:
        """Summed log-prob of each continuation and whether greedy decoding reproduces it."""
        results: list[LoglikelihoodResult | FailedResult | None] = [None] * len(requests)
        windows: list[Window] = []
        owners: list[int] = []
        splits: list[int] = []
        contexts: dict[int, int] = {}
        prefixes: dict[str, list[int]] = {}
        for i, request in enumerate(requests):
            # lm-eval encodes a continuation after an empty context without special tokens.
            encode = self._encode if request.context else self._encode_plain
            context_ids, continuation_ids = encode_pair(
                encode, request.context, request.continuation, self.prefix_token_id
            )
            # A context of only spaces encodes to nothing: the prefix token stands in for it.
            context_ids = context_ids or [self.prefix_token_id]
            try:
                window = fit_window(context_ids, continuation_ids, self.max_length)
            except ValueError as exc:
                results[i] = FailedResult("error", str(exc))
                continue
            windows.append(window)
            splits.append(
                self._prefix_split(request.context, window, prefixes) if self.prefix_cache else 0
            )
            owners.append(i)
            contexts[i] = len(context_ids)
        if progress and len(owners) < len(requests):
            progress(len(requests) - len(owners))
        scores = self._score_windows(windows, owners, progress, splits)
        for i, window, (logprob, greedy) in zip(owners, windows, scores, strict=True):
            results[i] = LoglikelihoodResult(
                logprob=logprob,
                is_greedy=greedy,
                n_tokens=len(window.targets),
                n_context_tokens=contexts[i],
                truncated=window.truncated,
            )
        return [r for r in results if r is not None]

    def loglikelihood_rolling(
        self, requests: Sequence[RollingLoglikelihoodRequest], progress: Progress | None = None
    ) -> list[RollingResult | FailedResult]:
        """log P(text) of each text, in disjoint windows of `max_length` tokens."""
        windows: list[Window] = []
        owners: list[int] = []
        for i, request in enumerate(requests):
            # The prefix token already plays BOS's part for the first window.
            for window in rolling_windows(
                self._encode_plain(request.text), self.prefix_token_id, self.max_length
            ):
                windows.append(window)
                owners.append(i)
        if progress and (empty := len(requests) - len(set(owners))):
            progress(empty)
        totals = [0.0] * len(requests)
        counts = [0] * len(requests)
        for i, window, (logprob, _) in zip(
            owners, windows, self._score_windows(windows, owners, progress), strict=True
        ):
            totals[i] += logprob
            counts[i] += len(window.targets)
        return [RollingResult(logprob=t, n_tokens=n) for t, n in zip(totals, counts, strict=True)]

    def generate(
        self, requests: Sequence[GenerateRequest], progress: Progress | None = None
    ) -> list[GenerateResult]:
        """Generate for each request alone (batching would change padding and so the text)."""
        results: list[GenerateResult] = []
        for request in requests:
            results.append(self._generate_one(request))
            if progress:
                progress(1)
        return results

    # -- timed paths for `regress bench` ---------------------------------------------------
    @property
    def n_vocab(self) -> int:
        """Size of the model's vocabulary (random benchmark tokens are drawn below it)."""
        return int(self.model.config.vocab_size)

    def clear_cache(self) -> None:
        """Drop the benchmark's key/value cache: the next tokens start a new sequence."""
        self._bench_kv = None

    def _step(self, tokens: Sequence[int]) -> torch.Tensor:
        """Run `tokens` after the cached ones; the logits of the last token only, as
        llama-bench asks llama.cpp for them."""
        with torch.inference_mode():
            out = self.model(
                torch.tensor([list(tokens)], device=self._device),
                cache=self._bench_kv,
                use_cache=True,
                logits_to_keep=1,
            )
        self._bench_kv = out.cache
        last: torch.Tensor = out.logits[0, -1]
        return last

    def process_prompt(self, tokens: Sequence[int]) -> None:
        """llama-bench's prompt test: the tokens in one forward pass."""
        self._step(tokens)

    def generate_tokens(self, tokens: Sequence[int], n_past: int = 0) -> None:
        """llama-bench's generation test: one forward per given token, after the cache."""
        for token in tokens:
            self._step([token])

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` as a prompt."""
        return len(self._encode(text))

    def stream(self, prompt: str, max_tokens: int) -> Iterator[int]:
        """Greedy continuation of `prompt`, a token at a time with the key/value cache;
        end-of-sequence does not stop it (vLLM's ignore_eos)."""
        ids = self._encode(prompt)
        if not ids or len(ids) + max_tokens > self.max_length:
            raise BadInput(
                f"a prompt of {len(ids)} tokens + {max_tokens} new does not fit max_length "
                f"{self.max_length}"
            )
        self.clear_cache()
        logits = self._step(ids)
        for k in range(max_tokens):
            token = int(torch.argmax(logits))
            yield token
            if k + 1 < max_tokens:
                logits = self._step([token])
        self.clear_cache()

    def fingerprint(self) -> RuntimeFingerprint:
        """Library versions, every load setting that can change a log-prob, and the kernels
        torch dispatches to on this CPU."""
        threads = torch.get_num_threads()
        chat_params, chat_build = self._chat.recorded() if self._chat else ({}, {})
        return RuntimeFingerprint(
            name=self.name,
            version=transformers.__version__,
            params={
                "dtype": self._dtype_name,
                "max_length": self.max_length,
                "batch_size": self._batch_size,
                "add_bos_token": self.add_bos_token,
                "device": str(self._device),
                "threads": threads,
                "pad_multiple": _PAD_MULTIPLE,
                "prefix_cache": self.prefix_cache,
                # torch's OpenMP threads wait as llama.cpp's do: speed only, recorded alike.
                "openmp_waiting": openmp_waiting(),
                **chat_params,
            },
            libraries={"torch": torch.__version__},
            hardware=HardwarePath(
                kernels=f"torch {torch.backends.cpu.get_cpu_capability()}",
                cpu=this_cpu(),
                threads=threads,
            ),
            build=chat_build,
        )

    def close(self) -> None:
        """Release the model's memory."""
        del self.model
        gc.collect()

    def _encode_plain(self, text: str) -> list[int]:
        ids: list[int] = self.tokenizer(text, add_special_tokens=False).input_ids
        return ids

    def _encode(self, text: str) -> list[int]:
        ids = self._encode_plain(text)
        bos = self.tokenizer.bos_token
        # Like lm-eval, a prompt that already starts with the BOS text gets no second BOS.
        if self.add_bos_token and not (bos and text.startswith(bos)):
            return [self.tokenizer.bos_token_id, *ids]
        return ids

    def _prefix_split(self, context: str, window: Window, known: dict[str, list[int]]) -> int:
        """How many of `window`'s input tokens form a prefix worth sharing: the context's text
        up to its last blank line when that text alone tokenises to exactly those tokens and
        ends before the first scored position, else 0. A function of the request alone;
        `known` memoises prefix encodings (thousands of questions share a few k-shot blocks)."""
        first_scored = len(window.input_ids) - len(window.targets)
        cut = context.rfind("\n\n")
        # GPT-2 style tokenizers split a blank line before a word into two newline tokens,
        # others keep it whole: the cut is tried after the blank line, then inside it.
        for end in (cut + 2, cut + 1) if cut > 0 else ():
            text = context[:end]
            prefix = known.get(text)
            if prefix is None:
                prefix = known[text] = self._encode(text)
            if len(prefix) <= first_scored and window.input_ids[: len(prefix)] == prefix:
                return len(prefix)
        return 0

    def _score_windows(
        self,
        windows: Sequence[Window],
        owners: Sequence[int],
        progress: Progress | None,
        splits: Sequence[int] | None = None,
    ) -> list[tuple[float, bool]]:
        """(summed log-prob, all targets greedy) per window, one forward per distinct input.

        Windows with the same input tokens share one forward pass and read their targets from
        its last positions: this covers lm-eval's one-token continuations of a shared context
        (their input is exactly the context) and any other exact repeat. Window w's first
        `splits[w]` tokens are a prefix run once and shared through its key/value cache.
        """
        splits = splits or [0] * len(windows)
        by_input: dict[tuple[int, tuple[int, ...]], list[int]] = {}
        remaining: dict[int, int] = {}
        for w, window in enumerate(windows):
            # An empty continuation scores 0.0 without a forward pass, as in lm-eval.
            if window.targets:
                by_input.setdefault((splits[w], tuple(window.input_ids)), []).append(w)
                remaining[owners[w]] = remaining.get(owners[w], 0) + 1
        if progress and (done := len(set(owners)) - len(remaining)):
            progress(done)
        scores: list[tuple[float, bool]] = [(0.0, True)] * len(windows)
        for prefix, batch in self._batches(list(by_input)):
            spans = [
                max(len(windows[w].targets) for w in by_input[len(prefix), inputs])
                for inputs in batch
            ]
            logits = self._forward(prefix, [inputs[len(prefix) :] for inputs in batch], spans)
            finished = 0
            for row, inputs in enumerate(batch):
                for w in by_input[len(prefix), inputs]:
                    scores[w] = _score(logits[row], windows[w].targets)
                    remaining[owners[w]] -= 1
                    finished += remaining[owners[w]] == 0
            if progress and finished:
                progress(finished)
        return scores

    def _batches(
        self, inputs: list[tuple[int, tuple[int, ...]]]
    ) -> list[tuple[tuple[int, ...], list[tuple[int, ...]]]]:
        """(shared prefix, inputs) batches, longest first within a prefix (like lm-eval's
        Collator); a batch never mixes prefixes or padded lengths."""
        groups: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
        for split, item in inputs:
            groups.setdefault(item[:split], []).append(item)
        batches: list[tuple[tuple[int, ...], list[tuple[int, ...]]]] = []
        for prefix, items in groups.items():
            last: list[tuple[int, ...]] | None = None
            for item in sorted(items, key=len, reverse=True):
                padded = _padded_length(len(item) - len(prefix), bool(prefix))
                if (
                    last is not None
                    and _padded_length(len(last[0]) - len(prefix), bool(prefix)) == padded
                    and len(last) < self._rows_per_batch(len(prefix) + padded)
                ):
                    last.append(item)
                else:
                    last = [item]
                    batches.append((prefix, last))
        return batches

    def _rows_per_batch(self, padded_length: int) -> int:
        if self._batch_size != "auto":
            return int(self._batch_size)
        # Activations dominate; full logits (vocab floats per position) only without head_only.
        hidden = getattr(self.model.config, "hidden_size", 4096)
        per_token = 4 * (32 * hidden + (0 if self._head_only else len(self.tokenizer)))
        budget = self._available_memory * _AUTO_MEMORY_SHARE
        return max(1, min(_AUTO_BATCH_MAX, int(budget // (padded_length * per_token))))

    def _forward(
        self, prefix: tuple[int, ...], batch: Sequence[tuple[int, ...]], spans: Sequence[int]
    ) -> list[torch.Tensor]:
        """Per input, float32 logits [span, vocab] at its last `span` positions; the inputs are
        right-padded and follow `prefix` (empty: no prefix)."""
        length = _padded_length(len(batch[0]), bool(prefix))
        input_ids = torch.full((len(batch), length), self._pad_id, dtype=torch.long)
        attention = torch.zeros((len(batch), len(prefix) + length), dtype=torch.long)
        attention[:, : len(prefix)] = 1
        for row, inputs in enumerate(batch):
            input_ids[row, : len(inputs)] = torch.tensor(inputs)
            attention[row, len(prefix) : len(prefix) + len(inputs)] = 1
        kwargs: dict[str, Any] = {
            "input_ids": input_ids.to(self._device),
            "attention_mask": attention.to(self._device),
        }
        if prefix:
            # The forward pass appends to the cache it is given, so each batch gets a copy.
            kwargs["cache"] = copy.deepcopy(self._prefix_kv(prefix))
            kwargs["cache"].batch_repeat_interleave(len(batch))
        # The (row, position) of every scored position, row by row.
        rows = torch.repeat_interleave(torch.arange(len(batch)), torch.tensor(spans))
        positions = torch.tensor(
            [
                p
                for inputs, span in zip(batch, spans, strict=True)
                for p in range(len(inputs) - span, len(inputs))
            ]
        )
        with torch.inference_mode():
            if self._head_only:
                hidden = self.model.get_decoder()(**kwargs).last_hidden_state
                logits = self._head(hidden[rows, positions])
            else:
                logits = self.model(**kwargs).logits[rows, positions]
        return list(logits.float().split(list(spans)))

    def _head(self, hidden: torch.Tensor) -> torch.Tensor:
        """The output head over `hidden` [n, hidden size], run on a multiple of `_HEAD_ROWS`."""
        n = len(hidden)
        padding = -n % _HEAD_ROWS
        padded = torch.cat([hidden, hidden[-1:].expand(padding, -1)]) if padding else hidden
        logits: torch.Tensor = self.model.get_output_embeddings()(padded)[:n]
        return logits

    def _head_reproduces_logits(self) -> bool:
        """Whether the body plus the head alone give the model's logits exactly, both on a
        gathered block of rows and on a single row."""
        ids = torch.arange(64, device=self._device).unsqueeze(0)
        with torch.inference_mode():
            full = self.model(input_ids=ids).logits[0]
            hidden = self.model.get_decoder()(input_ids=ids).last_hidden_state[0]
            picks = (torch.arange(3, 35, 2), torch.tensor([40]))
            return all(torch.equal(self._head(hidden[p]), full[p]) for p in picks)

    def _prefix_kv(self, prefix: tuple[int, ...]) -> Any:
        """The key/value cache of `prefix` run alone, unpadded (kept for the next batch)."""
        if self._prefix_memo is None or self._prefix_memo[0] != prefix:
            with torch.inference_mode():
                out = self.model.get_decoder()(
                    input_ids=torch.tensor([prefix], device=self._device), use_cache=True
                )
            self._prefix_memo = (prefix, out.cache)
        return self._prefix_memo[1]

    @property
    def _pad_id(self) -> int:
        pad = self.tokenizer.pad_token_id
        return pad if pad is not None else self.prefix_token_id

    def _prompt(self, request: GenerateRequest) -> list[int]:
        """A generation's prompt tokens: its context, or its messages in the chat template."""
        if not request.messages:
            return self._encode(request.context)
        if self._chat is None:
            raise BadInput(missing(self.model.name_or_path))
        template = self._chat.text

        def render(chat: list[dict[str, str]]) -> str:
            text: str = self.tokenizer.apply_chat_template(
                chat, chat_template=template, add_generation_prompt=True, tokenize=False
            )
            return text

        try:
            # The template writes the special tokens (BOS too) itself; the messages' text
            # never does (chat.prompt_tokens).
            return prompt_tokens(
                render, request.messages, self._tokenize_special, self._chat.source
            )
        except BadInput:
            raise
        except Exception as exc:  # a template's own raise_exception, or a Jinja error
            raise BadInput(f"chat template ({self._chat.source}): {exc}") from exc

    def _tokenize_special(self, text: str, special: bool) -> list[int]:
        """`text` as tokens, added-token text as those tokens only when `special`."""
        ids: list[int] = self.tokenizer(
            text, add_special_tokens=False, split_special_tokens=not special
        )["input_ids"]
        return ids

    def _generate_one(self, request: GenerateRequest) -> GenerateResult:
        ids = self._prompt(request)
        # Leave room for the answer by cutting the prompt on the left, as lm-eval does.
        room = max(1, self.max_length - request.max_tokens)
        truncated = len(ids) > room
        ids = ids[-room:]
        sampling = request.temperature > 0
        eos = self.model.generation_config.eos_token_id or self.tokenizer.eos_token_id
        config = transformers.GenerationConfig(
            max_new_tokens=request.max_tokens,
            do_sample=sampling,
            temperature=request.temperature if sampling else None,
            top_p=request.top_p if sampling else None,
            top_k=request.top_k if sampling else None,
            min_p=(request.min_p or None) if sampling else None,
            eos_token_id=eos,
            pad_token_id=self._pad_id,
            stop_strings=list(request.until) or None,
        )
        inputs = torch.tensor([ids], device=self._device)
        rng_devices = [self._device] if self._device.type == "cuda" else []
        with torch.inference_mode(), torch.random.fork_rng(devices=rng_devices):
            # A private RNG stream seeded by the request: same seed, same sample, whatever
            # ran before it.
            torch.manual_seed(request.seed)
            out = self.model.generate(
                inputs,
                attention_mask=torch.ones_like(inputs),
                generation_config=config,
                tokenizer=self.tokenizer,
            )
        new = out[0, len(ids) :].tolist()
        ends = {eos} if isinstance(eos, int) else set(eos or ())
        finish: Finish
        if new and new[-1] in ends:
            new, finish = new[:-1], "eos"
        else:
            finish = "length" if len(new) >= request.max_tokens else "stop"
        text = self.tokenizer.decode(new, skip_special_tokens=True)
        text, stopped = cut_at_stop(text, request.until)
        if stopped:
            finish = "stop"
        return GenerateResult(
            text=text,
            n_tokens=len(new),
            n_context_tokens=len(ids),
            finish=finish,
            truncated=truncated,
        )


def _score(logits: torch.Tensor, targets: Sequence[int]) -> tuple[float, bool]:
    """Summed log-prob (float64) of `targets`, predicted by the last rows of `logits`."""
    if not targets:
        return 0.0, True
    rows = logits[len(logits) - len(targets) :]
    logprobs = torch.log_softmax(rows, dim=-1)
    target = torch.tensor(targets, device=rows.device)
    picked = logprobs.gather(1, target.unsqueeze(1)).squeeze(1)
    greedy = bool((rows.argmax(dim=-1) == target).all())
    return float(picked.double().sum()), greedy


def _padded_length(n: int, after_prefix: bool = False) -> int:
    multiple = _SUFFIX_PAD_MULTIPLE if after_prefix else _PAD_MULTIPLE
    return -(-n // multiple) * multiple


def _tokenizer_adds_bos(tokenizer: Any) -> bool:
    bos = tokenizer.bos_token_id
    return bos is not None and tokenizer("x").input_ids[:1] == [bos]


def _model_positions(config: Any) -> int:
    """The model's longest context, read like lm-eval does (multimodal models nest it)."""
    for cfg in (config, getattr(config, "text_config", None)):
        for attr in ("n_positions", "max_position_embeddings", "n_ctx"):
            value = getattr(cfg, attr, None)
            if isinstance(value, int) and value > 0:
                return value
    return _MAX_LENGTH_CAP


def _model_folder(path: Path) -> Path:
    """The HF folder to load: `path` itself, or the cached dequantised copy of a GGUF."""
    if path.is_file():
        check_gguf(path)
        return _gguf_folder(path)
    if not (path / "config.json").is_file():
        raise BadInput(f"{path}: not a Hugging Face model folder (no config.json)")
    if not any(next(path.glob(pattern), None) for pattern in _WEIGHT_GLOBS):
        raise BadInput(
            f"{path}: Hugging Face model folder without weights "
            "(no *.safetensors or pytorch_model.bin)"
        )
    return path


def _load(folder: Path, dtype: torch.dtype, trust_remote_code: bool) -> tuple[Any, Any]:
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(
            folder, trust_remote_code=trust_remote_code
        )
        model = transformers.AutoModelForCausalLM.from_pretrained(
            folder, dtype=dtype, trust_remote_code=trust_remote_code
        )
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        raise RunFailed(f"cannot load {folder} with transformers: {_first_line(exc)}") from exc
    return tokenizer, model


def _gguf_folder(gguf: Path) -> Path:
    """Dequantise `gguf` into an HF folder once, cached by the file's sha256."""
    folder = cache_root() / "hf" / file_sha256(gguf)
    if (folder / "config.json").is_file():
        return folder
    building: Path | None = None
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        # One process dequantises a file (30-40 s); another one waits for its folder.
        with open(folder.parent / f".{folder.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if (folder / "config.json").is_file():
                return folder
            building = Path(tempfile.mkdtemp(prefix=".building-", dir=folder.parent))
            _dequantise(gguf, building)
            # A rename is atomic: a half-written folder is never mistaken for the cache.
            building.rename(folder)
    except OSError as exc:
        # Losing the rename race to a process that took no lock is fine.
        if not (folder / "config.json").is_file():
            raise RunFailed(f"cannot cache the dequantised {gguf.name} in {folder}: {exc}") from exc
    finally:
        if building is not None:
            shutil.rmtree(building, ignore_errors=True)
    return folder


def _dequantise(gguf: Path, out: Path) -> None:
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        loaded = transformers.AutoModelForCausalLM.from_pretrained(
            gguf.parent, gguf_file=gguf.name, dtype=torch.float32
        )
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        raise RunFailed(f"cannot load {gguf} with transformers: {_first_line(exc)}") from exc
    # A GGUF-loaded model refuses save_pretrained ("not serializable"); a fresh model built
    # from the same config without the quantization entry saves fine.
    config = loaded.config
    del config.quantization_config
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict())
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
