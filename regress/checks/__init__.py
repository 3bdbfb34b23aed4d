"""The use cases above the gate: `check` (a candidate against a baseline, fixed or
sequential), `check_drift`, and what a stored baseline can decide (`regress plan`, its timing).

- `steps`: what every check does (plan the candidate's run, refuse changed inputs, rerun the
  baseline's model where the hardware differs, run, and finish: pair, judge and label).
- `fixed`: the fixed-sample check; `sequential`: the check in looks; `continuation`: what a
  sequential check stopped at a budget stores and when it may continue; `drift`: the drift check;
  `interleaved`: on a batch-dependent server, the baseline's model rerun beside the
  candidate (A B A B) and the gate against that rerun;
  `foreign`: two runs read from another harness's files (lm-eval, Inspect), no model loaded.
- `scaffold`: `regress init`, a starting policy and the gate's workflows for a repository.
- `verify`: whether a stored baseline is intact (`regress baseline verify`).
- `plan` and `timing`: the n and the minutes a baseline's units need; `shards`: the CI
  matrix that fits them in a job's budget.

Other wings import from this package only (tests/test_layout.py keeps them to it).
"""

from regress.checks.continuation import (
    baseline_key,
    continuation_state,
    fingerprint,
    looks_taken,
    refuse_other_model,
)
from regress.checks.drift import (
    DriftOptions,
    check_drift,
)
from regress.checks.fixed import (
    candidate_latency,
    check,
)
from regress.checks.foreign import (
    check_foreign,
    is_foreign,
    read_samples,
)
from regress.checks.interleaved import (
    CHUNK_EXAMPLES,
    SERVER_UNDER_TEST,
    STORED_ON_BATCHING,
    Interleaved,
    batch_dependent,
    chunk_count,
    on_server,
    reference_plan,
)
from regress.checks.plan import (
    LIGHTEST_DISCORDANCE,
    LIGHTEST_NOISE,
    PROFILES,
    TYPICAL_DISCORDANCE,
    TYPICAL_NOISE,
    BudgetOptions,
    BudgetPlan,
    FlipProfile,
    ProfileOutcome,
    UnitBudget,
    UnitPlan,
    flip_chance,
    flip_share,
    no_early_stop,
    plan_baseline,
    plan_budget,
    sequential_n,
    small_units,
)
from regress.checks.scaffold import (
    InitOptions,
    InitResult,
    init_repository,
)
from regress.checks.sequential import (
    SETTLED,
    check_sequential,
    run_order,
)
from regress.checks.shards import (
    MAX_JOBS,
    ShardOptions,
    ShardPlan,
    example_seconds,
    plan_shards,
)
from regress.checks.steps import (
    TEXT_CHARS,
    CandidateModel,
    CandidateRun,
    CheckOptions,
    CheckResult,
    Rebaseline,
    RunProgress,
    cache_use,
    candidate_plan,
    finish,
    judge_cache,
    labelled,
    question_text,
    reference_rerun,
    refuse_changed_inputs,
    refuse_unit_typos,
    rejected_rows,
    repeatability,
    rerun_drift,
    run_plan,
    scoring_unchecked,
    with_texts,
)
from regress.checks.timing import (
    SAMPLE,
    GateTime,
    Throughput,
    TimingOptions,
    gate_time,
    measure_throughput,
    unit_tokens,
)
from regress.checks.verify import (
    Verified,
    verify_baseline,
)

__all__ = [
    "CHUNK_EXAMPLES",
    "LIGHTEST_DISCORDANCE",
    "LIGHTEST_NOISE",
    "MAX_JOBS",
    "PROFILES",
    "SAMPLE",
    "SERVER_UNDER_TEST",
    "SETTLED",
    "STORED_ON_BATCHING",
    "TEXT_CHARS",
    "TYPICAL_DISCORDANCE",
    "TYPICAL_NOISE",
    "BudgetOptions",
    "BudgetPlan",
    "CandidateModel",
    "CandidateRun",
    "CheckOptions",
    "CheckResult",
    "DriftOptions",
    "FlipProfile",
    "GateTime",
    "InitOptions",
    "InitResult",
    "Interleaved",
    "ProfileOutcome",
    "Rebaseline",
    "RunProgress",
    "ShardOptions",
    "ShardPlan",
    "Throughput",
    "TimingOptions",
    "UnitBudget",
    "UnitPlan",
    "Verified",
    "baseline_key",
    "batch_dependent",
    "cache_use",
    "candidate_latency",
    "candidate_plan",
    "check",
    "check_drift",
    "check_foreign",
    "check_sequential",
    "chunk_count",
    "continuation_state",
    "example_seconds",
    "fingerprint",
    "finish",
    "flip_chance",
    "flip_share",
    "gate_time",
    "init_repository",
    "is_foreign",
    "judge_cache",
    "labelled",
    "looks_taken",
    "measure_throughput",
    "no_early_stop",
    "on_server",
    "plan_baseline",
    "plan_budget",
    "plan_shards",
    "question_text",
    "read_samples",
    "reference_plan",
    "reference_rerun",
    "refuse_changed_inputs",
    "refuse_other_model",
    "refuse_unit_typos",
    "rejected_rows",
    "repeatability",
    "rerun_drift",
    "run_order",
    "run_plan",
    "scoring_unchecked",
    "sequential_n",
    "small_units",
    "unit_tokens",
    "verify_baseline",
    "with_texts",
]
