"""regress's lm-eval files against lm-eval 0.4.13's own, key by key, on the same documents.

SmolLM2-135M (the packaged GGUF dequantised to float32 by transformers, as in
experiments/parity_generation.py) answers the first --limit GSM8K test questions (5-shot,
generate_until, filters strict-match and flexible-extract) and ARC-Easy test questions (0-shot,
multiple choice) twice: lm-eval's `hf` model with `--log_samples` over lm-eval's own YAML files
(reading regress's documents), and `regress eval --backend hf -o DIR --log-samples`. Then:

1. both folders are read with lm-eval's own code: its file-name helpers (lm_eval.utils), its
   samples schema (`lm_eval.result_schema.SampleResult`, validated strictly by pydantic) and
   its trackio logger's reader of a samples line;
2. the first document's lines are compared key by key (type and nesting);
3. over every document and filter, the values the two tools should share are counted equal;
4. the results files' keys are compared per task.

`--lm-eval-out DIR` reuses an earlier lm-eval `--output_path` of this script (same --limit)
instead of running lm-eval again. `--write-fixture PATH` saves lm-eval's lines for the first
document (strings cut short) as the reference tests/test_lm_eval_samples_shape.py compares
regress's shape with.

    flock /tmp/regress-model.lock .venv/bin/python experiments/lm_eval_samples_shape.py \\
        [--limit 20] [--write-fixture tests/fixtures/lm_eval_samples_shape.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from lm_eval import __version__ as lm_eval_version
from lm_eval.loggers.trackio_logger import _sample_to_trace
from lm_eval.result_schema import SampleResult
from lm_eval.utils import (
    get_file_datetime,
    get_file_task_name,
    get_latest_filename,
    get_results_filenames,
    get_sample_results_filenames,
)
from parity_generation import write_tasks
from parity_lm_eval import DATA, MAX_LENGTH, MODEL, benchmarks, lm_eval_cli, write_lm_eval_tasks
from pydantic import TypeAdapter, ValidationError

from regress.cli import cli
from regress.tasks.base import DataSource

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_lm_eval_samples_shape import shape  # noqa: E402 (the test's own comparison, found above)

# kind -> (lm-eval's task name, regress's task name, output_type)
KINDS = {
    "generate_until": ("gsm8k_local", "gsm8k", "generate_until"),
    "multiple_choice": ("arc_easy", "arc_easy", "multiple_choice"),
}
# The values both tools should write alike for the same document and filter.
SHARED = ("resps", "filtered_resps", "target", "doc_hash", "prompt_hash", "target_hash")
SCHEMA = TypeAdapter(SampleResult)


def trimmed(value: Any) -> Any:
    """`value` with every string cut to 40 characters: a fixture keeps the shape, not the text."""
    if isinstance(value, dict):
        return {k: trimmed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [trimmed(v) for v in value]
    return value[:40] if isinstance(value, str) else value


def read_folder(out: Path) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    """A run folder through lm-eval's file-name helpers: the newest results file and every
    samples file, by task name."""
    # lm-eval's helpers match "/results_" and "/samples_": they take paths, not bare names.
    names = [str(p) for p in out.rglob("*.json*")]
    results = get_latest_filename(get_results_filenames(names))
    samples = {}
    for name in get_sample_results_filenames(names):
        assert get_file_datetime(name) == get_file_datetime(results).removesuffix(".json")
        lines = Path(name).read_text(encoding="utf-8").splitlines()
        samples[get_file_task_name(Path(name).name)] = [json.loads(x) for x in lines]
    return json.loads(Path(results).read_text(encoding="utf-8")), samples


def schema_errors(rows: list[dict[str, Any]]) -> list[str]:
    """lm-eval's SampleResult schema over every line: the first error of each failing line."""
    errors = []
    for row in rows:
        try:
            SCHEMA.validate_python(row, strict=True)
        except ValidationError as exc:
            first = exc.errors()[0]
            errors.append(f"{'.'.join(map(str, first['loc']))}: {first['msg']}")
    return errors


def traced(rows: list[dict[str, Any]], task: str, output_type: str) -> list[str]:
    """What lm-eval's trackio logger reads as the model's answer of each line."""
    module = types.SimpleNamespace(Trace=lambda messages, metadata: messages[1]["content"])
    return [_sample_to_trace(module, row, task, output_type) for row in rows]


def key_table(ours: dict[str, Any], theirs: dict[str, Any]) -> list[str]:
    """Markdown rows: each key of the first document's line, its shape in both tools."""
    rows = []
    for key in list(theirs) + [k for k in ours if k not in theirs]:
        a = json.dumps(shape(theirs[key])) if key in theirs else "absent"
        b = json.dumps(shape(ours[key])) if key in ours else "absent"
        if key == "doc":  # the document's own fields: the verdict alone
            a, b = (
                ("(object)" if key in theirs else "absent"),
                ("(object)" if key in ours else "absent"),
            )
        same = shape(theirs.get(key)) == shape(ours.get(key))
        rows.append(f"| `{key}` | `{a}` | `{b}` | {'yes' if same else '**no**'} |")
    return rows


def by_doc_filter(rows: list[dict[str, Any]]) -> dict[tuple[int, str], dict[str, Any]]:
    """Lines keyed by (doc_id, filter)."""
    return {(r["doc_id"], r["filter"]): r for r in rows}


