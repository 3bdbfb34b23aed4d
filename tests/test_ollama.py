"""`regress bench --backend ollama` and generation through Ollama's OpenAI-compatible API,
against a scripted server that replays Ollama's documented responses (no Ollama binary can be
installed here): docs/api.md and docs/api/{streaming,errors,openai-compatibility}.mdx of
ollama/ollama. Its `/api/generate` streams one NDJSON object per token and a final `done: true`
object with `total_duration`, `load_duration`, `prompt_eval_count`, `prompt_eval_duration`,
`eval_count` and `eval_duration` (nanoseconds, timed by the server); errors come as
`{"error": ...}`, mid-stream too; `/v1/completions` takes neither `echo` nor `logprobs`."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from regress.backends import load_backend
from regress.bench.ollama import api_root, engine_timing
from regress.cli import cli
from regress.core.errors import RunFailed
from regress.core.requests import GenerateRequest, LoglikelihoodRequest

MODEL = "smollm2:135m"
CREATED = "2023-08-04T19:22:45.499127Z"
TOKEN_SECONDS = 0.002


@dataclass
class Script:
    """How the scripted server behaves, and what it was sent and answered."""

    eos_after: int | None = None
    """Stop (done_reason "stop") after this many tokens, before num_predict."""
    drop: str | None = None
    """A figure left out of the final object."""
    reported_eval_count: int | None = None
    """An eval_count other than the tokens streamed."""
    error_after: int | None = None
    """Stream this many tokens, then Ollama's mid-stream error object."""
    last_token_in_final: bool = False
    """Put the last token's text in the final object (docs/api/streaming.mdx)."""
    requests: list[dict[str, Any]] = field(default_factory=list)
    finals: list[dict[str, Any]] = field(default_factory=list)
    loaded: bool = False


def _words(prompt: str) -> int:
    return len(prompt.split())


