"""Task-level fingerprints: sha256 over the ordered hashes of a task's documents and prompts,
and over what scores its answers.

A task's `dataset_hash`, `prompt_hash` and `scoring_hash` (regress.core.manifest.TaskInfo) are
computed here and nowhere else, so a run, a merged run, a proxy and an imported lm-eval run
always agree.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from regress.core.records import Record

_SHA256 = re.compile(r"[0-9a-f]{64}")


def is_sha256(value: object, empty: bool = False) -> bool:
    """Whether `value` is a sha256 as regress writes it: 64 lowercase hex characters (or "",
    when `empty`: a served model or an lm-eval import may name no weights). Every reader of a
    stored identity checks this, so no file can pass markup off as a hash."""
    if not isinstance(value, str):
        return False
    return (empty and value == "") or _SHA256.fullmatch(value) is not None


def digest(parts: Sequence[str]) -> str:
    """sha256 over an ordered list of hashes: a task-level fingerprint."""
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def task_hashes(records: Sequence[Record]) -> tuple[str, str]:
    """(dataset_hash, prompt_hash) of a task's records, in their order (by doc_id)."""
    return digest([r.doc_hash for r in records]), digest([r.prompt_hash for r in records])


def scoring_digest(description: Mapping[str, Any]) -> str:
    """sha256 of a task's scoring description as canonical JSON (keys sorted): its
    `scoring_hash`. What the description holds is the tasks' to say
    (regress.tasks.catalog.scoring_hash); YAML values JSON lacks (dates) count as their text."""
    text = json.dumps(description, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def instruction_key(text: str) -> str:
    """The short hash that names a user's instruction text (`arc_easy@ins1a2b3c4d`): the first
    8 hex digits of its sha256. Short names suffice: the prompt hashes pin the texts."""
    return hashlib.sha256(text.encode()).hexdigest()[:8]
