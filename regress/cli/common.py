"""Options and behaviour shared by commands: model selection, data, progress, errors."""

from __future__ import annotations

import dataclasses
import difflib
import functools
import inspect
import itertools
import os
import shlex
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from regress.backends import BACKENDS, parse_model_args
from regress.core.errors import BadInput, ExitCode, RegressError
from regress.core.files import write_text_atomic
from regress.run.cache import default_cache_dir
from regress.run.engine import Shard
from regress.run.generation import REASONING_CAPS, GenerationSettings, parse_gen_kwargs
from regress.run.runner import Outcome, RunPlan, execute
from regress.run.suite import Suite, TaskEntry, inline_suite, load_suite, parse_limit
from regress.tasks import resolve_source, task_groups
from regress.tasks.base import DataSource
from regress.tasks.catalog import (
    BUILTIN,
    GOLDEN_SUFFIXES,
    TASK_FILE_SUFFIXES,
    TaskCatalog,
    load_catalog,
)
from regress.tasks.formats import MAX_FORMATS
from regress.tasks.variants import variant_of

if TYPE_CHECKING:
    from regress.checks import TimingOptions


class _Limit(click.ParamType):
    """lm-eval's --limit: a number of documents per task, or a fraction of them (0.1)."""

    name = "N|FRACTION"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, int | float):
            return value
        try:
            number = float(value)
        except ValueError:
            self.fail(f"{value!r} is neither a number of documents nor a fraction", param, ctx)
        try:
            return parse_limit(int(number) if number.is_integer() else number, "--limit")
        except BadInput as exc:
            self.fail(str(exc).removeprefix("--limit: "), param, ctx)


LIMIT = _Limit()


F = TypeVar("F", bound=Callable[..., Any])
stderr = Console(stderr=True)


def stdout() -> Console:
    """A console for tables; wide when not a terminal, so CI logs show whole cells."""
    console = Console()
    return console if console.is_terminal else Console(width=160)


def handles_errors(func: F) -> F:
    """Turn the package's own errors into one line on stderr and the documented exit code."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except RegressError as exc:
            click.echo(f"regress: error: {exc}", err=True)
            sys.exit(int(exc.exit_code))
        except KeyboardInterrupt:
            click.echo("regress: interrupted", err=True)
            sys.exit(130)
        except (click.ClickException, click.exceptions.Exit, SystemExit):
            raise
        except Exception as exc:  # a bug or an unforeseen failure: never exit 1 (regression)
            if debug_enabled():
                raise
            where = traceback.extract_tb(exc.__traceback__)[-1]
            click.echo(
                f"regress: error: unexpected {type(exc).__name__}: {exc} "
                f"(at {Path(where.filename).name}:{where.lineno}; REGRESS_DEBUG=1 or --debug "
                "shows the traceback)",
                err=True,
            )
            sys.exit(int(ExitCode.RUN_FAILED))

    return wrapper  # type: ignore[return-value]


def debug_enabled() -> bool:
    """--debug (or REGRESS_DEBUG=1): show tracebacks of unexpected errors."""
    return os.environ.get("REGRESS_DEBUG", "") not in ("", "0")


def model_options(func: F) -> F:
    """--model, --backend, --model-args: lm-eval's way of naming a model."""
    func = click.option(
        "--model-args",
        default=None,
        help="Backend settings as k=v,k2=v2 (n_ctx=2048, threads=2, dtype=float32, base_url=...).",
    )(func)
    func = click.option(
        "--backend",
        type=click.Choice(BACKENDS),
        default="llama_cpp",
        show_default=True,
        help="Where the model runs: llama.cpp in-process, HF transformers, or an "
        "OpenAI-compatible server.",
    )(func)
    return click.option(
        "--model",
        "-m",
        required=True,
        help="A .gguf path, a model folder, a served model name (openai), or a packaged model: "
        "smollm2-135m, gemma3-270m.",
    )(func)


