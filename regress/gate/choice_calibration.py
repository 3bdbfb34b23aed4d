"""Calibration of multiple-choice answers: is the model as sure as it is right?

Each multiple-choice record stores the summed log-likelihood of every choice. Their softmax
is the model's distribution over the choices (lm-eval's `brier_score` uses the same); the
confidence of an answer is the largest probability, and the answer is right when that choice
is the target (the `acc` prediction). Over a unit's examples:

- **ECE**, the expected calibration error: examples are put in bins by confidence, and ECE
  is the example-weighted mean of |accuracy - mean confidence| over the bins. Two binnings,
  both with `BINS` = 10 bins: equal-width ([0, 0.1), ..., [0.9, 1.0]) and equal-mass
  (confidence-sorted examples cut into 10 groups of equal size, the first ones one larger
  when n is not a multiple of 10). Equal-width is the usual figure; equal-mass does not
  leave most bins empty when confidences crowd together.
- **Brier score**: the mean over examples of sum over choices of (p - 1[choice is right])^2.
- **ΔECE** = candidate - baseline over the paired examples, with a 95% paired percentile
  bootstrap interval (`RESAMPLES` = 2,000 resamples of the examples, seed 0, so reruns give
  the same report). Reported, never gated: calibration moves with quantization in ways that
  do not change a single answer.

`reliability_diagram` gives the per-bin data a reliability diagram plots.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from regress.core.manifest import TaskInfo
from regress.core.records import Record
from regress.gate.pairing import Pair

BINS = 10
RESAMPLES = 2000
SEED = 0
BLOCK = 100_000
"""Resampled examples the bootstrap handles at once (a few MB per array)."""
Binning = Literal["width", "mass"]


@dataclass(frozen=True)
class ChoiceOutcomes:
    """Per example: the probability of each choice, the target, and the derived columns."""

    probs: list[np.ndarray]
    target: np.ndarray

    @property
    def confidence(self) -> np.ndarray:
        """The largest choice probability of each example."""
        return np.array([p.max() for p in self.probs])

    @property
    def correct(self) -> np.ndarray:
        """1.0 where the most probable choice is the target."""
        return np.array(
            [float(int(np.argmax(p)) == t) for p, t in zip(self.probs, self.target, strict=True)]
        )


def choice_probabilities(record: Record) -> np.ndarray | None:
    """Softmax of a record's per-choice log-likelihoods; None when it has none to use."""
    loglik = record.scores.get("loglik")
    target = record.target
    if not record.ok or not loglik or len(loglik) < 2:
        return None
    if not isinstance(target, int) or isinstance(target, bool) or not 0 <= target < len(loglik):
        return None
    values = np.asarray(loglik, dtype=float)
    exp = np.exp(values - values.max())
    probabilities: np.ndarray = exp / exp.sum()
    return probabilities


def outcomes(records: Sequence[Record]) -> ChoiceOutcomes:
    """The multiple-choice records among `records`, as probabilities and targets."""
    probs, targets = [], []
    for record in records:
        p = choice_probabilities(record)
        if p is not None:
            probs.append(p)
            targets.append(record.target)
    return ChoiceOutcomes(probs, np.asarray(targets, dtype=int))


def _bin_index(confidence: np.ndarray, bins: int, binning: Binning) -> np.ndarray:
    """The bin of each example (0..bins-1)."""
    if binning == "width":
        index: np.ndarray = np.minimum((confidence * bins).astype(int), bins - 1)
        return index
    n = len(confidence)
    rank = np.empty(n, dtype=int)
    rank[np.argsort(confidence, kind="stable")] = np.arange(n)
    return _mass_bins(rank, bins)


def _mass_bins(rank: np.ndarray, bins: int) -> np.ndarray:
    """The equal-mass bin of each rank of n = len(rank): rank r goes where np.array_split
    would put it, the first n % bins bins holding one more."""
    size, extra = divmod(len(rank), bins)
    head = extra * (size + 1)
    return np.where(rank < head, rank // (size + 1), extra + (rank - head) // max(size, 1)).astype(
        int
    )


def _resampled_bins(
    confidence: np.ndarray, pick: np.ndarray, bins: int, binning: Binning
) -> np.ndarray:
    """The bin of each example of each resample (a row of `pick`, indices into
    `confidence`), as `_bin_index` bins that resample alone."""
    if binning == "width":
        return np.asarray(_bin_index(confidence, bins, binning)[pick])
    # Equal-mass bins go by rank within the resample, ties in the order drawn: the dense
    # ranks of the confidences order a row as they do, and small integers sort faster.
    values, dense = np.unique(confidence, return_inverse=True)
    order = np.argsort(dense.astype(np.min_scalar_type(values.size))[pick], axis=1, kind="stable")
    index = np.empty(pick.shape, dtype=int)
    by_rank = np.broadcast_to(_mass_bins(np.arange(pick.shape[1]), bins), pick.shape)
    np.put_along_axis(index, order, by_rank, axis=1)
    return index


def ece(
    confidence: np.ndarray, correct: np.ndarray, bins: int = BINS, binning: Binning = "width"
) -> float:
    """Expected calibration error over `bins` equal-width or equal-mass bins."""
    if len(confidence) == 0:
        return float("nan")
    index = _bin_index(confidence, bins, binning)
    return float(_ece_rows(index[None, :], confidence[None, :], correct[None, :], bins)[0])


