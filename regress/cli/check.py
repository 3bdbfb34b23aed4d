"""`regress check`: rerun a baseline's examples on a candidate and gate on the paired test."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import click

from regress.backends import BACKENDS
from regress.checks import (
    CandidateModel,
    CheckOptions,
    CheckResult,
    Rebaseline,
    candidate_plan,
    check_foreign,
    is_foreign,
    read_samples,
)
from regress.checks import check as gate_check
from regress.cli.baseline import store_option
from regress.cli.common import (
    cache_folder,
    command_line,
    data_options,
    data_source,
    exit_with,
    handles_errors,
    option_group,
    parse_args,
    parse_shard,
    policy_option,
    progress_bar,
    run_options,
    run_with_progress,
    task_catalog,
    task_options,
    write_report,
)
from regress.core.errors import BadInput
from regress.core.manifest import Run
from regress.core.store import Store, check_replaceable, read_run, write_run
from regress.gate.policy import load_policy
from regress.gate.results import Comparison
from regress.report.history import append_history, check_history_file, history_entry
from regress.report.json_report import render_json
from regress.report.markdown import render_markdown
from regress.stats import SequentialDesign


@dataclass(frozen=True)
class Sides:
    """What is compared: a baseline (stored, or another harness's run) and a candidate (a
    model to run, a stored run, or another harness's run)."""

    baseline_name: str | None
    baseline_samples: Path | None
    model: str | None
    candidate_run: Path | None
    candidate_samples: Path | None
    candidate_name: str | None
    backend: str | None
    model_args: str | None

    def refuse_bad_combinations(self) -> None:
        """UsageError unless exactly one baseline and one candidate are given, and samples
        are gated against samples."""
        if (self.baseline_name is None) == (self.baseline_samples is None):
            raise click.UsageError("give exactly one of --baseline or --baseline-samples")
        if self.baseline_samples is not None and self.candidate_samples is None:
            raise click.UsageError("--baseline-samples gates --candidate-samples (no model is run)")
        given = (self.model, self.candidate_run, self.candidate_samples)
        if sum(x is not None for x in given) != 1:
            raise click.UsageError(
                "give exactly one of --model, --candidate-run or --candidate-samples"
            )

    def baseline(self, store: Store) -> Run:
        """The baseline run, read from the store or from another harness's files."""
        if self.baseline_samples is not None:
            return read_samples(self.baseline_samples, "baseline")
        return _stored_baseline(store, str(self.baseline_name))


@dataclass(frozen=True)
class Reports:
    """Where the reports go besides stdout."""

    report_md: Path | None
    report_json: Path | None
    judgements_path: Path | None


@dataclass(frozen=True)
class GateFlags:
    """How the candidate is gated: pairing, rebaselining, the creep anchor, timings, the
    history kept and the candidate's own noise."""

    allow_mismatch: bool
    allow_backend_change: bool
    rebaseline: str
    reference_model: str | None
    sequential: bool
    max_looks: int | None
    continue_run: Path | None
    anchor: str | None
    bench_file: Path | None
    record_history: Path | None
    repeat_check: int


@dataclass(frozen=True)
class RunFlags:
    """The user's tasks, where data and baselines are, how a run is split, kept and cached."""

    include_path: tuple[Path, ...]
    golden: tuple[Path, ...]
    data_dir: Path | None
    hf_datasets: bool
    store: Path
    shard: str | None
    save_run: Path | None
    no_cache: bool
    cache_dir: Path | None


sides_options = option_group(
    "sides",
    Sides,
    click.option(
        "--baseline", "-b", "baseline_name", default=None, help="Baseline name in --store."
    ),
    click.option(
        "--baseline-samples",
        type=click.Path(path_type=Path),
        help="Instead of --baseline: another harness's run as the baseline (lm-eval's "
        "--output_path written with --log_samples, or an Inspect .eval/.json log); with "
        "--candidate-samples no model is loaded.",
    ),
    click.option("--model", "-m", help="Candidate: .gguf path, folder or packaged name."),
    click.option(
        "--candidate-run",
        type=click.Path(path_type=Path),
        help="Gate an already stored run (a merged shard run) instead of running --model.",
    ),
    click.option(
        "--candidate-samples",
        type=click.Path(path_type=Path),
        help="Gate an lm-eval run (its --output_path, written with --log_samples) or an Inspect "
        "log (.eval, .json) instead of running --model.",
    ),
    click.option(
        "--name",
        "candidate_name",
        default=None,
        help="The candidate's name in the reports (default: its model file's name, or the served "
        "model's).",
    ),
    click.option(
        "--backend",
        type=click.Choice(BACKENDS),
        default=None,
        help="Default: the baseline's backend.",
    ),
    click.option(
        "--model-args", default=None, help="k=v,... (default: the baseline's n_ctx etc.)."
    ),
)

report_options = option_group(
    "reports",
    Reports,
    click.option(
        "--report-md", type=click.Path(path_type=Path), help="Write the Markdown report here."
    ),
    click.option(
        "--report-json", type=click.Path(path_type=Path), help="Write the JSON report here."
    ),
    click.option(
        "--judgements",
        "judgements_path",
        type=click.Path(path_type=Path),
        help="Write the policy judge's verdicts here, one JSON line per judged example "
        "(`regress judge sample` and `audit` read it).",
    ),
)

gate_options = option_group(
    "gate",
    GateFlags,
    click.option(
        "--allow-mismatch",
        is_flag=True,
        help="Pair only identical documents when dataset/prompt hashes differ, instead of "
        "refusing (exit 2).",
    ),
    click.option(
        "--allow-backend-change",
        is_flag=True,
        help="Allow a candidate on another backend than the baseline (adds real noise).",
    ),
    click.option(
        "--rebaseline",
        type=click.Choice([r.value for r in Rebaseline]),
        default=Rebaseline.AUTO.value,
        show_default=True,
        help="Rerun the baseline's pinned model on this machine: auto (when the CPU build's "
        "kernels differ from the baseline's and the runtime version does not, or beside the "
        "candidate on a server that answers differently by batch), always, never.",
    ),
    click.option(
        "--reference-model",
        default=None,
        help="Where the baseline's pinned model file is now, or on a batch-dependent server "
        "the served model with its weights (default: the reference it recorded).",
    ),
    click.option(
        "--sequential",
        is_flag=True,
        help="Run the candidate in looks and stop each unit once it decides (alpha spent over "
        "the looks; the policy's `sequential:` sets them, default 20/50/100%).",
    ),
    click.option(
        "--max-looks",
        type=click.IntRange(1),
        default=None,
        help="Sequential: take at most N looks now (a CI budget); continue the run saved with "
        "--save-run later with --continue.",
    ),
    click.option(
        "--continue",
        "continue_run",
        type=click.Path(path_type=Path),
        default=None,
        help="Continue the sequential check whose candidate run was saved here (--save-run) "
        "from its next look, without spending alpha twice; refused (exit 2) for another "
        "baseline, policy, design or model.",
    ),
    click.option(
        "--anchor",
        default=None,
        help="Creep guard: also gate against this baseline (a name in --store, a run folder, or "
        "NAME~N: NAME as it was N promotions ago, from git) with the policy's max_cumulative_drop "
        "(default 3 points); overrides the policy's anchor.",
    ),
    click.option(
        "--bench",
        "bench_file",
        type=click.Path(path_type=Path),
        default=None,
        help="A bench file (`regress bench -o FILE.json`) holding the candidate's model file: "
        "the timings a `ttft_ms` decision gate tests.",
    ),
    click.option(
        "--record-history",
        type=click.Path(path_type=Path),
        default=None,
        help="Append this gate run to a history file (one JSON line; `regress history` draws it). "
        "For the default branch's runs, not a PR's.",
    ),
    click.option(
        "--repeat-check",
        type=click.IntRange(0),
        default=0,
        help="Send N random examples to the candidate again and report its own A/A noise.",
    ),
)

run_flags = option_group("where", RunFlags, task_options, data_options, store_option, run_options)


@click.command()
@handles_errors
@sides_options
@policy_option("Policy YAML (alpha, correction, test, max_drop, ...). Default: built-in.")
@report_options
@gate_options
@run_flags
def check(
    sides: Sides, policy_path: Path | None, reports: Reports, gate: GateFlags, where: RunFlags
) -> None:
    """Gate a candidate MODEL against a stored baseline.

    Reruns exactly the baseline's examples with the same prompts, pairs them example by
    example, runs a one-sided McNemar test per unit (Holm-corrected), applies the policy and
    writes the reports. When this machine's CPU build differs from the baseline's, the
    baseline's pinned model is rerun here first (cached) and the candidate gated against it.
    On a server whose answers move with the batch (`--backend openai`, probed), the
    baseline's model is rerun on that server interleaved with the candidate (A B A B) and the
    report prints the A/A flip rate beside the verdict; a server that does not serve the
    baseline's model is bad input (docs/scale-out.md).

    \b
    Exit: 0 pass (inconclusive warns), 1 regression, 2 bad input or incompatible baseline,
          3 the run failed (model would not load, error rate above policy).
    \b
    Examples:
      regress check --baseline main --model cand.gguf --report-md report.md
      regress check --baseline main --model cand.gguf --name "PR 42 (Q4_0)"
      regress check --baseline main --model cand.gguf --sequential
      regress check -b main -m cand.gguf --sequential --max-looks 1 --save-run cand/
      regress check -b main -m cand.gguf --continue cand/ --save-run cand2/
      regress check --baseline main --model cand.gguf --anchor release-1.0
      regress check --baseline main --model cand.gguf --shard 0/2 --save-run shard0/
      regress merge shard0/ shard1/ -o cand/ && regress check -b main --candidate-run cand/
      regress check -b main --candidate-samples lm-eval-out/
      regress check --baseline-samples base-out/ --candidate-samples cand-out/
      regress check --baseline-samples base.eval --candidate-samples cand.eval
    """
    sides.refuse_bad_combinations()
    if (gate.max_looks or gate.continue_run) and sides.model is None:
        raise click.UsageError("--max-looks and --continue need --model: a sequential check")
    if where.shard and where.save_run is None:
        raise click.UsageError("--shard needs --save-run DIR; gate the merged run afterwards")
    if where.save_run:
        check_replaceable(where.save_run)  # before the model runs, not after
    if gate.record_history is not None:
        check_history_file(gate.record_history)
    base = sides.baseline(Store(where.store))
    options = check_options(policy_path, gate, where, sides.candidate_name)
    if sides.model is None:
        checked = _check_files(base, sides.candidate_run, sides.candidate_samples, options)
    else:
        candidate = CandidateModel(sides.model, sides.backend, parse_args(sides.model_args))
        if where.shard and where.save_run is not None:  # --shard needs --save-run: see above
            plan, _ = candidate_plan(base, candidate, options)
            shard = replace(plan, shard=parse_shard(where.shard))
            write_run(run_with_progress(f"check {sides.model}", shard).run, where.save_run)
            click.echo(f"stored shard {where.shard} of the candidate run -> {where.save_run}")
            return
        checked = gate_check(base, candidate, options, progress_bar)
        if where.save_run:
            write_run(checked.candidate, where.save_run)
    if reports.judgements_path is not None:
        lines = (json.dumps(j.to_dict(), ensure_ascii=False) + "\n" for j in checked.judgements)
        write_report(reports.judgements_path, "".join(lines))
    if gate.record_history is not None:
        now = datetime.now(UTC)
        entry = history_entry(checked.comparison, base, checked.candidate, current_commit(), now)
        append_history(gate.record_history, entry)
    emit(checked.comparison, reports.report_md, reports.report_json)
    exit_with(checked.comparison.exit_code)


def check_options(
    policy_path: Path | None, gate: GateFlags, where: RunFlags, candidate_name: str | None
) -> CheckOptions:
    """The library's options for a check: the policy (with --sequential and --anchor over
    its own), the anchor run and bench timings loaded, so a missing file is bad input
    before any model runs."""
    policy = load_policy(policy_path)
    # The next look of a continued check runs under the same design: a sequential one.
    if (gate.sequential or gate.max_looks or gate.continue_run) and policy.sequential is None:
        policy = replace(policy, sequential=SequentialDesign())
    if gate.anchor is not None:
        policy = replace(policy, anchor=gate.anchor)
    anchor_run = Store(where.store).find(policy.anchor) if policy.anchor is not None else None
    ttft_ms = None
    if gate.bench_file is not None:
        from regress.report.sources import load_bench  # pandas, through the sweep views

        # The latest bench of each model file.
        timed = sorted(load_bench(gate.bench_file), key=lambda m: m.created)
        ttft_ms = {m.sha256: m.ttft_ms for m in timed if m.sha256}
    return CheckOptions(
        policy=policy,
        source=data_source(where.data_dir, where.hf_datasets),
        cache_dir=cache_folder(where.no_cache, where.cache_dir),
        rebaseline=Rebaseline(gate.rebaseline),
        reference_model=gate.reference_model,
        allow_mismatch=gate.allow_mismatch,
        allow_backend_change=gate.allow_backend_change,
        repeat_check=gate.repeat_check,
        command=command_line(),
        tasks=task_catalog(where.include_path, where.golden),
        candidate_name=candidate_name,
        anchor=anchor_run,
        ttft_ms=ttft_ms,
        max_looks=gate.max_looks,
        resume=read_run(gate.continue_run) if gate.continue_run is not None else None,
    )


def _stored_baseline(store: Store, name: str) -> Run:
    """Baseline `name`; a store with none yet says how to make one."""
    if not store.names() and not store.path(name).exists():
        # A new repository's first check: say how to make what it is compared against.
        where = "" if store.root == Path("baselines") else f" --store {store.root}"
        raise BadInput(
            f"no baselines in {store.root} yet: make one first, e.g. regress baseline create "
            f"--name {name} --model REFERENCE_MODEL --tasks builtin --limit 100{where}"
        )
    return store.load(name)


def _check_files(
    base: Run, candidate_run: Path | None, samples: Path | None, options: CheckOptions
) -> CheckResult:
    """Gate a stored run, or an lm-eval run read from its sample files."""
    if candidate_run is not None:
        return gate_check(base, read_run(candidate_run), options)
    assert samples is not None
    candidate = read_samples(samples, "candidate")
    if is_foreign(base):
        return check_foreign(base, candidate, options)
    # The user chose these files, so a backend change needs no opt-in; it is still noise.
    checked = gate_check(base, candidate, options)
    theirs, ours = checked.candidate.manifest.backend.name, base.manifest.backend.name
    if theirs == ours:
        return checked
    source = candidate.manifest.environment["source"]
    note = (
        f"candidate read from {source} files ({theirs}), baseline ran on {ours}: part of "
        "any difference is backend noise, not the model"
    )
    result = checked.comparison
    return replace(checked, comparison=replace(result, warnings=(note, *result.warnings)))


def current_commit() -> str | None:
    """The commit being gated: GITHUB_SHA in an Action, else git's HEAD here, else None."""
    if os.environ.get("GITHUB_SHA"):
        return os.environ["GITHUB_SHA"]
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def emit(result: Comparison, report_md: Path | None, report_json: Path | None) -> None:
    """Write the reports and print the Markdown summary to stdout."""
    # The Action sets REGRESS_DOCS_URL to its own version's docs, so the report links them.
    markdown = render_markdown(result, docs_url=os.environ.get("REGRESS_DOCS_URL"))
    if report_md:
        write_report(report_md, markdown)
    if report_json:
        write_report(report_json, render_json(result))
    click.echo(markdown)
