"""The gate on a batch-dependent server (issue 48): the baseline's model rerun on the
candidate's server, interleaved with it chunk by chunk (A B A B), the candidate gated against
that rerun, and the A/A flip rate beside the verdict in both reports; and the cases refused.
The server is scripted: an OpenAI-compatible server whose log-probs move with how many
requests it computes at once, as a GPU server without batch-invariant kernels does. The
invariant path on a real vLLM is in tests/test_vllm_server.py."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import groupby
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from regress import Store
from regress.backends import batch_probe
from regress.checks import (
    SERVER_UNDER_TEST,
    STORED_ON_BATCHING,
    CheckOptions,
    Rebaseline,
    chunk_count,
    interleaved,
    reference_plan,
)
from regress.cli import cli
from regress.core.errors import BadInput
from regress.gate.compare import compare
from regress.gate.policy import Policy
from regress.gate.results import HardwareAction
from regress.run.runner import RunPlan, plan_rerun

BASE, CAND = "base-model", "cand-model"
WEIGHTS = {BASE: "a" * 64, CAND: "b" * 64}
LIMIT = 24
CHUNK = 8
"""Examples per chunk in these tests: 24 arc_easy questions run in 3 chunks a side."""
SERVED = "chat=false,concurrency=4"


def _digest(*parts: object) -> int:
    return int(hashlib.sha256(repr(parts).encode()).hexdigest()[:8], 16)


class _Server:
    """Two served models over one scripted engine. A token's log-prob is a function of the
    model, its position and its text, within 0.2 nats of -1 so that choices are close; the
    candidate's differs from the baseline's by 0.1 on two thirds of the tokens; and when
    `batching`, each request's log-probs move by up to 0.09 nats with the other requests in
    flight when it finishes (each takes 30 ms). Every completion's
    model and prompt are logged in arrival order."""

    def __init__(self, batching: bool) -> None:
        self.batching = batching
        self.log: list[tuple[str, str, bool]] = []
        self._in_flight = 0
        self._lock = threading.Lock()

    def logprob(self, model: str, position: int, token: str, others: int) -> float:
        value = -1.0 - _digest(position, token) % 200 / 1000
        if model == CAND:
            value += 0.1 * (_digest("cand", position, token) % 3 - 1)
        if self.batching and others:
            value -= 0.03 * min(others, 3) * (1 if _digest("batch", token) % 2 else -1)
        return value

    def complete(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """The completion, or None (HTTP 404, as vLLM answers) for a model not served."""
        model, prompt, echo = body["model"], body["prompt"], bool(body.get("echo"))
        if model not in WEIGHTS:
            return None
        with self._lock:
            self.log.append((model, prompt, echo))
            self._in_flight += 1
        time.sleep(0.03)
        with self._lock:
            others = self._in_flight - 1
            self._in_flight -= 1
        spans = [(m.start(), m.group()) for m in re.finditer(r"\s*\S+", prompt)]
        generated = [(len(prompt) + i, f" w{i}") for i in range(body.get("max_tokens") or 1)]
        tokens = [*spans, *generated] if echo else generated
        first = 0 if echo else len(spans)
        values: list[float | None] = [
            self.logprob(model, first + i, token, others) for i, (_, token) in enumerate(tokens)
        ]
        if echo:
            values[0] = None  # as vLLM: the first prompt token has no log-prob
        text = "".join(token for _, token in generated)
        logprobs = {
            "tokens": [token for _, token in tokens],
            "token_logprobs": values,
            "text_offset": [offset for offset, _ in tokens],
        }
        choice = {"text": (prompt if echo else "") + text, "index": 0, "logprobs": logprobs}
        usage = {"prompt_tokens": len(spans), "completion_tokens": len(generated)}
        return {"choices": [choice], "usage": usage, "system_fingerprint": "vllm-0.32.0-1a2b3c4d"}


@contextmanager
def _serving(batching: bool) -> Iterator[tuple[str, _Server]]:
    engine = _Server(batching)
    gets = {"/version": {"version": "0.32.0"}, "/v1/models": {"data": [{"id": BASE}, {"id": CAND}]}}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            self._send(gets.get(self.path))

        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            self._send(engine.complete(body) if self.path == "/v1/completions" else None)

        def _send(self, answer: dict[str, Any] | None) -> None:
            data = json.dumps(answer).encode() if answer is not None else b""
            self.send_response(200 if answer is not None else 404)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", engine
    finally:
        server.shutdown()
        server.server_close()


def _cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output + (result.stderr if result.stderr_bytes else "")


def _model_args(url: str, model: str) -> str:
    return f"base_url={url},{SERVED},model_sha256={WEIGHTS[model]}"


def _baseline(url: str, store: Path, data_dir: Path) -> None:
    code, text = _cli(
        "baseline", "create", "--name", "main", "-t", "arc_easy", "--limit", str(LIMIT),
        "--backend", "openai", "--model", BASE, "--model-args", _model_args(url, BASE),
        "--store", str(store), "--data-dir", str(data_dir),
    )  # fmt: skip
    assert code == 0, text


def _check(url: str, store: Path, data_dir: Path, out: Path, *extra: str) -> tuple[int, str]:
    return _cli(
        "check", "-b", "main", "--backend", "openai", "--model", CAND,
        "--model-args", _model_args(url, CAND), "--store", str(store),
        "--data-dir", str(data_dir), "--report-json", str(out / "r.json"),
        "--report-md", str(out / "r.md"), "--save-run", str(out / "cand"), *extra,
    )  # fmt: skip


def _probes() -> set[str]:
    return {*batch_probe.PROBES, batch_probe.FILLER}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Path:
    """Baseline `main`: the baseline's model on a batch-dependent server (the candidate's
    server, started by each test, is another one at the same address's settings)."""
    root = tmp_path_factory.mktemp("store")
    with _serving(batching=True) as (url, _):
        _baseline(url, root, data_dir)
    return root


