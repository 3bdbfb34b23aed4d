"""The typed result of comparing a candidate run with its baseline: what reports render.

`regress.gate.compare` builds a `Comparison`; the Markdown and JSON reports read only these types.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from regress.core.errors import ExitCode
from regress.core.manifest import Manifest
from regress.gate.choice_calibration import CalibrationResult
from regress.gate.divergence import DivergenceResult
from regress.gate.failure_rates import FailureRate
from regress.gate.format_spread import SpreadChange
from regress.gate.golden_rules import GoldenResult
from regress.gate.judged import JudgedSummary
from regress.gate.outcomes import UnitKind as UnitKind  # re-exported: a unit's kind
from regress.gate.policy import Policy
from regress.gate.recovery import RecoveryResult
from regress.gate.turns import TurnChange
from regress.gate.verdict import Verdict as Verdict  # re-exported: a unit's verdict

if TYPE_CHECKING:
    # Only a type here: the requirements module builds on this one.
    from regress.gate.requirements import RequirementResult
from regress.stats import Rule

COMPARISON_SCHEMA_VERSION = 1
MAX_FLIPS = 200
"""Flips kept in a Comparison (regressions first); the total is always reported."""


@dataclass(frozen=True)
class SubjectResult:
    """One member task of a group unit (an MMLU subject): shown, not gated."""

    task: str
    n: int
    baseline: float
    candidate: float
    delta: float
    b: int
    c: int


@dataclass(frozen=True)
class ProxyEstimate:
    """How a proxy unit's figures estimate its parent suite (regress.stats.stratified)."""

    parent: str
    """The parent baseline the proxy was drawn from."""
    population: int
    """The parent's examples in this unit: what `baseline`, `candidate` and `delta` estimate."""
    strata: int
    ci_design: tuple[float, float]
    """95% interval of the parent suite's own Δ: what running all of it would have shown."""
    se: float
    """Standard error of Δ as the gate uses it: the design's plus the suite's own sampling."""
    se_full: float
    """The standard error running every example of the parent would have had."""

    @property
    def width_ratio(self) -> float | None:
        """How many times wider the gate's interval is than running the whole parent."""
        return self.se / self.se_full if self.se_full > 0 else None


@dataclass(frozen=True)
class DropBounds:
    """One-sided confidence bounds of a unit's drop, each at the level its family's correction
    tested it at: the inversions of the tests that decided the verdict, so they agree with it.

    In the unit's drop scale: accuracy points lost or score lost (fractions), or the relative
    increase of a perplexity.
    """

    at_least: float | None
    """The drop is at least this, with confidence 1 - at_least_level (the margin rule's
    REGRESSION test inverted); None under the change rule, whose test is not a margin's."""
    at_least_level: float
    at_most: float
    """The drop is at most this, with confidence 1 - at_most_level (the PASS test inverted)."""
    at_most_level: float


