"""A model reference resolved once (regress.backends.models.ModelFile): its header read once,
its facts and sha256 those `model_info` gives, a folder without a header."""

from __future__ import annotations

import hashlib
from pathlib import Path

import gguf
import numpy as np
import pytest

from regress.backends import models
from regress.backends.models import ModelFile, model_info, resolve_model
from regress.core.errors import BadInput


def _tiny_gguf(path: Path) -> Path:
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_name("tiny")
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    writer.add_context_length(4096)
    writer.add_tensor("a", np.arange(12, dtype=np.float32).reshape(3, 4))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_the_header_is_read_once_however_often_its_facts_are_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _tiny_gguf(tmp_path / "tiny.gguf")
    reads: list[Path] = []
    real = models.read_header
    monkeypatch.setattr(models, "read_header", lambda p: reads.append(p) or real(p))
    model = resolve_model(str(path))
    assert model == ModelFile(str(path), path)
    assert reads == []  # resolving alone reads nothing
    assert model.context_length == 4096
    info = model.info
    assert (model.context_length, model.info) == (4096, info)
    assert reads == [path]
    assert info.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert (info.name, info.architecture, info.quantization) == ("tiny", "llama", "Q8_0")
    assert (info.n_params, info.context_length, info.ref) == (12, 4096, str(path))


def test_model_info_is_the_resolved_models_info(tmp_path: Path) -> None:
    path = _tiny_gguf(tmp_path / "tiny.gguf")
    assert model_info(str(path)) == resolve_model(str(path)).info


def test_a_folder_has_no_header_and_hashes_its_weights(tmp_path: Path) -> None:
    (tmp_path / "model.safetensors").write_bytes(b"weights")
    model = resolve_model(str(tmp_path))
    assert model.header is None and model.context_length is None
    one = hashlib.sha256(b"weights").hexdigest()
    assert model.info.sha256 == hashlib.sha256(one.encode()).hexdigest()


def test_a_file_that_is_no_gguf_is_refused_when_its_facts_are_read(tmp_path: Path) -> None:
    path = tmp_path / "model.gguf"
    path.write_bytes(b"not a model")
    model = resolve_model(str(path))
    with pytest.raises(BadInput, match=r"is not a GGUF file \(starts with b'not '"):
        _ = model.info
    with pytest.raises(BadInput, match="not found"):
        resolve_model(str(tmp_path / "missing.gguf"))


@pytest.mark.model
def test_a_llama_cpp_run_resolves_its_model_once_and_reads_its_header_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import regress
    from regress.run.suite import inline_suite

    resolved: list[str] = []
    reads: list[Path] = []
    resolve, read = models.resolve_model_path, models.read_header
    monkeypatch.setattr(models, "resolve_model_path", lambda r: resolved.append(r) or resolve(r))
    monkeypatch.setattr(models, "read_header", lambda p: reads.append(p) or read(p))
    specs = regress.suite_specs(inline_suite("builtin_arithmetic", limit=2))
    run = regress.execute(regress.RunPlan(specs=tuple(specs), model="smollm2-135m")).run
    assert resolved == ["smollm2-135m"]
    assert len(reads) == 1
    assert run.manifest.model == model_info("smollm2-135m")
    assert run.manifest.model.context_length == models.PACKAGED["smollm2-135m"].context_length
