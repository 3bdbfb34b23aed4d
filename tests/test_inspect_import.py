"""Inspect logs as runs: inspect-ai itself evaluates a tiny task (six questions, two epochs,
its `includes()` scorer) on the packaged SmolLM2 Q4_1 and on a Q2_K requantization made by
regress's quantize API, each served by llama-cpp-python's server and reached through
inspect-ai's llama-cpp-python provider (the servers start as in tests/test_backend_openai.py).
regress then gates the two real logs: one imported
as a baseline, the other as the candidate, and both as files with no model loaded.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from inspect_ai import Task
from inspect_ai import eval as inspect_eval
from inspect_ai.dataset import Sample
from inspect_ai.log import read_eval_log, write_eval_log
from inspect_ai.scorer import includes, value_to_float
from inspect_ai.solver import generate
from test_backend_openai import _llama_servers

from regress.checks import check_foreign, read_samples
from regress.cli import cli
from regress.core.errors import BadInput, ExitCode
from regress.core.store import read_run
from regress.run.inspect_import import read_inspect_log
from regress.sweep.quantize import quantize_file

pytestmark = pytest.mark.model

QUESTIONS = [
    ("What is the capital of France?", "Paris"),
    ("What is 2 + 3?", "5"),
    ("What color is the sky on a clear day?", "blue"),
    ("What is the largest planet in the solar system?", "Jupiter"),
    ("How many legs does a spider have?", "8"),
    ("What gas do plants absorb from the air?", "carbon dioxide"),
]
EPOCHS = 2


def _task() -> Task:
    samples = [Sample(input=q, target=t, id=i) for i, (q, t) in enumerate(QUESTIONS)]
    return Task(dataset=samples, solver=generate(), scorer=includes(), epochs=EPOCHS)


@pytest.fixture(scope="module")
def logs(smollm2_path: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Real Inspect logs of the same task: `base` (Q4_1) and `cand` (its Q2_K)."""
    root = tmp_path_factory.mktemp("inspect")
    models = {"base": smollm2_path, "cand": quantize_file(smollm2_path, "Q2_K", root / "q2_k.gguf")}
    found = {}
    with _llama_servers(models, root) as urls:
        for side, model in models.items():
            [log] = inspect_eval(
                _task(),
                model=f"llama-cpp-python/{model.name}",
                model_base_url=urls[side],
                log_dir=str(root / side),
                max_tokens=24,
                temperature=0.0,
                display="none",
            )
            assert log.status == "success", log.error
            found[side] = Path(log.location)
    return found


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output + (result.stderr if result.stderr_bytes else "")


def scores(log: Path) -> dict[int, list[float]]:
    """Each sample's scores in epoch order, as inspect-ai reads them."""
    samples = sorted(read_eval_log(str(log)).samples or [], key=lambda s: (s.id, s.epoch))
    out: dict[int, list[float]] = {}
    for sample in samples:
        out.setdefault(int(sample.id), []).append(value_to_float()(sample.scores["includes"].value))
    return out


def test_records_are_the_log_samples_by_id_and_epoch(logs: dict[str, Path]) -> None:
    run_ = read_inspect_log(logs["base"], "base")
    [(task, records)] = run_.records.items()
    expected = scores(logs["base"])
    assert [r.doc_id for r in records] == sorted(expected)
    for record in records:
        assert record.scores["correct"] == expected[record.doc_id]
        assert record.scores["epoch"] == list(range(1, EPOCHS + 1))
        assert record.metrics["score"] == sum(expected[record.doc_id]) / EPOCHS
        assert record.target == QUESTIONS[record.doc_id][1]
    backend = run_.manifest.backend
    assert backend.name == "inspect:llama-cpp-python"
    assert backend.params == {"max_tokens": 24, "temperature": 0.0}
    assert run_.manifest.model.ref == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert run_.manifest.environment["eval_settings"]["epochs"] == EPOCHS


def test_two_inspect_logs_are_gated_from_the_cli(logs: dict[str, Path], tmp_path: Path) -> None:
    store, report = tmp_path / "store", tmp_path / "r.json"
    code, text = run(
        *("baseline", "import-inspect", "--log", str(logs["base"]), "--name", "ib"),
        *("--store", str(store)),
    )
    assert code == 0 and f"{len(QUESTIONS)} samples" in text, text
    code, text = run(
        *("check", "-b", "ib", "--candidate-samples", str(logs["cand"])),
        *("--store", str(store), "--report-json", str(report)),
    )
    data = json.loads(report.read_text())
    assert code == (ExitCode.REGRESSION if data["verdict"] == "REGRESSION" else ExitCode.OK), text
    base, cand = scores(logs["base"]), scores(logs["cand"])
    lower = sum(sum(base[i]) > sum(cand[i]) for i in base)
    higher = sum(sum(base[i]) < sum(cand[i]) for i in base)
    [unit] = data["units"]
    assert (unit["n"], unit["b"], unit["c"], unit["kind"]) == (
        len(QUESTIONS),
        lower,
        higher,
        "score",
    )
    assert data["candidate"]["model"] == "q2_k.gguf"
    assert data["candidate"]["params"] == {"max_tokens": 24, "temperature": 0.0}
    assert "model changed: SmolLM2-135M-Instruct.Q4_1.gguf -> q2_k.gguf" in data["warnings"]
    assert any(w.startswith("no runtime check was possible") for w in data["warnings"])
    stored = read_run(store / "ib")
    assert stored.records == read_inspect_log(logs["base"], "ib").records
    # Both as files, no store: the same gate, through the library as through the CLI.
    code, text = run(
        "check", "--baseline-samples", str(logs["base"]), "--candidate-samples", str(logs["cand"])
    )
    assert code in (ExitCode.OK, ExitCode.REGRESSION) and "| task | 6 |" in text, text
    library = check_foreign(read_samples(logs["base"], "b"), read_samples(logs["cand"], "c"))
    [ours] = library.comparison.units
    assert (ours.n, ours.b, ours.c) == (len(QUESTIONS), lower, higher)


def test_a_log_that_asked_differently_is_refused(logs: dict[str, Path], tmp_path: Path) -> None:
    log = read_eval_log(str(logs["cand"]))
    log.eval.config.epochs = EPOCHS + 1
    edited = tmp_path / "edited.eval"
    write_eval_log(log, str(edited))
    code, text = run(
        "check", "--baseline-samples", str(logs["base"]), "--candidate-samples", str(edited)
    )
    assert code == ExitCode.BAD_INPUT, text
    assert f"epochs {EPOCHS} in the baseline, {EPOCHS + 1} in the candidate" in text
    with pytest.raises(BadInput, match="no scorer 'match'"):
        read_inspect_log(logs["base"], "b", scorer="match")