@dataclass(frozen=True)
class UnitResult:
    """Everything the gate measured and decided about one unit."""

    name: str
    kind: UnitKind
    metric: str
    """The metric paired (several primary metrics are joined with ', ')."""
    tasks: tuple[str, ...]
    gated: bool
    rule: Rule
    """What the unit's p tests, and so what alpha bounds for it."""
    n: int
    """Paired examples (perplexity: documents scored on both sides)."""
    baseline: float | None
    """Accuracy, or the corpus perplexity-like metric; None without any pair."""
    candidate: float | None
    delta: float | None
    """Accuracy: candidate minus baseline. Perplexity: candidate / baseline - 1."""
    ci: tuple[float, float] | None
    """95% interval for delta: Tango's score interval (accuracy), a bootstrap-t interval
    (score) or the inverted sign-flip test (perplexity)."""
    b: int | None
    """Baseline right, candidate wrong (score units: examples the candidate scored lower)."""
    c: int | None
    """Baseline wrong, candidate right (score units: examples the candidate scored higher)."""
    discordance: float | None
    """(b + c) / n: the share of examples whose outcome flipped."""
    pvalue: float
    """The rule's one-sided p: H0 "drop <= threshold" (margin: the exact unconditional test,
    bootstrap-t, or the corpus test) or H0 "no drop" (change: McNemar, bootstrap-t or the
    corpus test)."""
    adjusted_pvalue: float | None
    """After the gate's one family-wise correction (units, failure classes, golden sets); None
    when not gated."""
    change_pvalue: float
    """One-sided p of H0 "no drop": the evidence that the candidate is worse at all."""
    change_adjusted_pvalue: float | None
    """change_pvalue after the same family-wise correction; None when not gated."""
    threshold: float
    """max_drop (accuracy, score) or max_relative_increase (perplexity) for this unit."""
    verdict: Verdict
    reason: str
    """One line saying why the verdict is what it is."""
    mde: float | None
    """Minimum detectable effect: the smallest true drop (perplexity: relative increase) the
    unit flags as a REGRESSION with the policy's power, at its n and observed discordance
    (score and perplexity units: the observed spread). None when no drop would be."""
    n_needed: int | None
    """INCONCLUSIVE units: examples that give the policy's power against `plan_drop`."""
    plan_drop: float | None
    """The drop the n that would decide is planned for: twice the threshold."""
    kl_divergence: float | None
    """Mean KL(baseline || candidate) over the choices, where both scored them."""
    top1_agreement: float | None
    """Share of those examples where both put most likelihood on the same choice."""
    baseline_failures: dict[str, int]
    """Examples per status other than ok (truncated included: scored, but a failure mode)."""
    candidate_failures: dict[str, int]
    error_rate: float
    """Share of the candidate's examples that failed (error, timeout, refused)."""
    subjects: tuple[SubjectResult, ...] = ()
    pass_pvalue: float | None = None
    """One-sided p of H0 "drop >= threshold": the evidence that the drop is within it."""
    pass_adjusted_pvalue: float | None = None
    """pass_pvalue after the correction over the gated units' PASS tests; None when not
    gated."""
    bounds: DropBounds | None = None
    """The one-sided bounds that agree with the verdict; None without a pair."""
    n_to_pass: int | None = None
    """INCONCLUSIVE units of a fixed check: examples that would show the drop within the
    threshold, with the policy's power, if the candidate changed nothing. The report offers
    them to a new sequential check (which needs at least as many), never to a rerun of this
    one: reading a fixed verdict twice tests twice."""
    proxy: ProxyEstimate | None = None
    """Set when the baseline is a proxy: then n, b and c count the sampled examples, while
    baseline, candidate, delta, ci, the p-values, discordance, KL divergence and top-1
    agreement are stratified estimates (each example weighs 1 / its inclusion probability)
    and tests of the parent suite."""
    since: str | None = None
    """The creep guard's row: the anchor baseline this unit's candidate is tested against
    (with the policy's max_cumulative_drop as its threshold); None for the checked baseline."""
    judged: JudgedSummary | None = None
    """A judged unit (regress.gate.judged): the judge's wins, losses, ties, win rate and
    swap consistency; b counts the losses and c the wins. None for every other unit."""


@dataclass(frozen=True)
class Flip:
    """One example whose right/wrong outcome changed."""

    task: str
    doc_id: int
    baseline_pred: Any
    candidate_pred: Any
    target: Any
    regressed: bool
    """True: baseline right, candidate wrong."""
    candidate_status: str
    question: str | None = None
    """The example's question (its own prompt, without the shots), when the check had the
    documents; None otherwise (stored records hold hashes, no benchmark text)."""
    baseline_answer: str | None = None
    """The text of the baseline's answer (a choice's text, or the generation), when known."""
    candidate_answer: str | None = None
    target_answer: str | None = None


