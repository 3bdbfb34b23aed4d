"""Measured noise floors: how far answers move when nothing but the runtime changes.

A gate that alarms on runtime noise is a gate people learn to ignore, so `regress drift`
judges a change against the noise of its cause, and reports say what a hardware difference
typically costs. The figures come from `experiments/noise_floor.py` and the built-in suite (README,
"Noise floors"), measured on 2026-12-01 with llama-cpp-python 0.3.36.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Cause(StrEnum):
    """What differs between a baseline and a rerun of the same pinned model."""

    NOTHING = "nothing"
    """Same model file, runtime and CPU build: reruns are byte-identical."""
    HARDWARE = "hardware"
    """Same runtime version, another CPU build (AVX2 vs AVX-512 kernels)."""
    RUNTIME = "runtime"
    """Another backend or library version (llama-cpp-python, transformers, torch)."""
    MODEL = "model"
    """The pinned model file itself changed (another sha256)."""


@dataclass(frozen=True)
class NoiseFloor:
    """The answer movement one cause produced when measured."""

    flips: float
    """Allowed share of answers whose right/wrong outcome changes: twice the largest share
    measured, so that a cause's own noise is not drift."""
    kl_divergence: float
    """Largest mean KL divergence over the choices measured."""
    source: str
    """Where and how it was measured."""


NOISE_FLOORS: dict[Cause, NoiseFloor] = {
    Cause.NOTHING: NoiseFloor(0.0, 0.0, "reruns, threads 1 vs 2, n_batch 512 vs 64: identical"),
    Cause.HARDWARE: NoiseFloor(
        0.045,
        0.0043,
        "llama.cpp AVX2 vs AVX-512 builds of one version: 1.1% (SmolLM2) and 2.2% (Gemma 3) "
        "on 180 proxy examples, 1.8% on SmolLM2's 500 built-in ones",
    ),
    Cause.RUNTIME: NoiseFloor(
        0.045,
        0.0043,
        "taken as the CPU-build floor: a library upgrade changes kernels the same way",
    ),
}
"""`Cause.MODEL` has no floor: a changed pinned file is always drift."""


def typical(cause: Cause) -> str:
    """One sentence a report shows next to a runtime difference."""
    floor = NOISE_FLOORS[cause]
    return (
        f"measured: up to {floor.flips:.1%} of answers change and mean KL over the choices up "
        f"to {floor.kl_divergence:.3g} ({floor.source})"
    )