@pytest.fixture()
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(interleaved, "CHUNK_EXAMPLES", CHUNK)


def test_a_batch_dependent_server_gates_against_an_interleaved_rerun(
    store: Path, tmp_path: Path, data_dir: Path, small_chunks: None
) -> None:
    from regress import read_run

    with _serving(batching=True) as (url, engine):
        engine.log.clear()
        code, text = _check(url, store, data_dir, tmp_path)
    assert code in (0, 1), text
    report = json.loads((tmp_path / "r.json").read_text())
    assert (report["verdict"] == "REGRESSION") == (code == 1)
    candidate = read_run(tmp_path / "cand")
    assert candidate.manifest.backend.build["server"]["batch_dependent"] is True

    # The scored requests, in arrival order: the baseline's model's chunk, then the
    # candidate's, three times, each pair over the same prompts.
    scored = [(m, p) for m, p, echo in engine.log if echo and not p.startswith("The capital")]
    blocks = [
        (model, sorted(p for _, p in group)) for model, group in groupby(scored, lambda x: x[0])
    ]
    chunks = chunk_count(LIMIT)
    assert chunks == LIMIT // CHUNK == 3
    assert [model for model, _ in blocks] == [BASE, CAND] * chunks
    for (_, ours), (_, theirs) in zip(blocks[::2], blocks[1::2], strict=True):
        assert ours == theirs
    assert len({p for _, prompts in blocks for p in prompts}) == sum(len(b[1]) for b in blocks) / 2
    # The batch probe ran once a side, not once a chunk.
    probed = [m for m, p, _ in engine.log if p == batch_probe.PROBES[1]]
    assert sorted(probed) == [BASE, BASE, CAND, CAND]  # alone, then in a batch

    # Gated against the rerun: the report's baseline is the rerun on the server, and its
    # flips are the candidate's against it, not against the stored records.
    hardware = report["hardware"]
    assert hardware["action"] == HardwareAction.INTERLEAVED == "interleaved"
    assert hardware["chunks"] == chunks
    assert report["baseline"]["run"] == "main (rerun on the server)"
    assert hardware["stored"]["run"] == "main"
    assert report["baseline"]["sha256"] == WEIGHTS[BASE]
    # The A/A flip rate: the baseline model's answers its rerun changed from the stored ones.
    assert report["aa_flip_rate"] == hardware["flips"] / hardware["n"]
    assert hardware["n"] == LIMIT
    markdown = (tmp_path / "r.md").read_text()
    summary = markdown.split("\n\n")[1]
    assert f"A/A flip rate {hardware['flips'] / hardware['n']:.1%}" in summary
    assert f"({hardware['flips']} of {hardware['n']})" in summary
    assert "interleaved with the candidate in 3 chunks each (A B A B)" in markdown
    # Neither side was replayed from the result cache: each chunk ran beside the other's.
    assert {(u["run"], u["enabled"]) for u in report["cache"]} == {
        ("candidate", False),
        ("baseline rerun", False),
    }