@dataclass(frozen=True)
class Fingerprint:
    """What identifies the model and runtime of one side."""

    run: str
    model: str
    sha256: str
    quantization: str
    backend: str
    backend_version: str
    params: dict[str, Any]
    created: str
    libraries: dict[str, str] = field(default_factory=dict)
    kernels: str = ""
    """The CPU build's compute features (llama.cpp system info, torch CPU capability)."""
    cpu: str = ""
    threads: int | None = None
    label: str = ""
    """What the reports call this side: the run's name, or the name `check` gave the candidate
    (`--name`; default: its model file's name or the served model's)."""

    @classmethod
    def of(cls, manifest: Manifest, label: str = "") -> Fingerprint:
        """The fingerprint of a run's manifest, labelled `label` (default: the run's name)."""
        backend = manifest.backend
        return cls(
            run=manifest.name,
            label=label or manifest.name,
            model=manifest.model.ref,
            sha256=manifest.model.sha256,
            quantization=manifest.model.quantization,
            backend=backend.name,
            backend_version=backend.version,
            params=dict(backend.params),
            created=manifest.created,
            libraries=dict(backend.libraries),
            kernels=backend.hardware.kernels,
            cpu=backend.hardware.cpu.label(),
            threads=backend.hardware.threads,
        )


class HardwareAction(StrEnum):
    """What the gate did about a candidate whose hardware path differs from the baseline's."""

    NONE = "none"
    """Same compute path: the stored records are what this machine computes."""
    RERAN = "reran"
    """The baseline's pinned model was rerun here and the candidate gated against that."""
    STORED = "stored"
    """Gated against the stored records although the paths differ (a warning says why)."""
    INTERLEAVED = "interleaved"
    """The candidate's server computes answers differently by batch: the baseline's model
    was rerun on it, interleaved with the candidate chunk by chunk (A B A B), and the
    candidate gated against that rerun (regress.checks.interleaved)."""


@dataclass(frozen=True)
class HardwareCheck:
    """How this machine's compute path relates to the baseline's, and how far it moves answers."""

    differences: tuple[str, ...]
    """One line per difference (CPU build kernels, CPU); empty when the paths match."""
    action: HardwareAction
    stored: Fingerprint | None = None
    """The stored baseline, when the candidate was gated against a rerun of its model here
    (`Comparison.baseline` is then that rerun)."""
    n: int = 0
    """Examples paired between the stored baseline and the rerun."""
    flips: int = 0
    """Of those, examples whose right/wrong outcome differs: hardware drift, not the model."""
    kl_divergence: float | None = None
    """Mean KL(stored || rerun) over the choices."""
    typical: str = ""
    """What such a difference measurably costs (regress.gate.noise), for the reader."""
    chunks: int = 0
    """How many chunks each side ran in, interleaved A B A B (INTERLEAVED only)."""

    @property
    def aa_flip_rate(self) -> float | None:
        """On a batch-dependent server, the share of the baseline model's answers that its
        rerun there changed from the stored records: the noise the server adds to the same
        model (None before an interleaved rerun, or with nothing paired)."""
        if self.action is not HardwareAction.INTERLEAVED or not self.n:
            return None
        return self.flips / self.n


@dataclass(frozen=True)
class Repeatability:
    """The candidate's own A/A noise: examples sent again and compared with the first answers."""

    n: int
    changed: int
    """Examples whose answer (pred or status) differed the second time."""
    max_abs_logprob_delta: float
    """Largest per-choice |Δ log-likelihood| between the two answers."""


@dataclass(frozen=True)
class CacheUse:
    """Where one run's results came from: replayed from the result cache or computed here."""

    run: str
    """Which run: `candidate`, `baseline rerun` (the baseline's model run on this machine), or
    `judge` (the policy judge's verdicts)."""
    enabled: bool
    """False: the cache was off (`--no-cache`), every result was computed."""
    replayed: int
    """Results replayed from the cache."""
    computed: int
    """Results the backend computed (when the cache was on)."""
    rejected: int
    """Cached rows not replayed because they were corrupt or failed their digest: computed
    again. Non-zero means the cache folder was damaged or edited."""


@dataclass(frozen=True)
class Look:
    """One look of a sequential gate: what it had seen and which units it settled."""

    fraction: float
    """The share of each undecided unit's examples seen by this look."""
    examples: int
    """Paired examples judged at this look, every unit together."""
    decided: tuple[str, ...]
    """Gated units whose verdict this look settled (REGRESSION, PASS or ERROR)."""


