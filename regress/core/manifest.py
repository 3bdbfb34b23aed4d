"""The manifest of a run: which model, backend, suite and environment produced its records.

The task-level dataset, prompt and scoring hashes are the compatibility fingerprint the gate
checks before pairing a candidate with a baseline.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from regress.core.errors import BadInput
from regress.core.fingerprint import RuntimeFingerprint
from regress.core.hashes import instruction_key, is_sha256, task_hashes
from regress.core.proxy_design import ProxyDesign
from regress.core.records import Record

MANIFEST_SCHEMA_VERSION = 2
"""2 adds the typed runtime fingerprint (libraries, hardware path); 1 is still read."""


@dataclass(frozen=True)
class ModelInfo:
    """The model file and what its header says."""

    ref: str
    """What the user passed: a path or a packaged short name (`smollm2-135m`)."""
    sha256: str
    name: str = ""
    architecture: str = ""
    quantization: str = ""
    n_params: int | None = None
    context_length: int | None = None
    size_bytes: int | None = None


@dataclass(frozen=True)
class TaskInfo:
    """One task of the suite as it was run."""

    name: str
    group: str | None
    n: int
    num_fewshot: int
    metric: str
    """Primary metric the gate pairs on."""
    output_type: str
    dataset_hash: str
    """sha256 over the ordered doc hashes."""
    prompt_hash: str
    """sha256 over the ordered prompt hashes."""
    limit: int | None = None
    higher_is_better: bool = True
    generation: dict[str, Any] | None = None
    """A generate_until task run with its own settings (regress.run.generation): what a rerun
    must repeat. Absent when the task's own settings were used."""
    scoring_hash: str | None = None
    """sha256 of what scores the task's answers beyond its documents and prompts (a task
    YAML's metric_list, filter_list, metric options and target; a built-in task's scorer:
    regress.tasks.catalog.scoring_hash). None in manifests written before it was recorded:
    the gate then cannot check the scoring, and says so."""