def test_the_rerun_the_gate_used_is_the_one_its_flips_count(
    store: Path, tmp_path: Path, data_dir: Path, small_chunks: None
) -> None:
    """Through the API: the verdict's flips are the candidate's against the rerun, and the
    A/A flips are the rerun's against the stored baseline, both recounted from the records."""
    from regress.checks import CandidateModel, check

    with _serving(batching=True) as (url, _):
        baseline = Store(store).load("main")
        args = {"base_url": url, "chat": False, "concurrency": 4, "model_sha256": WEIGHTS[CAND]}
        options = CheckOptions(source=_source(data_dir))
        result = check(baseline, CandidateModel(CAND, "openai", args), options)
    assert result.reference is not None
    rerun, candidate = result.reference, result.candidate
    assert rerun.manifest.model.sha256 == WEIGHTS[BASE]
    assert rerun.manifest.backend.params["model_name"] == BASE
    assert (
        rerun.manifest.backend.params["concurrency"]
        == candidate.manifest.backend.params["concurrency"]
    )
    hardware = result.comparison.hardware
    assert hardware is not None and hardware.action is HardwareAction.INTERLEAVED
    aa = compare(baseline, rerun, Policy())
    assert (hardware.flips, hardware.n) == (aa.n_flips, LIMIT)
    assert result.comparison.n_flips == compare(rerun, candidate, Policy()).n_flips
    assert hardware.aa_flip_rate == aa.n_flips / LIMIT


def _source(data_dir: Path) -> Any:
    from regress.tasks.base import DataSource

    return DataSource(data_dir=data_dir)


def test_an_invariant_server_is_gated_against_the_stored_records(
    tmp_path: Path, data_dir: Path
) -> None:
    store = tmp_path / "store"
    with _serving(batching=False) as (url, engine):
        _baseline(url, store, data_dir)
        engine.log.clear()
        code, text = _check(url, store, data_dir, tmp_path)
    assert code in (0, 1), text
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["hardware"]["action"] == "none"
    assert "aa_flip_rate" not in report and "chunks" not in report["hardware"]
    assert {u["run"] for u in report["cache"]} == {"candidate"}
    assert {m for m, _, echo in engine.log if echo} == {CAND}
    assert "A/A flip rate" not in (tmp_path / "r.md").read_text()


def test_a_reference_the_server_does_not_serve_is_refused(
    store: Path, tmp_path: Path, data_dir: Path
) -> None:
    with _serving(batching=True) as (url, engine):
        engine.log.clear()
        code, text = _check(url, store, data_dir, tmp_path, "--reference-model", "elsewhere")
        assert code == 2, text
        assert "serves no model 'elsewhere'" in text
        assert f"it lists: {BASE}, {CAND}" in text
        # Nothing scored before the refusal.
        assert not [p for _, p, echo in engine.log if echo and p not in _probes()]
        # The candidate's own served name, declared as other weights than the pinned ones.
        code, text = _check(url, store, data_dir, tmp_path, "--reference-model", CAND)
    assert code == 2, text
    assert f"declares served model {CAND!r} as weights bbbbbbbbbbbb" in text
    assert len(set(text.strip().splitlines())) == 1  # one line (stdout and stderr)


def test_rebaseline_never_gates_against_the_stored_records_with_a_warning(
    store: Path, tmp_path: Path, data_dir: Path
) -> None:
    with _serving(batching=True) as (url, _):
        code, text = _check(url, store, data_dir, tmp_path, "--rebaseline", "never")
    assert code in (0, 1), text
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["hardware"]["action"] in ("none", "stored")
    assert STORED_ON_BATCHING in report["warnings"]
    assert "aa_flip_rate" not in report