@dataclass(frozen=True)
class SequentialRun:
    """How a sequential gate ran (regress.checks.sequential): its design and where it stopped."""

    looks: tuple[float, ...]
    spending: str
    seed: int
    taken: tuple[Look, ...]
    """The looks taken, in order; fewer than `looks` when the gate stopped early."""
    examples_run: int
    """Examples the candidate ran (golden sets included)."""
    examples_total: int
    """Examples the fixed gate would have run."""
    decided_at: dict[str, int]
    """Gated unit -> the look (1-based) that settled it, or the last look taken."""
    stopped: str
    """Why the run stopped: every gated unit decided, a REGRESSION, or the last look."""
    adjusted_delta: dict[str, float] = field(default_factory=dict)
    """Accuracy units settled before the last look: the median-unbiased Δ (stage-wise
    ordering), since the naive Δ of a unit that stopped early overstates its change."""


@dataclass(frozen=True)
class Comparison:
    """The outcome of `compare`: the JSON report is `to_dict()`."""

    verdict: Verdict
    exit_code: ExitCode
    units: tuple[UnitResult, ...]
    flips: tuple[Flip, ...]
    """At most MAX_FLIPS, regressions first."""
    n_flips: int
    unpaired: int
    """Baseline examples without a candidate example of the same doc_id and doc_hash."""
    warnings: tuple[str, ...]
    baseline: Fingerprint
    candidate: Fingerprint
    policy: Policy
    suite: str
    command: str
    """The command that produced the candidate run."""
    hardware: HardwareCheck | None = None
    """Set by `regress.checks.fixed.check` when it ran the candidate on this machine."""
    repeatability: Repeatability | None = None
    """Set when `check --repeat-check N` resent N examples."""
    golden: tuple[GoldenResult, ...] = ()
    """Golden sets: the must-pass and relative-drop rules (regress.gate.golden_rules)."""
    calibration: tuple[CalibrationResult, ...] = ()
    """Multiple-choice units: ECE and Brier score on both sides (reported, not gated)."""
    failures: tuple[FailureRate, ...] = ()
    """Generation units: each failure class's rate on both sides (regress.gate.failure_rates)."""
    cache: tuple[CacheUse, ...] = ()
    """Set by `regress.checks.fixed.check` for the runs it made: how many results it replayed."""
    sequential: SequentialRun | None = None
    """Set by `regress.checks.sequential.check_sequential`: the looks the gate took."""
    requirements: tuple[RequirementResult, ...] = ()
    """The policy's decision gates (`gates:`), each tested and decided."""
    recovery: tuple[RecoveryResult, ...] = ()
    """Units with a `max_relative_drop`: the candidate's share of the baseline's accuracy,
    tested and decided (regress.gate.recovery)."""
    divergence: tuple[DivergenceResult, ...] = ()
    """Units with a `max_kl`: how far the candidate's choice distributions moved, tested and
    decided (regress.gate.divergence)."""
    turns: tuple[TurnChange, ...] = ()
    """Conversation units: each turn's pass rate on both sides (reported, not gated)."""
    formats: tuple[SpreadChange, ...] = ()
    """Units in several prompt formats: each side's spread and its change (reported, not
    gated)."""
    schema_version: int = field(default=COMPARISON_SCHEMA_VERSION)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the whole comparison."""
        data = asdict(self)
        if self.sequential is None:
            del data["sequential"]
        if not self.requirements:
            del data["requirements"]
        for name in ("turns", "formats", "recovery", "divergence"):
            if not data[name]:
                del data[name]
        if self.hardware is not None:
            if self.hardware.action is HardwareAction.INTERLEAVED:
                data["aa_flip_rate"] = self.hardware.aa_flip_rate
            else:
                del data["hardware"]["chunks"]
        for unit in data["units"]:
            for name in ("since", "judged"):
                if unit[name] is None:
                    del unit[name]
        data["policy"] = self.policy.to_dict()
        data["exit_code"] = int(self.exit_code)
        return data
