"""lm-eval habits: its underscore spellings, --batch-size, --device, --seed,
--apply-chat-template, its output layout and header line, and hints for the usual slips
(a misspelt task, space-separated tasks, a check before any baseline). No model runs: every
command here stops before one would load."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from lm_eval.utils import sanitize_model_name

from regress.cli import cli
from regress.cli.common import LmEvalFlags
from regress.core.errors import BadInput, ExitCode
from regress.report.lm_eval import header_line, model_folder
from regress.run.generation import GenerationSettings


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def test_lm_eval_spellings_reach_regress_options(tmp_path: Path) -> None:
    """Each underscore spelling is parsed (no "No such option"); the run then stops at the
    misspelt task, before any model would load."""
    code, text = run(
        "eval", "-m", str(tmp_path / "none.gguf"), "-t", "arc_esay",
        "--model_args", "n_ctx=512", "--num_fewshot", "0", "--output_path", str(tmp_path / "o"),
        "--log_samples", "--gen_kwargs", "temperature=0", "--batch_size", "auto",
        "--device", "cpu", "--seed", "1",
    )  # fmt: skip
    assert code == ExitCode.BAD_INPUT
    assert text == (
        "regress: error: unknown task 'arc_esay': did you mean arc_easy? "
        "(`regress tasks` lists them all)\n"
    )
    code, text = run(
        "baseline", "create", "--name", "x", "-m", "none.gguf", "-t", "piqa",
        "--model_args", "n_ctx=512", "--num_fewshot", "0", "--batch_size", "0",
        "--store", str(tmp_path / "s"),
    )  # fmt: skip
    assert code == ExitCode.BAD_INPUT
    assert text == "regress: error: --batch-size: '0' is neither a positive integer nor auto\n"
    # A choice keeps its own spelling: llama_cpp is still a backend.
    code, text = run("eval", "-m", "none.gguf", "-t", "arc_esay", "--backend", "llama_cpp")
    assert "did you mean arc_easy?" in text


def test_the_spellings_stay_out_of_the_help() -> None:
    code, text = run("eval", "--help")
    assert code == 0
    assert "--batch-size" in text and "--model-args" in text
    # An option's names are its line's words up to the two spaces before its help.
    names = [line.split("  ")[1] for line in text.splitlines() if line.startswith("  -")]
    assert "-k, --num-fewshot INTEGER RANGE" in names and not [n for n in names if "_" in n]


def test_space_separated_tasks_say_they_are_comma_separated() -> None:
    code, text = run("eval", "-m", "none.gguf", "-t", "arc_easy", "piqa", "boolq", "--limit", "2")
    assert code == ExitCode.BAD_INPUT
    assert text.splitlines()[-1] == (
        "Error: Got unexpected extra arguments (piqa boolq): tasks are comma-separated "
        "(-t arc_easy,piqa,boolq)"
    )
    code, text = run("baseline", "create", "--name", "x", "-m", "m", "--tasks", "a", "b")
    assert "tasks are comma-separated (-t a,b)" in text


def test_a_name_with_no_near_task_keeps_the_full_list() -> None:
    code, text = run("eval", "-m", "none.gguf", "-t", "qqqqqqqqqq")
    assert code == ExitCode.BAD_INPUT
    assert "unknown task 'qqqqqqqqqq'; known: " in text and "did you mean" not in text


def test_apply_chat_template_is_refused_with_the_reason() -> None:
    for extra in (["--apply-chat-template"], ["--apply_chat_template", "chatml"]):
        code, text = run("eval", "-m", "none.gguf", "-t", "arc_easy", *extra)
        assert code == ExitCode.BAD_INPUT and text.count("\n") == 1, text
        assert text.startswith("regress: error: --apply-chat-template: regress scores lm-eval's")
        assert "conversation sets only" in text


def test_device_other_than_cpu_is_refused_where_the_backend_cannot_use_it() -> None:
    code, text = run("eval", "-m", "none.gguf", "-t", "arc_easy", "--device", "cuda")
    assert code == ExitCode.BAD_INPUT
    assert text == (
        "regress: error: --device cuda: the llama_cpp backend runs the model on the CPU "
        "(a CPU build); leave --device out or give cpu\n"
    )
    with pytest.raises(BadInput, match="the server decides where the model runs"):
        LmEvalFlags(device="mps").model_args("openai", {})
    assert LmEvalFlags(device="cpu").model_args("llama_cpp", {"n_ctx": 512}) == {"n_ctx": 512}


def test_batch_size_and_device_are_the_hf_backends_settings() -> None:
    flags = LmEvalFlags(batch_size="auto", device="cuda")
    assert flags.model_args("hf", {"dtype": "float32"}) == {
        "dtype": "float32",
        "batch_size": "auto",
        "device": "cuda",
    }
    # llama.cpp and a server score one request at a time: nothing to set.
    assert LmEvalFlags(batch_size=8).model_args("llama_cpp", {}) == {}
    assert LmEvalFlags(batch_size=8).model_args("hf", {"batch_size": 8}) == {"batch_size": 8}
    with pytest.raises(BadInput, match="--batch-size 8 and --model-args batch_size=4 differ"):
        LmEvalFlags(batch_size=8).model_args("hf", {"batch_size": 4})


def test_seed_is_the_sampling_seed() -> None:
    settings = GenerationSettings(gen_kwargs={"temperature": 0.8})
    seeded = LmEvalFlags(seed=7).generation(settings)
    assert dict(seeded.gen_kwargs) == {"temperature": 0.8, "seed": 7}
    assert LmEvalFlags().generation(settings) is settings
    with pytest.raises(BadInput, match="--seed 7 and --gen-kwargs seed=3 differ"):
        LmEvalFlags(seed=7).generation(GenerationSettings(gen_kwargs={"seed": 3}))


@pytest.mark.parametrize(
    "model", ["smollm2-135m", "HuggingFaceTB/SmolLM2-135M", "models/cand:v2?.gguf", 'a"b[c]']
)
def test_results_go_to_lm_evals_model_folder(tmp_path: Path, model: str) -> None:
    assert model_folder(tmp_path, model) == tmp_path / sanitize_model_name(model)


def test_header_line_reads_as_lm_evals() -> None:
    line = header_line("llama_cpp", {"pretrained": "smollm2-135m", "n_ctx": 2048}, {}, 10, None, 1)
    assert line == (
        "llama_cpp (pretrained=smollm2-135m,n_ctx=2048), gen_kwargs: (None), limit: 10.0, "
        "num_fewshot: None, batch_size: 1"
    )
    line = header_line("hf", {"pretrained": "m"}, {"temperature": 0.5}, 0.1, 5, "auto")
    assert line == (
        "hf (pretrained=m), gen_kwargs: (temperature=0.5), limit: 0.1, num_fewshot: 5, "
        "batch_size: auto"
    )


def test_check_before_any_baseline_names_the_create_command(tmp_path: Path) -> None:
    store = tmp_path / "baselines"
    store.mkdir()
    code, text = run("check", "-b", "main", "-m", "cand.gguf", "--store", str(store),
                     "--model_args", "n_ctx=512")  # fmt: skip
    assert code == ExitCode.BAD_INPUT
    assert text == (
        f"regress: error: no baselines in {store} yet: make one first, e.g. regress baseline "
        f"create --name main --model REFERENCE_MODEL --tasks builtin --limit 100 --store {store}\n"
    )
