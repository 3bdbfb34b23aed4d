"""The latency gate: is a candidate significantly slower than the baseline, beyond a margin?

Both models are loaded side by side and timed on the same prompts in the order A B A B for
each prompt of each round, so drift of a shared machine (another job starting, a CPU clock
change) reaches both sides alike. From each quadruple:

- candidate vs baseline: the pairs (A1, B1) and (A2, B2), as log(B / A);
- the A/A noise floor, measured the same way: the pair (A1, A2), as log(A2 / A1).

`paired_shift` turns each set into a Hodges-Lehmann ratio with one-sided bounds. The noise
floor is the largest relative change the A/A bounds admit. The verdict:

- SLOWER (exit 1) when the lower bound of B/A exceeds 1 + max(max_slowdown, noise floor):
  the slowdown is significant, beyond the policy's margin and beyond what identical models
  show on this machine now;
- INCONCLUSIVE when it exceeds 1 + max_slowdown but not the noise floor (the machine is too
  noisy to tell);
- PASS otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from regress.backends import load_backend
from regress.backends.models import resolve_model
from regress.bench.latency import time_request
from regress.bench.prompts import BUILTIN_PROMPTS
from regress.bench.run import TIMED_BACKENDS
from regress.bench.shift import Shift, paired_shift
from regress.core.errors import BadInput
from regress.core.fingerprint import RuntimeFingerprint
from regress.core.manifest import ModelInfo


class SpeedVerdict(StrEnum):
    """The latency gate's answer."""

    PASS = "PASS"
    SLOWER = "SLOWER"
    INCONCLUSIVE = "INCONCLUSIVE"


@dataclass(frozen=True)
class SpeedGateOptions:
    """Baseline and candidate (a model reference plus backend settings each) and the test."""

    baseline: str
    candidate: str
    backend: str = "llama_cpp"
    baseline_args: Mapping[str, Any] = field(default_factory=dict)
    candidate_args: Mapping[str, Any] = field(default_factory=dict)
    prompts: tuple[str, ...] = BUILTIN_PROMPTS
    output_len: int = 32
    rounds: int = 3
    warmup: int = 1
    max_slowdown: float = 0.10
    """Policy `speed: {max_slowdown}`: the tolerated relative increase of latency."""
    alpha: float = 0.05

    def __post_init__(self) -> None:
        if self.backend not in TIMED_BACKENDS:
            raise BadInput(f"the speed gate times {', '.join(TIMED_BACKENDS)} only")
        if self.rounds < 1 or self.output_len < 1 or not self.prompts:
            raise BadInput("speed gate: rounds and output length must be >= 1, prompts given")


@dataclass(frozen=True)
class Decision:
    """The verdict from the two shifts, with its reason in one sentence."""

    verdict: SpeedVerdict
    reason: str
    ratio: Shift
    """Candidate over baseline (end-to-end latency)."""
    noise: Shift
    """Baseline over itself (A2 / A1)."""
    noise_floor: float
    """Largest relative change the A/A bounds admit (inf when unbounded)."""


@dataclass(frozen=True)
class SpeedGateResult:
    """A gate run: the decision, both sides' identities and every timing in run order."""

    decision: Decision
    baseline: ModelInfo
    candidate: ModelInfo
    baseline_fingerprint: RuntimeFingerprint
    candidate_fingerprint: RuntimeFingerprint
    order: tuple[tuple[str, int, float], ...]
    """(side 'A' or 'B', prompt index, end-to-end ms) in the order they ran."""
    max_slowdown: float


def decide(
    ab_log_ratios: Sequence[float],
    aa_log_ratios: Sequence[float],
    max_slowdown: float,
    alpha: float,
) -> Decision:
    """Apply the gate's rule (module docstring) to paired log ratios."""
    ratio = paired_shift(ab_log_ratios, alpha)
    noise = paired_shift(aa_log_ratios, alpha)
    floor = max(noise.high - 1.0, 1.0 / noise.low - 1.0) if noise.low > 0 else math.inf
    margin = max(max_slowdown, floor)
    shown = f"B/A {ratio.ratio:.3f} (lower bound {ratio.low:.3f}, {ratio.n_pairs} pairs)"
    if ratio.low > 1.0 + margin:
        verdict, why = (
            SpeedVerdict.SLOWER,
            (f"significantly slower beyond {max_slowdown:.0%} and the A/A noise floor {floor:.1%}"),
        )
    elif ratio.low > 1.0 + max_slowdown:
        verdict, why = (
            SpeedVerdict.INCONCLUSIVE,
            (
                f"slower beyond {max_slowdown:.0%} but within the A/A noise floor {floor:.1%}: "
                "rerun on a quieter machine"
            ),
        )
    else:
        verdict, why = (
            SpeedVerdict.PASS,
            (f"no significant slowdown beyond {max_slowdown:.0%} (A/A noise floor {floor:.1%})"),
        )
    return Decision(verdict, f"{shown}: {why}", ratio, noise, floor)


def _pairs(order: Sequence[tuple[str, int, float]]) -> tuple[list[float], list[float]]:
    """log(B/A) of each adjacent A,B and log(A2/A1) of each quadruple A B A B."""
    ab, aa = [], []
    for start in range(0, len(order), 4):
        a1, b1, a2, b2 = (ms for _, _, ms in order[start : start + 4])
        ab += [math.log(b1 / a1), math.log(b2 / a2)]
        aa.append(math.log(a2 / a1))
    return ab, aa


def run_speed_gate(
    options: SpeedGateOptions, progress: Callable[[str], None] = lambda _: None
) -> SpeedGateResult:
    """Load both sides, time them interleaved (A B A B per prompt and round), decide."""
    models = {"A": resolve_model(options.baseline), "B": resolve_model(options.candidate)}
    sides: dict[str, Any] = {}
    try:
        for side, args in (("A", options.baseline_args), ("B", options.candidate_args)):
            sides[side] = load_backend(options.backend, models[side], dict(args))
            for i in range(options.warmup):
                prompt = options.prompts[i % len(options.prompts)]
                for _ in sides[side].stream(prompt, options.output_len):
                    pass
        order: list[tuple[str, int, float]] = []
        for round_ in range(options.rounds):
            progress(f"speed gate: round {round_ + 1}/{options.rounds}")
            for i, prompt in enumerate(options.prompts):
                for side in "ABAB":
                    timing = time_request(sides[side], i, prompt, options.output_len)
                    order.append((side, i, timing.e2el_ms))
        prints = {side: backend.fingerprint() for side, backend in sides.items()}
    finally:
        for backend in sides.values():
            backend.close()
    ab, aa = _pairs(order)
    return SpeedGateResult(
        decision=decide(ab, aa, options.max_slowdown, options.alpha),
        baseline=models["A"].info,
        candidate=models["B"].info,
        baseline_fingerprint=prints["A"],
        candidate_fingerprint=prints["B"],
        order=tuple(order),
        max_slowdown=options.max_slowdown,
    )
