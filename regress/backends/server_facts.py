"""What an OpenAI-compatible server says about how it computes: the server's fingerprint.

A served model's floats depend on more than its weights: the engine and its version, the dtype
it computes in, how many sequences it batches, whether it reuses cached prefixes, whether its
batch-invariant kernels are on, and how the model is split over devices. vLLM reports some of
these: each reply's `system_fingerprint` (`vllm-<version>[-tpN][-dpN]-<hash8>`, the hash of
its model, cache and parallel configs), `max_model_len` in GET /v1/models and
`enable_prefix_caching` in its /metrics' `vllm:cache_config_info`. llama.cpp's llama-server
reports its context and slots at GET /props. The user declares the rest with `--model-args`;
a declared value the server contradicts is refused, since the record would then lie.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from regress.core.errors import BadInput

LAYOUT = (
    "max_num_seqs",
    "prefix_caching",
    "batch_invariant",
    "tensor_parallel_size",
    "data_parallel_size",
    "batch_dependent",
    "concurrency",
)
"""The facts about how a server lays out its work: a difference here between a baseline and a
candidate is a difference of hardware path (`check`'s rebaseline decision), not the change
under test."""


@dataclass(frozen=True)
class ServerFacts:
    """What is known of a server's compute path; None or '' where neither the server reports
    it nor the user declared it."""

    engine: str = ""
    """`vllm` or `llama.cpp` when the server said so."""
    system_fingerprint: str = ""
    """vLLM's per-reply `system_fingerprint`: version, parallel degrees and a config hash."""
    dtype: str = ""
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    prefix_caching: bool | None = None
    batch_invariant: bool | None = None
    tensor_parallel_size: int | None = None
    data_parallel_size: int | None = None
    batch_dependent: bool | None = None
    """Measured (`batch_probe`): True when a probe's log-probs moved inside a batch."""
    concurrency: int | None = None
    """The run's concurrency, recorded only when the server is batch-dependent: then it is
    part of what computed the floats."""

    def record(self) -> dict[str, Any]:
        """The known facts, for the manifest's `build.server` (unknown ones left out)."""
        return {k: v for k, v in asdict(self).items() if v not in (None, "")}

    def layout(self) -> str:
        """The known layout facts as `name=value` words, for the hardware path's kernels."""
        known = self.record()
        return " ".join(f"{name}={_word(known[name])}" for name in LAYOUT if name in known)


def _word(value: object) -> str:
    return ("on" if value else "off") if isinstance(value, bool) else str(value)


def from_system_fingerprint(text: object) -> ServerFacts:
    """vLLM's `system_fingerprint`: the engine, and its parallel degrees (vLLM names only
    those above 1, so a vLLM fingerprint without `-tpN` means 1)."""
    if not isinstance(text, str) or not text.startswith("vllm-"):
        return ServerFacts()
    degrees = dict(re.findall(r"-(tp|dp)(\d+)(?=-)", text))
    return ServerFacts(
        engine="vllm",
        system_fingerprint=text,
        tensor_parallel_size=int(degrees.get("tp", 1)),
        data_parallel_size=int(degrees.get("dp", 1)),
    )


def from_models(answer: object, served: str) -> ServerFacts:
    """GET /v1/models: vLLM's `max_model_len` of the served model."""
    data = answer.get("data") if isinstance(answer, dict) else None
    for entry in data or []:
        if isinstance(entry, dict) and entry.get("id") == served:
            length = entry.get("max_model_len")
            if isinstance(length, int) and not isinstance(length, bool):
                return ServerFacts(max_model_len=length)
    return ServerFacts()


def from_metrics(text: str | None) -> ServerFacts:
    """vLLM's Prometheus text: `enable_prefix_caching` of `vllm:cache_config_info`."""
    line = re.search(r"^vllm:cache_config_info\{([^}]*)\}", text or "", re.MULTILINE)
    labels = dict(re.findall(r'(\w+)="([^"]*)"', line.group(1))) if line else {}
    caching = labels.get("enable_prefix_caching")
    return ServerFacts(prefix_caching=caching == "True" if caching in ("True", "False") else None)


def from_props(answer: object) -> ServerFacts:
    """llama-server's GET /props: its context (`n_ctx`) and slots (`total_slots`)."""
    if not isinstance(answer, dict) or "total_slots" not in answer:
        return ServerFacts()
    settings = answer.get("default_generation_settings")
    n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
    slots = answer.get("total_slots")
    return ServerFacts(
        engine="llama.cpp",
        max_model_len=n_ctx if isinstance(n_ctx, int) else None,
        max_num_seqs=slots if isinstance(slots, int) else None,
    )


def combine(reported: list[ServerFacts], declared: Mapping[str, Any], where: str) -> ServerFacts:
    """The server's reports joined with the user's declarations; BadInput when they disagree."""
    facts = ServerFacts()
    for part in reported:
        facts = replace(facts, **part.record())
    known = facts.record()
    for name, value in declared.items():
        if value is None or value == "":
            continue
        if name in known and known[name] != value:
            raise BadInput(
                f"openai: model_args declare {name}={_word(value)}, but the server at {where} "
                f"reports {name}={_word(known[name])}"
            )
        facts = replace(facts, **{name: value})
    return facts
