"""`regress sweep` as a library: quantize a source model into configurations and measure each.

Per configuration, in this order: quantize (cached by the source's sha256 and the settings),
evaluate the suite (regress's runner, result cache on), score WikiText-2 against the source
(regress.sweep.token_kld: perplexity, KL divergence, same top token), and benchmark pp/tg speed
and peak RSS (regress.bench.run, in a fresh process so one configuration's memory does not
leak into the next one's peak). A configuration is finished when its result file exists;
every file is written to a temporary name and renamed, so a killed sweep leaves nothing
half-written and the same command continues with the first unfinished configuration.

Files in the output folder:
    sweep.json             what was asked (source, its sha256, suite, configurations)
    models/NAME-KEY.gguf   the quantized files (KEY: source sha256 + settings)
    runs/NAME/             accuracy records, a regress run folder (`regress report` reads it)
    tokens/NAME.npz        per-token NLL, KLD and same-top over the WikiText-2 tokens
    configs/NAME.json      the configuration's results (written last)
    cache/                 regress's result cache (a killed evaluation resumes)
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from regress import __version__
from regress.backends.models import model_info, resolve_model_path
from regress.bench.summaries import accuracy_run
from regress.core import safe_json
from regress.core.errors import BadInput, RunFailed
from regress.core.manifest import Run
from regress.core.store import is_run_folder, read_run, write_run
from regress.gate.pairing import pair_runs
from regress.run.runner import RunPlan, execute, suite_specs
from regress.run.suite import Suite
from regress.stats import mcnemar_pvalue, paired_diff_ci
from regress.sweep.quantize import QuantSettings, check_settings, quantize_file, weights_sha256
from regress.sweep.results import (
    SOURCE,
    ConfigResult,
    Speed,
    SweepResults,
    TaskScore,
    load_results,
    result_from_dict,
    result_to_dict,
    slug,
)
from regress.sweep.token_kld import (
    Divergence,
    DivergenceOptions,
    TokenValues,
    summarize,
    token_values,
    wikitext_text,
)
from regress.tasks.base import DataSource

SCHEMA = "regress-sweep/1"


@dataclass(frozen=True)
class SweepOptions:
    """What to sweep and how much to measure."""

    model: str
    """The source: a .gguf path or a packaged name (smollm2-135m, gemma3-270m)."""
    configs: tuple[QuantSettings, ...]
    out_dir: Path
    suite: Suite
    source: DataSource = field(default_factory=DataSource)
    divergence: DivergenceOptions = field(default_factory=DivergenceOptions)
    n_prompt: int = 512
    n_gen: int = 128
    bench_runs: int = 5
    threads: int | None = None
    eval_n_ctx: int = 2048
    stop_after: int | None = None
    """Measure at most this many new configurations, then stop (rerun to continue)."""
    reevaluate: bool = False
    """Evaluate the accuracy of stored configurations again (after a change to the backend's
    scoring), keeping their quantization, KL divergence and speed."""

    def __post_init__(self) -> None:
        if not self.configs:
            raise BadInput("sweep: give at least one configuration (--types)")
        names = [c.name for c in self.configs]
        if len(set(names)) != len(names):
            raise BadInput(f"sweep: configuration given twice ({', '.join(names)})")
        if self.bench_runs < 2:
            raise BadInput("sweep: --runs must be >= 2 (speed intervals need two)")
        if self.stop_after is not None and self.stop_after < 1:
            raise BadInput("sweep: --stop-after must be >= 1")
        for config in self.configs:
            check_settings(config)


def settings_key(source_sha256: str, settings: QuantSettings) -> str:
    """The quantized file's cache key: source sha256, settings and llama.cpp's version."""
    import llama_cpp

    text = json.dumps(
        [source_sha256, dataclasses.asdict(settings), llama_cpp.__version__], sort_keys=True
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=1, sort_keys=True)
        handle.flush()
        os.fsync(handle.fileno())
    tmp.replace(path)


def _suite_entries(suite: dict[str, Any]) -> dict[str, Any]:
    """What of a suite decides the examples: its name and, per entry, task, shots, limit and
    documents (fields a suite entry gains later do not make an old sweep another sweep)."""
    keys = ("task", "num_fewshot", "limit", "docs")
    entries = [{k: entry.get(k) for k in keys} for entry in suite.get("tasks", [])]
    return {"name": suite.get("name"), "tasks": entries}


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _scores(reference: Run, run: Run) -> tuple[TaskScore, ...]:
    """Per-task and pooled accuracy with the paired comparison against the reference run."""
    summary = accuracy_run(run)
    infos = [
        info for name, info in run.manifest.tasks.items() if name in {t.task for t in summary.tasks}
    ]
    pairing = pair_runs(reference, run, infos)
    rows, total_b, total_c, total_n = [], 0, 0, 0
    for task in summary.tasks:
        pairs = pairing.pairs.get(task.task, [])
        # A failed example counts as wrong on the side that failed, as in the gate.
        b = sum(1 for x, y in pairs if (x.correct or 0) and not (y.correct or 0))
        c = sum(1 for x, y in pairs if not (x.correct or 0) and (y.correct or 0))
        rows.append(_score(task.task, task.n, task.accuracy, task.low, task.high, b, c, len(pairs)))
        total_b, total_c, total_n = total_b + b, total_c + c, total_n + len(pairs)
    n = sum(t.n for t in summary.tasks)
    rows.append(
        _score("all", n, summary.accuracy, summary.low, summary.high, total_b, total_c, total_n)
    )
    return tuple(rows)


def _score(
    task: str, n: int, acc: float, low: float, high: float, b: int, c: int, paired: int
) -> TaskScore:
    d_low, d_high = paired_diff_ci(b, c, paired)
    delta = (c - b) / paired if paired else 0.0
    return TaskScore(
        task, n, acc, low, high, b, c, delta, d_low, d_high, float(mcnemar_pvalue(b, c))
    )


@contextlib.contextmanager
def _stderr_to(path: Path) -> Iterator[None]:
    """Send file descriptor 2 (where llama.cpp's C code logs) to `path` for a while: its
    quantize log is hundreds of per-tensor fallback lines, worth keeping, not printing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    saved = os.dup(2)
    try:
        with path.open("w") as log:
            os.dup2(log.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _bench_child(path: str, options: Any) -> Any:
    from regress.bench.run import bench_model

    return bench_model(path, options, lambda _: None)


def _speed(path: Path, options: SweepOptions) -> Speed:
    from regress.bench.run import BenchOptions  # psutil: the bench extra

    args = {"n_ctx": options.n_prompt + options.n_gen + 16}
    if options.threads:
        args["threads"] = options.threads
    bench = BenchOptions(
        models=(str(path),),
        model_args=args,
        n_prompt=(options.n_prompt,),
        n_gen=(options.n_gen,),
        runs=options.bench_runs,
        output_len=0,
    )
    # A fresh process: its peak RSS is this model's, not what earlier ones left behind.
    with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:
        result = pool.submit(_bench_child, str(path), bench).result()
    pp, tg = result.micro
    return Speed(
        pp_ts=pp.mean_ts,
        pp_sd=pp.sd_ts,
        tg_ts=tg.mean_ts,
        tg_sd=tg.sd_ts,
        tg_samples_ts=tg.samples_ts,
        peak_rss_bytes=result.resources.peak_rss_bytes,
        load_s=result.load_s or 0.0,
    )


def _system_info() -> str:
    import llama_cpp

    return llama_cpp.llama_print_system_info().decode(errors="replace").strip()


Progress = Callable[[str], None]


class _Sweep:
    """One sweep folder being filled."""

    def __init__(self, options: SweepOptions, progress: Progress) -> None:
        self.options = options
        self.progress = progress
        self.out = options.out_dir
        self.source_path = resolve_model_path(options.model)
        self.source_info = model_info(str(self.source_path))
        self.specs = tuple(suite_specs(options.suite))
        self.finished: list[ConfigResult] = []
        """Configurations measured or read back so far, in sweep order."""

    def start(self) -> None:
        """Write sweep.json, or check that an existing one asked for the same sweep."""
        o = self.options
        asked = {
            "schema": SCHEMA,
            "model": o.model,
            "source_sha256": self.source_info.sha256,
            "suite": _suite_entries(dataclasses.asdict(o.suite)),
            "divergence": dataclasses.asdict(o.divergence),
            "n_prompt": o.n_prompt,
            "n_gen": o.n_gen,
            "bench_runs": o.bench_runs,
            "threads": o.threads,
        }
        path = self.out / "sweep.json"
        if path.is_file():
            try:
                old = safe_json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise BadInput(f"{path}: unreadable ({exc})") from exc
            old["suite"] = _suite_entries(old.get("suite") or {})
            differ = sorted(k for k in asked if _canonical(old.get(k)) != _canonical(asked[k]))
            if differ:
                raise BadInput(
                    f"{self.out} holds a sweep with other settings ({', '.join(differ)}); "
                    "use another -o folder"
                )
            # Configurations may be added to a sweep; earlier ones keep their place.
            names = list(dict.fromkeys([*old.get("configs", []), *(c.name for c in o.configs)]))
        else:
            names = [c.name for c in o.configs]
        _write_json(path, {**asked, "configs": names, "regress_version": __version__})

    def done(self, name: str) -> dict[str, Any] | None:
        path = self.out / "configs" / f"{slug(name)}.json"
        if not path.is_file():
            return None
        try:
            return dict(safe_json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError) as exc:
            raise BadInput(f"{path}: unreadable sweep result ({exc}); delete it to redo") from exc

    def quantized(self, settings: QuantSettings) -> Path:
        key = settings_key(self.source_info.sha256, settings)
        path = self.out / "models" / f"{slug(settings.name)}-{key}.gguf"
        if not path.is_file():
            log = path.with_suffix(".log")
            self.progress(f"{settings.name}: quantize (llama.cpp's log: {log})")
            with _stderr_to(log):
                quantize_file(self.source_path, settings, path, self.options.threads or 0)
        return path

    def accuracy_run(self, name: str, path: Path, again: bool = False) -> Run:
        """The configuration's stored run, or a new evaluation (`again`: always)."""
        folder = self.out / "runs" / slug(name)
        if not again and folder.is_dir() and is_run_folder(folder):
            return read_run(folder)
        self.progress(f"{name}: evaluate {', '.join(s.task.name for s in self.specs)}")
        args: dict[str, Any] = {"n_ctx": self.options.eval_n_ctx}
        if self.options.threads:
            args["threads"] = self.options.threads
        plan = RunPlan(
            specs=self.specs,
            model=str(path),
            model_args=args,
            source=self.options.source,
            name=slug(name),
            suite_name=self.options.suite.name,
            cache_dir=self.out / "cache",
        )
        run = execute(plan).run
        write_run(run, folder)
        return run

    def reevaluated(
        self, data: dict[str, Any], reference: Run | None
    ) -> tuple[dict[str, Any], bool]:
        """A stored configuration with its accuracy evaluated again by this regress (a scoring
        change of the backend), and whether its backend fingerprint changed. Quantization,
        KL divergence and speed do not use the scoring code and stay as measured."""
        result = result_from_dict(data)
        if result.identical_to is not None:
            same = next(r for r in self.finished if r.name == result.identical_to)
            return result_to_dict(dataclasses.replace(result, scores=same.scores)), False
        folder = self.out / "runs" / slug(result.name)
        before = read_run(folder).manifest.backend if is_run_folder(folder) else None
        run = self.accuracy_run(result.name, Path(result.file), again=True)
        scores = _scores(reference if reference is not None else run, run)
        changed = before != run.manifest.backend
        return result_to_dict(dataclasses.replace(result, scores=scores)), changed

    def divergence(self, name: str, path: Path, text: str) -> Divergence:
        file = self.out / "tokens" / f"{slug(name)}.npz"
        if not file.is_file():
            self.progress(f"{name}: WikiText-2 against the source")
            cand = None if path == self.source_path else str(path)
            values = token_values(str(self.source_path), cand, text, self.options.divergence)
            file.parent.mkdir(parents=True, exist_ok=True)
            values.save(file)
        return summarize(TokenValues.load(file))

    def measure(
        self,
        name: str,
        settings: QuantSettings | None,
        path: Path,
        reference: Run | None,
        text: str,
    ) -> ConfigResult:
        start = time.perf_counter()
        info = model_info(str(path))
        weights = weights_sha256(path)
        # Hashed again rather than read back: cheap, and independent of what an earlier
        # version of regress stored.
        earlier = [r for r in self.finished if weights_sha256(Path(r.file)) == weights]
        if earlier:
            same = earlier[0]
            self.progress(
                f"{name}: the same tensors as {same.name} (weights sha256 {weights[:12]}); "
                "not measured again"
            )
            return dataclasses.replace(
                same,
                name=name,
                settings=settings,
                file=str(path),
                sha256=info.sha256,
                quantization=info.quantization,
                identical_to=same.name,
                elapsed_s=time.perf_counter() - start,
            )
        run = self.accuracy_run(name, path)
        scores = _scores(reference if reference is not None else run, run)
        divergence = self.divergence(name, path, text)
        self.progress(f"{name}: pp{self.options.n_prompt} and tg{self.options.n_gen}")
        speed = _speed(path, self.options)
        created = dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        return ConfigResult(
            name=name,
            settings=settings,
            file=str(path),
            sha256=info.sha256,
            weights_sha256=weights,
            quantization=info.quantization,
            size_bytes=path.stat().st_size,
            n_params=info.n_params or 0,
            identical_to=None,
            scores=scores,
            divergence=divergence,
            speed=speed,
            system_info=_system_info(),
            created=created,
            elapsed_s=time.perf_counter() - start,
        )

    def one(
        self, name: str, settings: QuantSettings | None, reference: Run | None, text: str
    ) -> dict[str, Any]:
        """Measure one configuration (or record why llama.cpp could not make it)."""
        if settings is None:
            path = self.source_path
        else:
            try:
                path = self.quantized(settings)
            except RunFailed as exc:
                self.progress(f"{name}: skipped ({exc})")
                return {"name": name, "settings": dataclasses.asdict(settings), "skipped": str(exc)}
        return result_to_dict(self.measure(name, settings, path, reference, text))

    def run(self) -> SweepResults:
        text = wikitext_text(self.options.source)  # missing data: refused before any file
        self.start()
        todo: list[tuple[str, QuantSettings | None]] = [(SOURCE, None)]
        todo += [(c.name, c) for c in self.options.configs]
        new = 0
        reference = None
        for name, settings in todo:
            data = self.done(name)
            if data is None:
                if self.options.stop_after is not None and new >= self.options.stop_after:
                    self.progress(f"stopped after {new} new configurations; rerun to continue")
                    break
                data = self.one(name, settings, reference, text)
                _write_json(self.out / "configs" / f"{slug(name)}.json", data)
                new += 1
                self.progress(f"{name}: stored")
            elif self.options.reevaluate and "skipped" not in data:
                if self.options.stop_after is not None and new >= self.options.stop_after:
                    self.progress(f"stopped after {new} evaluations; rerun to continue")
                    break
                data, changed = self.reevaluated(data, reference)
                _write_json(self.out / "configs" / f"{slug(name)}.json", data)
                new += int(changed)  # a rerun the result cache answered takes no lock time
            if settings is None:
                reference = read_run(self.out / "runs" / slug(SOURCE))
            if "skipped" not in data:
                self.finished.append(result_from_dict(data))
        return load_results(self.out)


def run_sweep(options: SweepOptions, progress: Progress = lambda _: None) -> SweepResults:
    """Measure the source and every configuration not yet measured in `options.out_dir`."""
    return _Sweep(options, progress).run()


def parse_types(text: str) -> tuple[QuantSettings, ...]:
    """`Q8_0,Q4_K_M,...` as plain settings (one per type)."""
    names = [t.strip().upper() for t in text.split(",") if t.strip()]
    if not names:
        raise BadInput("--types: give at least one quantization type")
    return tuple(QuantSettings(n) for n in dict.fromkeys(names))


def config_space(data: dict[str, Any]) -> tuple[QuantSettings, ...]:
    """The product of a YAML config space: `types` x `pure` x `output_tensor_type` x
    `token_embedding_type` (each a list; the last three optional, null meaning llama.cpp's
    choice). Unknown keys are errors."""
    known = {"types", "pure", "output_tensor_type", "token_embedding_type"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise BadInput(f"sweep config: unknown key(s) {', '.join(unknown)}; known: {sorted(known)}")

    def listed(key: str, default: Sequence[Any]) -> list[Any]:
        value = data.get(key, list(default))
        return value if isinstance(value, list) else [value]

    types = listed("types", [])
    if not types or not all(isinstance(t, str) for t in types):
        raise BadInput("sweep config: `types` must be a list of quantization type names")
    configs = [
        QuantSettings(t.upper(), bool(pure), out, emb)
        for t in types
        for pure in listed("pure", [False])
        for out in listed("output_tensor_type", [None])
        for emb in listed("token_embedding_type", [None])
    ]
    return tuple(dict.fromkeys(configs))


def load_config_space(path: Path) -> tuple[QuantSettings, ...]:
    """A YAML config space file (see config_space)."""
    import yaml

    from regress.core.safe_yaml import load

    try:
        data = load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"{path}: cannot read ({exc})") from exc
    except yaml.YAMLError as exc:
        raise BadInput(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from exc
    if not isinstance(data, dict):
        raise BadInput(f"{path}: expected a mapping with `types:`")
    try:
        return config_space(data)
    except BadInput as exc:
        raise BadInput(f"{path}: {exc}") from exc
