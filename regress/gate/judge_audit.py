"""An LLM judge audited against people, and the win rate people would give the candidate.

`regress check` with a `judge:` policy block writes a judgements file: for each example, the
judge's verdict on the baseline's answer against the candidate's, asked in both orders
(docs/formats.md). Here: a seeded, blind sample of that file for people to label (`sample`);
the judge measured against their labels (`audit`: raw agreement, Cohen's kappa, the confusion
matrix, swap consistency); and the candidate's win rate as people judge it, from the few labels
plus every judge verdict, by prediction-powered inference tuned for power (PPI++: Angelopoulos,
Duchi & Zrnic 2023, arXiv:2311.01453). Outcomes are the candidate's side: win, tie and loss
score 1, 1/2 and 0.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats as sps

from regress.core.errors import BadInput
from regress.core.files import write_text_atomic
from regress.core.judgements import Judgement, Outcome, outcome_of
from regress.stats import wilson_interval
from regress.tasks.loaders import read_jsonl_numbered

CATEGORIES = ("win", "tie", "loss")
"""The outcomes people and the judge share, in the order of the confusion matrix."""
JUDGE_ERROR = str(Outcome.JUDGE_ERROR)
"""A judgements line whose reply could not be parsed: data for the audit, no verdict."""
OUTCOMES = (*CATEGORIES, JUDGE_ERROR)
SCORES = {"win": 1.0, "tie": 0.5, "loss": 0.0}
"""A win rate counts a tie as half a win."""
VERDICTS = ("baseline", "candidate", "tie")
"""One order's verdict in a judgements file: the answer the judge preferred."""
MIN_AGREEMENT = 0.80
"""Seed 002: when the judge agrees with people less often than this, refine its prompt."""
AGREEMENT_WARNING = "agreement below 80%: revise the judge prompt"
ALPHA = 0.05
"""Every interval of the audit is a two-sided 95% one."""
RESAMPLES = 1999
"""Bootstrap resamples of kappa's BCa interval."""
SEED = 20261206
"""Its fixed seed: an audit prints the same interval every time."""

_JUDGEMENT_KEYS = frozenset(
    {
        "task",
        "doc_id",
        "unit",
        "mode",
        "judge",
        "question",
        "reference",
        "baseline",
        "candidate",
        "verdicts",
        "replies",
        "outcome",
        "consistent",
    }
)
_LABEL_KEYS = frozenset({"task", "doc_id", "label"})
_FORM_KEYS = frozenset({"task", "doc_id", "a_is", "preferred"})
_FORM_TEXT_KEYS = frozenset({"question", "reference", "answer_a", "answer_b"})
"""What a labeller was shown: a filled-in form may keep or drop them."""


@dataclass(frozen=True)
class Label:
    """A person's judgement of one example, from the candidate's side."""

    task: str
    doc_id: int
    label: str
    """win, tie or loss."""
    where: str
    """file:line, for the errors an audit finds."""
    answers: tuple[str, str] | None = None
    """(baseline, candidate) as a filled-in sample form showed them, checked against the
    judgements file; None for a bare label."""


@dataclass(frozen=True)
class Estimate:
    """A value with its two-sided 95% interval."""

    value: float
    low: float
    high: float


@dataclass(frozen=True)
class WinRate:
    """The candidate's win rate as people judge it (a tie counts half), three ways.

    All three are over the examples the judge gave a verdict on: a judge_error line has no
    judge score, so it leaves the labelled and the unlabelled set alike and all three estimate
    the same thing."""

    ppi: Estimate
    """PPI++: the labels' mean, corrected by the judge's scores on every other example."""
    lam: float
    """PPI++'s weight on the judge in [0, 1]: 0 ignores it (the labels alone), 1 is plain PPI."""
    human_only: Estimate
    """The labels alone: their mean with a Student-t interval."""
    judge_only: Estimate
    """The judge alone over every example it judged. Its interval ignores the judge's bias, so
    it does not cover people's win rate when the judge leans one way."""
    labelled: int
    """n: labelled examples with a judge verdict."""
    unlabelled: int
    """N: unlabelled examples with a judge verdict."""


