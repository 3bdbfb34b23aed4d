"""The gate's policy: thresholds and tests, read from a small YAML file.

Every key is optional; unknown keys and bad values are errors (BadInput, one line naming the
key and the file), because a misspelt threshold that is silently ignored is a gate that lies.

```yaml
alpha: 0.05             # family-wise error rate across the gated units
rule: margin            # margin (H0: drop <= max_drop) | change (H0: no drop)
correction: holm        # holm | bonferroni
test: midp              # midp | exact | asymptotic (one-sided McNemar)
max_drop: 0.02          # largest tolerated accuracy drop (absolute, 0.02 = 2 points)
metric: acc_norm        # pair on this 0/1 metric instead of each task's primary metric
pass_requires: evidence  # evidence (drop shown within max_drop) | no_evidence_of_harm
inconclusive: warn      # warn | fail: exit code of an INCONCLUSIVE verdict (0 or 1)
max_error_rate: 0.05    # failed candidate examples per unit above this: ERROR (exit 3)
max_failure_increase: 0.05  # generations: a failure class's rate may rise by 5 points at most
min_examples: 100       # fewer paired examples in a unit (>= 1): INCONCLUSIVE
power: 0.8              # power of the minimum detectable effect and the n that would decide
perplexity:
  max_relative_increase: 0.02
golden:
  max_relative_drop: 0.05   # golden sets: pass rate may drop by 5% of itself at most
anchor: release-1.0     # creep guard: also test against this baseline (docs/gate.md#creep-guard)
max_cumulative_drop: 0.03  # largest tolerated drop since the anchor (needs anchor)
sequential:             # stop each unit as soon as it decides (docs/gate.md#sequential)
  looks: [0.2, 0.5, 1.0]  # shares of each unit's examples (or a count: 4 equal steps)
  spending: obf-early   # a tenth of alpha at the first look, then O'Brien-Fleming | obf
  seed: 0               # the random order the examples run in
judge:                  # an LLM judge for units no code can score (docs/judge.md)
  model: gemma3-270m    # any backend's model; a server: backend openai + model_args
  template: pairwise    # pairwise | pairwise_reference | a template file
  min_consistency: 0.6  # swapped orders agreeing on fewer pairs: INCONCLUSIVE
speed:
  max_slowdown: 0.10    # latency gate (regress bench --against): tolerated relative slowdown
units:
  arc_easy: {max_drop: 0.03, metric: acc, rule: change}
  builtin: {gate: false}
  wikitext: {max_relative_increase: 0.05}
  piqa: {estimand: p_gold, max_drop: 0.01}  # pair on the gold choice's probability
  hellaswag: {max_kl: 0.02}  # mean KL over the choices at most 0.02 nats
```
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import yaml

from regress.core import safe_yaml
from regress.core.errors import BadInput
from regress.run.judge import JudgeSpec, Read
from regress.stats import MAX_LOOKS, Correction, PassRequires, Rule, SequentialDesign, Test
from regress.tasks.judge_templates import Mode


class Inconclusive(StrEnum):
    """What an INCONCLUSIVE verdict does to the exit code."""

    WARN = "warn"
    """Exit 0, with a warning in the report."""
    FAIL = "fail"
    """Exit 1, like a regression."""


E = TypeVar("E", bound=StrEnum)

# Only where the default's change (before 0.1.0) can turn a check red: `inconclusive: fail`
# exits 1 on what used to PASS; under `warn` the exit code did not change.
PASS_REQUIRES_NOTICE = (
    "{where} sets inconclusive: fail but not pass_requires: a PASS needs the drop shown within "
    "max_drop (pass_requires: evidence, the default since 0.1.0), else the unit is INCONCLUSIVE "
    "and fails; pass_requires: no_evidence_of_harm passes unless a drop beyond it is shown"
)


def _choice(kind: type[E], value: str, name: str) -> E:
    """`value` as a member of `kind` (a member, or its string); BadInput naming the choices."""
    try:
        return kind(value)
    except ValueError:
        choices = ", ".join(str(member) for member in kind)
        raise BadInput(f"policy: {name} must be one of {choices}, not {value!r}") from None


class Estimand(StrEnum):
    """What a multiple-choice unit pairs example by example (docs/gate.md#estimands)."""

    ACCURACY = "accuracy"
    """Right or wrong (0/1): the default."""
    P_GOLD = "p_gold"
    """The probability the model puts on the gold choice, among the choices (expected
    accuracy): it moves with every change, not only the ones that flip an answer."""


@dataclass(frozen=True)
class UnitPolicy:
    """Overrides for one gated unit (a task, or a group such as `mmlu`)."""

    max_drop: float | None = None
    metric: str | None = None
    max_relative_increase: float | None = None
    gate: bool = True
    """False: the unit is compared and reported but never changes the verdict."""
    rule: Rule | None = None
    max_relative_drop: float | None = None
    """Recovery: the candidate keeps at least 1 - this of the baseline's accuracy
    (regress.gate.recovery); None: no recovery rule for the unit."""
    estimand: Estimand | None = None
    """None: accuracy (or the unit's score or perplexity)."""
    max_kl: float | None = None
    """Divergence: the largest mean KL (nats) of the candidate's choice distributions from
    the baseline's (regress.gate.divergence); None: no divergence rule for the unit."""

    def __post_init__(self) -> None:
        if self.rule is not None:
            object.__setattr__(self, "rule", _choice(Rule, self.rule, "rule"))
        if self.estimand is not None:
            object.__setattr__(self, "estimand", _choice(Estimand, self.estimand, "estimand"))


class Metric(StrEnum):
    """What a requirement bounds."""

    PASS_AT_1 = "pass_at_1"
    """A unit's accuracy (the mean pass rate over samples): at least `min`."""
    REFUSAL_RATE = "refusal_rate"
    """The share of a unit's generations that refused: at most `max`."""
    TTFT_MS = "ttft_ms"
    """The candidate's median time to first token, from a bench file (`check --bench`): at
    most `max` milliseconds."""
    QUALITY = "quality"
    """The candidate's mean judged score on the grading judge's scale (`judge.mode` single,
    1-10, or rubric, 1-5): at least `min`."""


MINIMA = {Metric.PASS_AT_1, Metric.QUALITY}
"""Metrics bounded from below (`min`); the others from above (`max`)."""


@dataclass(frozen=True)
class Requirement:
    """One decision gate of the policy (`gates:`)."""

    metric: Metric
    bound: float
    unit: str | None = None
    """The unit it applies to; None: every gated unit's examples together."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "metric", _choice(Metric, self.metric, "gates"))

    @property
    def at_least(self) -> bool:
        return self.metric in MINIMA

    def describe(self) -> str:
        """`pass_at_1 of core >= 85.0%`."""
        where = f" of {self.unit}" if self.unit else ""
        sign = ">=" if self.at_least else "<="
        value = f"{self.bound:g} ms" if self.metric is Metric.TTFT_MS else f"{self.bound:.1%}"
        if self.metric is Metric.QUALITY:
            value = f"{self.bound:g}"
        return f"{self.metric}{where} {sign} {value}"


@dataclass(frozen=True)
class Policy:
    """Thresholds and tests of the gate; the defaults are what `regress check` uses."""

    alpha: float = 0.05
    rule: Rule = Rule.MARGIN
    """What a REGRESSION rejects, and so what alpha bounds (docs/gate.md)."""
    correction: Correction = Correction.HOLM
    test: Test = Test.MIDP
    max_drop: float = 0.02
    """Absolute accuracy drop (candidate minus baseline) beyond which a unit can regress."""
    metric: str | None = None
    """A 0/1 metric to pair on instead of each task's primary metric (perplexity excluded)."""
    pass_requires: PassRequires = PassRequires.EVIDENCE
    """What a PASS must show: the drop within the threshold (evidence) or merely no drop
    shown beyond it (no_evidence_of_harm, the behaviour before the key existed)."""
    inconclusive: Inconclusive = Inconclusive.WARN
    max_error_rate: float = 0.05
    max_failure_increase: float | None = None
    """Generation units: largest tolerated rise of any failure class's rate (absolute); None:
    failure rates are reported, not gated (regress.gate.failure_rates)."""
    min_examples: int = 100
    """Below 100 paired examples one example moves accuracy by more than a point, so a
    2-point max_drop is two answers: a PASS would mean nothing. The built-in suite has 100
    documents per task. At least 1, so an empty unit is never a PASS. Not applied to
    perplexity units, whose few long documents (62 in WikiText-2's test split) each carry
    thousands of tokens."""
    power: float = 0.8
    max_relative_increase: float = 0.02
    """Perplexity units: largest tolerated relative increase of the unit's corpus metric
    (word perplexity by default; byte_perplexity or bits_per_byte when the policy names it)."""
    units: Mapping[str, UnitPolicy] = field(default_factory=dict)
    max_relative_drop: float = 0.05
    """Golden sets (regress.gate.golden_rules): largest tolerated drop of the pass rate relative to
    the baseline's (the seed's 5% rule); any must-pass item that regressed fails regardless."""
    max_slowdown: float = 0.10
    """Latency gate: largest tolerated relative increase of end-to-end latency (0.10 = 10%
    slower); only a significant slowdown beyond it fails."""
    sequential: SequentialDesign | None = None
    """A group-sequential gate: looks, alpha spending and the order examples run in; None
    runs every example and tests once."""
    anchor: str | None = None
    """The creep guard: a baseline (a name in the store, or a run folder) some promotions
    back that the candidate is tested against too, so drops that each pass cannot add up
    unseen; None tests against the checked baseline only."""
    max_cumulative_drop: float = 0.03
    """Largest tolerated accuracy drop since the anchor (absolute); used only with one."""
    gates: tuple[Requirement, ...] = ()
    """Decision gates: absolute requirements on the candidate, each a one-sided test in the
    gate's families (regress.gate.requirements)."""
    pool_formats: bool = False
    """Units in several prompt formats also get one pooled unit each (`UNIT@pooled`): every
    example's accuracy averaged over its formats, so the test clusters on the example
    (regress.gate.format_pool); False gates the formats one by one only."""
    judge: JudgeSpec | None = None
    """The model that judges units no code can score, pairwise in both orders
    (regress.gate.judged); None leaves such units out of the gate."""
    notices: tuple[str, ...] = field(default=(), compare=False)
    """Lines the report repeats about how the policy was read (a key whose default changed)."""

    def __post_init__(self) -> None:
        # The gate compares these by identity (`rule is Rule.MARGIN`): a plain string from a
        # library caller would silently mix the rules, so strings are converted or refused.
        for name, kind in (
            ("rule", Rule),
            ("correction", Correction),
            ("test", Test),
            ("inconclusive", Inconclusive),
            ("pass_requires", PassRequires),
        ):
            object.__setattr__(self, name, _choice(kind, getattr(self, name), name))

    def for_unit(self, unit: str) -> UnitPolicy:
        """The unit's effective settings: its overrides filled in with the defaults."""
        own = self.units.get(unit, UnitPolicy())
        return replace(
            own,
            max_drop=self.max_drop if own.max_drop is None else own.max_drop,
            metric=own.metric or self.metric,
            rule=own.rule or self.rule,
            max_relative_increase=(
                self.max_relative_increase
                if own.max_relative_increase is None
                else own.max_relative_increase
            ),
        )

    def to_dict(self) -> dict[str, Any]:
        """The policy as its YAML file would spell it, every key filled in."""
        return {
            "alpha": self.alpha,
            "rule": str(self.rule),
            "correction": str(self.correction),
            "test": str(self.test),
            "max_drop": self.max_drop,
            "metric": self.metric,
            "pass_requires": str(self.pass_requires),
            "inconclusive": str(self.inconclusive),
            "max_error_rate": self.max_error_rate,
            **(
                {"max_failure_increase": self.max_failure_increase}
                if self.max_failure_increase is not None
                else {}
            ),
            "min_examples": self.min_examples,
            "power": self.power,
            "perplexity": {"max_relative_increase": self.max_relative_increase},
            "units": {name: _unit_dict(unit) for name, unit in sorted(self.units.items())},
            # Only when set: the golden section of a report states the rule.
            **(
                {"golden": {"max_relative_drop": self.max_relative_drop}}
                if self.max_relative_drop != 0.05
                else {}
            ),
            **({"sequential": self.sequential.to_dict()} if self.sequential else {}),
            **(
                {"anchor": self.anchor, "max_cumulative_drop": self.max_cumulative_drop}
                if self.anchor is not None
                else {}
            ),
            **({"gates": _gates_dict(self.gates)} if self.gates else {}),
            **({"formats": {"pooled": True}} if self.pool_formats else {}),
            **({"judge": self.judge.to_dict()} if self.judge else {}),
            # The latency gate's key only when set: accuracy reports print this dict.
            **({"speed": {"max_slowdown": self.max_slowdown}} if self.max_slowdown != 0.10 else {}),
        }


def _gates_dict(gates: tuple[Requirement, ...]) -> dict[str, Any]:
    """`gates:` as the policy file spells it: a mapping per metric, a list when several."""
    found: dict[str, list[dict[str, Any]]] = {}
    for gate in gates:
        entry: dict[str, Any] = {"unit": gate.unit} if gate.unit else {}
        entry["min" if gate.at_least else "max"] = gate.bound
        found.setdefault(str(gate.metric), []).append(entry)
    return {
        metric: entries[0] if len(entries) == 1 else entries for metric, entries in found.items()
    }


def _unit_dict(unit: UnitPolicy) -> dict[str, Any]:
    values = {f.name: getattr(unit, f.name) for f in fields(unit)}
    return {
        key: str(value) if isinstance(value, StrEnum) else value
        for key, value in values.items()
        if value is not None
    }


def load_policy(path: str | Path | None) -> Policy:
    """Read a policy YAML file; None gives the defaults."""
    if path is None:
        return Policy()
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise BadInput(f"policy file {path}: cannot read ({exc.strerror})") from exc
    except UnicodeDecodeError as exc:
        raise BadInput(f"policy file {path}: not UTF-8 text (byte {exc.start})") from exc
    try:
        data = safe_yaml.load(text)  # bounded: no alias bomb, no oversized file
    except yaml.YAMLError as exc:
        raise BadInput(f"policy file {path}: not valid YAML ({_yaml_problem(exc)})") from exc
    return parse_policy({} if data is None else data, where=f"policy file {path}")


def parse_policy(data: Any, where: str = "policy file") -> Policy:
    """Build a Policy from a parsed YAML mapping; `where` names the file in errors."""
    reader = _Reader(where)
    top = reader.mapping(data, "")
    nested = {"max_relative_increase", "max_relative_drop", "max_slowdown", "pool_formats"}
    known = {f.name for f in fields(Policy)} - nested - {"notices"}
    known |= {"perplexity", "golden", "speed", "formats"}
    reader.no_unknown(top, known, "")
    values: dict[str, Any] = {}
    for key in ("alpha", "power"):
        if key in top:
            values[key] = reader.fraction(top[key], key, open_low=True)
    for key in ("max_drop", "max_error_rate", "max_failure_increase", "max_cumulative_drop"):
        if key in top:
            values[key] = reader.fraction(top[key], key, open_low=False)
    if "correction" in top:
        values["correction"] = reader.choice(top["correction"], "correction", Correction)
    if "test" in top:
        values["test"] = reader.choice(top["test"], "test", Test)
    if "rule" in top:
        values["rule"] = reader.choice(top["rule"], "rule", Rule)
    if "inconclusive" in top:
        values["inconclusive"] = reader.choice(top["inconclusive"], "inconclusive", Inconclusive)
    if "pass_requires" in top:
        values["pass_requires"] = reader.choice(top["pass_requires"], "pass_requires", PassRequires)
    elif values.get("inconclusive") is Inconclusive.FAIL:
        values["notices"] = (PASS_REQUIRES_NOTICE.format(where=where),)
    if top.get("metric") is not None:
        values["metric"] = reader.name(top["metric"], "metric")
    if "min_examples" in top:
        values["min_examples"] = reader.count(top["min_examples"], "min_examples")
    if "perplexity" in top:
        perplexity = reader.mapping(top["perplexity"], "perplexity")
        reader.no_unknown(perplexity, {"max_relative_increase"}, "perplexity.")
        if "max_relative_increase" in perplexity:
            values["max_relative_increase"] = reader.positive(
                perplexity["max_relative_increase"], "perplexity.max_relative_increase"
            )
    if "speed" in top:
        speed = reader.mapping(top["speed"], "speed")
        reader.no_unknown(speed, {"max_slowdown"}, "speed.")
        if "max_slowdown" in speed:
            values["max_slowdown"] = reader.positive(speed["max_slowdown"], "speed.max_slowdown")
    if "formats" in top:
        formats = reader.mapping(top["formats"], "formats")
        reader.no_unknown(formats, {"pooled"}, "formats.")
        if "pooled" in formats:
            values["pool_formats"] = reader.flag(formats["pooled"], "formats.pooled")
    if "golden" in top:
        golden = reader.mapping(top["golden"], "golden")
        reader.no_unknown(golden, {"max_relative_drop"}, "golden.")
        if "max_relative_drop" in golden:
            values["max_relative_drop"] = reader.fraction(
                golden["max_relative_drop"], "golden.max_relative_drop", open_low=False
            )
    if top.get("anchor") is not None:
        values["anchor"] = reader.text(top["anchor"], "anchor", "a baseline name or folder")
    elif "max_cumulative_drop" in top:
        # Without an anchor the budget would be silently ignored: a gate that lies.
        reader.fail("max_cumulative_drop", top["max_cumulative_drop"], "set with an anchor")
    if "gates" in top:
        values["gates"] = _parse_gates(reader, top["gates"])
    if top.get("sequential") not in (None, False):
        values["sequential"] = _parse_design(reader, top["sequential"])
    if top.get("judge") is not None:
        values["judge"] = _parse_judge(reader, top["judge"])
    if "units" in top:
        units = reader.mapping(top["units"], "units")
        values["units"] = {
            str(name): _parse_unit(reader, spec, f"units.{name}") for name, spec in units.items()
        }
    return Policy(**values)


def _parse_design(reader: _Reader, spec: Any) -> SequentialDesign:
    """`sequential: true`, or a mapping of looks (fractions, or a count of equal steps),
    spending and seed."""
    if spec is True:
        return SequentialDesign()
    entry = reader.mapping(spec, "sequential")
    reader.no_unknown(entry, {"looks", "spending", "seed"}, "sequential.")
    values: dict[str, Any] = {}
    if "looks" in entry:
        looks = entry["looks"]
        if isinstance(looks, int) and not isinstance(looks, bool):
            count = reader.count(looks, "sequential.looks")
            if count > MAX_LOOKS:  # checked before the looks are built: 10**12 would not fit
                reader.fail("sequential.looks", looks, f"at most {MAX_LOOKS}")
            values["looks"] = tuple((k + 1) / count for k in range(count))
        elif isinstance(looks, list) and looks:
            values["looks"] = tuple(reader.number(t, "sequential.looks") for t in looks)
        else:
            reader.fail("sequential.looks", looks, "a count or a list of fractions ending at 1")
    if "spending" in entry:
        values["spending"] = reader.name(entry["spending"], "sequential.spending")
    if "seed" in entry:
        values["seed"] = int(reader.number(entry["seed"], "sequential.seed"))
    try:
        return SequentialDesign(**values)
    except ValueError as exc:
        raise BadInput(f"{reader.where}: sequential: {exc}") from exc


_JUDGE_KEYS = {
    "model",
    "backend",
    "model_args",
    "template",
    "mode",
    "temperature",
    "seed",
    "max_tokens",
    "read",
    "min_consistency",
    "units",
}


def _parse_judge(reader: _Reader, spec: Any) -> JudgeSpec:
    """`judge:`: the judge's model (required) and how it is asked."""
    entry = reader.mapping(spec, "judge")
    reader.no_unknown(entry, _JUDGE_KEYS, "judge.")
    values: dict[str, Any] = {"model": reader.text(entry.get("model"), "judge.model", "a model")}
    for key in ("backend", "template"):
        if key in entry:
            values[key] = reader.text(entry[key], f"judge.{key}", "a name")
    if "model_args" in entry:
        args = reader.mapping(entry["model_args"], "judge.model_args")
        values["model_args"] = {str(k): v for k, v in args.items()}
    if "temperature" in entry:
        temperature = reader.number(entry["temperature"], "judge.temperature")
        if temperature < 0:
            reader.fail("judge.temperature", temperature, "a number >= 0")
        values["temperature"] = temperature
    if "seed" in entry:
        seed = entry["seed"]
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            reader.fail("judge.seed", seed, "a whole number >= 0")
        values["seed"] = seed
    if "max_tokens" in entry:
        values["max_tokens"] = reader.count(entry["max_tokens"], "judge.max_tokens")
    if "read" in entry:
        values["read"] = reader.choice(entry["read"], "judge.read", Read)
    if "mode" in entry:
        values["mode"] = reader.choice(entry["mode"], "judge.mode", Mode)
    if "min_consistency" in entry:
        values["min_consistency"] = reader.fraction(
            entry["min_consistency"], "judge.min_consistency", open_low=False
        )
    if "units" in entry:
        units = entry["units"]
        if not isinstance(units, list) or not all(isinstance(u, str) and u for u in units):
            reader.fail("judge.units", units, "a list of unit names")
        values["units"] = tuple(units)
    judge = JudgeSpec(**values)
    try:
        judge.loaded_template()  # a missing template file or a wrong mode fails here
    except BadInput as exc:
        raise BadInput(f"{reader.where}: judge.template: {exc}") from exc
    return judge


def _parse_gates(reader: _Reader, spec: Any) -> tuple[Requirement, ...]:
    """`gates:` maps a metric to one requirement (`{unit: core, min: 0.85}`) or a list of
    them; a metric bounded from below takes `min`, the others `max`."""
    gates = []
    for metric, entries in reader.mapping(spec, "gates").items():
        kind = reader.choice(metric, "gates", Metric)
        for i, entry in enumerate(entries if isinstance(entries, list) else [entries]):
            key = f"gates.{metric}" + (f"[{i}]" if isinstance(entries, list) else "")
            side = "min" if kind in MINIMA else "max"
            found = reader.mapping(entry, key)
            reader.no_unknown(found, {"unit", side}, f"{key}.")
            if side not in found:
                reader.fail(f"{key}.{side}", None, "a number (the bound)")
            if kind in (Metric.PASS_AT_1, Metric.REFUSAL_RATE):
                bound = reader.fraction(found[side], f"{key}.{side}", open_low=True)
            else:
                bound = reader.positive(found[side], f"{key}.{side}")
            unit = found.get("unit")
            if unit is not None:
                unit = reader.text(unit, f"{key}.unit", "a unit name")
            gates.append(Requirement(kind, bound, unit))
    return tuple(gates)


def _parse_unit(reader: _Reader, spec: Any, key: str) -> UnitPolicy:
    entry = reader.mapping(spec, key)
    reader.no_unknown(entry, {f.name for f in fields(UnitPolicy)}, f"{key}.")
    values: dict[str, Any] = {}
    if "max_drop" in entry:
        values["max_drop"] = reader.fraction(entry["max_drop"], f"{key}.max_drop", open_low=False)
    if "metric" in entry:
        values["metric"] = reader.name(entry["metric"], f"{key}.metric")
    if "max_relative_increase" in entry:
        values["max_relative_increase"] = reader.positive(
            entry["max_relative_increase"], f"{key}.max_relative_increase"
        )
    if "max_relative_drop" in entry:
        values["max_relative_drop"] = reader.fraction(
            entry["max_relative_drop"], f"{key}.max_relative_drop", open_low=True
        )
    if "rule" in entry:
        values["rule"] = reader.choice(entry["rule"], f"{key}.rule", Rule)
    if "gate" in entry:
        values["gate"] = reader.flag(entry["gate"], f"{key}.gate")
    if "max_kl" in entry:
        values["max_kl"] = reader.positive(entry["max_kl"], f"{key}.max_kl")
    if "estimand" in entry:
        values["estimand"] = reader.choice(entry["estimand"], f"{key}.estimand", Estimand)
    return UnitPolicy(**values)


class _Reader:
    """Checks one value at a time and names the key and the file when it is wrong."""

    def __init__(self, where: str) -> None:
        self.where = where

    def fail(self, key: str, value: Any, expected: str) -> NoReturn:
        raise BadInput(f"{self.where}: {key or 'policy'} must be {expected}, got {value!r}")

    def mapping(self, value: Any, key: str) -> dict[Any, Any]:
        if not isinstance(value, dict):
            self.fail(key, value, "a mapping of keys to values")
        return value

    def no_unknown(self, data: dict[Any, Any], known: set[str], prefix: str) -> None:
        for key in data:
            if key not in known:
                raise BadInput(
                    f"{self.where}: unknown policy key '{prefix}{key}' "
                    f"(known: {', '.join(sorted(known))})"
                )

    def number(self, value: Any, key: str) -> float:
        # bool is an int in Python, but `alpha: true` is a typo, not 1.0.
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.fail(key, value, "a number")
        return float(value)

    def fraction(self, value: Any, key: str, open_low: bool) -> float:
        number = self.number(value, key)
        low_ok = number > 0 if open_low else number >= 0
        if not (low_ok and number < 1):
            self.fail(key, value, "a number in (0, 1)" if open_low else "a number in [0, 1)")
        return number

    def positive(self, value: Any, key: str) -> float:
        number = self.number(value, key)
        if number <= 0:
            self.fail(key, value, "a positive number")
        return number

    def count(self, value: Any, key: str) -> int:
        # At least 1: a unit with no paired example must never pass.
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            self.fail(key, value, "a whole number >= 1")
        return value

    def name(self, value: Any, key: str) -> str:
        return self.text(value, key, "a metric name")

    def flag(self, value: Any, key: str) -> bool:
        if not isinstance(value, bool):
            self.fail(key, value, "true or false")
        return value

    def text(self, value: Any, key: str, what: str) -> str:
        if not isinstance(value, str) or not value:
            self.fail(key, value, what)
        return value

    def choice(self, value: Any, key: str, enum: type[StrEnum]) -> Any:
        try:
            return enum(value)
        except ValueError:
            self.fail(key, value, f"one of {', '.join(e.value for e in enum)}")


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """The parser's complaint and its line, on one line."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or type(exc).__name__
    return f"line {mark.line + 1}: {problem}" if mark is not None else problem
