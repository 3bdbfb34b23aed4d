"""Which configuration of a sweep to ship under constraints, why, and what the next relaxation
of a constraint would buy (`regress recommend`).

The rule (regress.bench.choose's, over a sweep): drop every configuration that breaks a limit on
its estimate; take the most accurate of the rest; the configurations whose accuracy the
paired test on shared examples cannot tell from it are tied, and of those the one best in
`prefer` (latency by default) is chosen. Then, for each limit given, the smallest change of
it that admits a configuration buying something: more accuracy for a latency or memory
limit, lower latency for an accuracy floor.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from regress.bench.serving import parse_slo
from regress.core.errors import BadInput

MIB = 2**20


def parse_latency_ms(text: str) -> float:
    """`50ms`, `0.05s` or `50` (milliseconds) per generated token."""
    try:
        return parse_slo(f"tpot={text.strip()}")["tpot"]
    except BadInput:
        raise BadInput(
            f"--max-latency: expected a time such as 50ms or 0.05s, got {text!r}"
        ) from None


class Prefer(StrEnum):
    """What decides among configurations the accuracy test cannot tell apart."""

    LATENCY = "latency"
    MEMORY = "memory"
    SIZE = "size"


@dataclass(frozen=True)
class Limits:
    """Constraints a configuration must meet on its estimates (None: no limit)."""

    max_latency_ms: float | None = None
    """Milliseconds per generated token (1000 / tg tokens/s)."""
    max_memory_bytes: int | None = None
    """Peak RSS of a process running the model."""
    min_accuracy: float | None = None
    """Pooled accuracy over the sweep's tasks."""


@dataclass(frozen=True)
class Option:
    """One distinct configuration's figures."""

    name: str
    accuracy: float
    acc_low: float
    acc_high: float
    latency_ms: float
    peak_rss_bytes: int
    size_bytes: int


@dataclass(frozen=True)
class Relaxation:
    """What loosening one limit would admit."""

    flag: str
    """The option to change: --max-latency, --max-memory, --min-accuracy."""
    to: str
    """The value that admits `admits`."""
    admits: str
    buys: str


@dataclass(frozen=True)
class Recommendation:
    """The chosen configuration (None: none fits), the reasons and the next relaxations."""

    chosen: Option | None
    why: str
    rejected: dict[str, str]
    """configuration -> the limits it breaks."""
    relaxations: tuple[Relaxation, ...]


AccuracyTest = Callable[[str, str], float]
"""p(a, b): one-sided paired p-value that `a` is less accurate than `b`."""


def violations(option: Option, limits: Limits) -> dict[str, str]:
    """Each limit `option` breaks (by flag), with the figures."""
    broken = {}
    if limits.max_latency_ms is not None and option.latency_ms > limits.max_latency_ms:
        broken["--max-latency"] = f"{option.latency_ms:.1f} ms/token > {limits.max_latency_ms:g} ms"
    if limits.max_memory_bytes is not None and option.peak_rss_bytes > limits.max_memory_bytes:
        broken["--max-memory"] = (
            f"peak RSS {option.peak_rss_bytes / MIB:.0f} MiB > "
            f"{limits.max_memory_bytes / MIB:.0f} MiB"
        )
    if limits.min_accuracy is not None and option.accuracy < limits.min_accuracy:
        broken["--min-accuracy"] = f"accuracy {option.accuracy:.3f} < {limits.min_accuracy:g}"
    return broken


def _preferred(prefer: Prefer) -> Callable[[Option], float]:
    return {
        Prefer.LATENCY: lambda o: o.latency_ms,
        Prefer.MEMORY: lambda o: float(o.peak_rss_bytes),
        Prefer.SIZE: lambda o: float(o.size_bytes),
    }[prefer]


