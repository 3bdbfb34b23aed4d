"""A bound on every input of issue #47's probe: conversation turns and set files, a regex's
compiled size, what one template call may build, and a server's reply (its bytes and its
tokens). Each probe once took gigabytes or minutes; here each is refused at once. Probes
that would exhaust the machine on unbounded code run in a child with a 2 GB address space
and a timeout, so a regression fails the test instead of the machine."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from click.testing import CliRunner

from regress.backends import openai
from regress.backends.openai import OpenAIBackend
from regress.bench import serving
from regress.bench.serving import ServingOptions, run_serving
from regress.cli import cli
from regress.core import safe_regex
from regress.core.errors import BadInput
from regress.core.requests import FailedResult, GenerateRequest, GenerateResult
from regress.tasks import golden, templates
from regress.tasks.base import DataSource
from regress.tasks.conversation import MAX_TURNS, conversation_task, read_conversations

LIMIT_BYTES = 2 << 30
"""The probe's bound: no input may make regress take more than 2 GB..."""
LIMIT_SECONDS = 60
"""...or run longer than a minute."""


def _bounded_child(code: str) -> subprocess.CompletedProcess[str]:
    """Run `code` in a Python child limited to LIMIT_BYTES of address space and
    LIMIT_SECONDS; its output, whatever happened."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (LIMIT_BYTES, LIMIT_BYTES))

    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=LIMIT_SECONDS,
        preexec_fn=limit,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
    )


# --- regular expressions: measured before they compile --------------------------------

BOMBS = [
    "(?:(?:a{1000}){1000}){1000}",  # 27 characters, 10^9 copies: 5.6 GB in the probe
    "((a{100}){100}){100}",
    "(?:[a-z]{200}|b){5000}",
    "a{100001}",
]


@pytest.mark.parametrize("pattern", BOMBS)
def test_a_regex_whose_repeats_multiply_out_is_refused_before_it_compiles(pattern: str) -> None:
    code = f"""
import time
from regress.core import safe_regex
from regress.core.errors import BadInput
start = time.monotonic()
try:
    safe_regex.check({pattern!r}, "item 1: regex")
    print("compiled")
except BadInput as exc:
    print(exc)
except MemoryError:
    print("MemoryError")
