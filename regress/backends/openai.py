"""OpenAI-compatible server backend (vLLM, llama-cpp-python's server, Ollama, ...).

The server tokenises. Log-likelihoods come from the completions endpoint with `echo=True`:
the server scores the whole prompt `context + continuation` and the continuation's tokens are
those whose text offset lies at or past the end of the context, as lm-eval's
`local-completions` does. Before the first scoring call the backend checks, once, that the
server really returns prompt log-probs and that they line up with its tokens: some servers
return none (llama.cpp's own llama-server), and llama-cpp-python's server returns them shifted
by one position for models without a BOS token (abetlen/llama-cpp-python#1983). Either would
otherwise give plausible-looking but wrong numbers.
"""

from __future__ import annotations

import math
import os
import random
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, replace
from typing import Any, TypeVar, cast

import httpx

from regress.backends import batch_probe, http_deadline, server_facts
from regress.backends.base import Progress, setting
from regress.backends.server_facts import ServerFacts
from regress.core.errors import BadInput, RunFailed
from regress.core.fingerprint import HardwarePath, RuntimeFingerprint
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

_PROBE = "The capital of France is"
_PROBE_TOLERANCE = 0.1
"""Echoed vs generated log-prob of one token; servers may compute the two on different kernels
(prefill vs decode), a misaligned echo is off by whole nats."""
_BACKOFF_BASE_S = 0.5
_BACKOFF_CAP_S = 30.0
MAX_REPLY_BYTES = 8 * 2**20
"""The largest reply read from the server: an echo of a 100,000-token prompt with its
log-probs takes a few MB; 24 judge replies of 30 MB once took 2.8 GB. A larger reply is that
request's error."""
_VERSION_BYTES = 64 * 2**10
"""A version reply is a few dozen bytes, llama-server's /props a few KB."""
_METRICS_BYTES = 2 * 2**20
"""vLLM's /metrics is about 100 KB of Prometheus text."""
MAX_TOKEN_CHARS = 256
"""The most characters one token decodes to. Vocabularies' longest tokens are runs of spaces
or punctuation (81 characters in SmolLM2's); a reply longer than `max_tokens` of these came
from a server that did not stop where it was told."""

Req = TypeVar("Req")
Res = TypeVar("Res")


@dataclass(frozen=True)
class _Entry:
    """One echoed token: its text offset, text, log-prob and the top alternatives' log-probs."""

    offset: int
    token: str
    logprob: float | None
    top: dict[str, float] | None


