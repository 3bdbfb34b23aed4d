"""A server's fingerprint (issue 48): read from what the engine reports (vLLM's replies,
/v1/models and /metrics; llama-server's /props), completed by what the user declares, and
part of the compute path: the result cache's key, `merge`'s identity and `check`'s
rebaseline decision. The servers here are scripted with the engines' documented replies; the
real vLLM's are read in tests/test_vllm_server.py."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from test_merge_identity import _relabel, _shards

from regress.backends import batch_probe, load_backend, server_facts
from regress.backends.server_facts import ServerFacts
from regress.core.errors import BadInput
from regress.core.fingerprint import RuntimeFingerprint, hardware_differences
from regress.core.merge import merge_runs
from regress.run.cache import model_key

# vLLM 0.32.0's /metrics line (cut to the labels read), as the real server printed it.
VLLM_METRICS = (
    "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"
    'vllm:cache_config_info{block_size="128",cache_dtype="auto",enable_prefix_caching="True",'
    'engine="0",num_gpu_blocks="182"} 1.0\n'
)


def _vllm(fingerprint: str = "vllm-0.32.0-bcc7bf8e", **_: Any) -> dict[str, Any]:
    return {
        "/version": {"version": "0.32.0"},
        "/v1/models": {"data": [{"id": "m", "max_model_len": 2048}]},
        "/metrics": VLLM_METRICS,
        "/v1/completions": _completion(fingerprint, -0.25),
    }


def _completion(fingerprint: str, logprob: float) -> dict[str, Any]:
    logprobs = {"tokens": [" Paris"], "token_logprobs": [logprob], "text_offset": [0]}
    choice = {"text": " Paris", "index": 0, "finish_reason": "length", "logprobs": logprobs}
    return {"choices": [choice], "system_fingerprint": fingerprint}


def _batching_vllm() -> dict[str, Any]:
    """A server whose log-probs move with the requests it computes at once, as a GPU server
    without batch-invariant kernels does: each request waits 0.2 s, and its log-prob is
    lowered by 1e-7 per other request in flight."""
    in_flight = [0]
    lock = threading.Lock()

    def answer() -> dict[str, Any]:
        with lock:
            in_flight[0] += 1
        time.sleep(0.2)
        with lock:
            others = in_flight[0] - 1
            in_flight[0] -= 1
        return _completion("vllm-0.32.0-bcc7bf8e", -0.25 - 1e-7 * others)

    return {**_vllm(), "/v1/completions": answer}


def _llama_server() -> dict[str, Any]:
    return {
        "/v1/models": {"data": [{"id": "m"}]},
        "/props": {"total_slots": 4, "default_generation_settings": {"n_ctx": 4096}},
    }


@contextmanager
def _server(routes: dict[str, Any]) -> Iterator[str]:
    """Answers each path in `routes` (JSON, or text for a str) and 404 for any other."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            answer = routes.get(self.path)
            if callable(answer):
                answer = answer()
            if answer is None:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            data = (answer if isinstance(answer, str) else json.dumps(answer)).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers["Content-Length"]))
            self.do_GET()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def _fingerprint(routes: dict[str, Any], **declared: Any) -> RuntimeFingerprint:
    with _server(routes) as url:
        return _loaded(url, **declared)


def _loaded(url: str, **declared: Any) -> RuntimeFingerprint:
    backend = load_backend("openai", "m", {"base_url": url, **declared})
    try:
        return backend.fingerprint()
    finally:
        backend.close()


def test_a_vllm_server_is_fingerprinted_from_its_own_replies() -> None:
    fingerprint = _fingerprint(_vllm())
    assert fingerprint.version == "0.32.0"
    assert fingerprint.build["server"] == {
        "engine": "vllm",
        "system_fingerprint": "vllm-0.32.0-bcc7bf8e",
        "max_model_len": 2048,
        "prefix_caching": True,
        "tensor_parallel_size": 1,
        "data_parallel_size": 1,
    }
    assert fingerprint.hardware.kernels == (
        "server prefix_caching=on tensor_parallel_size=1 data_parallel_size=1"
    )


def test_parallel_degrees_come_from_the_system_fingerprint() -> None:
    facts = server_facts.from_system_fingerprint("vllm-0.32.0-tp4-dp2-ep-0a1b2c3d")
    assert (facts.tensor_parallel_size, facts.data_parallel_size) == (4, 2)
    assert server_facts.from_system_fingerprint("fp_44709d6fcb") == ServerFacts()
    assert server_facts.from_system_fingerprint(None) == ServerFacts()


def test_llama_server_reports_its_context_and_slots() -> None:
    fingerprint = _fingerprint(_llama_server())
    assert fingerprint.build["server"] == {
        "engine": "llama.cpp",
        "max_model_len": 4096,
        "max_num_seqs": 4,
    }
    assert fingerprint.hardware.kernels == "server max_num_seqs=4"


def test_a_server_that_reports_nothing_records_only_what_is_declared() -> None:
    bare = {"/v1/models": {"data": [{"id": "m"}]}}
    assert "server" not in _fingerprint(bare).build
    declared = _fingerprint(
        bare, dtype="bfloat16", batch_invariant=True, tensor_parallel_size=2, max_num_seqs=64
    )
    assert declared.build["server"] == {
        "dtype": "bfloat16",
        "max_num_seqs": 64,
        "batch_invariant": True,
        "tensor_parallel_size": 2,
    }
    assert declared.hardware.kernels == (
        "server max_num_seqs=64 batch_invariant=on tensor_parallel_size=2"
    )
    # Declared settings are constructor arguments: a rerun passes them back.
    assert declared.params["batch_invariant"] is True


