"""A sweep's trade-offs: its table, the Pareto front over chosen objectives with the tests
that separate configurations, the hypervolume, and the warnings a reader needs.

Configurations with the same tensors (`identical_to`) are one point: they are listed, not
counted twice. Objectives and their tests (each two-sided at `alpha` per pair, uncorrected
across pairs):

| objective | direction | test between two configurations |
| accuracy | max | McNemar mid-p on the shared examples (paired through regress.gate.pairing) |
| latency_ms | min | Welch's t on the tg repetitions (ms per generated token) |
| pp_ts | max | Welch's t on the pp repetitions |
| peak_rss | min | one measurement each: differences under RSS_TOLERANCE are not separable |
| size | min | exact (file bytes) |
| ppl, kld | min | paired t on the per-token values over the same WikiText-2 tokens |
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats as sps

from regress.core.errors import BadInput
from regress.core.fingerprint import result_params
from regress.core.manifest import Run
from regress.core.store import read_run
from regress.gate.pairing import pair_runs
from regress.stats import mcnemar_pvalue
from regress.sweep.pareto import (
    Direction,
    Judgement,
    Objective,
    Standing,
    default_reference,
    hypervolume,
    standings,
)
from regress.sweep.results import ConfigResult, SweepResults, load_results, slug
from regress.sweep.token_kld import TokenValues

RSS_TOLERANCE = 0.02
"""Relative peak-RSS difference below which two single measurements are not separable."""
KLD_NEAR_LOSSLESS = 0.01
"""Mean KLD under which a configuration is near-lossless and KLD ranks by noise."""

OBJECTIVES: dict[str, tuple[Direction, str]] = {
    "accuracy": (Direction.MAX, "accuracy"),
    "latency_ms": (Direction.MIN, "ms per generated token"),
    "pp_ts": (Direction.MAX, "prompt tokens/s"),
    "peak_rss": (Direction.MIN, "peak RSS (MiB)"),
    "size": (Direction.MIN, "file size (MiB)"),
    "ppl": (Direction.MIN, "WikiText-2 perplexity"),
    "kld": (Direction.MIN, "mean KLD vs source"),
}
DEFAULT_OBJECTIVES = ("accuracy", "latency_ms", "peak_rss")


def objective_value(result: ConfigResult, name: str) -> float:
    """One objective's estimate for a configuration (memory and size in MiB)."""
    values = {
        "accuracy": lambda r: r.overall.accuracy,
        "latency_ms": lambda r: r.speed.latency_ms,
        "pp_ts": lambda r: r.speed.pp_ts,
        "peak_rss": lambda r: r.speed.peak_rss_bytes / 2**20,
        "size": lambda r: r.size_bytes / 2**20,
        "ppl": lambda r: r.divergence.ppl,
        "kld": lambda r: r.divergence.kld_mean,
    }
    return float(values[name](result))


def parse_objectives(text: str) -> tuple[str, ...]:
    """`accuracy,latency_ms,peak_rss` as validated names."""
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in OBJECTIVES]
    if len(names) < 2 or unknown:
        raise BadInput(
            f"--objectives: give two or more of {', '.join(OBJECTIVES)}"
            + (f" (unknown: {', '.join(unknown)})" if unknown else "")
        )
    return names


def table(sweep: SweepResults) -> pd.DataFrame:
    """One row per configuration, the source first."""
    rows = []
    for r in sweep.results:
        a, d, s = r.overall, r.divergence, r.speed
        rows.append(
            {
                "config": r.name,
                "quantization": r.quantization,
                "size_mib": r.size_bytes / 2**20,
                "bpw": r.bits_per_weight,
                "accuracy": a.accuracy,
                "acc_low": a.low,
                "acc_high": a.high,
                "delta": a.delta,
                "delta_low": a.delta_low,
                "delta_high": a.delta_high,
                "p_worse": a.p_worse,
                "ppl": d.ppl,
                "ppl_se": d.ppl_se,
                "kld": d.kld_mean,
                "kld_se": d.kld_se,
                "same_top": d.same_top,
                "same_top_se": d.same_top_se,
                "pp_ts": s.pp_ts,
                "tg_ts": s.tg_ts,
                "latency_ms": s.latency_ms,
                "peak_rss_mib": s.peak_rss_bytes / 2**20,
                "identical_to": r.identical_to or "",
            }
        )
    return pd.DataFrame(rows)


def paired_accuracy_p(outcomes: Sequence[tuple[bool, bool]]) -> tuple[float, float]:
    """From (first right, second right) per shared example: the one-sided McNemar mid-p that
    the second is more accurate than the first, and that it is less accurate."""
    only_first = sum(1 for a, b in outcomes if a and not b)
    only_second = sum(1 for a, b in outcomes if b and not a)
    # mcnemar_pvalue(b, c) tests "the candidate is worse", b counting the baseline's own wins.
    return (
        float(mcnemar_pvalue(only_second, only_first)),
        float(mcnemar_pvalue(only_first, only_second)),
    )