class _Handler(BaseHTTPRequestHandler):
    script: Script

    def log_message(self, *_: object) -> None:
        pass

    def _json(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _not_found(self) -> None:
        # Ollama's router answers an unknown path as Go's default handler does.
        data = b"404 page not found"
        self.send_response(404)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/api/version":
            self._json(200, {"version": "0.5.1"})
        elif self.path == "/v1/models":
            model = {"id": MODEL, "object": "model", "created": 1691178165, "owned_by": "library"}
            self._json(200, {"object": "list", "data": [model]})
        else:
            self._not_found()

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.script.requests.append({"path": self.path, **body})
        if body.get("model") != MODEL:
            self._json(404, {"error": f"model '{body.get('model')}' not found"})
        elif self.path == "/api/generate":
            self._generate(body)
        elif self.path == "/v1/chat/completions":
            text = f"reply to {body['messages'][-1]['content']}"
            self._openai(
                body, "chat.completion", {"message": {"role": "assistant", "content": text}}
            )
        elif self.path == "/v1/completions":
            # `echo` and `logprobs` are not supported: the generated text only, no log-probs.
            self._openai(body, "text_completion", {"text": f"completion of {body['prompt']}"})
        else:
            self._not_found()

    def _openai(self, body: dict[str, Any], kind: str, choice: dict[str, Any]) -> None:
        prompt = body["messages"][-1]["content"] if "messages" in body else body["prompt"]
        self._json(
            200,
            {
                "id": "chatcmpl-123" if kind == "chat.completion" else "cmpl-123",
                "object": kind,
                "created": 1691178165,
                "model": MODEL,
                "system_fingerprint": "fp_ollama",
                "choices": [{"index": 0, **choice, "finish_reason": "stop"}],
                "usage": {
                    "prompt_tokens": _words(prompt),
                    "completion_tokens": 3,
                    "total_tokens": 0,
                },
            },
        )

    def _generate(self, body: dict[str, Any]) -> None:
        script = self.script
        start = time.perf_counter_ns()
        # The first request loads the model (a cold load), the rest find it in memory.
        load = 0 if script.loaded else 50_000_000
        script.loaded = True
        time.sleep(load / 1e9)
        limit = body["options"]["num_predict"]
        n = limit if script.eos_after is None else min(limit, script.eos_after)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.end_headers()
        prompt_start = time.perf_counter_ns()
        time.sleep(0.001)
        prompt_ns = time.perf_counter_ns() - prompt_start
        eval_start = time.perf_counter_ns()
        streamed = n - 1 if script.last_token_in_final else n
        for i in range(streamed):
            if script.error_after is not None and i == script.error_after:
                self._line({"error": "an error was encountered while running the model"})
                return
            time.sleep(TOKEN_SECONDS)
            self._line({"model": MODEL, "created_at": CREATED, "response": f" w{i}", "done": False})
        if script.last_token_in_final:
            time.sleep(TOKEN_SECONDS)
        eval_ns = time.perf_counter_ns() - eval_start
        final = {
            "model": MODEL,
            "created_at": CREATED,
            "response": f" w{n - 1}" if script.last_token_in_final else "",
            "done": True,
            "done_reason": "length" if n == limit else "stop",
            "context": [1, 2, 3],
            "total_duration": time.perf_counter_ns() - start,
            "load_duration": load,
            "prompt_eval_count": _words(body["prompt"]),
            "prompt_eval_duration": prompt_ns,
            "eval_count": n if script.reported_eval_count is None else script.reported_eval_count,
            "eval_duration": eval_ns,
        }
        if script.drop:
            del final[script.drop]
        script.finals.append(final)
        self._line(final)

    def _line(self, obj: dict[str, Any]) -> None:
        self.wfile.write(json.dumps(obj).encode() + b"\n")
        self.wfile.flush()


@pytest.fixture
def ollama() -> Iterator[tuple[str, Script]]:
    script = Script()
    handler = type("Handler", (_Handler,), {"script": script})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", script
    finally:
        server.shutdown()
        server.server_close()


PROMPTS = ("What is the capital of France?", "Write one sentence about the sea.")


def _bench(
    url: str, tmp: Path, *extra: str, output_len: int = 6
) -> tuple[int, str, dict[str, Any]]:
    (tmp / "prompts.txt").write_text("\n".join(PROMPTS) + "\n")
    args = [
        "bench", "--backend", "ollama", "-m", MODEL, "--model-args", f"base_url={url}/v1",
        "--prompts", str(tmp / "prompts.txt"), "--output-len", str(output_len),
        "--num-requests", "4", "-o", str(tmp / "bench.json"), "-o", str(tmp / "bench.md"),
        "-o", str(tmp / "bench.jsonl"), *extra,
    ]  # fmt: skip
    done = CliRunner().invoke(cli, args)
    path = tmp / "bench.json"
    return done.exit_code, done.output, json.loads(path.read_text()) if path.exists() else {}


def test_bench_keeps_ollamas_own_timings_beside_the_clients(
    ollama: tuple[str, Script], tmp_path: Path
) -> None:
    url, script = ollama
    code, output, run = _bench(url, tmp_path, "--concurrency", "1,2")
    assert code == 0, output
    # Every request went to the native API, raw, greedy, with the output limit.
    assert {r["path"] for r in script.requests} == {"/api/generate"}
    assert all(r["raw"] is True and r["stream"] is True for r in script.requests)
    assert all(r["options"]["num_predict"] == 6 for r in script.requests)
    assert all(r["options"]["temperature"] == 0 for r in script.requests)
    assert len(script.requests) == 1 + 4 + 4  # a warm-up, then two levels of four
    (result,) = run["results"]
    assert result["fingerprint"]["name"] == "ollama"
    assert result["fingerprint"]["version"] == "0.5.1"
    assert result["fingerprint"]["params"]["base_url"] == url  # the API root, /v1 dropped
    engine = result["engine"]
    assert engine["first_load_ms"] == script.finals[0]["load_duration"] / 1e6 == 50.0
    figures = ("total_duration", "load_duration", "prompt_eval_count", "prompt_eval_duration",
               "eval_count", "eval_duration")  # fmt: skip
    for i, level in enumerate(engine["levels"]):
        assert level["concurrency"] == (1, 2)[i]
        sent = script.finals[1 + 4 * i : 5 + 4 * i]
        # The server's figures, unchanged (a level's requests in the order they finished).
        key = lambda t: tuple(t[f] for f in figures)  # noqa: E731
        assert sorted(map(key, level["requests"])) == sorted(map(key, sent))
        rates = [t["eval_count"] * 1e9 / t["eval_duration"] for t in sent]
        assert level["eval_ts"]["mean"] == pytest.approx(sum(rates) / len(rates))
        assert level["eval_ts"]["n"] == 4
    for level in result["serving"]:
        assert level["failed"] == 0 and level["usage_flagged"] == 0
        assert [r["output_tokens"] for r in level["latency"]["requests"]] == [6] * 4
        assert {r["prompt_tokens"] for r in level["latency"]["requests"]} == {6}
    markdown = (tmp_path / "bench.md").read_text()
    assert "6 output tokens at most" in markdown
    assert "As Ollama timed them" in markdown and "| smollm2:135m | 0.5.1 | 50.0 |" in markdown
    rows = [json.loads(line) for line in (tmp_path / "bench.jsonl").read_text().splitlines()]
    measured = [
        (r["measurement"], r.get("concurrency")) for r in rows if "ollama" in r["measurement"]
    ]
    assert measured == [("ollama_prompt_ts", 1), ("ollama_eval_ts", 1), ("ollama_prompt_ts", 2),
                        ("ollama_eval_ts", 2)]  # fmt: skip


def test_an_early_end_of_sequence_and_a_last_token_in_the_final_object(
    ollama: tuple[str, Script], tmp_path: Path
) -> None:
    """Ollama cannot ignore the end of sequence: a request that stops at 3 of 6 tokens counts
    3; a final object that carries the last token's text counts it as a token."""
    url, script = ollama
    script.eos_after = 3
    script.last_token_in_final = True
    code, output, run = _bench(url, tmp_path)
    assert code == 0, output
    (level,) = run["results"][0]["serving"]
    assert [r["output_tokens"] for r in level["latency"]["requests"]] == [3] * 4
    assert all(len(r["itl_ms"]) == 2 for r in level["latency"]["requests"])
    assert level["usage_flagged"] == 0
    assert {f["done_reason"] for f in script.finals} == {"stop"}


def test_a_count_that_disagrees_with_the_stream_is_flagged(
    ollama: tuple[str, Script], tmp_path: Path
) -> None:
    url, script = ollama
    script.reported_eval_count = 100
    code, output, run = _bench(url, tmp_path)
    assert code == 0, output
    (level,) = run["results"][0]["serving"]
    assert level["usage_flagged"] == 4
    assert [r["output_tokens"] for r in level["latency"]["requests"]] == [6] * 4


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"drop": "eval_duration"}, "ollama reported eval_duration None"),
        ({"error_after": 2}, "ollama: an error was encountered while running the model"),
    ],
)
def test_a_broken_request_fails_with_ollamas_reason(
    ollama: tuple[str, Script], tmp_path: Path, change: dict[str, Any], says: str
) -> None:
    url, script = ollama
    for name, value in change.items():
        setattr(script, name, value)
    code, output, _ = _bench(url, tmp_path)
    assert code == 3, output
    assert "the first request failed" in output and says in output


