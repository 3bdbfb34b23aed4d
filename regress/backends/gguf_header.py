"""A GGUF file's header: its metadata scalars and its tensors' descriptions.

Read here with `struct` over a memory map rather than with gguf.GGUFReader, which builds a numpy
view per element of every metadata array: 24 s for Gemma 3's 262k-token vocabulary, 4 s for
SmolLM2's, paid by every new model file a run or a sweep meets. regress needs the scalars and
the tensor shapes only; arrays are stepped over. The layout is ggml's docs/gguf.md (versions 2
and 3, either byte order); tests check the result against gguf.GGUFReader.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from math import prod
from pathlib import Path

from regress.core.errors import BadInput

_SCALARS = {
    0: "B",
    1: "b",
    2: "H",
    3: "h",
    4: "I",
    5: "i",
    6: "f",
    7: "?",
    10: "Q",
    11: "q",
    12: "d",
}
"""GGUF value type -> struct code (the type numbers of gguf.GGUFValueType)."""
_STRING, _ARRAY = 8, 9
GGUF_MAGIC = b"GGUF"
_DEFAULT_ALIGNMENT = 32

Scalar = int | float | bool | str


@dataclass(frozen=True)
class TensorInfo:
    """One tensor's description in the header."""

    name: str
    shape: tuple[int, ...]
    type: int
    """ggml type number (gguf.GGMLQuantizationType)."""
    offset: int
    """Bytes from the start of the tensor data."""

    @property
    def n_elements(self) -> int:
        """How many numbers the tensor holds."""
        return prod(self.shape)


@dataclass(frozen=True)
class GGUFHeader:
    """What a GGUF file says about itself before its tensor data."""

    version: int
    metadata: dict[str, Scalar]
    """Every scalar and string key; array values (vocabularies, merges) are not kept."""
    tensors: tuple[TensorInfo, ...]
    tensor_info_span: tuple[int, int]
    """Byte range of the tensor descriptions (names, shapes, types, offsets)."""
    data_offset: int
    """Where the tensor data starts: the span's end rounded up to general.alignment."""

    @property
    def n_params(self) -> int:
        """The model's parameter count: every tensor's elements."""
        return sum(t.n_elements for t in self.tensors)


class _Cursor:
    def __init__(self, data: mmap.mmap, order: str) -> None:
        self.data, self.order, self.at = data, order, 0

    def take(self, code: str) -> int | float | bool:
        fmt = self.order + code
        value: int | float | bool = struct.unpack_from(fmt, self.data, self.at)[0]
        self.at += struct.calcsize(fmt)
        return value

    def string(self) -> str:
        length = int(self.take("Q"))
        if self.at + length > len(self.data):
            raise ValueError("string runs past the end of the file")
        text = self.data[self.at : self.at + length].decode("utf-8")
        self.at += length
        return text

    def value(self, kind: int) -> Scalar | None:
        """A scalar or string, or None after stepping over an array."""
        if kind in _SCALARS:
            return self.take(_SCALARS[kind])
        if kind == _STRING:
            return self.string()
        if kind != _ARRAY:
            raise ValueError(f"unknown value type {kind}")
        item, count = int(self.take("I")), int(self.take("Q"))
        if item in _SCALARS:
            self.at += struct.calcsize(_SCALARS[item]) * count
        elif item == _STRING:
            for _ in range(count):
                length = int(self.take("Q"))
                self.at += length
        else:
            for _ in range(count):
                self.value(item)
        if self.at > len(self.data):
            raise ValueError("an array runs past the end of the file")
        return None


def check_gguf(path: Path) -> None:
    """Fail with one clear line unless `path` is a readable GGUF file."""
    try:
        with path.open("rb") as fh:
            magic = fh.read(4)
    except OSError as exc:
        raise BadInput(f"cannot read model file {path}: {exc.strerror}") from exc
    if magic != GGUF_MAGIC:
        raise BadInput(f"{path} is not a GGUF file (starts with {magic!r}, expected b'GGUF')")


def read_header(path: Path) -> GGUFHeader:
    """The header of the GGUF file at `path`; BadInput names the file if it is not one."""
    check_gguf(path)
    try:
        with path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return _parse(data)
    except OSError as exc:
        raise BadInput(f"cannot read model file {path}: {exc.strerror or exc}") from exc
    except (ValueError, struct.error, UnicodeDecodeError) as exc:
        raise BadInput(f"{path}: corrupt GGUF file ({exc})") from exc


def _parse(data: mmap.mmap) -> GGUFHeader:
    # A big-endian file's version reads with its low half zero in little-endian order.
    (version,) = struct.unpack_from("<I", data, 4)
    order = ">" if version & 0xFFFF == 0 else "<"
    cursor = _Cursor(data, order)
    cursor.at = 4
    version = int(cursor.take("I"))
    if version not in (2, 3):
        raise ValueError(f"GGUF version {version} is not supported (2 or 3)")
    n_tensors, n_kv = int(cursor.take("Q")), int(cursor.take("Q"))
    metadata: dict[str, Scalar] = {}
    for _ in range(n_kv):
        key = cursor.string()
        value = cursor.value(int(cursor.take("I")))
        if value is not None:
            metadata[key] = value
    start = cursor.at
    tensors = []
    for _ in range(n_tensors):
        name = cursor.string()
        n_dims = int(cursor.take("I"))
        shape = tuple(int(cursor.take("Q")) for _ in range(n_dims))
        tensors.append(TensorInfo(name, shape, int(cursor.take("I")), int(cursor.take("Q"))))
    end = cursor.at
    alignment = int(metadata.get("general.alignment", _DEFAULT_ALIGNMENT))
    return GGUFHeader(
        version=version,
        metadata=metadata,
        tensors=tuple(tensors),
        tensor_info_span=(start, end),
        data_offset=-(-end // alignment) * alignment,
    )