class _Tests:
    """Pairwise tests between the distinct configurations of one sweep folder."""

    def __init__(self, out_dir: Path, results: list[ConfigResult], alpha: float) -> None:
        self.out_dir = out_dir
        self.results = results
        self.alpha = alpha

    @cache  # noqa: B019 - one instance per analysis; runs are read once
    def run(self, name: str) -> Run:
        return read_run(self.out_dir / "runs" / slug(name))

    @cache  # noqa: B019
    def _tokens(self, name: str) -> TokenValues:
        return TokenValues.load(self.out_dir / "tokens" / f"{slug(name)}.npz")

    def accuracy_p(self, i: int, j: int) -> tuple[float, float]:
        """One-sided mid-p of (i better than j, i worse than j) on shared examples."""
        a, b = self.run(self.results[i].name), self.run(self.results[j].name)
        pairs = pair_runs(b, a, list(b.manifest.tasks.values())).pairs
        # A failed example counts as wrong, as in the gate; perplexity records have no 0/1.
        return paired_accuracy_p(
            [
                (x.right, y.right)
                for task in pairs.values()
                for x, y in task
                if x.correct is not None or y.correct is not None or not (x.ok and y.ok)
            ]
        )

    def per_token_p(self, i: int, j: int, field: str) -> float:
        """Two-sided paired t p-value of the per-token values (nll or kld)."""
        a = getattr(self._tokens(self.results[i].name), field).astype(np.float64)
        b = getattr(self._tokens(self.results[j].name), field).astype(np.float64)
        diff = a - b
        if not np.any(diff):
            return 1.0
        return float(sps.ttest_1samp(diff, 0.0).pvalue)

    def judge(self, i: int, j: int, objective: str) -> Judgement:
        ri, rj = self.results[i], self.results[j]
        vi, vj = objective_value(ri, objective), objective_value(rj, objective)
        direction = OBJECTIVES[objective][0]
        better = vi > vj if direction is Direction.MAX else vi < vj
        if vi == vj:
            return Judgement.NOT_SEPARABLE
        if objective == "accuracy":
            p_better, p_worse = self.accuracy_p(i, j)
            if p_better < self.alpha / 2:
                return Judgement.BETTER
            return Judgement.WORSE if p_worse < self.alpha / 2 else Judgement.NOT_SEPARABLE
        if objective in ("latency_ms", "pp_ts"):
            p = _welch_p(ri, rj, objective)
        elif objective == "peak_rss":
            p = 0.0 if abs(vi - vj) > RSS_TOLERANCE * max(vi, vj) else 1.0
        elif objective == "size":
            p = 0.0
        else:
            p = self.per_token_p(i, j, "nll" if objective == "ppl" else "kld")
        if p >= self.alpha:
            return Judgement.NOT_SEPARABLE
        return Judgement.BETTER if better else Judgement.WORSE


def _welch_p(a: ConfigResult, b: ConfigResult, objective: str) -> float:
    if objective == "latency_ms":
        xa = 1000.0 / np.asarray(a.speed.tg_samples_ts)
        xb = 1000.0 / np.asarray(b.speed.tg_samples_ts)
        return float(sps.ttest_ind(xa, xb, equal_var=False).pvalue)
    n = len(a.speed.tg_samples_ts)  # pp and tg have the same number of repetitions
    return float(
        sps.ttest_ind_from_stats(
            a.speed.pp_ts, a.speed.pp_sd, n, b.speed.pp_ts, b.speed.pp_sd, n, equal_var=False
        ).pvalue
    )


@dataclass(frozen=True)
class Frontier:
    """The Pareto analysis of one sweep over chosen objectives."""

    objectives: tuple[Objective, ...]
    names: tuple[str, ...]
    """Distinct configurations (the same tensors counted once), the source first."""
    points: np.ndarray
    standings: tuple[Standing, ...]
    reference: tuple[float, ...]
    """The hypervolume's reference point (default: each objective's worst, 10% of its range
    further out)."""
    hypervolume: float
    alpha: float
    warnings: tuple[str, ...]

    def status(self, name: str) -> str:
        """front / dominated by X / not separable from X, for one configuration."""
        i = self.names.index(name)
        s = self.standings[i]
        if s.on_front:
            return "front"
        if s.dominated_by:
            return "dominated by " + ", ".join(self.names[k] for k in s.dominated_by)
        return "not separable from " + ", ".join(self.names[k] for k in s.unsupported_by)