def test_a_model_ollama_lacks_and_a_server_that_is_not_ollama(
    ollama: tuple[str, Script], tmp_path: Path
) -> None:
    url, _ = ollama
    args = ["bench", "--backend", "ollama", "--output-len", "4", "--num-requests", "1"]
    done = CliRunner().invoke(cli, [*args, "-m", "llama9:1b", "--model-args", f"base_url={url}"])
    assert done.exit_code == 3, done.output
    assert "model 'llama9:1b' not found" in done.output
    done = CliRunner().invoke(
        cli, [*args, "-m", MODEL, "--model-args", f"base_url={url}/not-ollama"]
    )
    assert done.exit_code == 2, done.output
    assert "is this Ollama?" in done.output or "no server answers" in done.output


def test_engine_timing_reads_the_documented_final_object() -> None:
    """docs/api.md's final streamed object, as printed there."""
    final = {
        "model": "llama3.2", "created_at": "2023-08-04T19:22:45.499127Z", "response": "",
        "done": True, "context": [1, 2, 3], "total_duration": 10706818083,
        "load_duration": 6338219291, "prompt_eval_count": 26, "prompt_eval_duration": 130079000,
        "eval_count": 259, "eval_duration": 4232710000,
    }  # fmt: skip
    timing = engine_timing(final)
    assert timing.eval_ts == 259 / 4232710000 * 1e9  # the docs' own formula
    assert timing.prompt_ts == 26 / 130079000 * 1e9
    for bad in (-1, 1.5, "259", True, None):
        with pytest.raises(RuntimeError, match="eval_count"):
            engine_timing({**final, "eval_count": bad})
    assert api_root("http://127.0.0.1:11434/v1/") == "http://127.0.0.1:11434"


def test_generation_through_ollamas_openai_compatible_api(ollama: tuple[str, Script]) -> None:
    """The openai backend generates through Ollama's /v1 endpoints as they are, and refuses
    log-likelihood tasks in one line: Ollama's /v1/completions has no echo or logprobs."""
    url, script = ollama
    backend: Any = load_backend("openai", MODEL, {"base_url": f"{url}/v1"})
    try:
        (chat,) = backend.generate([GenerateRequest("2 + 2 =", until=("\n",), max_tokens=8)])
        assert chat.text == "reply to 2 + 2 ="
        assert (chat.n_tokens, chat.n_context_tokens) == (3, 4)  # the usage Ollama reported
        sent = [r for r in script.requests if r["path"] == "/v1/chat/completions"]
        assert sent[-1]["messages"] == [{"role": "user", "content": "2 + 2 ="}]
        assert sent[-1]["max_tokens"] == 8 and sent[-1]["stop"] == ["\n"]
        with pytest.raises(RunFailed, match="log"):
            backend.loglikelihood([LoglikelihoodRequest("The sky is", " blue")])
    finally:
        backend.close()
    plain: Any = load_backend("openai", MODEL, {"base_url": f"{url}/v1", "chat": False})
    try:
        (text,) = plain.generate([GenerateRequest("2 + 2 =", max_tokens=8)])
        assert text.text == "completion of 2 + 2 ="
    finally:
        plain.close()