@dataclass(frozen=True)
class Manifest:
    """Everything needed to reproduce and to judge the compatibility of a run."""

    name: str
    created: str
    """UTC ISO-8601 timestamp."""
    regress_version: str
    model: ModelInfo
    backend: RuntimeFingerprint
    """Backend, versions, settings and hardware path: what decides the floats."""
    suite_name: str
    tasks: dict[str, TaskInfo]
    environment: dict[str, Any] = field(default_factory=dict)
    """python, platform, cpu and library versions."""
    command: str = ""
    """The command line that produced the run."""
    shard: str | None = None
    """`i/n` when the run holds one shard of the suite (join shards with `regress merge`)."""
    records_sha256: dict[str, str] = field(default_factory=dict)
    """sha256 of each `records/<task>.jsonl` by task, set by the store when it writes the run;
    a records file that does not match is refused, so an edit cannot pass unseen."""
    schema_version: int = MANIFEST_SCHEMA_VERSION
    proxy: ProxyDesign | None = None
    """Set on a proxy baseline: the stratified sample of its parent it holds
    (regress.core.proxy_design). Its records are then estimates of the parent suite, never a
    plain baseline's."""
    sequential: dict[str, Any] | None = None
    """Set on a candidate run a sequential gate made (`check --sequential --save-run`): the
    design that chose and ordered its examples, `{"looks": [...], "spending": ..., "seed": ...}`;
    the run holds only the examples run before the gate stopped."""
    instructions: dict[str, str] = field(default_factory=dict)
    """Key -> text of every instruction of the user's its tasks ran with (`TASK@insKEY`,
    regress.tasks.instructions), so a rerun rebuilds the same prompts."""

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict, tasks in name order; `proxy`, `sequential` and `instructions`
        only when set."""
        data = asdict(self)
        data["tasks"] = {k: data["tasks"][k] for k in sorted(data["tasks"])}
        for task in data["tasks"].values():
            for key in ("generation", "scoring_hash"):
                if task[key] is None:
                    del task[key]
        del data["proxy"]
        if self.proxy is not None:
            data["proxy"] = self.proxy.to_dict()
        if self.sequential is None:
            del data["sequential"]
        if not self.instructions:
            del data["instructions"]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "manifest.json") -> Manifest:
        """Parse a manifest dict, naming `where` in the error when it is malformed."""
        try:
            version = data.get("schema_version")
            if version not in (1, MANIFEST_SCHEMA_VERSION):
                raise ValueError(f"schema_version {version!r}, expected {MANIFEST_SCHEMA_VERSION}")
            environment = data.get("environment", {})
            manifest = cls(
                name=data["name"],
                created=data["created"],
                regress_version=data["regress_version"],
                model=ModelInfo(**data["model"]),
                backend=RuntimeFingerprint.from_dict(data["backend"], environment),
                suite_name=data["suite_name"],
                tasks={k: TaskInfo(**v) for k, v in data["tasks"].items()},
                environment=environment,
                command=data.get("command", ""),
                shard=data.get("shard"),
                records_sha256=data.get("records_sha256", {}),
                schema_version=MANIFEST_SCHEMA_VERSION,
                proxy=ProxyDesign.from_dict(data["proxy"]) if data.get("proxy") else None,
                sequential=data.get("sequential"),
                instructions=data.get("instructions", {}),
            )
            _check_identities(manifest)
            return manifest
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise BadInput(f"{where}: malformed manifest ({exc})") from exc


def _check_identities(manifest: Manifest) -> None:
    """What reports and the gate show as text must be text, and every sha256 a sha256: a
    manifest is a file anyone can edit (a `<plaintext>` model sha256 once broke the HTML page).
    ValueError naming the field, never echoing its value."""
    model = manifest.model
    texts = {"name": manifest.name, "created": manifest.created, "suite_name": manifest.suite_name}
    texts |= {
        f"model.{k}": getattr(model, k) for k in ("ref", "name", "architecture", "quantization")
    }
    for key, value in texts.items():
        if not isinstance(value, str):
            raise ValueError(f"{key} is not a string")
    if not is_sha256(model.sha256, empty=True):
        raise ValueError("model.sha256 is not 64 lowercase hex characters")
    hashes = manifest.records_sha256
    if not isinstance(hashes, dict):
        raise ValueError("records_sha256 is not a mapping")
    parents = manifest.proxy.parent_records_sha256 if manifest.proxy else {}
    for field_name, mapping in (
        ("records_sha256", hashes),
        ("proxy.parent_records_sha256", parents),
    ):
        bad = sorted(str(task)[:100] for task, sha in mapping.items() if not is_sha256(sha))
        if bad:
            raise ValueError(f"{field_name} of {bad[0]!r} is not 64 lowercase hex characters")
    for name, info in sorted(manifest.tasks.items()):
        if info.scoring_hash is not None and not is_sha256(info.scoring_hash):
            raise ValueError(
                f"tasks.{str(name)[:100]}.scoring_hash is not 64 lowercase hex characters"
            )
    instructions = manifest.instructions
    if not isinstance(instructions, dict) or any(
        not isinstance(text, str) or instruction_key(text) != key
        for key, text in instructions.items()
    ):
        raise ValueError(
            "instructions: each key must be the first 8 hex digits of its text's sha256"
        )


@dataclass(frozen=True)
class Run:
    """A manifest and its records by task, each list sorted by doc_id."""

    manifest: Manifest
    records: dict[str, list[Record]]

    def restricted(self, keep: Mapping[str, Collection[int]]) -> Run:
        """This run cut to the kept doc ids of each task: what rerunning just those examples
        gives, since reruns are exact. A task with nothing kept is left out; each task's n and
        hashes are those of its kept records, and no records file hash is carried over."""
        records = {
            task: kept
            for task in sorted(self.records)
            if (kept := [r for r in self.records[task] if r.doc_id in keep.get(task, ())])
        }
        tasks = {}
        for task, recs in records.items():
            dataset_hash, prompt_hash = task_hashes(recs)
            tasks[task] = replace(
                self.manifest.tasks[task],
                n=len(recs),
                dataset_hash=dataset_hash,
                prompt_hash=prompt_hash,
            )
        manifest = replace(self.manifest, tasks=tasks, records_sha256={})
        return Run(manifest=manifest, records=records)