@dataclass(frozen=True)
class Audit:
    """A judge measured against people's labels of a sample of its judgements file."""

    judge: str
    judged: int
    """Lines of the judgements file."""
    judge_errors: int
    """Of them, judge_error lines."""
    labelled: int
    agreed: int
    """Labelled examples whose judge outcome is the label; a judge_error never agrees."""
    labelled_errors: int
    """Labelled examples the judge gave no verdict on (counted as disagreements)."""
    agreement: Estimate
    """agreed / labelled, with Wilson's score interval."""
    kappa: Estimate | None
    """Cohen's kappa over the labelled examples with a verdict, with its BCa bootstrap interval;
    None when undefined (judge and people used one and the same category)."""
    confusion: tuple[tuple[int, ...], ...]
    """Counts of labelled examples with a verdict: judge outcome rows by people's label
    columns, both in CATEGORIES order."""
    consistent: int
    """Lines of the whole file whose two orders gave the same verdict."""
    asked: int
    """Lines of the whole file the judge answered in both orders (`consistent` not null): all
    but the judge_errors and the examples it was not asked about."""
    swap_consistency: float | None
    """consistent / asked; None when nothing was asked."""
    win_rate: WinRate

    @property
    def warning(self) -> str | None:
        """Seed 002's warning when the judge agrees with people less than 80% of the time."""
        return AGREEMENT_WARNING if self.agreement.value < MIN_AGREEMENT else None

    def as_json(self) -> dict[str, Any]:
        """The audit as JSON-ready data, with the warning and the confusion matrix's order."""
        return {**asdict(self), "categories": list(CATEGORIES), "warning": self.warning}


def read_judgements(path: Path) -> list[Judgement]:
    """A judgements file, every line checked: a line that is not one of the documented
    objects, an unknown outcome, an outcome that does not follow from the two verdicts, an
    example judged twice or a second judge id is a one-line BadInput naming file:line."""
    judgements: list[Judgement] = []
    seen: dict[tuple[str, int], str] = {}
    first = ""
    for where, obj in _objects(path):
        judgement = _judgement(obj, where)
        key = (judgement.task, judgement.doc_id)
        if key in seen:
            raise BadInput(f"{where}: {_example(*key)} judged twice (also {seen[key]})")
        seen[key] = where
        if judgements and judgement.judge != judgements[0].judge:
            raise BadInput(
                f"{where}: judge {judgement.judge!r}, but {first} has judge "
                f"{judgements[0].judge!r}: audit one judge's judgements at a time"
            )
        first = first or where
        judgements.append(judgement)
    if not judgements:
        raise BadInput(f"{path}: no judgements")
    return judgements


def read_labels(path: Path) -> list[Label]:
    """People's labels: per line `{"task", "doc_id", "label"}` (win, tie or loss, the
    candidate's side) or a filled-in sample form (`preferred` "A", "B" or "tie", with its
    `a_is`). Unknown keys, bad values and an unfilled form are a one-line BadInput."""
    labels = [_label(obj, where) for where, obj in _objects(path)]
    if not labels:
        raise BadInput(f"{path}: no labels")
    return labels


def audit(judgements: Sequence[Judgement], labels: Sequence[Label]) -> Audit:
    """Measure one judge's judgements (as `read_judgements` gives them) against labels.

    Every label must name an example of the judgements, once; at least two labelled examples
    need a judge verdict, for the win rate's intervals.
    """
    by_example = {(j.task, j.doc_id): j for j in judgements}
    labelled: dict[tuple[str, int], Label] = {}
    for label in labels:
        key = (label.task, label.doc_id)
        judgement = by_example.get(key)
        if judgement is None:
            raise BadInput(f"{label.where}: no judgement of {_example(*key)} to audit")
        if key in labelled:
            raise BadInput(
                f"{label.where}: {_example(*key)} labelled twice (also {labelled[key].where})"
            )
        if label.answers not in (None, (judgement.baseline, judgement.candidate)):
            raise BadInput(
                f"{label.where}: the answers shown differ from the judgements' for "
                f"{_example(*key)} (labelled from another judgements file?)"
            )
        labelled[key] = label
    win_rate = _win_rate(judgements, labelled)  # first: it refuses too few usable labels
    pairs = [(by_example[key].outcome, label.label) for key, label in labelled.items()]
    confusion = [[0] * len(CATEGORIES) for _ in CATEGORIES]
    for outcome, human in pairs:
        if outcome != JUDGE_ERROR:
            confusion[CATEGORIES.index(outcome)][CATEGORIES.index(human)] += 1
    agreed = sum(outcome == human for outcome, human in pairs)
    judged = [j for j in judgements if j.outcome != JUDGE_ERROR]
    asked = sum(j.consistent is not None for j in judgements)
    consistent = sum(j.consistent is True for j in judgements)
    return Audit(
        judge=judgements[0].judge,
        judged=len(judgements),
        judge_errors=len(judgements) - len(judged),
        labelled=len(pairs),
        agreed=agreed,
        labelled_errors=sum(outcome == JUDGE_ERROR for outcome, _ in pairs),
        agreement=Estimate(agreed / len(pairs), *wilson_interval(agreed, len(pairs), ALPHA)),
        kappa=cohens_kappa(confusion),
        confusion=tuple(tuple(row) for row in confusion),
        consistent=consistent,
        asked=asked,
        swap_consistency=consistent / asked if asked else None,
        win_rate=win_rate,
    )


