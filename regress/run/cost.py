"""What generations cost: tokens, reasoning overhead, seed 002's Token Efficiency Score and
cost per success from a price table.

A price table is a small YAML file; every key is optional:

```yaml
input_per_1k: 0.00015    # per 1,000 prompt tokens (an API's price)
output_per_1k: 0.0006    # per 1,000 generated tokens, reasoning included
per_second: 0.0001       # per second of compute (a local machine's running cost)
currency: USD
judge:                   # the judge's own prices (docs/judge.md), when it has any
  input_per_1k: 0.0025
  output_per_1k: 0.01
```

Per-second cost needs wall time, which records never hold (reruns must be byte-identical):
a run's elapsed time is shared among its tasks in proportion to their tokens, and the table
says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from regress.core import safe_yaml
from regress.core.errors import BadInput
from regress.core.records import Record

_PRICE_KEYS = {"input_per_1k", "output_per_1k", "per_second", "currency", "judge"}
_JUDGE_KEYS = {"input_per_1k", "output_per_1k"}


@dataclass(frozen=True)
class Prices:
    """Prices per 1,000 input and output tokens and per second of compute."""

    input_per_1k: float = 0.0
    output_per_1k: float = 0.0
    per_second: float = 0.0
    currency: str = "USD"
    judge: Prices | None = None
    """The judge's prices per 1,000 tokens (a hosted judge seldom costs what the model under
    test does); None: judge calls are counted, not priced."""

    def tokens(self, prompt: int, completion: int) -> float:
        """What `prompt` and `completion` tokens cost at these per-token prices."""
        return prompt / 1000 * self.input_per_1k + completion / 1000 * self.output_per_1k


def load_prices(path: Path) -> Prices:
    """Read a price table; a missing file, unknown key or negative price is BadInput."""
    try:
        data = safe_yaml.load(Path(path).read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise BadInput(f"price table {path}: cannot read ({exc.strerror})") from exc
    except yaml.YAMLError as exc:
        raise BadInput(f"price table {path}: not valid YAML") from exc
    if not isinstance(data, dict) or set(data) - _PRICE_KEYS:
        raise BadInput(f"price table {path}: a mapping of {', '.join(sorted(_PRICE_KEYS))}")
    values = _numbers(data, _PRICE_KEYS - {"currency", "judge"}, f"price table {path}")
    judge = None
    if "judge" in data:
        block = data["judge"]
        if not isinstance(block, dict) or set(block) - _JUDGE_KEYS:
            raise BadInput(
                f"price table {path}: judge is a mapping of {', '.join(sorted(_JUDGE_KEYS))}"
            )
        rates = _numbers(block, _JUDGE_KEYS, f"price table {path}: judge")
        judge = Prices(input_per_1k=rates["input_per_1k"], output_per_1k=rates["output_per_1k"])
    return Prices(
        input_per_1k=values["input_per_1k"],
        output_per_1k=values["output_per_1k"],
        per_second=values["per_second"],
        currency=str(data.get("currency", "USD")),
        judge=judge,
    )


def _numbers(data: Mapping[str, object], keys: set[str], where: str) -> dict[str, float]:
    values = {}
    for key in sorted(keys):
        value = data.get(key, 0.0)
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise BadInput(f"{where}: {key} must be a number >= 0, got {value!r}")
        values[key] = float(value)
    return values


@dataclass(frozen=True)
class TaskCost:
    """One task's generations: tokens, successes and what they cost."""

    task: str
    samples: int
    """Generations scored (documents x repeats; failed examples count once)."""
    successes: float
    input_tokens: int
    output_tokens: int
    """Generated tokens, reasoning included."""
    reasoning_tokens: int | None
    """None where the backend could not count them apart."""
    seconds: float
    """The run's wall time shared by token count (see the module doc)."""
    cost: float
    cost_per_success: float | None
    """None without a success."""
    tes: float | None
    """Token Efficiency Score: success rate per 1,000 generated tokens per sample."""
    reasoning_overhead: float | None
    """Reasoning tokens / final tokens; None where not counted or no final token."""


def task_cost(task: str, records: Sequence[Record], prices: Prices, seconds: float) -> TaskCost:
    """Totals over a task's records; `seconds` is the task's share of the run's time."""
    outcomes = [o for record in records for o in record.outcomes]
    samples, successes = len(outcomes), float(sum(outcomes))
    input_tokens = sum(r.tokens.get("prompt", 0) for r in records)
    output_tokens = sum(r.tokens.get("completion", 0) for r in records)
    counted = [r.tokens.get("reasoning") for r in records if r.ok]
    reasoning = None if any(c is None for c in counted) else sum(c or 0 for c in counted)
    cost = prices.tokens(input_tokens, output_tokens) + seconds * prices.per_second
    per_sample_tokens = output_tokens / samples if samples else 0.0
    rate = successes / samples if samples else 0.0
    final = output_tokens - (reasoning or 0)
    return TaskCost(
        task=task,
        samples=samples,
        successes=successes,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        reasoning_tokens=reasoning,
        seconds=seconds,
        cost=cost,
        cost_per_success=cost / successes if successes else None,
        tes=rate / per_sample_tokens * 1000 if per_sample_tokens else None,
        reasoning_overhead=reasoning / final if reasoning is not None and final else None,
    )


def run_costs(
    by_task: Mapping[str, Sequence[Record]], prices: Prices, elapsed_s: float
) -> list[TaskCost]:
    """Every task's cost, the run's wall time shared in proportion to tokens."""
    tokens = {
        task: sum(r.tokens.get("prompt", 0) + r.tokens.get("completion", 0) for r in records)
        for task, records in by_task.items()
    }
    total = sum(tokens.values()) or 1
    return [
        task_cost(task, records, prices, elapsed_s * tokens[task] / total)
        for task, records in by_task.items()
    ]
