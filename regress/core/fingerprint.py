"""The runtime fingerprint: which backend, libraries and hardware path produced a run's floats.

Two runs of the same model file give byte-identical records only when their *compute path*
matches: the backend and its version, the libraries it computes with (torch for hf), every
result-relevant setting, and the kernels the CPU build uses (llama.cpp's system info, torch's
CPU capability). An AVX2 build and an AVX-512 build of the same llama.cpp version differ by
about 0.02 nats per token, enough to flip close answers. The CPU's vendor, family and model
and the thread count are recorded beside it, shown in reports, but not part of the compute
path: measured here, threads 1 vs 2 and n_batch give identical log-probs, and two CPUs
running the same kernels compute the same floats.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
from dataclasses import asdict, dataclass, field
from functools import cache
from typing import Any

SPEED_ONLY_PARAMS = frozenset(
    {
        "threads",
        "n_batch",
        "batch_size",
        "prefix_reuse",
        "concurrency",
        "timeout",
        "max_retries",
        "openmp_waiting",
    }
)
"""Load settings that change how fast a backend runs, never what it answers."""

MODEL_PARAMS = frozenset({"model_name", "model_sha256"})
"""Load settings that name which model answers (a served model's name and weights): a rerun
of a baseline's examples on another model does not inherit them from the baseline."""

OPENMP_WAIT_VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
"""The environment variables that decide how long idle OpenMP threads spin before they sleep."""


def openmp_waiting() -> str:
    """The OpenMP waiting in this process's environment, as `NAME=value` pairs ('' if unset):
    a speed-only setting (it decides when a waiting thread sleeps, not what it computes)."""
    return " ".join(
        f"{name}={os.environ[name]}" for name in OPENMP_WAIT_VARIABLES if name in os.environ
    )


def result_params(params: dict[str, Any]) -> dict[str, Any]:
    """The load settings that can change results: what caches, merges and reruns must match."""
    return {k: v for k, v in params.items() if k not in SPEED_ONLY_PARAMS}


@dataclass(frozen=True)
class Cpu:
    """The processor a run used, as /proc/cpuinfo names it."""

    vendor: str = ""
    """GenuineIntel, AuthenticAMD, ... ('' where unknown)."""
    family: int | None = None
    model: int | None = None
    name: str = ""
    """The marketing name ("AMD EPYC", "Intel(R) Xeon(R) Processor")."""
    simd: tuple[str, ...] = ()
    """The CPU's vector extensions among those llama.cpp and torch dispatch on."""

    def label(self) -> str:
        """One line: name, vendor family/model."""
        where = f"{self.vendor} family {self.family} model {self.model}" if self.vendor else ""
        return ", ".join(part for part in (self.name, where) if part) or "unknown CPU"


_SIMD = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni")


@cache
def this_cpu() -> Cpu:
    """The CPU this process runs on (Linux /proc/cpuinfo; the platform's name elsewhere)."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if not line.strip():
                    break  # the first processor describes them all
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    except OSError:
        return Cpu(name=platform.processor())
    flags = set(fields.get("flags", "").split())
    return Cpu(
        vendor=fields.get("vendor_id", ""),
        family=_int(fields.get("cpu family")),
        model=_int(fields.get("model")),
        name=fields.get("model name", platform.processor()),
        simd=tuple(flag for flag in _SIMD if flag in flags),
    )


def _int(text: str | None) -> int | None:
    return int(text) if text and text.isdigit() else None


@dataclass(frozen=True)
class HardwarePath:
    """Which kernels computed the floats, and on what CPU with how many threads."""

    kernels: str
    """Compute features of the build: llama.cpp's enabled system-info flags ("AVX2 FMA ..."),
    torch's CPU capability ("torch AVX512"), or "server" when a server computes."""
    cpu: Cpu = field(default_factory=Cpu)
    threads: int | None = None


@dataclass(frozen=True)
class RuntimeFingerprint:
    """What a backend reports about itself; stored as a manifest's `backend`."""

    name: str
    """llama_cpp, hf or openai (lm-eval runs: lm-eval:<model type>)."""
    version: str
    """The backend's own version: llama-cpp-python, transformers, or the server's."""
    params: dict[str, Any] = field(default_factory=dict)
    """Load parameters: n_ctx, threads, dtype, base_url, ..."""
    libraries: dict[str, str] = field(default_factory=dict)
    """Other libraries that compute results (torch for hf)."""
    hardware: HardwarePath = field(default_factory=lambda: HardwarePath(kernels=""))
    build: dict[str, Any] = field(default_factory=dict)
    """Raw build description (llama.cpp's system info line) as the runtime printed it."""

    def compute_path(self) -> dict[str, Any]:
        """Everything that decides the floats (speed-only settings and the CPU model left out)."""
        return {
            "backend": self.name,
            "version": self.version,
            "libraries": dict(sorted(self.libraries.items())),
            "params": result_params(self.params),
            "kernels": self.hardware.kernels,
            "build": self.build,
        }

    def compute_key(self) -> str:
        """sha256 of `compute_path()`: equal keys give byte-identical records."""
        blob = json.dumps(self.compute_path(), sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], environment: dict[str, Any]) -> RuntimeFingerprint:
        """Parse a manifest's `backend`; a schema-1 manifest gets its hardware path from the
        llama.cpp system info and the CPU name it recorded."""
        hardware = data.get("hardware")
        build = data.get("build") or {}
        if hardware is None:
            cpu = Cpu(name=str(environment.get("cpu", "")))
            hardware = HardwarePath(
                kernels=llama_kernels(str(build.get("system_info", ""))), cpu=cpu
            )
        else:
            cpu = Cpu(**{**hardware.get("cpu", {}), "simd": tuple(hardware["cpu"].get("simd", ()))})
            hardware = HardwarePath(
                kernels=hardware["kernels"], cpu=cpu, threads=hardware.get("threads")
            )
        return cls(
            name=data["name"],
            version=str(data["version"]),
            params=dict(data.get("params") or {}),
            libraries=dict(data.get("libraries") or {}),
            hardware=hardware,
            build=dict(build),
        )


def llama_kernels(system_info: str) -> str:
    """llama.cpp's `AVX2 = 1 | AVX512 = 0 | ...` as the sorted names of enabled features."""
    enabled = sorted(k for k, v in re.findall(r"(\w+) = (\w+)", system_info) if v != "0")
    return " ".join(enabled)


def hardware_differences(old: RuntimeFingerprint, new: RuntimeFingerprint) -> list[str]:
    """Human lines naming how two runs' hardware paths differ (empty when they match)."""
    changes = []
    old_k, new_k = set(old.hardware.kernels.split()), set(new.hardware.kernels.split())
    if old_k != new_k:
        gone = " ".join(sorted(old_k - new_k)) or "-"
        added = " ".join(sorted(new_k - old_k)) or "-"
        # A server's "kernels" are its layout: parallel degrees, batching, prefix caching.
        what = "server layout differs" if "server" in old_k & new_k else "CPU build kernels differ"
        changes.append(f"{what}: only in the baseline {gone}; only here {added}")
    if old.hardware.cpu.label() != new.hardware.cpu.label():
        changes.append(f"CPU {old.hardware.cpu.label()} -> {new.hardware.cpu.label()}")
    return changes


def default_threads() -> int:
    """Threads a CPU backend uses by default: the cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1