def _choose(
    fit: Sequence[Option], p_less: AccuracyTest, alpha: float, prefer: Prefer
) -> tuple[Option, str]:
    key = _preferred(prefer)
    top = max(fit, key=lambda o: (o.accuracy, -key(o)))
    tied = [o for o in fit if o is top or p_less(o.name, top.name) >= alpha]
    best = min(tied, key=lambda o: (key(o), -o.accuracy))
    figures = f"accuracy {best.accuracy:.3f} [{best.acc_low:.3f}, {best.acc_high:.3f}]"
    figures += f", {best.latency_ms:.1f} ms/token, peak RSS {best.peak_rss_bytes / MIB:.0f} MiB"
    if best is top and len(tied) == 1:
        return best, f"the most accurate that meets the limits ({figures})"
    others = ", ".join(f"{o.name} {o.accuracy:.3f}" for o in tied if o is not best)
    if best is top:
        return best, (
            f"the most accurate and the best {prefer.value} ({figures}) of the configurations "
            f"the paired test does not show less accurate (one-sided p >= {alpha:g}: {others})"
        )
    return best, (
        f"the best {prefer.value} ({figures}) of the configurations the paired test does not "
        f"show less accurate than the most accurate, {top.name} (one-sided p >= {alpha:g}: "
        f"{others})"
    )


def recommend(
    options: Sequence[Option],
    limits: Limits,
    p_less: AccuracyTest,
    alpha: float = 0.05,
    prefer: Prefer = Prefer.LATENCY,
) -> Recommendation:
    """Apply the module's rule to a sweep's distinct configurations."""
    if not options:
        raise BadInput("recommend: the sweep has no measured configuration")
    broken = {o.name: violations(o, limits) for o in options}
    rejected = {name: "; ".join(v.values()) for name, v in broken.items() if v}
    fit = [o for o in options if not broken[o.name]]
    chosen, why = (None, "no configuration meets the limits")
    if fit:
        chosen, why = _choose(fit, p_less, alpha, prefer)
    relaxations = tuple(_relaxations(options, broken, limits, chosen, p_less))
    return Recommendation(chosen, why, rejected, relaxations)


def _relaxations(
    options: Sequence[Option],
    broken: dict[str, dict[str, str]],
    limits: Limits,
    chosen: Option | None,
    p_less: AccuracyTest,
) -> list[Relaxation]:
    out = []
    for flag in ("--max-latency", "--max-memory", "--min-accuracy"):
        # Configurations that break this limit only: loosening it alone admits them.
        only = [o for o in options if list(broken[o.name]) == [flag]]
        if flag == "--min-accuracy":
            gains = [o for o in only if chosen is None or o.latency_ms < chosen.latency_ms]
            if not gains:
                continue
            best = max(gains, key=lambda o: o.accuracy)
            buys = f"{best.latency_ms:.1f} ms/token"
            if chosen is not None:
                buys += f" instead of {chosen.latency_ms:.1f}"
            out.append(Relaxation(flag, f"{best.accuracy:.3f}", best.name, buys))
            continue
        gains = [o for o in only if chosen is None or o.accuracy > chosen.accuracy]
        if not gains:
            continue
        if flag == "--max-latency":
            best = min(gains, key=lambda o: (o.latency_ms, -o.accuracy))
            to = f"{best.latency_ms:.1f}ms"
        else:
            best = min(gains, key=lambda o: (o.peak_rss_bytes, -o.accuracy))
            to = f"{best.peak_rss_bytes / MIB:.0f}MiB"
        buys = f"accuracy {best.accuracy:.3f}"
        if chosen is not None:
            p = p_less(chosen.name, best.name)
            verdict = "a significant gain" if p < 0.05 else "not separable by the paired test"
            buys += f" instead of {chosen.accuracy:.3f} (paired p={p:.2f}: {verdict})"
        out.append(Relaxation(flag, to, best.name, buys))
    return out


def render(rec: Recommendation, limits_text: str) -> str:
    """The recommendation as plain text lines."""
    lines = [f"Limits: {limits_text or 'none'}"]
    if rec.chosen is None:
        lines.append(f"Recommended: none: {rec.why}.")
    else:
        lines.append(f"Recommended: {rec.chosen.name}: {rec.why}.")
    if rec.rejected:
        lines.append("Excluded: " + "; ".join(f"{k} ({v})" for k, v in rec.rejected.items()) + ".")
    for r in rec.relaxations:
        lines.append(f"Relaxing {r.flag} to {r.to} would admit {r.admits}: {r.buys}.")
    if not rec.relaxations and rec.rejected:
        lines.append("No single relaxation admits a better configuration.")
    return "\n".join(lines)