class OpenAIBackend:
    """A model behind an OpenAI-compatible HTTP server."""

    name = "openai"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        model_name: str | None = None,
        api_key_env: str | None = None,
        timeout: float = 300.0,
        max_retries: int = 3,
        concurrency: int = 4,
        chat: bool = True,
        model_sha256: str = "",
        dtype: str = "",
        max_model_len: int | None = None,
        max_num_seqs: int | None = None,
        prefix_caching: bool | None = None,
        batch_invariant: bool | None = None,
        tensor_parallel_size: int | None = None,
        data_parallel_size: int | None = None,
    ) -> None:
        """Connect to the server at `base_url` (e.g. http://127.0.0.1:8000/v1).

        `model_name` is sent as the request's `model` (default: `model`); the API key is read
        from the environment variable `api_key_env` (default OPENAI_API_KEY, optional).
        Generation uses /chat/completions unless `chat=False`. `model_sha256` names the served
        weights (their sha256: 64 hex digits); without it results are never cached, since a server
        can swap the weights behind a name. `timeout` bounds each whole request, however slowly
        the server sends its answer.

        The server's fingerprint (`server_facts`) is read from the server where it reports
        it; `dtype`, `max_model_len`, `max_num_seqs`, `prefix_caching`, `batch_invariant`,
        `tensor_parallel_size` and `data_parallel_size` declare what it does not (a
        declaration the server contradicts is refused).
        """
        if not base_url:
            raise BadInput(
                "openai: model_args needs base_url, e.g. base_url=http://127.0.0.1:8000/v1"
            )
        setting("concurrency", concurrency, int, 1)
        setting("max_retries", max_retries, int, 0)
        setting("timeout", timeout, float, 0.001)
        self.base_url = _api_root(base_url)
        self.model_name = model_name or model
        self.chat = chat
        self.model_sha256 = setting("model_sha256", model_sha256, str)
        self._declared = _declared(
            dtype=dtype,
            max_model_len=max_model_len,
            max_num_seqs=max_num_seqs,
            prefix_caching=prefix_caching,
            batch_invariant=batch_invariant,
            tensor_parallel_size=tensor_parallel_size,
            data_parallel_size=data_parallel_size,
        )
        self._timeout = timeout
        self._cache_prompt_field = True
        """llama.cpp's servers reuse a cached prompt prefix by default, which computes the
        rest on other kernels and can change a greedy answer; the field turns that off and is
        dropped for servers that reject unknown fields."""
        self._max_retries = max_retries
        self._concurrency = concurrency
        self._echo_checked = False
        self._batch_probed = False
        self.listed: tuple[str, ...] = ()
        """The models the server lists at GET /models: a check that reruns the baseline's
        model on the candidate's server refuses a name not among them."""
        headers = {}
        if key := _api_key(api_key_env):
            headers["Authorization"] = f"Bearer {key}"
        self._client = httpx.Client(
            headers=headers,
            timeout=timeout,
            transport=http_deadline.transport(httpx.Limits(max_connections=concurrency)),
        )
        try:
            self.served_model, models = self._served_model()
            self.server_version = self._server_version()
            self.server = self._server_facts(models)
        except (RunFailed, BadInput):
            self._client.close()
            raise

    def loglikelihood(
        self, requests: Sequence[LoglikelihoodRequest], progress: Progress | None = None
    ) -> list[LoglikelihoodResult | FailedResult]:
        """Summed log-prob of each continuation, scored by the server over the whole prompt."""
        self._check_echo()
        return self._map(self._loglikelihood_one, requests, progress)

    def loglikelihood_rolling(
        self, requests: Sequence[RollingLoglikelihoodRequest], progress: Progress | None = None
    ) -> list[RollingResult | FailedResult]:
        """log P(text) of each text in one echo; the first token has no log-prob and is not
        counted, and a text longer than the server's context fails (the server says why)."""
        self._check_echo()
        return self._map(self._rolling_one, requests, progress)

    def generate(
        self, requests: Sequence[GenerateRequest], progress: Progress | None = None
    ) -> list[GenerateResult | FailedResult]:
        """Generate through /chat/completions (or /completions when chat=False)."""
        return self._map(self._generate_one, requests, progress)

    def fingerprint(self) -> RuntimeFingerprint:
        """The server and model that answered, and the settings that change results. The
        server computes, so its hardware path is what it says of its layout (parallel
        degrees, batching, prefix caching); its other facts are part of the build."""
        # Only a server that batches is probed: vLLM (one that reports its version). Others
        # (llama-cpp-python's server, chat-only APIs, judges) would only pay for the probe.
        if self._concurrency > 1 and self.server_version is not None and not self._batch_probed:
            self.server = self._probed(self.server)
            self._batch_probed = True
        server = self.server.record()
        return RuntimeFingerprint(
            name=self.name,
            version=self.server_version or "unknown",
            # Exactly constructor arguments, so a rerun can pass them back.
            params={
                "base_url": self.base_url,
                "model_name": self.model_name,
                "chat": self.chat,
                "model_sha256": self.model_sha256,
                "concurrency": self._concurrency,
                **self._declared,
            },
            hardware=HardwarePath(kernels=" ".join(filter(None, ("server", self.server.layout())))),
            build={"served_model": self.served_model} | ({"server": server} if server else {}),
        )

    def close(self) -> None:
        """Close the HTTP connections."""
        self._client.close()

    def _loglikelihood_one(
        self, request: LoglikelihoodRequest
    ) -> LoglikelihoodResult | FailedResult:
        prompt = request.context + request.continuation
        answer = self._post("completions", _echo_body(self.model_name, prompt))
        if isinstance(answer, FailedResult):
            return answer
        return _loglikelihood(_echo_entries(answer, prompt, self.base_url), request)

    def _rolling_one(self, request: RollingLoglikelihoodRequest) -> RollingResult | FailedResult:
        answer = self._post("completions", _echo_body(self.model_name, request.text))
        if isinstance(answer, FailedResult):
            return answer
        scored = [
            e.logprob
            for e in _between(
                _echo_entries(answer, request.text, self.base_url), 0, len(request.text)
            )
            if e.logprob is not None
        ]
        return RollingResult(logprob=math.fsum(scored), n_tokens=len(scored))

    def _generate_one(self, request: GenerateRequest) -> GenerateResult | FailedResult:
        body: dict[str, Any] = {
            "model": self.model_name,
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "top_p": request.top_p,
            "seed": request.seed,
        }
        # Not in OpenAI's API: sent only when set (llama-server and vLLM read both).
        body |= {k: v for k, v in (("top_k", request.top_k), ("min_p", request.min_p)) if v}
        if request.until:
            body["stop"] = list(request.until[:4])  # the OpenAI API takes at most four
        if request.messages and not self.chat:
            raise BadInput("openai: a conversation needs the chat endpoint (chat=true)")
        if self.chat:
            # The server applies the model's chat template.
            chat = request.messages or (("user", request.context),)
            body["messages"] = [{"role": role, "content": text} for role, text in chat]
        else:
            body["prompt"] = request.context
        answer = self._post("chat/completions" if self.chat else "completions", body)
        if isinstance(answer, FailedResult):
            return answer
        choice = answer["choices"][0]
        message = choice.get("message") or {}
        if message.get("refusal") or choice.get("finish_reason") == "content_filter":
            return FailedResult("refused", message.get("refusal") or "content filter")
        text = (message.get("content") if self.chat else choice.get("text")) or ""
        usage = answer.get("usage") or {}
        if overrun := _past_budget(text, usage.get("completion_tokens"), request.max_tokens):
            return FailedResult("error", f"server at {self.base_url} {overrun}")
        return GenerateResult(
            # Servers apply at most four stop strings: cut at every one.
            text=cut_at_stop(text, request.until)[0],
            n_tokens=usage.get("completion_tokens", 0),
            n_context_tokens=usage.get("prompt_tokens", 0),
            finish=_finish(choice),
        )

    def _check_echo(self) -> None:
        """Refuse a server whose echoed prompt log-probs are missing or misaligned.

        Generate one greedy token after a probe prompt, then echo the prompt with that token
        appended: the echoed token's log-prob must equal the one the server reported when it
        generated it.
        """
        if self._echo_checked:
            return
        try:
            self._probe_echo()
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise RunFailed(
                f"server at {self.base_url} answered the log-prob probe with a malformed "
                f"reply ({exc!r:.120})"
            ) from exc
        self._echo_checked = True

    def _probe_echo(self) -> None:
        generated = self._post(
            "completions",
            {
                "model": self.model_name,
                "prompt": _PROBE,
                "max_tokens": 1,
                "temperature": 0,
                "logprobs": 1,
            },
        )
        if isinstance(generated, FailedResult):
            raise RunFailed(f"server at {self.base_url}: {generated.message}")
        choice = generated["choices"][0]
        token = choice.get("text") or ""
        expected = ((choice.get("logprobs") or {}).get("token_logprobs") or [None])[0]
        if expected is None:
            raise RunFailed(_no_logprobs(self.base_url))
        prompt = _PROBE + token
        echoed = self._post("completions", _echo_body(self.model_name, prompt))
        if isinstance(echoed, FailedResult):
            raise RunFailed(f"server at {self.base_url}: {echoed.message}")
        found = _between(_echo_entries(echoed, prompt, self.base_url), len(_PROBE), len(prompt))
        # A token that re-tokenises differently inside the prompt cannot be compared.
        echoed_logprob = found[0].logprob if len(found) == 1 else None
        if echoed_logprob is not None and abs(echoed_logprob - expected) > _PROBE_TOLERANCE:
            raise RunFailed(
                f"server at {self.base_url} returned echoed log-probs that do not line up "
                f"with its tokens ({found[0].token!r}: {echoed_logprob:.3f} echoed, "
                f"{expected:.3f} generated); llama-cpp-python's server shifts them by one "
                "position for models without a BOS token: use vLLM, or the llama_cpp or hf "
                "backend"
            )

    def _map(
        self,
        one: Callable[[Req], Res],
        requests: Sequence[Req],
        progress: Progress | None,
    ) -> list[Res | FailedResult]:
        """Run `one` over the requests on `concurrency` threads; results in request order."""
        results: list[Res | FailedResult | None] = [None] * len(requests)
        with ThreadPoolExecutor(self._concurrency) as pool:
            futures = {
                pool.submit(_guarded, one, request, self.base_url): i
                for i, request in enumerate(requests)
            }
            try:
                for future in as_completed(futures):
                    results[futures[future]] = future.result()
                    if progress:
                        progress(1)
            except BaseException:
                pool.shutdown(cancel_futures=True)
                raise
        return [r for r in results if r is not None]

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any] | FailedResult:
        if not self._cache_prompt_field:
            return self._call("POST", f"{self.base_url}/{path}", body)
        answer = self._call("POST", f"{self.base_url}/{path}", {**body, "cache_prompt": False})
        if isinstance(answer, FailedResult) and "cache_prompt" in answer.message:
            self._cache_prompt_field = False
            return self._call("POST", f"{self.base_url}/{path}", body)
        return answer

    def _call(
        self, method: str, url: str, body: dict[str, Any] | None = None
    ) -> dict[str, Any] | FailedResult:
        """One API call with retries on connection errors, 429 and 5xx (exponential backoff
        with jitter). A request-level failure comes back typed; a server that rejects every
        request (401, 403, 404) raises RunFailed."""
        failure = FailedResult("error", f"no answer from {url}")
        retry_after: float | None = None
        for attempt in range(self._max_retries + 1):
            if attempt:
                time.sleep(_backoff(attempt, retry_after))
            try:
                response = self._request(method, url, body)
            except (httpx.ReadTimeout, httpx.WriteTimeout, httpx.PoolTimeout):
                return FailedResult("timeout", f"no answer from {url} within {self._timeout} s")
            except http_deadline.ReplyTooLarge as exc:
                return FailedResult("error", f"{url}: {exc}")
            except httpx.TransportError as exc:
                failure = FailedResult("error", f"cannot reach {url}: {_reason(exc)}")
                continue
            if response.status_code == 429 or response.status_code >= 500:
                failure = FailedResult(
                    "error", f"HTTP {response.status_code} from {url}: {_message(response)}"
                )
                header = response.headers.get("retry-after", "")
                retry_after = float(header) if header.isdigit() else None
                continue
            if response.status_code in (401, 403, 404):
                raise RunFailed(f"{url} answered HTTP {response.status_code}: {_message(response)}")
            if response.is_error:
                return FailedResult(
                    "error", f"HTTP {response.status_code} from {url}: {_message(response)}"
                )
            try:
                answer = response.json()
            except ValueError:
                return FailedResult("error", f"{url} answered with something other than JSON")
            if method == "POST" and not (isinstance(answer, dict) and answer.get("choices")):
                return FailedResult("error", f"{url} answered without choices: {answer!s:.200}")
            return cast("dict[str, Any]", answer)  # a GET's answer: its caller reads it
        return failure

    def _request(self, method: str, url: str, body: dict[str, Any] | None) -> httpx.Response:
        """One HTTP exchange that ends by `timeout` overall, connecting, headers and body
        together: httpx's own timeouts bound each read, so a server trickling a byte a second
        would otherwise never time out."""
        with (
            http_deadline.deadline(self._timeout),
            self._client.stream(method, url, json=body) as response,
        ):
            return http_deadline.read_at_most(response, MAX_REPLY_BYTES)

    def _served_model(self) -> tuple[str, dict[str, Any]]:
        """The served model's id and the whole reply of GET /models (raises RunFailed if the
        server is down)."""
        answer = self._call("GET", f"{self.base_url}/models")
        if isinstance(answer, FailedResult):
            raise RunFailed(answer.message)
        data = answer.get("data") if isinstance(answer, dict) else None
        ids = [m.get("id", "") for m in data or [] if isinstance(m, dict)]
        self.listed = tuple(ids)
        if self.model_name in ids or len(ids) != 1:
            return self.model_name, answer
        return ids[0], answer

    def _server_version(self) -> str | None:
        """vLLM reports its version at <root>/version; most other servers report none."""
        answer = self._small_json("version")
        version = answer.get("version") if isinstance(answer, dict) else None
        return None if version is None else str(version)

    def _server_facts(self, models: dict[str, Any]) -> ServerFacts:
        """What the server reports of its compute path, joined with what the user declared.

        A vLLM server (one that reports a version) is asked for one token, whose reply
        carries its `system_fingerprint`, and for its /metrics; any other server for
        llama-server's /props. A server that answers none of these reports nothing."""
        reported = [server_facts.from_models(models, self.served_model)]
        if self.server_version is not None:
            reply = self._post(
                "completions",
                {"model": self.model_name, "prompt": _PROBE, "max_tokens": 1, "temperature": 0},
            )
            if isinstance(reply, dict):
                reported.append(
                    server_facts.from_system_fingerprint(reply.get("system_fingerprint"))
                )
            metrics = self._small_get("metrics", _METRICS_BYTES)
            reported.append(server_facts.from_metrics(metrics.text if metrics else None))
        else:
            reported.append(server_facts.from_props(self._small_json("props")))
        return server_facts.combine(reported, self._declared, self.base_url)

    def _probed(self, facts: ServerFacts) -> ServerFacts:
        """`facts` with what `batch_probe` measured. A batch-dependent server's results
        depend on the run's concurrency, which is then recorded with them; an invariant one
        (or one that gives no log-probs to compare) records nothing, so runs at any
        concurrency share one compute path."""
        try:
            dependent = batch_probe.batch_dependent(
                lambda body: self._post("completions", body), self.model_name, self._concurrency
            )
        except RunFailed:  # a chat-only server: no completions endpoint to probe
            dependent = None
        if not dependent:
            return facts
        return replace(facts, batch_dependent=True, concurrency=self._concurrency)

    def _small_get(self, path: str, limit: int = _VERSION_BYTES) -> httpx.Response | None:
        """GET <origin>/<path> (outside /v1), read up to `limit` bytes within 5 seconds; None
        when the server does not answer it with success."""
        origin = self.base_url.removesuffix("/v1")
        try:
            with (
                http_deadline.deadline(min(self._timeout, 5.0)),
                self._client.stream("GET", f"{origin}/{path}") as streamed,
            ):
                response = http_deadline.read_at_most(streamed, limit)
        except httpx.HTTPError:  # ReplyTooLarge is one
            return None
        return response if response.is_success else None

    def _small_json(self, path: str) -> object:
        """`_small_get`'s reply as JSON; None when there is none."""
        response = self._small_get(path)
        try:
            return response.json() if response is not None else None
        except ValueError:
            return None


