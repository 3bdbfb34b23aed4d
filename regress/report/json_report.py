"""The JSON report: the Comparison's `to_dict()`, with sorted keys so reruns diff cleanly."""

from __future__ import annotations

import json
import math
from typing import Any

from regress.gate.results import Comparison


def render_json(comparison: Comparison) -> str:
    """The comparison as stable, strictly valid JSON (sorted keys, NaN written as null)."""
    data = _finite(comparison.to_dict())
    return json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def _finite(value: Any) -> Any:
    """Replace NaN and infinities, which JSON cannot carry, with None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value
