"""Which model to ship: accuracy, speed and memory side by side, and a choice under
constraints with its reason (`regress compare`).

Accuracy comes from a stored run of the same model file (matched by sha256) or from an
evaluation run now; speed and memory from a bench file of the same model or from a bench run
now. The rule: drop every model that breaks a constraint (saying which and by how much),
then take the most accurate of the rest; when accuracies are within each other's 95%
intervals, the faster one, since the data cannot tell them apart.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from regress.core.errors import BadInput

_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
}


def parse_bytes(text: str) -> int:
    """`1GB`, `512MiB`, `300000000` as bytes."""
    match = re.fullmatch(r"\s*([0-9.]+)\s*([a-zA-Z]*)\s*", text)
    unit = match.group(2).lower() if match else ""
    if not match or unit not in _UNITS:
        raise BadInput(f"--max-memory: expected a size such as 1GB or 512MiB, got {text!r}")
    return int(float(match.group(1)) * _UNITS[unit])


@dataclass(frozen=True)
class Constraints:
    """Limits a model must meet (None: no limit)."""

    max_memory_bytes: int | None = None
    """Peak resident memory while benchmarking."""
    min_tps: float | None = None
    """Generation tokens/s (the bench's tg test)."""
    max_ttft_ms: float | None = None
    """Median time to first token."""


@dataclass(frozen=True)
class Contender:
    """One model's measured figures."""

    model: str
    sha256: str
    quantization: str
    accuracy: float | None
    accuracy_low: float | None
    accuracy_high: float | None
    accuracy_from: str
    """The run the accuracy comes from (its name), or '' when none."""
    tg_tps: float
    pp_tps: float
    ttft_p50_ms: float
    peak_rss_bytes: int


@dataclass(frozen=True)
class Choice:
    """The recommendation, or None with the reason why no model fits."""

    contenders: tuple[Contender, ...]
    chosen: Contender | None
    reason: str
    rejected: dict[str, str]
    """model -> the constraint it breaks."""


def _violations(c: Contender, limits: Constraints) -> list[str]:
    broken = []
    if limits.max_memory_bytes is not None and c.peak_rss_bytes > limits.max_memory_bytes:
        broken.append(
            f"peak RSS {c.peak_rss_bytes / 2**20:.0f} MiB > {limits.max_memory_bytes / 2**20:.0f}"
            " MiB"
        )
    if limits.min_tps is not None and not c.tg_tps >= limits.min_tps:
        broken.append(f"generation {c.tg_tps:.1f} tok/s < {limits.min_tps:g}")
    if limits.max_ttft_ms is not None and not c.ttft_p50_ms <= limits.max_ttft_ms:
        broken.append(f"TTFT p50 {c.ttft_p50_ms:.0f} ms > {limits.max_ttft_ms:g} ms")
    return broken


def choose(contenders: Sequence[Contender], limits: Constraints) -> Choice:
    """Apply the module's rule."""
    rejected = {c.model: "; ".join(v) for c in contenders if (v := _violations(c, limits))}
    fit = [c for c in contenders if c.model not in rejected]
    if not fit:
        return Choice(tuple(contenders), None, "no model meets the constraints", rejected)
    scored = [c for c in fit if c.accuracy is not None]
    if not scored:
        best = max(fit, key=lambda c: c.tg_tps)
        why = f"fastest generation ({best.tg_tps:.1f} tok/s); no accuracy measured"
        return Choice(tuple(contenders), best, why, rejected)
    top = max(scored, key=lambda c: (c.accuracy, c.tg_tps))
    # Models whose interval reaches the top one's estimate are not shown to be less accurate.
    tied = [c for c in scored if (c.accuracy_high or c.accuracy or 0) >= (top.accuracy or 0)]
    best = max(tied, key=lambda c: c.tg_tps)
    if len(tied) == 1:
        others = ", ".join(f"{c.model} {c.accuracy:.3f}" for c in scored if c is not top)
        why = f"most accurate that meets the constraints ({top.accuracy:.3f}"
        why += f" vs {others})" if others else ")"
    else:
        names = ", ".join(f"{c.model} {c.accuracy:.3f}" for c in tied)
        why = (
            f"the fastest generation ({best.tg_tps:.1f} tok/s) of the models whose accuracy is "
            f"within the 95% interval of the best ({names})"
        )
    if rejected:
        why += "; excluded: " + "; ".join(f"{m} ({v})" for m, v in rejected.items())
    return Choice(tuple(contenders), best, why, rejected)