print(time.monotonic() - start)
"""
    done = _bounded_child(code)
    message, seconds = done.stdout.splitlines()
    assert message.startswith(f"item 1: regex pattern {pattern!r} is too large to compile")
    assert f"more than {safe_regex.MAX_PROGRAM:,} atoms" in message
    assert float(seconds) < 0.5


def test_a_golden_set_with_such_a_regex_is_bad_input(tmp_path: Path) -> None:
    # The smallest bomb: unbounded code compiles it in 30 MB, so this runs in-process.
    path = tmp_path / "set.jsonl"
    item = {"id": "x", "input": "Q:", "expected": BOMBS[-1], "match": "regex"}
    path.write_text(json.dumps(item) + "\n", encoding="utf-8")
    with pytest.raises(BadInput, match=r"item 1: regex pattern .* is too large to compile"):
        golden.read_golden(path)


def test_the_size_counts_every_copy_a_repeat_makes() -> None:
    assert safe_regex.program_size("abc") == 3
    assert safe_regex.program_size(r"\d{4}-\d{2}") == 4 + 1 + 2
    assert safe_regex.program_size("(?:ab){10}") == 10 * (2 + 2 + 1)  # "?:", "ab", the group
    assert safe_regex.program_size("[{]{3}") == 3  # a brace in a class is no repeat
    assert safe_regex.program_size("a{,5}x{2,}") == 5 + 2
    assert safe_regex.program_size(BOMBS[0]) > safe_regex.MAX_PROGRAM


def test_patterns_users_write_keep_their_meaning() -> None:
    # `regex` reads \w, \d and \b as Unicode, as `re` does (RE2 would read them as ASCII).
    assert safe_regex.search(r"\w+", "café au lait")[0] == "café"
    assert safe_regex.search(r"\d+", "٣٤ apples")[0] == "٣٤"
    assert safe_regex.search(r"\bParis\b", "It is paris.", ignore_case=True)
    assert safe_regex.search(r"(?<=#### )\d+", "so #### 42")[0] == "42"  # lookbehind
    assert safe_regex.search(r"(\w)\1", "book")[0] == "oo"  # backreference
    assert safe_regex.sub(r"\s+", " ", "a \n b") == "a b"
    assert safe_regex.search("a{20000}", "a" * 20000)  # at the limit: allowed
    with pytest.raises(BadInput, match="is not a regex"):
        safe_regex.search("(", "text")


# --- conversations: turns and set files ------------------------------------------------


def _conversation(turns: int) -> dict:
    return {
        "id": "long",
        "turns": [{"user": "a"}] * (turns - 1) + [{"user": "a", "check": {"expected": "b"}}],
    }


def test_a_conversation_of_a_hundred_thousand_turns_is_refused_at_once(tmp_path: Path) -> None:
    """The probe: one 2.2 MB conversation of 10^5 turns made `regress tasks` reach 21 GiB
    (each turn's request held every earlier message). Now one line, exit 2."""
    path = tmp_path / "conv_long.jsonl"
    path.write_text(json.dumps(_conversation(100_000)) + "\n", encoding="utf-8")
    code = f"""
import sys
from regress.cli import cli
sys.argv = ["regress", "tasks", "--golden", {str(path)!r}, "conv_long"]
cli()
"""
    start = time.monotonic()
    done = _bounded_child(code)
    assert done.returncode == 2, done.stderr[-500:]
    assert done.stderr.strip() == (
        f"regress: error: {path}: item 1: 100,000 turns, more than the {MAX_TURNS} a "
        "conversation may have"
    )
    assert time.monotonic() - start < 10


def test_the_longest_conversation_allowed_shares_its_messages(tmp_path: Path) -> None:
    path = tmp_path / "conv_long.jsonl"
    path.write_text(json.dumps(_conversation(MAX_TURNS)) + "\n", encoding="utf-8")
    (example,) = conversation_task(path).examples(DataSource())
    requests = example.requests
    assert len(requests) == MAX_TURNS
    assert [len(r.messages) for r in requests] == [2 * t + 1 for t in range(MAX_TURNS)]
    last = requests[-1].messages
    for request in requests:
        # Each turn's history is the start of the last turn's, the same message objects.
        assert all(a is b for a, b in zip(request.messages, last, strict=False))
    with pytest.raises(BadInput, match=f"{MAX_TURNS + 1} turns, more than the {MAX_TURNS}"):
        path.write_text(json.dumps(_conversation(MAX_TURNS + 1)) + "\n", encoding="utf-8")
        read_conversations(path)


@pytest.mark.parametrize("kind", ["golden", "conversation"])
def test_a_set_file_larger_than_a_set_may_be_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    monkeypatch.setattr(golden, "MAX_SET_BYTES", 4096)
    path = tmp_path / "big.jsonl"
    item = (
        _conversation(2) if kind == "conversation" else {"id": "x", "input": "Q", "expected": "A"}
    )
    rows = [json.dumps({**item, "id": f"i{k}"}) for k in range(200)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    size = path.stat().st_size
    name = "conv_big" if kind == "conversation" else "golden_big"
    result = CliRunner().invoke(cli, ["tasks", "--golden", str(path), name])
    assert result.exit_code == 2
    assert f"{path} is {size:,} bytes, more than the 4,096 a set may be" in result.output


# --- templates: what one call may build ------------------------------------------------

TEMPLATE_BOMBS = [
    "{{ 'x' | center(1000000000) }}",  # the probe: > 60 s and 4 GB
    '{{ "%0999999999d" | format(1) }}',  # the probe
    '{{ "%0999999999d" % 1 }}',
    "{{ 'x'.center(1000000000) }}",
    "{{ 'x'.zfill(1000000000) }}",
    "{{ '{:>999999999}'.format(1) }}",
    "{{ '{a}{a}{a}'.format_map({'a': 'x' * 1000000}) }}",
    "{{ ('a' * 1000000).replace('', 'bb') }}",
    "{{ ('a' * 1000).join(range(100000)) }}",
    "{{ range(100000) | join('x' * 1000) }}",
    "{{ [1] | batch(1000000000, 0) | list }}",
    "{{ [1] | slice(1000000000) | list }}",
    "{{ 'a\tb'.expandtabs(1000000000) }}",
    "{{ 'ab'.translate({97: 'x' * 1000000}) }}",
    "{{ 'a\nb' | indent(1000000000) }}",
    "{{ {'a': [1, 2]} | tojson(indent=1000000000) }}",
    "{{ ('a ' * 400000) | wordwrap(1, wrapstring='x' * 100) }}",
    "{{ ['x'] | map('center', 1000000000) | list }}",
    "{{ lipsum(1000000) }}",
    "{{ (1).to_bytes(1000000000, 'big') }}",
]


def test_no_call_in_a_template_builds_more_than_a_template_may() -> None:
    code = f"""
import json, time
from regress.core.errors import BadInput
from regress.tasks.templates import render
out = []
for source in {TEMPLATE_BOMBS!r}:
    start = time.monotonic()
    try:
        render(source, {{}}, "task t")
        message = "rendered"
    except BadInput as exc:
        message = str(exc)
    out.append((message, time.monotonic() - start))
print(json.dumps(out))
"""
    done = _bounded_child(code)
    assert done.returncode == 0, done.stderr[-500:]
    results = json.loads(done.stdout)
    for source, (message, seconds) in zip(TEMPLATE_BOMBS, results, strict=True):
        assert message.startswith("task t: template "), (source, message)
        assert f"(at most {templates.MAX_SIZE:,})" in message, (source, message)
        assert seconds < 1.0, (source, seconds)


def test_templates_that_build_prompts_render_as_before() -> None:
    doc = {"question": "Why?", "choices": ["a", "b"], "n": 3}
    source = (
        "{{ question | center(10) }}|{{ '%5.2f' | format(3.14159) }}|{{ ', '.join(choices) }}|"
        "{{ '{} and {}'.format(1, 2) }}|{{ choices | join('; ') }}|{{ '%s!' % question }}|"
        "{{ question | replace('W', 'w') }}|{{ 'a b c' | wordwrap(2) }}|"
        "{{ choices | batch(1) | list }}|{{ 'x'.zfill(n) }}|{{ n % 2 }}|{{ choices | tojson }}"
    )
    assert templates.render(source, doc, "task t") == (
        "   Why?   | 3.14|a, b|1 and 2|a; b|Why?!|why?|a\nb\nc|[['a'], ['b']]|00x|1|[\"a\", \"b\"]"
    )


# --- a server's reply: its bytes and its tokens -----------------------------------------


class _Server(BaseHTTPRequestHandler):
    """/models, and a completion answering `text` with `usage`, or `body_bytes` of padding
    inside the JSON; `sent` counts the body bytes the client took before hanging up."""

    text = " Paris"
    usage: dict | None = None
    body_bytes = 0
    sent = 0

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        self._send(json.dumps({"data": [{"id": "stub"}]}).encode())

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers["Content-Length"]))
        stub = type(self)
        choice = {"index": 0, "message": {"content": stub.text}, "finish_reason": "length"}
        answer = {"choices": [choice], "usage": stub.usage or {}}
        if not stub.body_bytes:
            self._send(json.dumps(answer).encode())
            return
        head = json.dumps(answer)[:-1].encode() + b', "padding": "'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(stub.body_bytes + len(head) + 2))
        self.end_headers()
        try:
            self.wfile.write(head)
            block = b"x" * (1 << 20)
            for _ in range(stub.body_bytes >> 20):
                self.wfile.write(block)
                stub.sent += len(block)
            self.wfile.write(b'"}')
        except OSError:
            pass  # the client hung up, as it should

    def _send(self, data: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@contextmanager
def _serving(**behaviour: object) -> Iterator[tuple[str, type[_Server]]]:
    handler = type("Server", (_Server,), {"sent": 0, **behaviour})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    server.handle_error = lambda *_: None  # type: ignore[method-assign]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", handler
    finally:
        server.shutdown()
        server.server_close()


def test_a_reply_of_thirty_megabytes_is_a_failed_request_read_no_further() -> None:
    """The probe: 24 judge replies of 30 MB took 2.8 GB. A reply past MAX_REPLY_BYTES is that
    request's error, and the client stops reading it there."""
    with _serving(body_bytes=30 << 20) as (url, server):
        backend = OpenAIBackend("m", base_url=url, max_retries=0)
        (result,) = backend.generate([GenerateRequest("Hi", max_tokens=64)])
        assert isinstance(result, FailedResult) and result.status == "error"
        assert result.message == (
            f"{url}/chat/completions: the reply is larger than {openai.MAX_REPLY_BYTES:,} bytes"
        )
        assert server.sent < 2 * openai.MAX_REPLY_BYTES  # read no further than the limit


def test_a_reply_beyond_its_token_budget_is_a_failed_request() -> None:
    with _serving(usage={"completion_tokens": 500, "prompt_tokens": 3}) as (url, _):
        backend = OpenAIBackend("m", base_url=url)
        (result,) = backend.generate([GenerateRequest("Hi", max_tokens=64)])
    assert result == FailedResult(
        "error", f"server at {url} generated 500 tokens for a request of max_tokens 64"
    )
    long_text = "y" * (64 * openai.MAX_TOKEN_CHARS + 1)
    with _serving(text=long_text) as (url, _):
        backend = OpenAIBackend("m", base_url=url)
        (result,) = backend.generate([GenerateRequest("Hi", max_tokens=64)])
    assert isinstance(result, FailedResult)
    assert result.message == (
        f"server at {url} sent {len(long_text):,} characters for a request of max_tokens 64 "
        f"(at most {openai.MAX_TOKEN_CHARS} per token)"
    )
    # Within the budget, the reply is the answer.
    with _serving(usage={"completion_tokens": 64, "prompt_tokens": 3}) as (url, _):
        backend = OpenAIBackend("m", base_url=url)
        (result,) = backend.generate([GenerateRequest("Hi", max_tokens=64)])
    assert result == GenerateResult(" Paris", n_tokens=64, n_context_tokens=3, finish="length")


class _Flood(BaseHTTPRequestHandler):
    """A streaming server whose token events carry 1 MiB of text each, 9 of them."""

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        event = json.dumps({"choices": [{"text": "x" * (1 << 20), "finish_reason": None}]})
        try:
            for _ in range(9):
                self.wfile.write(f"data: {event}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")
        except OSError:
            pass  # the client hung up, as it should


def test_a_benchmarked_stream_is_read_up_to_its_bound() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Flood)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        options = ServingOptions(url, "m", ("hi",), output_len=8, num_requests=2, timeout_s=20)
        (level,) = run_serving(options)
    finally:
        server.shutdown()
        server.server_close()
    assert level.failed == 2 and level.latency.requests == ()
    assert level.errors[0] == (
        f"RuntimeError: the server streamed more than {serving.MAX_STREAM_BYTES:,} bytes"
    )
