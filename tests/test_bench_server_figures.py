"""`regress bench` against a server does not take the server's own figures on trust: a token
count that is no whole number fails the request, one that disagrees with what was streamed is
replaced by the streamed count and flagged. A scripted server on 127.0.0.1 plays the liar."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from regress.bench.serving import ServingOptions, output_tokens, run_serving

CHUNKS = 8


def test_output_tokens_believes_only_what_the_stream_supports() -> None:
    assert output_tokens({"completion_tokens": 8}, 8) == (8, False)
    assert output_tokens({"completion_tokens": 7}, 8) == (7, False)  # the closing chunk
    assert output_tokens({"completion_tokens": 32}, 8) == (32, False)  # merged chunks
    assert output_tokens({}, 8) == (8, False)
    assert output_tokens({"completion_tokens": 1_000_000}, 8) == (8, True)
    assert output_tokens({"completion_tokens": 2}, 8) == (8, True)
    for usage in ({"completion_tokens": -209}, {"prompt_tokens": -1}, {"completion_tokens": 2.5}):
        with pytest.raises(RuntimeError, match="the server reported"):
            output_tokens(usage, 8)


def _server(usage: dict[str, object] | None) -> type[BaseHTTPRequestHandler]:
    """A streaming server reporting `usage`; with None, a stream that never ends."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            while usage is None:
                chunk = {"choices": [{"text": "t", "finish_reason": None}]}
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                time.sleep(0.05)
            for i in range(CHUNKS):
                chunk = {"choices": [{"text": f"t{i}", "finish_reason": None}]}
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.write(f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")

    return Handler


@pytest.fixture
def serve() -> Iterator:
    servers = []

    def start(usage: dict[str, object] | None) -> str:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _server(usage))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}/v1"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def _level(url: str, timeout_s: float = 10):
    options = ServingOptions(
        url, "m", ("hi",), output_len=CHUNKS, num_requests=3, timeout_s=timeout_s
    )
    (level,) = run_serving(options)
    return level


def test_an_inflated_count_is_replaced_by_the_streamed_one_and_flagged(serve) -> None:
    honest = _level(serve({"prompt_tokens": 2, "completion_tokens": CHUNKS}))
    assert honest.usage_flagged == 0 and honest.failed == 0
    lying = _level(serve({"prompt_tokens": 2, "completion_tokens": 1_000_000}))
    assert lying.usage_flagged == 3 and lying.failed == 0
    assert [r.output_tokens for r in lying.latency.requests] == [CHUNKS] * 3
    # Throughput is counted from the streamed tokens: no 31.7 M tok/s from eight chunks.
    ratio = lying.latency.output_throughput / lying.latency.request_throughput
    assert ratio == pytest.approx(CHUNKS)


def test_a_negative_count_fails_the_request(serve) -> None:
    level = _level(serve({"prompt_tokens": 2, "completion_tokens": -209}))
    assert level.failed == 3 and level.latency.requests == ()
    assert "the server reported completion_tokens -209" in level.errors[0]


def test_a_stream_that_never_ends_is_cut_at_the_request_deadline(serve) -> None:
    # Every chunk arrives well within httpx's per-read timeout; only the wall clock ends it.
    start = time.monotonic()
    level = _level(serve(None), timeout_s=0.5)
    assert level.failed == 3 and level.latency.requests == ()
    assert level.errors[0] == "timeout: no complete answer within 0.5 s"
    # The warm-up and three requests at concurrency 1, each cut at 0.5 s.
    assert time.monotonic() - start < 4.0
