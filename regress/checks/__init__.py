"""The use cases above the gate: `check` (a candidate against a baseline, fixed or
sequential), `check_drift`, and what a stored baseline can decide (`regress plan`, its timing).

- `steps`: what every check does (plan the candidate's run, refuse changed inputs, rerun the
  baseline's model where the hardware differs, run, and finish: pair, judge and label).
- `fixed`: the fixed-sample check; `sequential`: the check in looks; `drift`: the drift check.
- `plan` and `timing`: the n and the minutes a baseline's units need.

Other wings import from this package only (tests/test_layout.py keeps them to it).
"""

from regress.checks.fixed import (
    CandidateModel,
    CheckOptions,
    CheckResult,
    DriftOptions,
    Rebaseline,
    candidate_plan,
    check,
    check_drift,
)
from regress.checks.plan import (
    FACTS_DISCORDANCE,
    UnitPlan,
    plan_baseline,
    small_units,
)
from regress.checks.timing import (
    Throughput,
    TimingOptions,
    gate_time,
    measure_throughput,
)

__all__ = [
    "CandidateModel",
    "CheckOptions",
    "CheckResult",
    "DriftOptions",
    "FACTS_DISCORDANCE",
    "Rebaseline",
    "Throughput",
    "TimingOptions",
    "UnitPlan",
    "candidate_plan",
    "check",
    "check_drift",
    "gate_time",
    "measure_throughput",
    "plan_baseline",
    "small_units",
]