def _guarded(one: Callable[[Req], Res], request: Req, base_url: str) -> Res | FailedResult:
    """Run one request; an answer of the wrong shape (valid JSON, but not what the OpenAI
    API returns) is that request's typed failure, not a crash of the whole run."""
    try:
        return one(request)
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
        return FailedResult("error", f"server at {base_url} sent a malformed answer ({exc!r:.120})")


def _backoff(attempt: int, retry_after: float | None) -> float:
    """Seconds to wait before retry `attempt`: the server's Retry-After, else full jitter."""
    if retry_after is not None:
        return min(retry_after, _BACKOFF_CAP_S)
    return random.uniform(0, min(_BACKOFF_CAP_S, _BACKOFF_BASE_S * 2**attempt))


def _echo_body(model: str, prompt: str) -> dict[str, Any]:
    # max_tokens=0 means "no limit" to llama-cpp-python, so ask for one token and drop it.
    return {
        "model": model,
        "prompt": prompt,
        "max_tokens": 1,
        "temperature": 0,
        "logprobs": 1,
        "echo": True,
    }


def _echo_entries(answer: dict[str, Any], prompt: str, base_url: str) -> list[_Entry]:
    """The echoed tokens, with offsets counted from the prompt's first character."""
    choice = answer["choices"][0]
    logprobs = choice.get("logprobs") or {}
    offsets = logprobs.get("text_offset")
    values = logprobs.get("token_logprobs")
    n_prompt = (answer.get("usage") or {}).get("prompt_tokens", 0)
    # Without echo the text is only the generated part; without prompt log-probs there are
    # fewer entries than prompt tokens (less one: some servers drop the BOS entry).
    if (
        not offsets
        or not values
        or not (choice.get("text") or "").startswith(prompt)
        or len(values) < n_prompt - 1
    ):
        raise RunFailed(_no_logprobs(base_url))
    tokens = logprobs.get("tokens") or [""] * len(values)
    tops = logprobs.get("top_logprobs") or [None] * len(values)
    if not len(offsets) == len(values) == len(tokens) == len(tops):
        raise RunFailed(f"server at {base_url} returned logprobs lists of different lengths")
    # vLLM counts offsets over the decoded tokens, so an echoed BOS (`<s>`) that is not in
    # the prompt text moves every later offset by its length.
    base = offsets[0]
    if tokens[0] and not prompt.startswith(tokens[0]):
        base += len(tokens[0])
    return [
        _Entry(offset - base, token, value, top)
        for offset, token, value, top in zip(offsets, tokens, values, tops, strict=True)
    ]