def cohens_kappa(table: ArrayLike, alpha: float = ALPHA) -> Estimate | None:
    """Cohen's kappa of a square table of counts (one rater's rows by the other's columns)
    with its BCa bootstrap interval over the table's examples (scipy's `bootstrap`, fixed
    seed), clipped to [-1, 1].

    The asymptotic normal interval used before (the non-null SE of Fleiss, Cohen & Everitt
    1969, statsmodels' `cohens_kappa`) covered 93.1% at 30 labels; BCa covers 96%
    (tests/test_judge_audit.py). None when kappa is undefined: both raters used one and the
    same category, so chance agreement is already 1.
    """
    counts = np.asarray(table, dtype=float)
    n = counts.sum()
    if n <= 0:
        raise ValueError("kappa of an empty table")
    kappa = _kappa(counts)
    if kappa is None:
        return None
    rows, cols = np.nonzero(counts)
    times = counts[rows, cols].astype(int)
    first, second = np.repeat(rows, times), np.repeat(cols, times)
    if kappa == 1.0 or np.all(first == first[0]) or np.all(second == second[0]):
        return Estimate(kappa, kappa, kappa)  # every resample agrees, or has no kappa
    size = counts.shape[0]

    def statistic(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
        # Vectorised over resamples, in whole counts so that a resample tied with the
        # estimate is tied exactly (BCa's bias correction counts resamples below it): kappa
        # = (n agreements - Σ rows·cols) / (n² - Σ rows·cols). A resample whose raters each
        # used one category has no kappa; it counts as no agreement beyond chance.
        left, right = np.eye(size)[a], np.eye(size)[b]
        m = a.shape[-1]
        agreements = (left * right).sum(axis=(-1, -2))
        chance = (left.sum(-2) * right.sum(-2)).sum(-1)
        spread = m * m - chance
        return np.where(spread > 0, (m * agreements - chance) / np.where(spread > 0, spread, 1), 0)

    ci = sps.bootstrap(
        (first, second),
        statistic,
        paired=True,
        vectorized=True,
        confidence_level=1 - alpha,
        n_resamples=RESAMPLES,
        method="BCa",
        random_state=SEED,
    ).confidence_interval
    return Estimate(kappa, max(-1.0, float(ci.low)), min(1.0, float(ci.high)))


def _kappa(counts: np.ndarray) -> float | None:
    """Kappa of a table of counts; None when chance agreement is already 1."""
    p = counts / counts.sum()
    observed, expected = float(np.trace(p)), float(p.sum(axis=1) @ p.sum(axis=0))
    if expected >= 1 - 1e-12:
        return None
    return (observed - expected) / (1 - expected)


def ppi_lambda(y: ArrayLike, f_labelled: ArrayLike, f_unlabelled: ArrayLike) -> float:
    """PPI++'s power-tuning weight: the λ in [0, 1] that minimises `ppi_mean`'s variance.

    That variance, λ² s²(f_unl) / N + s²(y - λ f_lab) / n, is a parabola in λ with its
    minimum at s(y, f_lab) / (s²(f_lab) + (n / N) s²(f_unl)) (sample variances and
    covariance); clipped to [0, 1], so a judge that tells nothing about the labels (or fewer
    than two unlabelled scores) gives 0, the labels' own mean.
    """
    y, labelled, unlabelled = _arrays(y, f_labelled, f_unlabelled)
    if len(unlabelled) < 2:
        return 0.0
    covariance = float(np.cov(y, labelled, ddof=1)[0, 1])
    denominator = labelled.var(ddof=1) + len(y) / len(unlabelled) * unlabelled.var(ddof=1)
    if denominator <= 0:
        return 0.0
    return min(1.0, max(0.0, covariance / float(denominator)))


def ppi_mean(
    y: ArrayLike,
    f_labelled: ArrayLike,
    f_unlabelled: ArrayLike,
    lam: float | None = None,
    alpha: float = ALPHA,
) -> Estimate:
    """The prediction-powered estimate of the mean of y, with its Student-t interval.

    n examples carry a label y and a prediction f_lab; N more carry a prediction only. The
    estimate is mean(λ f_unl) + mean(y - λ f_lab): the predictions' mean, corrected by how far
    they miss the labels, unbiased for any fixed λ. Its variance is λ² s²(f_unl) / N +
    s²(y - λ f_lab) / n. λ None takes `ppi_lambda`'s (PPI++); 0 gives the labels' mean, 1
    plain PPI. A λ fitted to the labels is a slope fitted to n points: the rectifier's
    variance then counts two degrees of freedom spent and the quantile is t's with n - 2 (else
    n - 1). With the normal quantile PPI++ covered 92.7% at 20 labels; so it covers 94.6%
    (tests/test_judge_audit.py).
    """
    y, labelled, unlabelled = _arrays(y, f_labelled, f_unlabelled)
    fitted = lam is None
    lam = ppi_lambda(y, labelled, unlabelled) if lam is None else lam
    if lam and len(unlabelled) < 2:
        raise ValueError("a nonzero lam needs at least 2 unlabelled predictions")
    spent = 2 if fitted and lam and len(y) > 2 else 1
    rectifier = y - lam * labelled
    value = float(rectifier.mean())
    variance = float(rectifier.var(ddof=spent)) / len(y)
    if lam:
        value += lam * float(unlabelled.mean())
        variance += lam**2 * float(unlabelled.var(ddof=1)) / len(unlabelled)
    return _student(value, variance, len(y) - spent, alpha)


def mean_interval(values: ArrayLike, alpha: float = ALPHA) -> Estimate:
    """The mean of at least two values with its Student-t interval (sample variance / m,
    m - 1 degrees of freedom)."""
    array = np.asarray(values, dtype=float)
    if len(array) < 2:
        raise ValueError(f"need at least 2 values, got {len(array)}")
    variance = float(array.var(ddof=1)) / len(array)
    return _student(float(array.mean()), variance, len(array) - 1, alpha)


def sample(
    judgements: Sequence[Judgement],
    n: int,
    stratify: Literal["outcome"] | None = "outcome",
    seed: int = 0,
) -> list[dict[str, Any]]:
    """A seeded sample of n judgements as blind forms for people to label.

    Stratified by the judge's outcome, each outcome gets its proportional share (largest
    remainders), and every outcome present at least one line when n allows; judge_error lines
    are eligible like the rest. n at least the file's size takes every line. Forms come in
    (task, doc_id) order, so their order tells nothing of the judge's outcome, and a seeded
    coin per line decides which answer is A, so the baseline's is not always shown first.
    """
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    if stratify not in ("outcome", None):
        raise ValueError(f"stratify must be 'outcome' or None, got {stratify!r}")
    rng = np.random.default_rng(seed)
    chosen: list[int] = []
    if n >= len(judgements):
        chosen = list(range(len(judgements)))
    elif stratify is None:
        chosen = [int(i) for i in rng.choice(len(judgements), size=n, replace=False)]
    else:
        strata = [[i for i, j in enumerate(judgements) if j.outcome == o] for o in OUTCOMES]
        for members, k in zip(strata, _allocate([len(s) for s in strata], n), strict=True):
            if k:
                chosen += [int(i) for i in rng.choice(members, size=k, replace=False)]
    picked = sorted((judgements[i] for i in chosen), key=lambda j: (j.task, j.doc_id))
    candidate_first = rng.random(len(picked)) < 0.5
    return [_form(j, bool(flip)) for j, flip in zip(picked, candidate_first, strict=True)]


def write_sample(forms: Sequence[dict[str, Any]], path: Path, force: bool = False) -> None:
    """Write forms as JSON Lines, atomically: a temporary file beside `path`, then a rename,
    so an interrupted write never leaves half a form. An existing file may hold a person's
    labels already: it is replaced only with `force`."""
    if path.exists() and not force:
        raise BadInput(f"{path} exists (it may hold labels already; --force replaces it)")
    text = "".join(json.dumps(form, ensure_ascii=False) + "\n" for form in forms)
    try:
        write_text_atomic(path, text)
    except OSError as exc:
        raise BadInput(f"cannot write the sample to {path}: {exc.strerror or exc}") from exc


def _win_rate(judgements: Sequence[Judgement], labelled: dict[tuple[str, int], Label]) -> WinRate:
    """The three win-rate estimates over the examples with a judge verdict."""
    judged = [j for j in judgements if j.outcome != JUDGE_ERROR]
    pairs = [
        (SCORES[labelled[(j.task, j.doc_id)].label], SCORES[j.outcome])
        for j in judged
        if (j.task, j.doc_id) in labelled
    ]
    if len(pairs) < 2:
        raise BadInput(
            f"{len(pairs)} labelled example(s) with a judge verdict: the audit needs at least 2"
        )
    y, f_labelled = (np.array(column) for column in zip(*pairs, strict=True))
    f_unlabelled = np.array(
        [SCORES[j.outcome] for j in judged if (j.task, j.doc_id) not in labelled]
    )
    lam = ppi_lambda(y, f_labelled, f_unlabelled)
    return WinRate(
        ppi=_clipped(ppi_mean(y, f_labelled, f_unlabelled)),
        lam=lam,
        human_only=_clipped(mean_interval(y)),
        judge_only=_clipped(mean_interval([SCORES[j.outcome] for j in judged])),
        labelled=len(y),
        unlabelled=len(f_unlabelled),
    )


def _allocate(sizes: Sequence[int], n: int) -> list[int]:
    """n (below the sizes' total) split in proportion to the sizes by largest remainders, then
    one moved to each empty but present stratum (while n allows) from the stratum most above
    its proportional share. Integer arithmetic: quotas n * size / total exactly."""
    total = sum(sizes)
    counts = [n * size // total for size in sizes]
    by_remainder = sorted(range(len(sizes)), key=lambda h: (-(n * sizes[h] % total), h))
    for h in by_remainder[: n - sum(counts)]:
        counts[h] += 1
    present = [h for h, size in enumerate(sizes) if size]
    if n >= len(present):
        for h in present:
            if counts[h] == 0:
                donor = max(
                    (d for d in present if counts[d] > 1),
                    key=lambda d: (counts[d] * total - n * sizes[d], -d),
                )
                counts[donor] -= 1
                counts[h] = 1
    return counts


def _form(judgement: Judgement, candidate_first: bool) -> dict[str, Any]:
    answers = (judgement.baseline, judgement.candidate)
    a, b = reversed(answers) if candidate_first else answers
    return {
        "task": judgement.task,
        "doc_id": judgement.doc_id,
        "question": judgement.question,
        "reference": judgement.reference,
        "answer_a": a,
        "answer_b": b,
        "a_is": "candidate" if candidate_first else "baseline",
        "preferred": None,
    }


def _objects(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """The JSON objects of a JSON Lines file with their file:line; blank lines are skipped."""
    try:
        rows = read_jsonl_numbered(path)
    except OSError as exc:
        raise BadInput(f"{path}: cannot read ({exc.strerror})") from exc
    return [(f"{path}:{number}", obj) for number, obj in rows]


def _judgement(obj: dict[str, Any], where: str) -> Judgement:
    # The mode first: a graded line (a judged turn's too) has keys a pairwise one has not.
    if obj.get("mode", "pairwise") != "pairwise":
        raise BadInput(f"{where}: mode {_show(obj['mode'])}: only pairwise judgements are audited")
    _check_keys(obj, _JUDGEMENT_KEYS, frozenset(), where)
    verdicts = _pair(obj, "verdicts", where, lambda v: v is None or v in VERDICTS)
    outcome = _choice(obj, "outcome", OUTCOMES, where)
    consistent = obj["consistent"]
    if consistent is not None and not isinstance(consistent, bool):
        raise BadInput(f"{where}: consistent must be true, false or null, got {_show(consistent)}")
    expected = outcome_of(*verdicts)
    # consistent is null also where the judge was not asked: a failed side lost without it.
    if outcome != expected[0] or consistent not in (expected[1], None):
        raise BadInput(
            f"{where}: outcome {outcome!r} and consistent {_show(consistent)} do not follow "
            f"from verdicts {_show(verdicts)} (expected {str(expected[0])!r} and "
            f"{_show(expected[1])})"
        )
    reference = obj["reference"]
    if reference is not None and not isinstance(reference, str):
        raise BadInput(f"{where}: reference must be a string or null, got {_show(reference)}")
    replies = _pair(obj, "replies", where, lambda v: not isinstance(v, dict | list))
    return Judgement(
        task=_string(obj, "task", where),
        doc_id=_doc_id(obj, where),
        unit=_string(obj, "unit", where),
        judge=_string(obj, "judge", where),
        question=_string(obj, "question", where),
        reference=reference,
        baseline=_string(obj, "baseline", where),
        candidate=_string(obj, "candidate", where),
        verdicts=(verdicts[0], verdicts[1]),
        replies=(str(replies[0]), str(replies[1])),
        outcome=Outcome(outcome),
        consistent=consistent,
    )


def _label(obj: dict[str, Any], where: str) -> Label:
    if "label" in obj:
        _check_keys(obj, _LABEL_KEYS, frozenset(), where)
        label = _choice(obj, "label", CATEGORIES, where)
        return Label(_string(obj, "task", where), _doc_id(obj, where), label, where)
    _check_keys(obj, _FORM_KEYS, _FORM_TEXT_KEYS, where)
    if obj["preferred"] is None:
        raise BadInput(f'{where}: not labelled yet (set preferred to "A", "B" or "tie")')
    preferred = _choice(obj, "preferred", ("A", "B", "tie"), where)
    a_is = _choice(obj, "a_is", ("baseline", "candidate"), where)
    if preferred == "tie":
        label = "tie"
    else:
        label = "win" if (preferred == "A") == (a_is == "candidate") else "loss"
    answers = None
    if "answer_a" in obj and "answer_b" in obj:
        a, b = _string(obj, "answer_a", where), _string(obj, "answer_b", where)
        answers = (a, b) if a_is == "baseline" else (b, a)
    return Label(_string(obj, "task", where), _doc_id(obj, where), label, where, answers)


def _check_keys(
    obj: dict[str, Any], required: frozenset[str], optional: frozenset[str], where: str
) -> None:
    unknown = sorted(set(obj) - required - optional)
    if unknown:
        raise BadInput(
            f"{where}: unknown key {_show(unknown[0])} (the keys are "
            f"{', '.join(sorted(required | optional))})"
        )
    missing = sorted(required - set(obj))
    if missing:
        raise BadInput(f"{where}: missing key {missing[0]!r}")


def _string(obj: dict[str, Any], key: str, where: str) -> str:
    value = obj[key]
    if not isinstance(value, str):
        raise BadInput(f"{where}: {key} must be a string, got {_show(value)}")
    return value


def _doc_id(obj: dict[str, Any], where: str) -> int:
    value = obj["doc_id"]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadInput(f"{where}: doc_id must be an integer >= 0, got {_show(value)}")
    return value


def _choice(obj: dict[str, Any], key: str, choices: Sequence[str], where: str) -> str:
    value = obj[key]
    if not isinstance(value, str) or value not in choices:
        raise BadInput(f"{where}: {key} {_show(value)} is not one of {', '.join(choices)}")
    return value


def _pair(obj: dict[str, Any], key: str, where: str, valid: Callable[[Any], bool]) -> list[Any]:
    value = obj[key]
    if not (isinstance(value, list) and len(value) == 2 and all(valid(v) for v in value)):
        raise BadInput(f"{where}: {key} must be a list of two, one per order, got {_show(value)}")
    return value


def _show(value: Any) -> str:
    """A value as JSON on one line, cut short: for error messages."""
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def _example(task: str, doc_id: int) -> str:
    return f"{task} doc {doc_id}"


def _arrays(*columns: ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    y, labelled, unlabelled = (np.asarray(c, dtype=float) for c in columns)
    if len(y) != len(labelled) or len(y) < 2:
        raise ValueError(
            f"need as many predictions as labels, at least 2: {len(y)}, {len(labelled)}"
        )
    return y, labelled, unlabelled


def _student(value: float, variance: float, df: int, alpha: float) -> Estimate:
    half = float(sps.t.isf(alpha / 2, df)) * math.sqrt(variance)
    return Estimate(value, value - half, value + half)


def _clipped(estimate: Estimate) -> Estimate:
    """A win rate lies in [0, 1]: clipping its interval there loses no coverage."""
    return Estimate(*(min(1.0, max(0.0, x)) for x in (estimate.value, estimate.low, estimate.high)))
