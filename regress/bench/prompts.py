"""Prompts for request-level latency: a built-in set of varied lengths, or the user's file.

The built-in set spans what a small model is asked in practice, from a one-line question to
a page of context with a question at the end (7 to 770 tokens with SmolLM2's
tokenizer), so time to first token is measured over real prompt-processing work, not over a
single length.
"""

from __future__ import annotations

from pathlib import Path

from regress.core.errors import BadInput
from regress.core.jsonl import json_object, split_lines

_PASSAGE = (
    "The river rises in a ring of low hills where three springs meet in a marsh. For its "
    "first twenty miles it is narrow and fast, cutting through soft sandstone and turning the "
    "wheels of a dozen small mills that once ground corn for the valley. Below the market "
    "town it slows, widens and begins to wander across a flat plain of clay, where the "
    "farmers built banks of earth to hold it back in the wet months. In a dry summer the "
    "water falls so low that children can walk across the shallows near the old stone "
    "bridge; in a wet winter it spreads over the meadows for weeks, leaving a layer of silt "
    "that makes the land some of the richest in the county. "
)

_REPORT = (
    "Quarterly summary. Sales rose by four percent compared with the same quarter last year, "
    "driven mainly by the northern region, where two new shops opened in April. Costs grew "
    "faster than sales because the price of packaging went up twice and the warehouse lease "
    "was renewed at a higher rent. The online store handled more orders than ever before, "
    "but returns also increased, mostly for clothing bought in the wrong size. Staff numbers "
    "stayed the same. The board asked for a plan to reduce returns and to compare the cost "
    "of a second warehouse with the cost of faster delivery from the existing one. "
)

BUILTIN_PROMPTS: tuple[str, ...] = (
    "What is the capital of France?",
    "Write one sentence about the sea.",
    "List three fruits that are yellow and say which one is the sweetest.",
    "Explain in simple words why the sky looks blue during the day and red at sunset, as "
    "you would to a ten-year-old who likes science.",
    "Read the text and answer the question.\n\n" + _PASSAGE + "\n\nQuestion: Why is the "
    "land beside the river so rich?\nAnswer:",
    "Summarise the following report in two sentences.\n\n" + _REPORT + "\nSummary:",
    "Here are notes from a field trip.\n\n" + _PASSAGE * 2 + "\n" + _REPORT + "\nWrite a "
    "short title for these notes.\nTitle:",
    "Background:\n\n" + (_PASSAGE + _REPORT) * 3 + "\nQuestion: what rose by four percent?\n"
    "Answer:",
)
"""Eight prompts from one line to a page."""


def load_prompts(source: str) -> tuple[str, ...]:
    """`builtin`, or a file: JSON Lines with a "prompt" field per line, else one prompt per
    non-empty line of text."""
    if source == "builtin":
        return BUILTIN_PROMPTS
    path = Path(source)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise BadInput(f"--prompts {path}: cannot read a UTF-8 text file ({exc})") from exc
    if path.suffix == ".jsonl":
        lines = []
        for line in split_lines(data, f"--prompts {path}"):
            row = json_object(line)
            if not isinstance(row.get("prompt"), str):
                raise BadInput(f'{line.where}: expected {{"prompt": "..."}}')
            lines.append(row["prompt"])
    else:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BadInput(f"--prompts {path}: cannot read a UTF-8 text file ({exc})") from exc
        lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        raise BadInput(f"--prompts {path}: no prompts in the file")
    return tuple(lines)
