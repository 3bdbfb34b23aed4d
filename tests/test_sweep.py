"""regress sweep without a model: the config space, options, result files, tensor hashes."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from regress.core.errors import BadInput
from regress.run.suite import inline_suite
from regress.sweep.quantize import QuantSettings, weights_sha256
from regress.sweep.results import (
    ConfigResult,
    Speed,
    TaskScore,
    load_results,
    result_from_dict,
    result_to_dict,
    slug,
)
from regress.sweep.run import SweepOptions, config_space, load_config_space, parse_types
from regress.sweep.token_kld import Divergence, TokenValues, compare_rows, summarize


def test_config_space_is_the_product_of_its_lists() -> None:
    configs = config_space(
        {"types": ["q8_0", "Q4_0"], "pure": [False, True], "token_embedding_type": [None, "Q8_0"]}
    )
    assert len(configs) == 8
    assert configs[0] == QuantSettings("Q8_0")
    assert [c.name for c in configs[:4]] == [
        "Q8_0",
        "Q8_0+emb=Q8_0",
        "Q8_0+pure",
        "Q8_0+pure+emb=Q8_0",
    ]
    assert slug("Q4_0+out=Q8_0") == "Q4_0_out-Q8_0"


def test_config_space_refuses_what_it_does_not_know(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="unknown key"):
        config_space({"types": ["Q8_0"], "group_size": [32]})
    with pytest.raises(BadInput, match="types"):
        config_space({"pure": [True]})
    bad = tmp_path / "space.yaml"
    bad.write_text("types: [Q8_0\n")
    with pytest.raises(BadInput, match="space.yaml: not valid YAML"):
        load_config_space(bad)
    bad.write_text("types: [Q8_0, Q4_0]\npure: true\n")
    assert [c.name for c in load_config_space(bad)] == ["Q8_0+pure", "Q4_0+pure"]


@pytest.mark.model
def test_options_are_checked_before_any_work(tmp_path: Path) -> None:
    suite = inline_suite("arc_easy", limit=5)
    with pytest.raises(BadInput, match="unknown quantization"):
        SweepOptions("smollm2-135m", (QuantSettings("Q9_9"),), tmp_path, suite)
    with pytest.raises(BadInput, match="unknown token_embedding_type"):
        SweepOptions(
            "smollm2-135m", (QuantSettings("Q8_0", token_embedding_type="X"),), tmp_path, suite
        )
    with pytest.raises(BadInput, match="twice"):
        SweepOptions("smollm2-135m", parse_types("Q8_0") * 2, tmp_path, suite)
    with pytest.raises(BadInput, match="at least one"):
        parse_types(" , ")
    assert [c.name for c in parse_types("q8_0, Q4_0,q8_0")] == ["Q8_0", "Q4_0"]


def _result(name: str) -> ConfigResult:
    score = TaskScore("all", 10, 0.5, 0.2, 0.8, 1, 2, 0.1, -0.2, 0.4, 0.9)
    values = TokenValues(
        np.array([1.0, 2.0], np.float32),
        np.array([1.5, 2.5], np.float32),
        np.array([0.1, 0.3], np.float32),
        np.array([True, False]),
    )
    return ConfigResult(
        name=name,
        settings=QuantSettings("Q4_0", output_tensor_type="Q8_0"),
        file="/x.gguf",
        sha256="a" * 64,
        weights_sha256="b" * 64,
        quantization="Q4_0",
        size_bytes=2**20,
        n_params=10**6,
        identical_to=None,
        scores=(score,),
        divergence=summarize(values),
        speed=Speed(100.0, 5.0, 40.0, 1.0, (39.0, 41.0), 300 * 2**20, 0.1),
        system_info="CPU : AVX2 = 1 |",
        created="2026-12-01T00:00:00Z",
        elapsed_s=1.0,
    )


def test_a_result_survives_its_json_and_a_half_written_file_is_not_read(tmp_path: Path) -> None:
    result = _result("Q4_0+out=Q8_0")
    assert result_from_dict(json.loads(json.dumps(result_to_dict(result)))) == result
    assert result.bits_per_weight == pytest.approx(8 * 2**20 / 10**6)
    assert result.speed.latency_ms == pytest.approx(25.0)
    (tmp_path / "configs").mkdir()
    (tmp_path / "sweep.json").write_text(
        json.dumps({"model": "m", "source_sha256": "s", "configs": ["Q4_0+out=Q8_0", "Q2_K"]})
    )
    (tmp_path / "configs" / "source.json").write_text(
        json.dumps(result_to_dict(dataclasses.replace(result, name="source", settings=None)))
    )
    (tmp_path / "configs" / f"{slug(result.name)}.json").write_text(
        json.dumps(result_to_dict(result))
    )
    # A write the kill interrupted: a temporary name, never read as a result.
    (tmp_path / "configs" / ".Q2_K.json.tmp").write_text('{"name": "Q2')
    sweep = load_results(tmp_path)
    assert [r.name for r in sweep.results] == ["source", "Q4_0+out=Q8_0"]
    assert sweep.pending == ("Q2_K",)
    with pytest.raises(BadInput, match="not a sweep folder"):
        load_results(tmp_path / "configs")


def test_llama_perplexity_definitions_on_known_distributions() -> None:
    base = np.log(np.array([[0.5, 0.25, 0.25], [0.1, 0.8, 0.1]]))
    cand = np.log(np.array([[0.25, 0.5, 0.25], [0.1, 0.8, 0.1]]))
    nll_base, nll, kld, same = compare_rows(base + 3.0, cand - 1.0, np.array([0, 1]))
    assert nll_base == pytest.approx([np.log(2), -np.log(0.8)])
    assert nll == pytest.approx([np.log(4), -np.log(0.8)])
    assert kld == pytest.approx([0.5 * np.log(2) + 0.25 * np.log(0.5), 0.0])
    assert same.tolist() == [False, True]
    d: Divergence = summarize(TokenValues(nll_base, nll, kld, same))
    assert d.ppl == pytest.approx(np.exp(nll.mean()))
    assert d.ln_ppl_ratio == pytest.approx(np.log(d.ppl / d.ppl_base))
    assert d.same_top == 0.5


def _gguf(path: Path, file_type: int, data: np.ndarray) -> Path:
    import gguf

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_file_type(file_type)
    writer.add_array("tokenizer.ggml.tokens", ["a", "bb", "ccc"])
    writer.add_tensor("blk.0.w", data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_weights_hash_ignores_the_header_and_sees_the_tensors(tmp_path: Path) -> None:
    data = np.arange(64, dtype=np.float32).reshape(8, 8)
    a = _gguf(tmp_path / "a.gguf", 10, data)
    b = _gguf(tmp_path / "b.gguf", 11, data)
    c = _gguf(tmp_path / "c.gguf", 10, data + 1)
    assert hashlib.sha256(a.read_bytes()).digest() != hashlib.sha256(b.read_bytes()).digest()
    assert weights_sha256(a) == weights_sha256(b) != weights_sha256(c)
    (tmp_path / "x.gguf").write_bytes(b"GGML" + bytes(40))
    with pytest.raises(BadInput, match="not a GGUF"):
        weights_sha256(tmp_path / "x.gguf")


def test_kld_cannot_rank_near_lossless_configurations() -> None:
    from regress.sweep.frontier import _kld_warnings

    def with_kld(name: str, kld: float) -> ConfigResult:
        r = _result(name)
        return dataclasses.replace(r, divergence=dataclasses.replace(r.divergence, kld_mean=kld))

    results = [with_kld("source", 0.0), with_kld("Q8_0", 0.004), with_kld("Q6_K", 0.006)]
    results.append(with_kld("Q2_K", 0.4))

    class Tests:
        def __init__(self, p: float) -> None:
            self.p = p

        def per_token_p(self, i: int, j: int, field: str) -> float:
            return self.p

    noisy = _kld_warnings(results, Tests(0.3), 0.05)  # type: ignore[arg-type]
    assert len(noisy) == 2
    assert noisy[0].startswith("Q8_0, Q6_K: mean KLD under 0.01")
    assert noisy[1].startswith("KLD cannot rank Q8_0 and Q6_K (0.0040 vs 0.0060")
    assert "paired accuracy test" in noisy[1]
    separated = _kld_warnings(results, Tests(0.001), 0.05)  # type: ignore[arg-type]
    assert len(separated) == 1  # Q2_K is far from lossless: never compared this way


def test_the_sweep_table_renders_exactly() -> None:
    from regress.report.sweep_markdown import sweep_table
    from regress.sweep.frontier import Frontier
    from regress.sweep.pareto import Direction, Objective, Standing
    from regress.sweep.results import SweepResults

    base = _result("Q4_0")
    same = dataclasses.replace(base, name="Q4_0+pure", identical_to="Q4_0")
    sweep = SweepResults("smollm2-135m", "s" * 64, (base, same), (), ())
    frontier = Frontier(
        objectives=(Objective("accuracy", Direction.MAX), Objective("size", Direction.MIN)),
        names=("Q4_0",),
        points=np.array([[0.5, 1.0]]),
        standings=(Standing(True, (), ()),),
        reference=(0.4, 1.1),
        hypervolume=0.01,
        alpha=0.05,
        warnings=("a warning",),
    )
    lines = sweep_table(sweep, frontier).splitlines()
    assert lines[2] == (
        "| Q4_0 | Q4_0 | 1.0 | 8.39 | 0.500 [0.200, 0.800] | +0.100 [-0.200, +0.400] | 0.90 | "
        "7.39 ± 3.69 | 0.2000 ± 0.1000 | 50.0 ± 50.0 | 100 | 40.0 | 25.0 | 300 | front |"
    )
    assert lines[3].startswith("| Q4_0+pure | Q4_0 |") and lines[3].endswith("| = Q4_0 |")
    assert lines[6].startswith(
        "Pareto front over accuracy (max), size (min): Q4_0; hypervolume 0.01 (accuracy × file "
        "size (MiB)) with reference point (0.4, 1.1)."
    )
    assert lines[7] == "llama.cpp system info: `CPU : AVX2 = 1 |`"
    assert lines[-1] == "- a warning"


def test_accuracy_from_different_scoring_code_is_named() -> None:
    from types import SimpleNamespace

    from regress.sweep.frontier import _backend_warnings

    def run(params: dict[str, object]) -> SimpleNamespace:
        backend = SimpleNamespace(name="llama_cpp", version="0.3.36", params=params)
        return SimpleNamespace(manifest=SimpleNamespace(backend=backend))

    runs = {"source": run({"scoring": "split"}), "Q8_0": run({"scoring": "split"})}

    class Tests:
        def run(self, name: str) -> SimpleNamespace:
            return runs[name]

    results = [_result("source"), _result("Q8_0")]
    assert _backend_warnings(results, Tests()) == []  # type: ignore[arg-type]
    # A speed-only setting (the OpenMP waiting a newer regress records) changes no answer.
    runs["Q8_0"] = run({"scoring": "split", "openmp_waiting": "GOMP_SPINCOUNT=300"})
    assert _backend_warnings(results, Tests()) == []  # type: ignore[arg-type]
    runs["Q8_0"] = run({"scoring": "split-2"})
    (warning,) = _backend_warnings(results, Tests())  # type: ignore[arg-type]
    assert warning.startswith("accuracy was scored by different backend settings (source: ")
    assert warning.endswith("run the sweep again with --reevaluate")