@pytest.mark.parametrize(
    ("declared", "message"),
    [
        ({"max_model_len": 4096}, "declare max_model_len=4096, but the server at .* reports "
         "max_model_len=2048"),
        ({"prefix_caching": False}, "reports prefix_caching=on"),
        ({"tensor_parallel_size": 2}, "reports tensor_parallel_size=1"),
        ({"max_num_seqs": 0}, "max_num_seqs must be >= 1"),
        ({"batch_invariant": "yes"}, "batch_invariant must be bool"),
    ],
)  # fmt: skip
def test_a_declaration_the_server_contradicts_is_bad_input(declared, message: str) -> None:
    with pytest.raises(BadInput, match=message):
        _fingerprint(_vllm(), **declared)


def test_the_server_fingerprint_keys_the_cache() -> None:
    """One address, the same weights (same sha256) and settings: only the engine's config
    hash differs (the server restarted in bfloat16), and the cache keeps the results apart."""
    routes = _vllm()
    with _server(routes) as url:
        float32 = _loaded(url)
        routes["/v1/completions"] = _completion("vllm-0.32.0-5d1e0f77", -0.25)
        bfloat16 = _loaded(url)
        routes.update(_vllm())
        again = _loaded(url)
    assert float32.params == bfloat16.params
    weights = "ab" * 32
    assert model_key(weights, float32) != model_key(weights, bfloat16)
    assert model_key(weights, float32) == model_key(weights, again)


def test_merge_refuses_shards_from_servers_of_other_fingerprints() -> None:
    s0, s1 = _shards()
    served = {"engine": "vllm", "system_fingerprint": "vllm-0.32.0-bcc7bf8e"}
    other = {**served, "system_fingerprint": "vllm-0.32.0-5d1e0f77"}
    s0 = _relabel(s0, build={**s0.manifest.backend.build, "server": served})
    assert merge_runs([s0, _relabel(s1, build={**s1.manifest.backend.build, "server": served})])
    with pytest.raises(BadInput, match="compute path than shard 0/2: server .*bcc7bf8e"):
        merge_runs([s0, _relabel(s1, build={**s1.manifest.backend.build, "server": other})])


def test_another_server_layout_is_a_hardware_difference() -> None:
    """`check` reruns (or, for a server it cannot rerun, warns about) a baseline whose
    hardware path differs; a server's layout is its hardware path."""
    one = _fingerprint(_vllm())
    four = _fingerprint(_vllm("vllm-0.32.0-tp4-0a1b2c3d"))
    assert hardware_differences(one, four) == [
        "server layout differs: only in the baseline tensor_parallel_size=1; "
        "only here tensor_parallel_size=4"
    ]
    assert hardware_differences(one, dataclasses.replace(one)) == []


def test_a_server_whose_log_probs_move_with_the_batch_records_its_concurrency() -> None:
    with _server(_batching_vllm()) as url:
        eight, four = _loaded(url, concurrency=8), _loaded(url, concurrency=4)
        alone = _loaded(url, concurrency=1)
    assert eight.build["server"]["batch_dependent"] is True
    assert eight.build["server"]["concurrency"] == 8
    assert eight.hardware.kernels.endswith("batch_dependent=on concurrency=8")
    # Concurrency is then part of the compute path: no cache or merge mixes 8 with 4.
    weights = "ab" * 32
    assert model_key(weights, eight) != model_key(weights, four)
    assert hardware_differences(four, eight) == [
        "server layout differs: only in the baseline concurrency=4; only here concurrency=8"
    ]
    # One request at a time is never batched: nothing to probe, nothing recorded.
    assert "batch_dependent" not in alone.build["server"]


def test_a_batch_invariant_server_keeps_concurrency_a_speed_setting() -> None:
    """The probe's log-probs equal alone and in a batch: runs at any concurrency share a
    compute path (and so a cache and a merge)."""
    with _server(_vllm()) as url:
        eight, two = _loaded(url, concurrency=8), _loaded(url, concurrency=2)
    assert "batch_dependent" not in eight.build["server"]
    assert eight.compute_key() == two.compute_key()
    assert eight.params["concurrency"] == 8


def test_the_probe_compares_each_prompt_alone_and_in_a_full_batch() -> None:
    sent: list[tuple[str, int]] = []
    lock = threading.Lock()
    active = [0]

    def send(body: dict[str, Any]) -> dict[str, Any]:
        with lock:
            active[0] += 1
            sent.append((body["prompt"], active[0]))
        time.sleep(0.1)
        with lock:
            active[0] -= 1
        return _completion("", -0.5)

    assert batch_probe.batch_dependent(send, "m", 6) is False
    prompts = [prompt for prompt, _ in sent]
    k = len(batch_probe.PROBES)
    assert prompts[:k] == list(batch_probe.PROBES)  # alone, one at a time
    assert all(depth == 1 for _, depth in sent[:k])
    assert sorted(prompts[k:]) == sorted([*batch_probe.PROBES, *[batch_probe.FILLER] * 2])
    assert max(depth for _, depth in sent[k:]) > 1  # the batch was in flight together
    # A server without log-probs cannot be measured.
    assert batch_probe.batch_dependent(lambda body: {"choices": [{}]}, "m", 4) is None