def analyse(
    out_dir: Path,
    objectives: tuple[str, ...] = DEFAULT_OBJECTIVES,
    alpha: float = 0.05,
    reference: tuple[float, ...] | None = None,
) -> tuple[SweepResults, Frontier]:
    """Read a sweep folder and place its configurations."""
    sweep = load_results(out_dir)
    distinct = [r for r in sweep.results if r.identical_to is None]
    if not distinct:
        raise BadInput(f"{out_dir}: no configuration measured yet")
    dirs = tuple(OBJECTIVES[o][0] for o in objectives)
    points = np.array([[objective_value(r, o) for o in objectives] for r in distinct])
    tests = _Tests(out_dir, distinct, alpha)
    found = standings(points, dirs, lambda i, j, k: tests.judge(i, j, objectives[k]))
    ref = np.asarray(reference, dtype=float) if reference else default_reference(points, dirs)
    if len(ref) != len(objectives):
        raise BadInput(f"--reference: give {len(objectives)} values, one per objective")
    warnings = [
        *_identical_notes(sweep),
        *_backend_warnings(distinct, tests),
        *_kld_warnings(distinct, tests, alpha),
    ]
    frontier = Frontier(
        objectives=tuple(Objective(o, d) for o, d in zip(objectives, dirs, strict=True)),
        names=tuple(r.name for r in distinct),
        points=points,
        standings=tuple(found),
        reference=tuple(float(x) for x in ref),
        hypervolume=hypervolume(points, dirs, tuple(float(x) for x in ref)),
        alpha=alpha,
        warnings=tuple(warnings),
    )
    return sweep, frontier


def _identical_notes(sweep: SweepResults) -> list[str]:
    notes = [
        f"{r.name} has the same tensors as {r.identical_to} (llama.cpp fell back to the same "
        "types; only the header differs): one configuration, measured once"
        for r in sweep.results
        if r.identical_to
    ]
    notes += [f"{s.name} skipped: {s.reason}" for s in sweep.skipped]
    if sweep.pending:
        notes.append(f"not measured yet: {', '.join(sweep.pending)} (rerun the sweep)")
    return notes


def _backend_warnings(results: list[ConfigResult], tests: _Tests) -> list[str]:
    """Accuracy pairs only within one scoring code: runs whose backend versions or settings
    differ (a regress upgrade mid-sweep) are named. Speed-only settings (threads, OpenMP
    waiting) change no answer and are not compared."""
    groups: dict[str, list[str]] = {}
    for r in results:
        backend = tests.run(r.name).manifest.backend
        params = result_params(backend.params)
        key = json.dumps([backend.name, backend.version, params], sort_keys=True)
        groups.setdefault(key, []).append(r.name)
    if len(groups) < 2:
        return []
    described = "; ".join(f"{', '.join(names)}: {key}" for key, names in groups.items())
    return [
        f"accuracy was scored by different backend settings ({described}): the paired tests "
        "mix them; run the sweep again with --reevaluate"
    ]


def _kld_warnings(results: list[ConfigResult], tests: _Tests, alpha: float) -> list[str]:
    """Neighbours in KLD order whose per-token KLDs do not differ significantly, among
    near-lossless configurations: KLD cannot rank them."""
    order = sorted(
        (i for i, r in enumerate(results) if r.divergence.kld_mean > 0),
        key=lambda i: results[i].divergence.kld_mean,
    )
    near = [results[i].name for i in order if results[i].divergence.kld_mean < KLD_NEAR_LOSSLESS]
    out = []
    if len(near) > 1:
        out.append(
            f"{', '.join(near)}: mean KLD under {KLD_NEAR_LOSSLESS} (near-lossless); their KLD "
            "order need not show in answers: compare them with the paired accuracy test"
        )
    for i, j in zip(order, order[1:], strict=False):
        a, b = results[i], results[j]
        if b.divergence.kld_mean >= KLD_NEAR_LOSSLESS:
            break
        p = tests.per_token_p(i, j, "kld")
        if p >= alpha:
            out.append(
                f"KLD cannot rank {a.name} and {b.name} ({a.divergence.kld_mean:.4f} vs "
                f"{b.divergence.kld_mean:.4f}, paired per-token p={p:.2f}): near-lossless "
                "types differ by noise here; compare them with the paired accuracy test "
                "(Δ vs source in the table, or `regress check`)"
            )
    return out


def accuracy_test(out_dir: Path, results: list[ConfigResult]) -> Callable[[str, str], float]:
    """p(a, b): one-sided McNemar mid-p that configuration `a` is less accurate than `b` on
    their shared examples (regress.sweep.recommend's AccuracyTest)."""
    tests = _Tests(out_dir, results, 0.05)
    index = {r.name: i for i, r in enumerate(results)}
    return lambda a, b: tests.accuracy_p(index[a], index[b])[1]