def test_the_baselines_own_weights_on_the_server_are_not_rerun_beside_themselves(
    store: Path, tmp_path: Path, data_dir: Path
) -> None:
    """A candidate of the pinned weights tests the server (its dtype, version, settings): a
    rerun there would be the candidate itself, so the stored records gate it, with a warning."""
    with _serving(batching=True) as (url, engine):
        code, text = _cli(
            "check", "-b", "main", "--backend", "openai", "--model", BASE,
            "--model-args", _model_args(url, BASE), "--store", str(store),
            "--data-dir", str(data_dir), "--report-json", str(tmp_path / "r.json"),
        )  # fmt: skip
    assert code in (0, 1), text
    report = json.loads((tmp_path / "r.json").read_text())
    assert SERVER_UNDER_TEST in report["warnings"]
    assert "aa_flip_rate" not in report and report["hardware"]["action"] != "interleaved"
    assert {m for m, _, echo in engine.log if echo} == {BASE}
    assert {u["run"] for u in report["cache"]} == {"candidate"}


def test_a_baseline_without_a_served_model_or_a_pinned_sha256_is_refused(store: Path) -> None:
    baseline = Store(store).load("main")
    plan = RunPlan(specs=(), model=CAND, backend="openai", model_args={"model_sha256": "b" * 64})
    assert reference_plan(baseline, plan, None).model == BASE
    assert reference_plan(baseline, plan, None).cache_dir is None
    local = dataclasses.replace(
        baseline.manifest,
        backend=dataclasses.replace(baseline.manifest.backend, name="llama_cpp", build={}),
    )
    with pytest.raises(BadInput, match="made on llama_cpp: pass --reference-model"):
        reference_plan(dataclasses.replace(baseline, manifest=local), plan, None)
    assert reference_plan(dataclasses.replace(baseline, manifest=local), plan, BASE).model == BASE
    unpinned = dataclasses.replace(
        baseline.manifest, model=dataclasses.replace(baseline.manifest.model, sha256="")
    )
    with pytest.raises(BadInput, match="names no sha256"):
        reference_plan(dataclasses.replace(baseline, manifest=unpinned), plan, BASE)


def test_a_sequential_gate_on_a_batch_dependent_server_is_refused(
    store: Path, tmp_path: Path, data_dir: Path
) -> None:
    from regress.checks import CandidateModel, check
    from regress.stats import SequentialDesign

    with _serving(batching=True) as (url, engine):
        engine.log.clear()
        args = {"base_url": url, "chat": False, "concurrency": 4, "model_sha256": WEIGHTS[CAND]}
        options = CheckOptions(Policy(sequential=SequentialDesign()), source=_source(data_dir))
        with pytest.raises(BadInput, match="sequential gate cannot interleave"):
            check(Store(store).load("main"), CandidateModel(CAND, "openai", args), options)
        assert not [p for _, p, echo in engine.log if echo and p not in _probes()]
        never = dataclasses.replace(options, rebaseline=Rebaseline.NEVER)
        result = check(Store(store).load("main"), CandidateModel(CAND, "openai", args), never)
    assert result.comparison.sequential is not None


def test_a_candidate_served_under_another_name_is_not_sent_as_the_baseline(store: Path) -> None:
    """The baseline's served name and weights carry over to a rerun of its own model only: a
    candidate `-m cand-model` once inherited `model_name=base-model` and asked the server for
    the baseline's model."""
    baseline = Store(store).load("main")
    other = plan_rerun(baseline, CAND, "openai")
    assert "model_name" not in other.model_args and "model_sha256" not in other.model_args
    assert other.model_args["chat"] is False and "base_url" in other.model_args
    same = plan_rerun(baseline, BASE, "openai").model_args
    assert (same["model_name"], same["model_sha256"]) == (BASE, WEIGHTS[BASE])


def test_chunks_alternate_at_least_twice() -> None:
    assert [chunk_count(n) for n in (0, 1, 2, 50, 51, 100, 101)] == [1, 1, 2, 2, 2, 2, 3]