def renamed_option(command: str, old: str, new: str) -> Callable[[F], F]:
    """A hidden option under its old name: using it exits 2 with the name to use instead."""

    def refuse(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
        if value is not None:
            raise click.UsageError(f"{command} {old} is now {new} ({new} {value})", ctx)

    # A name of its own: the new option may keep the old one's (sweep's --runs is bench_runs).
    name = "renamed_" + old.lstrip("-").replace("-", "_")
    return click.option(old, name, default=None, hidden=True, expose_value=False, callback=refuse)


class TasksCommand(click.Command):
    """A command taking --tasks: words left over after its value were meant as more tasks."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        given = list(args)  # click's parser consumes the list it is given
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            # `-t a b`, as a shell or lm-eval's space-separated --tasks would have it.
            where = [i for i, arg in enumerate(given) if arg in ("-t", "--tasks")]
            if "unexpected extra argument" not in exc.message or not where:
                raise
            after = given[where[-1] + 1 :]
            words = list(itertools.takewhile(lambda a: not a.startswith("-"), after))
            if len(words) < 2:
                raise
            raise click.UsageError(
                f"{exc.message}: tasks are comma-separated (-t {','.join(words)})", ctx
            ) from None


def check_task_names(suite: Suite, catalog: TaskCatalog) -> None:
    """BadInput with the nearest known name for a task or group nobody defines (`arc_esay`:
    did you mean arc_easy?); names without a near one are left to the catalog's own error."""
    known = [*catalog.names(), *task_groups(), *catalog.groups]
    for entry in suite.tasks:
        name = variant_of(entry.task)[0]
        if name in known or name.endswith(TASK_FILE_SUFFIXES + GOLDEN_SUFFIXES):
            continue
        near = difflib.get_close_matches(name, known, n=1)
        if near:
            raise BadInput(
                f"unknown task {name!r}: did you mean {near[0]}? (`regress tasks` lists them all)"
            )


def _batch_size(value: str) -> int | str:
    """lm-eval's --batch_size: `auto` or a positive integer."""
    if value == "auto":
        return value
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise BadInput(f"--batch-size: {value!r} is neither a positive integer nor auto")
    return number


@dataclasses.dataclass(frozen=True)
class LmEvalFlags:
    """lm-eval's --batch_size, --device and --seed, as far as they mean something here."""

    batch_size: int | str | None = None
    """hf: rows per forward pass (an int or `auto`); llama_cpp and openai: none to set."""
    device: str | None = None
    """Where the hf backend runs the model; the other backends run where they run."""
    seed: int | None = None
    """The sampling seed of generate_until tasks."""

    def model_args(self, backend: str, args: Mapping[str, Any]) -> dict[str, Any]:
        """`args` with the batch size and device set where `backend` has such settings;
        BadInput for a device it cannot use, or a setting `args` gives otherwise."""
        out = dict(args)
        if backend != "hf":
            if self.device not in (None, "cpu"):
                where = (
                    "the server decides where the model runs"
                    if backend == "openai"
                    else "the llama_cpp backend runs the model on the CPU (a CPU build)"
                )
                raise BadInput(f"--device {self.device}: {where}; leave --device out or give cpu")
            # llama_cpp and openai score one request at a time: lm-eval's batch size has
            # nothing to set there (llama.cpp's tokens per decode are n_batch, another thing).
            return out
        for key, value in (("batch_size", self.batch_size), ("device", self.device)):
            if value is None:
                continue
            if out.get(key, value) != value:
                raise BadInput(
                    f"--{key.replace('_', '-')} {value} and --model-args {key}={out[key]} differ"
                )
            out[key] = value
        return out

    def generation(self, settings: GenerationSettings) -> GenerationSettings:
        """`settings` with --seed as the sampling seed (as --gen-kwargs seed=N)."""
        if self.seed is None:
            return settings
        given = settings.gen_kwargs.get("seed")
        if given is not None and given != self.seed:
            raise BadInput(f"--seed {self.seed} and --gen-kwargs seed={given} differ")
        return dataclasses.replace(settings, gen_kwargs={**settings.gen_kwargs, "seed": self.seed})


_NO_CHAT_TEMPLATE = (
    "--apply-chat-template: regress scores lm-eval's plain prompts (lm-eval's own default), "
    "so results pair with a baseline and with lm-eval's; a model's chat template is applied "
    "to conversation sets only (--golden FILE with `turns`, docs/generation.md#conversations)"
)


def lm_eval_options(func: F) -> F:
    """--batch-size, --device, --seed and --apply-chat-template, lm-eval's flags, given as one
    `flags: LmEvalFlags` argument (--apply-chat-template is refused, with the reason). Put it
    below @handles_errors."""

    @functools.wraps(func)
    def wrapper(
        *args: Any,
        batch_size: str | None,
        device: str | None,
        seed: int | None,
        apply_chat_template: str | None,
        **kwargs: Any,
    ) -> Any:
        if apply_chat_template is not None:
            raise BadInput(_NO_CHAT_TEMPLATE)
        flags = LmEvalFlags(
            batch_size=None if batch_size is None else _batch_size(batch_size),
            device=device,
            seed=seed,
        )
        return func(*args, flags=flags, **kwargs)

    options = (
        click.option(
            "--batch-size",
            metavar="N|auto",
            default=None,
            help="lm-eval's --batch_size. hf backend: rows per forward pass (its batch_size "
            "setting); results never depend on it. llama_cpp and openai score one request at "
            "a time: accepted, changes nothing (llama.cpp's tokens per decode: --model-args "
            "n_batch=).",
        ),
        click.option(
            "--device",
            default=None,
            help="lm-eval's --device. hf backend: where torch runs the model (its device "
            "setting: cpu, cuda, ...). llama_cpp runs on the CPU and an openai server where it "
            "runs: cpu only.",
        ),
        click.option(
            "--seed",
            type=click.IntRange(0),
            default=None,
            help="The sampling seed of generate_until tasks (as --gen-kwargs seed=N). Few-shot "
            "examples keep lm-eval's default seed 1234, so prompts pair with the baseline; "
            "log-likelihood scoring has nothing random.",
        ),
        click.option(
            "--apply-chat-template",
            is_flag=False,
            flag_value="",
            default=None,
            metavar="[TEMPLATE]",
            help="Refused: regress scores lm-eval's plain prompts; chat templates apply to "
            "conversation sets (--golden FILE with turns).",
        ),
    )
    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper  # type: ignore[return-value]


def option_group(
    name: str, build: Callable[..., Any], *options: Callable[[F], F]
) -> Callable[[F], F]:
    """Add `options` to a command and hand it one argument `name` in their place: `build`
    (a dataclass, say) called with their values, its parameters named as the options are.
    Put it below @handles_errors so `build`'s BadInput is one line too."""
    wanted = tuple(inspect.signature(build).parameters)

    def decorate(func: F) -> F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            values = {key: kwargs.pop(key) for key in wanted}
            return func(*args, **{name: build(**values)}, **kwargs)

        for option in reversed(options):
            wrapper = option(wrapper)
        return wrapper  # type: ignore[return-value]

    return decorate


def policy_option(help_text: str) -> Callable[[F], F]:
    """--policy FILE (read by `regress.gate.policy.load_policy`; default: the built-in policy)."""
    return click.option(
        "--policy", "policy_path", type=click.Path(path_type=Path), default=None, help=help_text
    )


def data_options(func: F) -> F:
    """--data-dir and --hf-datasets: where benchmark files come from."""
    func = click.option(
        "--hf-datasets",
        is_flag=True,
        help="Load benchmarks from the Hugging Face Hub through `datasets` (needs network).",
    )(func)
    return click.option(
        "--data-dir",
        type=click.Path(path_type=Path),
        default=None,
        help="Folder of the benchmarks' original files (default: $REGRESS_DATA_DIR). The "
        "built-in suite needs none.",
    )(func)


def timing_options(func: F) -> F:
    """--time MODEL and --time-examples: price a baseline's examples at a measured throughput
    (regress.checks.timing); the data and task options say where the examples come from."""
    func = click.option(
        "--time-examples",
        type=click.IntRange(1),
        default=None,
        help="With --time: how many of the baseline's examples to time, a seeded sample "
        "(default 40).",
    )(func)
    return click.option(
        "--time",
        "time_model",
        default=None,
        metavar="MODEL",
        help="Time a sample of the baseline on MODEL (its backend, no cache) and print the "
        "gate's wall time at that throughput.",
    )(func)


def timing(
    model: str | None,
    examples: int | None,
    include_path: Sequence[Path],
    golden: Sequence[Path],
    data_dir: Path | None,
    hf_datasets: bool,
) -> TimingOptions | None:
    """What --time and the data and task options ask to time (None without --time)."""
    from regress.checks import TimingOptions

    if model is None:
        return None
    options = TimingOptions(
        model, source=data_source(data_dir, hf_datasets), tasks=task_catalog(include_path, golden)
    )
    return options if examples is None else dataclasses.replace(options, examples=examples)


def generation_options(func: F) -> F:
    """--gen-kwargs, --repeats, --think-end-token, --budget, --refusal-pattern, given as one
    `generation: GenerationSettings` argument. Put it below @handles_errors."""

    @functools.wraps(func)
    def wrapper(
        *args: Any,
        gen_kwargs: str | None,
        repeats: int,
        think_end_token: str | None,
        budget: str,
        refusal_pattern: tuple[str, ...],
        **kwargs: Any,
    ) -> Any:
        settings = GenerationSettings(
            gen_kwargs=parse_gen_kwargs(gen_kwargs or ""),
            repeats=repeats,
            think_end_token=think_end_token,
            budget=budget,
        )
        if refusal_pattern:
            settings = dataclasses.replace(settings, refusals=refusal_pattern)
        return func(*args, generation=settings, **kwargs)

    options = (
        click.option(
            "--gen-kwargs",
            help="Generation settings over each generate_until task's own, as lm-eval's "
            "--gen_kwargs: temperature=0.8,top_p=0.95,top_k=40,min_p=0.05,seed=1,"
            "max_gen_toks=512,do_sample=false.",
        ),
        click.option(
            "--repeats",
            type=click.IntRange(1),
            default=1,
            show_default=True,
            help="Samples per document of each generate_until task (needs temperature > 0): "
            "the results carry pass@1..pass@k and maj@k.",
        ),
        click.option(
            "--think-end-token",
            help="End of a reasoning model's thinking (e.g. '</think>'): the answer is the "
            "text after it, reasoning tokens are counted apart, and the budget applies.",
        ),
        click.option(
            "--budget",
            type=click.Choice(sorted(REASONING_CAPS)),
            default="standard",
            show_default=True,
            help="Token caps for thinking runs: standard (2,000 reasoning / 1,000 output) "
            "or complex (8,000 / 4,000).",
        ),
        click.option(
            "--refusal-pattern",
            multiple=True,
            help="A regex (case-insensitive) that makes an answer a refusal; repeatable, "
            "replaces the built-in list.",
        ),
    )
    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper  # type: ignore[return-value]


def formats_option(func: F) -> F:
    """--formats K: every task in K prompt formats (regress.tasks.formats)."""
    return click.option(
        "--formats",
        type=click.IntRange(1, MAX_FORMATS),
        default=None,
        help="Render every task in K prompt formats (its own, then K-1 drawn from a fixed "
        "grammar of field names, separators and choice labels), each task TASK@fmtI in unit "
        "UNIT@fmtI: how brittle the model is, and a gate per format.",
    )(func)


def task_options(func: F) -> F:
    """--include-path and --golden: the user's own tasks beside the built-in ones."""
    func = click.option(
        "--golden",
        "golden",
        type=click.Path(path_type=Path),
        multiple=True,
        help='A golden set (JSONL of must-pass prompts; README "Your own tasks"), run as '
        "task golden_<file stem> (a stem that starts with `golden` is the name as it is: "
        "golden.jsonl is task golden), or a conversation set (items with `turns`), run as "
        "task conv_<file stem>. Repeatable.",
    )(func)
    return click.option(
        "--include-path",
        "include_path",
        type=click.Path(path_type=Path),
        multiple=True,
        help="A folder (searched recursively) or file of lm-eval task YAML; its tasks and "
        "groups can then be named like built-in ones. Repeatable.",
    )(func)


def task_catalog(
    include_path: Sequence[Path], golden: Sequence[Path], suite: Suite | None = None
) -> TaskCatalog:
    """The built-in tasks plus the task files and golden sets given (and those a suite names)."""
    files = suite.task_files() if suite else []
    goldens = [*golden, *(suite.golden_files() if suite else [])]
    if not (include_path or files or goldens):
        return BUILTIN
    unique = list(dict.fromkeys(Path(g).expanduser().resolve() for g in goldens))
    return load_catalog([*include_path, *files], unique)


def chosen_suite(
    tasks: str | None,
    suite: Path | None,
    num_fewshot: int | None,
    limit: int | float | None,
    golden: Sequence[Path],
    formats: int | None = None,
) -> Suite:
    """The suite --tasks or --suite describe, with every --golden set appended (run whole).
    --num-fewshot and --limit apply to every task of a --suite too, over its own settings;
    --formats K renders each of its tasks in K prompt formats."""
    if tasks is not None and suite is not None:
        raise click.UsageError("give only one of --tasks or --suite")
    if tasks is None and suite is None and not golden:
        raise click.UsageError("give --tasks, --suite or --golden")
    if suite is not None:
        spec = load_suite(suite)
        spec = dataclasses.replace(
            spec,
            tasks=tuple(
                dataclasses.replace(
                    entry,
                    num_fewshot=entry.num_fewshot if num_fewshot is None else num_fewshot,
                    limit=entry.limit if limit is None else limit,
                )
                for entry in spec.tasks
            ),
        )
    elif tasks is not None:
        spec = inline_suite(tasks, num_fewshot, limit)
    else:
        spec = Suite(name="golden", tasks=())
    if formats is not None:
        spec = spec.in_formats(formats)
    extra = tuple(TaskEntry(str(Path(g).expanduser().resolve())) for g in golden)
    return dataclasses.replace(spec, tasks=(*spec.tasks, *extra))


def data_source(data_dir: Path | None, hf_datasets: bool) -> DataSource:
    """The DataSource the data options describe."""
    return resolve_source(data_dir, hf_datasets)


def parse_args(text: str | None) -> dict[str, Any]:
    """--model-args text into a dict."""
    return parse_model_args(text)


def command_line() -> str:
    """The command as the user typed it, for reports that say how to reproduce them."""
    return shlex.join(["regress", *sys.argv[1:]])


class _ExamplesPerSecond(ProgressColumn):
    """Requests/s scaled to examples/s (a multiple-choice example is several requests)."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        ratio = task.fields.get("examples_per_request", 1.0)
        if not speed:
            return Text("- ex/s", style="progress.data.speed")
        return Text(f"{speed * ratio:.1f} ex/s", style="progress.data.speed")


@contextmanager
def progress_bar(label: str) -> Iterator[Callable[[int, int, int], None]]:
    """A rich progress bar on stderr; yields the engine's `progress` callback."""
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("requests"),
        _ExamplesPerSecond(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    )
    # The bar appears with the first request, so an error before any (an unknown model, a
    # refused setting) is the only line printed.
    bar = Progress(*columns, console=stderr, transient=False)
    task_id: TaskID | None = None
    # A CI log is no terminal: rich draws nothing until the end, so log a line a minute.
    last_line = time.monotonic()

    def update(done: int, total: int, n_examples: int) -> None:
        nonlocal last_line, task_id
        if task_id is None:
            bar.start()
            task_id = bar.add_task(label, total=None)
        ratio = n_examples / total if total else 1.0
        bar.update(task_id, completed=done, total=total, examples_per_request=ratio)
        now = time.monotonic()
        if not stderr.is_terminal and total and now - last_line >= 60:
            last_line = now
            speed = (bar.tasks[0].speed or 0.0) * ratio
            stderr.print(
                f"{label}: {done}/{total} requests ({done / total:.0%}), {speed:.1f} ex/s",
                highlight=False,
            )

    try:
        yield update
    finally:
        if task_id is not None:
            bar.stop()


def run_with_progress(label: str, plan: RunPlan) -> Outcome:
    """Execute `plan` behind a progress bar, noting cache reuse."""
    with progress_bar(label) as progress:
        outcome = execute(plan, progress)
    note_cache(outcome)
    return outcome


def note_cache(outcome: Outcome) -> None:
    """Say when a run replayed cached results (a resumed or repeated run), and when cached
    rows were refused (corrupt, or edited: they fail their digest)."""
    if outcome.cached:
        stderr.print(f"reused {outcome.cached} cached results (--no-cache recomputes them)")
    if outcome.cache_rejected:
        stderr.print(
            f"warning: {outcome.cache_rejected} cached results were corrupt or failed their "
            "digest and were computed again"
        )


def write_report(path: Path, text: str) -> None:
    """Write a report file whole (atomically), creating its folder; one clear line when that
    is impossible."""
    try:
        write_text_atomic(path, text)
    except OSError as exc:
        raise BadInput(f"cannot write the report to {path}: {exc.strerror or exc}") from exc


def exit_with(code: ExitCode) -> None:
    """Exit with a documented code (no-op for 0, so click finishes normally)."""
    if code != ExitCode.OK:
        sys.exit(int(code))


def run_options(func: F) -> F:
    """--shard, --save-run, --no-cache, --cache-dir: how a run is split, kept and resumed."""
    func = click.option(
        "--cache-dir",
        type=click.Path(path_type=Path),
        default=None,
        help="Result cache folder (default: $REGRESS_CACHE_DIR or ~/.cache/regress).",
    )(func)
    func = click.option(
        "--no-cache",
        is_flag=True,
        help="Recompute everything. By default finished requests are cached by model sha256, "
        "backend settings and request, so a killed run resumes when run again.",
    )(func)
    func = click.option(
        "--save-run",
        type=click.Path(path_type=Path),
        default=None,
        help="Also store the run (manifest + records) in this folder.",
    )(func)
    return click.option(
        "--shard",
        default=None,
        help="Run shard i/n of the examples (e.g. 0/4); join outputs with `regress merge`.",
    )(func)


def cache_folder(no_cache: bool, cache_dir: Path | None) -> Path | None:
    """The result cache folder the run options ask for, or None.

    --cache-dir moves every cache of the process there (dequantised models too), so a CI
    cache of that one folder holds all of them.
    """
    if cache_dir is not None:
        if cache_dir.exists() and not cache_dir.is_dir():
            raise BadInput(f"result cache {cache_dir}: not a folder (choose another --cache-dir)")
        os.environ["REGRESS_CACHE_DIR"] = str(cache_dir)
    return None if no_cache else default_cache_dir()


def parse_shard(text: str | None) -> Shard | None:
    """--shard text into a Shard."""
    return Shard.parse(text) if text else None
