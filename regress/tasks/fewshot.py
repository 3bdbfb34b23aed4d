"""Few-shot examples drawn and laid out exactly as lm-evaluation-harness 0.4 does.

Sampling: one `random.Random(1234)` per task, asked for shots doc after doc in evaluation
order (so `--limit` keeps the prompts of the documents it keeps). When the few-shot split is
the evaluation split as lm-eval's config states it (both unset for piqa, boolq, hellaswag),
lm-eval draws one extra shot and drops the document being evaluated; we do the same, because
the extra draw moves the generator. Tasks with a canonical order (MMLU's dev split) take the
first n.

Layout: description, then for each shot `text + " " + answer + "\\n\\n"`, then the document's
text. The continuation of a multiple-choice request is `" " + choice`.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from regress.tasks.loaders import Doc

FEWSHOT_SEED = 1234
"""lm-eval's default `fewshot_random_seed`."""
TARGET_DELIMITER = " "
FEWSHOT_DELIMITER = "\n\n"

SamplerKind = Literal["default", "first_n"]


@dataclass
class FewshotSampler:
    """Draws the shots for one task run; create a fresh one per run (it carries RNG state)."""

    docs: Sequence[Doc]
    kind: SamplerKind = "default"
    exclude_eval_doc: bool = False
    """lm-eval's `fewshot_split == test_split`: draw one extra shot and drop the eval doc."""
    rng: random.Random = field(default_factory=lambda: random.Random(FEWSHOT_SEED))

    def sample(self, n: int, eval_doc: Doc) -> list[Doc]:
        """The `n` shots for `eval_doc`."""
        if n == 0:
            return []
        if self.kind == "first_n":
            pool = [d for d in self.docs if d != eval_doc] if self.exclude_eval_doc else self.docs
            return list(pool[:n])
        if not self.exclude_eval_doc:
            return self.rng.sample(list(self.docs), n)
        shots = [d for d in self.rng.sample(list(self.docs), n + 1) if d != eval_doc][:n]
        if len(shots) < n:
            # Several copies of the eval doc were drawn: lm-eval redraws from the pool without it.
            shots = self.rng.sample([d for d in self.docs if d != eval_doc], n)
        return shots


def render_context(
    description: str,
    shots: Sequence[tuple[str, str]],
    query: str,
    target_delimiter: str = TARGET_DELIMITER,
    fewshot_delimiter: str = FEWSHOT_DELIMITER,
) -> str:
    """The prompt: description, each (text, answer) shot, then the document's own text."""
    block = "".join(
        # lm-eval writes no delimiter and no answer for a shot whose answer is empty.
        f"{text}{target_delimiter}{answer}{fewshot_delimiter}" if answer != "" else text
        for text, answer in shots
    )
    return description + block + query
