"""Where answers change: flip rates by the reference's margin quantile, measured on real candidates.

A proxy's allocation (regress.proxy.build) and `regress selftest`'s simulated candidates both need
to know how likely an example is to flip given how sure the reference model was. That is
measured, not assumed: pair a reference with real candidates (requantizations), rank each
unit's examples by the reference's margin, and count flips per quantile bin.
`experiments/proxy_efficiency.py` measures the default shipped here.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from regress.core import safe_json
from regress.core.errors import BadInput
from regress.core.manifest import Run
from regress.core.proxy_design import Calibration
from regress.gate.margins import margin_order
from regress.gate.pairing import pair_runs

BINS = 10

DEFAULT = Calibration(
    name="smollm2-requant-arc_easy",
    source=(
        "smollm2-135m (Q4_1) vs Q8_0, Q6_K, Q4_0, Q2_K, IQ3_S requantizations on the whole "
        "ARC-Easy test set (2376 examples), llama.cpp AVX2 build; bench/proxy_efficiency.py"
    ),
    points=(
        (0.05, 0.3319),
        (0.15, 0.2253),
        (0.25, 0.1689),
        (0.35, 0.1477),
        (0.45, 0.1286),
        (0.55, 0.1089),
        (0.65, 0.0807),
        (0.75, 0.0717),
        (0.85, 0.0387),
        (0.95, 0.0126),
    ),
)
"""Measured: the mean flip rate per margin decile over five real requantizations. Relative
rates drive a proxy's allocation; their mean (13.2%) is selftest's default discordance."""


def margin_ranks(run: Run, tasks: Sequence[str]) -> dict[tuple[str, int], float]:
    """(task, doc_id) -> quantile of the reference's margin among `tasks`' examples, in [0, 1].

    Examples without a margin (failed ones) rank lowest (regress.gate.margins.margin_order).
    """
    keyed = margin_order(run, tasks)
    last = max(1, len(keyed) - 1)
    return {(task, doc): rank / last for rank, (_, task, doc) in enumerate(keyed)}


def measure(reference: Run, candidates: Sequence[Run], name: str, bins: int = BINS) -> Calibration:
    """Mean flip rate per margin-quantile bin of `reference`, over the `candidates`.

    Each candidate is paired with the reference on every task they share; a flip is an
    example whose right/wrong outcome changed (a failure counts as wrong).
    """
    flips = np.zeros((len(candidates), bins))
    counts = np.zeros((len(candidates), bins))
    tasks = []
    for i, candidate in enumerate(candidates):
        shared = [
            info
            for t, info in sorted(reference.manifest.tasks.items())
            if t in candidate.manifest.tasks
        ]
        pairing = pair_runs(reference, candidate, shared)
        for info in shared:
            ranks = margin_ranks(reference, [info.name])
            tasks.append(info.name)
            for base, cand in pairing.pairs[info.name]:
                k = min(bins - 1, int(ranks[info.name, base.doc_id] * bins))
                counts[i, k] += 1
                flips[i, k] += base.right != cand.right
    if not counts.sum():
        raise ValueError("no paired example to calibrate on")
    rates = (flips / np.maximum(counts, 1)).mean(axis=0)
    models = ", ".join(c.manifest.model.quantization or c.manifest.model.ref for c in candidates)
    source = (
        f"{reference.manifest.model.ref} vs {models} on {', '.join(sorted(set(tasks)))} "
        f"({int(counts[0].sum())} examples)"
    )
    points = tuple(((k + 0.5) / bins, float(rate)) for k, rate in enumerate(rates))
    return Calibration(name=name, source=source, points=points)


def load_calibration(path: Path | None) -> Calibration:
    """A calibration written by `regress proxy calibrate`; None gives the shipped DEFAULT."""
    if path is None:
        return DEFAULT
    try:
        data = safe_json.loads(path.read_text(encoding="utf-8"))
        points = tuple((float(q), float(f)) for q, f in data["points"])
        calibration = Calibration(name=str(data["name"]), source=str(data["source"]), points=points)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BadInput(f"{path}: not a calibration file ({exc})") from exc
    quantiles = [q for q, _ in points]
    if not points or quantiles != sorted(quantiles) or not all(0 <= f <= 1 for _, f in points):
        raise BadInput(
            f"{path}: calibration points must be (quantile, rate) ascending, rates in [0, 1]"
        )
    return calibration