def _loglikelihood(
    entries: Sequence[_Entry], request: LoglikelihoodRequest
) -> LoglikelihoodResult | FailedResult:
    """Score the continuation's echoed tokens: those starting at or after the end of the
    context (whose trailing spaces belong to the continuation, as in encoding.encode_pair)."""
    split = len(request.context.rstrip())
    continuation = _between(entries, split, len(request.context + request.continuation))
    if any(e.logprob is None for e in continuation):
        return FailedResult("error", "the server gave no log-prob for the first prompt token")
    return LoglikelihoodResult(
        logprob=math.fsum(e.logprob for e in continuation if e.logprob is not None),
        is_greedy=all(_is_top(e) for e in continuation),
        n_tokens=len(continuation),
        n_context_tokens=sum(e.offset < split for e in entries),
    )


def _between(entries: Sequence[_Entry], start: int, end: int) -> list[_Entry]:
    """Entries whose text starts in [start, end) of the prompt."""
    return [e for e in entries if start <= e.offset < end]


def _is_top(entry: _Entry) -> bool:
    """Whether greedy decoding picks this token (a tie counts as greedy, as in lm-eval)."""
    if entry.logprob is None or not entry.top:
        return False
    return entry.logprob >= max(entry.top.values())


def _past_budget(text: str, reported: Any, max_tokens: int) -> str | None:
    """Why a reply overran its request's `max_tokens` (the count the server reported, or a
    text longer than that many tokens can be), or None. vLLM and llama-server stop at
    max_tokens, so a longer reply is an error of that request, not an answer to score."""
    if isinstance(reported, int) and not isinstance(reported, bool) and reported > max_tokens:
        return f"generated {reported:,} tokens for a request of max_tokens {max_tokens}"
    if len(text) > max_tokens * MAX_TOKEN_CHARS:
        return (
            f"sent {len(text):,} characters for a request of max_tokens {max_tokens} (at most "
            f"{MAX_TOKEN_CHARS} per token)"
        )
    return None


