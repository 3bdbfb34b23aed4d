"""The GGUF header reader against the maintained one (gguf.GGUFReader): files written by
gguf.GGUFWriter in both byte orders with every value type, and the packaged SmolLM2 file."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import pytest

from regress.backends.gguf_header import read_header
from regress.core.errors import BadInput


def _write(path: Path, endian: gguf.GGUFEndian) -> None:
    writer = gguf.GGUFWriter(path, "llama", endianess=endian)
    writer.add_name("tiny")
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    writer.add_context_length(4096)
    writer.add_float32("x.f32", 0.5)
    writer.add_float64("x.f64", -2.25)
    writer.add_bool("x.bool", True)
    writer.add_int8("x.i8", -3)
    writer.add_uint16("x.u16", 65535)
    writer.add_int64("x.i64", -(2**40))
    writer.add_string("x.text", "naïve ✓")
    writer.add_array("x.tokens", ["<s>", "a", "", "ü" * 300])
    writer.add_array("x.scores", [0.1, 0.2, 0.3])
    writer.add_array("x.nested", [[1, 2], [3]])
    writer.add_uint32("x.after_arrays", 7)
    writer.add_custom_alignment(64)
    writer.add_tensor("a", np.arange(12, dtype=np.float32).reshape(3, 4))
    writer.add_tensor("b", np.ones(5, dtype=np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def _oracle(path: Path) -> tuple[dict, list, int]:
    reader = gguf.GGUFReader(path)
    scalars = {
        name: field.contents()
        for name, field in reader.fields.items()
        if not name.startswith("GGUF.") and field.types[0] != gguf.GGUFValueType.ARRAY
    }
    tensors = [
        (t.name, tuple(int(d) for d in t.shape), int(t.tensor_type), int(t.data_offset))
        for t in reader.tensors
    ]
    return scalars, tensors, int(reader.data_offset)


def _same_as_oracle(path: Path) -> None:
    header = read_header(path)
    scalars, tensors, data_offset = _oracle(path)
    assert header.metadata == pytest.approx(scalars)
    # GGUFReader reports absolute offsets; the header keeps them relative to the data.
    mine = [(t.name, t.shape, t.type, header.data_offset + t.offset) for t in header.tensors]
    assert mine == tensors
    assert header.data_offset == data_offset


@pytest.mark.parametrize(
    "endian", [gguf.GGUFEndian.LITTLE, gguf.GGUFEndian.BIG], ids=["little", "big"]
)
def test_every_value_type_reads_as_gguf_reads_it(tmp_path: Path, endian) -> None:
    path = tmp_path / "tiny.gguf"
    _write(path, endian)
    _same_as_oracle(path)
    header = read_header(path)
    assert header.metadata["x.after_arrays"] == 7 and "x.tokens" not in header.metadata
    assert header.metadata["x.text"] == "naïve ✓" and header.n_params == 12 + 5
    assert header.data_offset % 64 == 0


def test_a_truncated_header_is_a_corrupt_file_named_once(tmp_path: Path) -> None:
    path = tmp_path / "tiny.gguf"
    _write(path, gguf.GGUFEndian.LITTLE)
    whole = path.read_bytes()
    for cut in (6, 40, len(whole) // 3):
        path.write_bytes(whole[:cut])
        with pytest.raises(BadInput, match=r"tiny\.gguf: corrupt GGUF file \("):
            read_header(path)
    path.write_bytes(b"GGML" + whole[4:])
    with pytest.raises(BadInput, match=r"tiny\.gguf is not a GGUF file \(starts with b'GGML'"):
        read_header(path)


@pytest.mark.model
def test_the_packaged_model_reads_as_gguf_reads_it(smollm2_path: Path) -> None:
    _same_as_oracle(smollm2_path)
