"""`regress bench --backend openai` against a real llama-cpp-python server of the packaged
model: vLLM's serving figures per concurrency level, fixed output length, goodput, and the
server's own memory through --server-pid."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from regress.bench.latency import RequestTiming
from regress.bench.serving import meets, parse_slo
from regress.cli import cli


@contextmanager
def _server(model: Path, log: Path) -> Iterator[tuple[str, int]]:
    """llama-cpp-python's server of the packaged model, taking requests side by side (its
    default interrupts a running request when the next one comes); yields (URL, pid)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = ["--model", str(model), "--port", str(port), "--n_ctx", "1024", "--n_threads", "2"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", *args, "--interrupt_requests", "False"],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    url = f"http://localhost:{port}/v1"
    try:
        deadline = time.monotonic() + 90
        while not _ready(url):
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "server not ready after 90 s"
            time.sleep(0.2)
        yield url, proc.pid
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/models", timeout=2).is_success
    except httpx.TransportError:
        return False


@pytest.mark.model
def test_serving_levels_against_a_real_server(smollm2_path, tmp_path):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"prompt": "The capital of France is"}\n{"prompt": "Two plus two is"}\n')
    out = tmp_path / "serve.json"
    with _server(smollm2_path, tmp_path / "server.log") as (url, pid):
        result = CliRunner().invoke(cli, [
            "bench", "--backend", "openai", "-m", "smollm2", "--model-args", f"base_url={url}",
            "--prompts", str(prompts), "--output-len", "4", "--num-requests", "4",
            "--concurrency", "1,2", "--slo", "ttft=60s,tpot=60s", "--server-pid", str(pid),
            "-o", str(out),
        ])  # fmt: skip
        assert result.exit_code == 0, result.output
    (model,) = json.loads(out.read_text())["results"]
    assert [level["concurrency"] for level in model["serving"]] == [1, 2]
    for level in model["serving"]:
        latency = level["latency"]
        assert level["failed"] == 0 and len(latency["requests"]) == 4, level["errors"]
        assert all(r["output_tokens"] == 4 for r in latency["requests"])  # EOS ignored
        assert all(len(r["itl_ms"]) == 3 for r in latency["requests"])
        for name in ("ttft", "tpot", "itl", "e2el"):
            s = latency[name]
            assert 0 < s["p50"] <= s["p95"] <= s["p99"]
        assert level["goodput"] == latency["request_throughput"] > 0  # every SLO is loose
    assert model["resources"]["peak_rss_bytes"] > smollm2_path.stat().st_size  # the server's tree


def test_goodput_rule_and_slo_parsing():
    fast = RequestTiming(0, 5, 3, ttft_ms=100.0, e2el_ms=140.0, itl_ms=(20.0, 20.0))
    assert parse_slo("ttft=500ms,tpot=50ms,e2el=2s") == {"ttft": 500, "tpot": 50, "e2el": 2000}
    assert meets(fast, {"ttft": 500, "tpot": 50})
    assert not meets(fast, {"ttft": 99})
    assert not meets(fast, {"tpot": 19.9})