def _finish(choice: dict[str, Any]) -> Finish:
    """Why the server stopped: `length`; vLLM names the matched stop string in `stop_reason`
    (None for end of sequence); llama-server says `stop` for both, which stays `unknown`."""
    reason = choice.get("finish_reason")
    if reason == "length":
        return "length"
    if reason == "stop" and "stop_reason" in choice:
        return "eos" if choice["stop_reason"] is None else "stop"
    return "unknown"


def _declared(**facts: Any) -> dict[str, Any]:
    """The server facts the user declared, type-checked (None or '' is undeclared)."""
    kinds: dict[str, type] = {"dtype": str, "prefix_caching": bool, "batch_invariant": bool}
    declared = {}
    for name, value in facts.items():
        if value is None or value == "":
            continue
        kind = kinds.get(name, int)
        if kind is int:
            setting(name, value, int, 1)
        elif not isinstance(value, kind):
            raise BadInput(f"--model-args: {name} must be {kind.__name__}, got {value!r:.40}")
        declared[name] = value
    return declared


def _api_root(base_url: str) -> str:
    """Accept a root (…/v1) or a full endpoint URL, as lm-eval's base_url is."""
    url = base_url.rstrip("/")
    for endpoint in ("/chat/completions", "/completions"):
        url = url.removesuffix(endpoint)
    return url


def _api_key(env_name: str | None) -> str | None:
    if env_name is None:
        return os.environ.get("OPENAI_API_KEY")
    if env_name not in os.environ:
        raise BadInput(f"openai: api_key_env names {env_name}, which is not set")
    return os.environ[env_name]


def _message(response: httpx.Response) -> str:
    """The server's own error message (OpenAI's error.message, FastAPI's detail, or text)."""
    try:
        data = response.json()
    except ValueError:
        return response.text.strip()[:300] or response.reason_phrase
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        if error or data.get("detail"):
            return str(error or data["detail"])
    return str(data)[:300]


def _reason(exc: httpx.TransportError) -> str:
    text = str(exc)
    return "connection refused" if "refused" in text.lower() else text or type(exc).__name__


def _no_logprobs(base_url: str) -> str:
    return (
        f"server at {base_url} returned no logprobs for the prompt; loglikelihood needs a "
        "completions endpoint with echo+logprobs (vLLM, llama-cpp-python's server with "
        "logits_all; llama.cpp's llama-server has none)"
    )