def _ece_rows(
    index: np.ndarray, confidence: np.ndarray, correct: np.ndarray, bins: int
) -> np.ndarray:
    """`ece` of each row of equal-length samples (n > 0) binned by `index`, in one pass: a
    bootstrap's resamples at once. Each row's bin sums add its examples in order, as one
    sample's would."""
    rows, n = index.shape
    flat = (index + bins * np.arange(rows)[:, None]).ravel()

    def sums(weights: np.ndarray) -> np.ndarray:
        return np.bincount(flat, weights=weights.ravel(), minlength=rows * bins).reshape(rows, bins)

    gap = np.abs(sums(correct) - sums(confidence))
    return np.asarray(gap.sum(axis=1) / n)


def brier(probs: Sequence[np.ndarray], target: np.ndarray) -> float:
    """Mean over examples of the squared distance between the choice distribution and the
    one-hot target."""
    if not probs:
        return float("nan")
    return float(
        np.mean([np.sum((p - np.eye(len(p))[t]) ** 2) for p, t in zip(probs, target, strict=True)])
    )


@dataclass(frozen=True)
class ReliabilityBin:
    """One bar of a reliability diagram."""

    lower: float
    upper: float
    """Confidence range of the bin (equal-mass: the smallest and largest in it)."""
    n: int
    confidence: float
    """Mean confidence in the bin (NaN when empty)."""
    accuracy: float
    """Share right in the bin (NaN when empty)."""


def reliability_diagram(
    records: Sequence[Record], bins: int = BINS, binning: Binning = "width"
) -> tuple[ReliabilityBin, ...]:
    """Per bin: its range, size, mean confidence and accuracy (what the diagram plots)."""
    data = outcomes(records)
    confidence, correct = data.confidence, data.correct
    index = _bin_index(confidence, bins, binning) if len(confidence) else np.array([], int)
    out = []
    for b in range(bins):
        inside = index == b
        n = int(inside.sum())
        if binning == "width":
            lower, upper = b / bins, (b + 1) / bins
        else:
            lower = float(confidence[inside].min()) if n else float("nan")
            upper = float(confidence[inside].max()) if n else float("nan")
        out.append(
            ReliabilityBin(
                lower=lower,
                upper=upper,
                n=n,
                confidence=float(confidence[inside].mean()) if n else float("nan"),
                accuracy=float(correct[inside].mean()) if n else float("nan"),
            )
        )
    return tuple(out)


@dataclass(frozen=True)
class CalibrationResult:
    """One unit's calibration, baseline and candidate, over their paired examples."""

    unit: str
    n: int
    bins: int
    baseline_ece: float
    candidate_ece: float
    """Equal-width bins."""
    delta_ece: float
    delta_ece_ci: tuple[float, float]
    baseline_ece_mass: float
    candidate_ece_mass: float
    """Equal-mass bins."""
    delta_ece_mass: float
    delta_ece_mass_ci: tuple[float, float]
    baseline_brier: float
    candidate_brier: float
    resamples: int = RESAMPLES


def _delta_ci(
    base: ChoiceOutcomes, cand: ChoiceOutcomes, binning: Binning, rng: np.random.Generator
) -> tuple[float, float]:
    """95% paired percentile bootstrap interval of ECE(candidate) - ECE(baseline)."""
    n = len(base.target)
    bc, bk = base.confidence, base.correct
    cc, ck = cand.confidence, cand.correct
    deltas = np.empty(RESAMPLES)
    # Blocks of resamples, a row each: `rng` draws them as it would one by one.
    block = max(1, BLOCK // n)
    for start in range(0, RESAMPLES, block):
        pick = rng.integers(0, n, (min(block, RESAMPLES - start), n))
        cand_ece = _ece_rows(_resampled_bins(cc, pick, BINS, binning), cc[pick], ck[pick], BINS)
        base_ece = _ece_rows(_resampled_bins(bc, pick, BINS, binning), bc[pick], bk[pick], BINS)
        deltas[start : start + len(pick)] = cand_ece - base_ece
    low, high = np.percentile(deltas, [2.5, 97.5])
    return float(low), float(high)


def compare_calibration(
    units: Mapping[str, Sequence[TaskInfo]], paired: Mapping[str, Sequence[Pair]]
) -> tuple[CalibrationResult, ...]:
    """Calibration of every unit with multiple-choice examples scored on both sides."""
    results = []
    for unit, tasks in units.items():
        pairs = [
            (b, c)
            for task in tasks
            for b, c in paired[task.name]
            if choice_probabilities(b) is not None and choice_probabilities(c) is not None
        ]
        if len(pairs) < 2:
            continue
        base = outcomes([b for b, _ in pairs])
        cand = outcomes([c for _, c in pairs])
        rng = np.random.default_rng(SEED)
        width = (ece(base.confidence, base.correct), ece(cand.confidence, cand.correct))
        mass = (
            ece(base.confidence, base.correct, binning="mass"),
            ece(cand.confidence, cand.correct, binning="mass"),
        )
        results.append(
            CalibrationResult(
                unit=unit,
                n=len(pairs),
                bins=BINS,
                baseline_ece=width[0],
                candidate_ece=width[1],
                delta_ece=width[1] - width[0],
                delta_ece_ci=_delta_ci(base, cand, "width", rng),
                baseline_ece_mass=mass[0],
                candidate_ece_mass=mass[1],
                delta_ece_mass=mass[1] - mass[0],
                delta_ece_mass_ci=_delta_ci(base, cand, "mass", rng),
                baseline_brier=brier(base.probs, base.target),
                candidate_brier=brier(cand.probs, cand.target),
            )
        )
    return tuple(results)
