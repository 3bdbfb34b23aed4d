"""What a sweep stores and reads back: per configuration its frozen results (accuracy with
the paired comparison against the source, perplexity and KL divergence, speed and memory) as
JSON in `configs/NAME.json`, and the folder as a whole (`load_results`).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from regress.core import safe_json
from regress.core.errors import BadInput
from regress.sweep.quantize import QuantSettings
from regress.sweep.token_kld import Divergence

SOURCE = "source"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+=-]{0,99}")
"""The name of the source model's own row (every other row is compared with it)."""


@dataclass(frozen=True)
class TaskScore:
    """Accuracy on one task (or `all`, pooled) and the paired comparison with the source."""

    task: str
    n: int
    accuracy: float
    low: float
    high: float
    """95% Wilson interval."""
    b: int
    """Examples the source got right and this configuration wrong."""
    c: int
    """Examples the source got wrong and this configuration right."""
    delta: float
    delta_low: float
    delta_high: float
    """95% paired interval of the change (Tango's score interval)."""
    p_worse: float
    """One-sided McNemar mid-p for "worse than the source"."""


@dataclass(frozen=True)
class Speed:
    """llama-bench's pp and tg tests and the peak RSS of a fresh process running them."""

    pp_ts: float
    pp_sd: float
    tg_ts: float
    tg_sd: float
    tg_samples_ts: tuple[float, ...]
    peak_rss_bytes: int
    load_s: float

    @property
    def latency_ms(self) -> float:
        """Milliseconds per generated token (1000 / tg tokens/s)."""
        return 1000.0 / self.tg_ts


@dataclass(frozen=True)
class ConfigResult:
    """Everything measured for one configuration."""

    name: str
    settings: QuantSettings | None
    """None for the source itself."""
    file: str
    sha256: str
    weights_sha256: str
    """sha256 of the tensors alone (regress.sweep.quantize.weights_sha256)."""
    quantization: str
    size_bytes: int
    n_params: int
    identical_to: str | None
    """An earlier configuration with the same tensors (weights_sha256): llama.cpp fell back to
    the same types, so its measurements are reused rather than measured again as if the
    files differed."""
    scores: tuple[TaskScore, ...]
    """Per task, then `all` (every example of every task, pooled)."""
    divergence: Divergence
    speed: Speed
    system_info: str
    """llama.cpp's CPU build flags where this configuration was measured."""
    created: str
    elapsed_s: float

    @property
    def size_gib(self) -> float:
        """File size in GiB."""
        return self.size_bytes / 2**30

    @property
    def bits_per_weight(self) -> float:
        """File bits over parameters (llama.cpp's BPW, header included)."""
        return self.size_bytes * 8 / self.n_params

    @property
    def overall(self) -> TaskScore:
        """The pooled score."""
        return self.scores[-1]


@dataclass(frozen=True)
class Skipped:
    """A configuration llama.cpp could not make (e.g. a type that needs an importance matrix)."""

    name: str
    settings: QuantSettings
    reason: str


@dataclass(frozen=True)
class SweepResults:
    """A sweep folder as read back."""

    model: str
    source_sha256: str
    results: tuple[ConfigResult, ...]
    """The source first, then the measured configurations in sweep order."""
    skipped: tuple[Skipped, ...]
    pending: tuple[str, ...]
    """Configurations asked for and not yet measured (a stopped or killed sweep)."""


def slug(name: str) -> str:
    """A configuration's name as a file name (`Q4_0+out=Q8_0` -> `Q4_0_out-Q8_0`); BadInput
    for a name that is no safe file name (a sweep.json naming `../../x` once made `recommend`
    read a file outside the sweep folder)."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or ".." in name:
        raise BadInput(f"configuration name {str(name)[:80]!r} is not a safe file name")
    return name.replace("=", "-").replace("+", "_")


def result_to_dict(result: ConfigResult) -> dict[str, Any]:
    """JSON-ready dict of a result."""
    return dataclasses.asdict(result)


def result_from_dict(data: dict[str, Any]) -> ConfigResult:
    """The inverse of result_to_dict."""
    settings = QuantSettings(**data["settings"]) if data["settings"] else None
    speed = dict(data["speed"])
    speed["tg_samples_ts"] = tuple(speed["tg_samples_ts"])
    return ConfigResult(
        **{
            **data,
            "settings": settings,
            "scores": tuple(TaskScore(**s) for s in data["scores"]),
            "divergence": Divergence(**data["divergence"]),
            "speed": Speed(**speed),
        }
    )


def load_results(out_dir: Path) -> SweepResults:
    """A sweep folder's finished, skipped and pending configurations."""
    manifest = out_dir / "sweep.json"
    if not manifest.is_file():
        raise BadInput(f"{out_dir}: not a sweep folder (no sweep.json)")
    results, skipped, pending = [], [], []
    try:
        asked = safe_json.loads(manifest.read_text(encoding="utf-8"))
        for name in [SOURCE, *asked["configs"]]:
            path = out_dir / "configs" / f"{slug(name)}.json"
            if not path.is_file():
                pending.append(name)
                continue
            data = safe_json.loads(path.read_text(encoding="utf-8"))
            if "skipped" in data:
                skipped.append(Skipped(name, QuantSettings(**data["settings"]), data["skipped"]))
            else:
                results.append(result_from_dict(data))
        return SweepResults(
            asked["model"], asked["source_sha256"], tuple(results), tuple(skipped), tuple(pending)
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BadInput(f"{out_dir}: unreadable sweep file ({exc})") from exc