def agreement(ours: list[dict[str, Any]], theirs: list[dict[str, Any]]) -> list[str]:
    """Per shared field (and each metric), how many (doc_id, filter) lines agree."""
    a, b = by_doc_filter(ours), by_doc_filter(theirs)
    keys = sorted(set(a) & set(b))
    out = [f"lines: lm-eval {len(theirs)}, regress {len(ours)}, paired {len(keys)}"]
    metrics = sorted({m for k in keys for m in b[k]["metrics"]})
    same: Callable[[str], int] = lambda f: sum(a[k].get(f) == b[k].get(f) for k in keys)  # noqa: E731
    out += [f"{field}: {same(field)}/{len(keys)}" for field in (*SHARED, *metrics)]
    pairs = [(x, y) for k in keys for x, y in zip(a[k]["resps"], b[k]["resps"], strict=True)]
    if pairs and isinstance(pairs[0][0][0], list):  # [logprob, is_greedy] per choice
        gap = max(abs(float(x[0][0]) - float(y[0][0])) for x, y in pairs)
        greedy = sum(x[0][1] == y[0][1] for x, y in pairs)
        out.append(f"resps is_greedy: {greedy}/{len(pairs)} choices")
        out.append(f"resps logprob: largest difference {gap:.1e}")
    prompts = sum(
        a[k]["arguments"]["gen_args_0"]["arg_0"] == b[k]["arguments"]["gen_args_0"]["arg_0"]
        for k in keys
    )
    out.append(f"arguments.gen_args_0.arg_0: {prompts}/{len(keys)}")
    return out


def run_regress(limit: int, threads: int, out: Path) -> float:
    """`regress eval` on the hf backend, float32, no result cache; the wall time in seconds."""
    args = ["eval", "-m", MODEL, "--backend", "hf", "-t", "gsm8k,arc_easy", "--limit", str(limit)]
    args += ["--model-args", f"dtype=float32,max_length={MAX_LENGTH},threads={threads}"]
    args += ["--data-dir", str(DATA), "-o", str(out), "--log-samples", "--no-cache"]
    start = time.perf_counter()
    done = CliRunner().invoke(cli, args)
    if done.exit_code:
        raise SystemExit(f"regress eval failed:\n{done.output[-4000:]}")
    return time.perf_counter() - start


def main() -> None:
    """Run both tools, read both folders with lm-eval's code and print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=20, help="documents per task")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads on both sides")
    parser.add_argument("--write-fixture", type=Path, help="save lm-eval's reference lines here")
    parser.add_argument(
        "--lm-eval-out",
        type=Path,
        help="an earlier lm-eval --output_path of this script's tasks and --limit: reuse it",
    )
    args = parser.parse_args()
    source = DataSource(DATA)
    with tempfile.TemporaryDirectory(prefix="samples-shape-") as scratch:
        root = Path(scratch)
        lm_out, lm_s = args.lm_eval_out, 0.0
        if lm_out is None:
            lm_out = root / "lm_eval"
            include = write_tasks(["gsm8k"], args.limit, source, root)
            write_lm_eval_tasks(benchmarks(0, args.limit, ["arc_easy"]), source, root)
            lm_s = lm_eval_cli([k[0] for k in KINDS.values()], include, lm_out, args.threads)
        regress_s = run_regress(args.limit, args.threads, root / "regress")
        lm_results, lm_samples = read_folder(lm_out)
        our_results, our_samples = read_folder(root / "regress")
    print(f"lm-eval {lm_eval_version} hf and regress hf, {MODEL} float32, first {args.limit}")
    lm_time = f"lm-eval {lm_s:.0f} s" if lm_s else f"lm-eval reused from {args.lm_eval_out}"
    print(f"documents of each task; wall time {lm_time}, regress {regress_s:.0f} s\n")
    fixture: dict[str, Any] = {"lm_eval_version": lm_eval_version, "lines": {}, "results": {}}
    for kind, (lm_task, our_task, output_type) in KINDS.items():
        theirs, ours = lm_samples[lm_task], our_samples[our_task]
        print(f"## {kind}: lm-eval `{lm_task}`, regress `{our_task}`\n")
        print("lm-eval's file-name helpers found both samples files; lm-eval's SampleResult")
        print(f"schema errors: lm-eval {len(schema_errors(theirs))}, regress "
              f"{len(schema_errors(ours))} (of {len(theirs)} and {len(ours)} lines)")  # fmt: skip
        order = lambda r: (r["doc_id"], r["filter"])  # noqa: E731
        answers = zip(
            traced(sorted(theirs, key=order), lm_task, output_type),
            traced(sorted(ours, key=order), our_task, output_type),
            strict=True,
        )
        same_trace = sum(x == y for x, y in answers)
        print(
            f"lm-eval's trackio reader gives the same answer for {same_trace}/{len(theirs)} lines\n"
        )
        first_theirs = [r for r in theirs if r["doc_id"] == 0]
        first_ours = {r["filter"]: r for r in ours if r["doc_id"] == 0}
        for row in first_theirs:
            print(f"first document, filter `{row['filter']}`:\n")
            print("| key | lm-eval | regress | same shape |\n|---|---|---|---|")
            print("\n".join(key_table(first_ours[row["filter"]], row)) + "\n")
        print("values over every document and filter: " + "; ".join(agreement(ours, theirs)))
        lm_keys = list(lm_results["results"][lm_task])
        our_keys = list(our_results["results"][our_task])
        print(f"\nresults keys, lm-eval: {', '.join(lm_keys)}")
        print(f"regress's beyond them: {', '.join(k for k in our_keys if k not in lm_keys)}")
        print(f"lm-eval's missing from regress: {[k for k in lm_keys if k not in our_keys]}\n")
        fixture["lines"][kind] = trimmed(first_theirs)
        fixture["results"][kind] = sorted(lm_results["results"][lm_task])
    if args.write_fixture:
        args.write_fixture.write_text(json.dumps(fixture, indent=1, ensure_ascii=False) + "\n")
        print(f"wrote {args.write_fixture}")


if __name__ == "__main__":
    main()
