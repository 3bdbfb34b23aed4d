"""Continuing a sequential check legally: what a stopped check stores, and when it may go on.

A group-sequential design spends its alpha over the looks of one pool, so a check that
stopped at a budget (`check --max-looks`) may take its remaining looks later, and only
those: the same baseline, policy, design (looks, spending, order seed) and candidate model.
Its saved run (`check --save-run`) records them in the manifest's `sequential` entry;
`check --continue RUN` replays the looks already taken from RUN's records (the same examples,
judged the same way, so the same units settle) and runs the next ones. A rerun on more
examples that read a fixed verdict again would test twice (issue 50: each side's size becomes
0.071-0.088); this is one test, continued.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from regress.core.errors import BadInput
from regress.core.manifest import Run
from regress.gate.policy import Policy


def fingerprint(data: Any) -> str:
    """sha256 of `data` as sorted JSON: what two runs must share to be one check."""
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def baseline_key(baseline: Run) -> str:
    """The baseline's name and records, hashed."""
    return fingerprint([baseline.manifest.name, baseline.manifest.records_sha256])


def continuation_state(
    baseline: Run, policy: Policy, model_sha256: str, taken: int, open_: bool
) -> dict[str, Any]:
    """The manifest's `sequential` entry of a check's candidate run: the design, the looks
    taken, whether it may continue (stopped at a budget with looks left), and what a
    continuation must match."""
    assert policy.sequential is not None
    return {
        **policy.sequential.to_dict(),
        "taken": taken,
        "open": open_,
        "baseline": baseline_key(baseline),
        "policy": fingerprint(policy.to_dict()),
        "model_sha256": model_sha256,
    }


def looks_taken(resume: Run, baseline: Run, policy: Policy) -> int:
    """How many looks `resume` took, after refusing (BadInput, exit 2) a run this check may
    not continue: not a sequential check's, ended, or made with another baseline, policy or
    design. The model is compared once the candidate has run (`refuse_other_model`)."""
    state = resume.manifest.sequential
    name = resume.manifest.name
    if not state or "taken" not in state:
        raise BadInput(f"cannot continue {name}: not saved by a sequential check (--save-run)")
    design = policy.sequential
    assert design is not None
    stored = {key: state.get(key) for key in ("looks", "spending", "seed")}
    if stored != design.to_dict():
        raise BadInput(
            f"cannot continue {name}: its design {stored} is not the policy's {design.to_dict()}"
        )
    if state.get("baseline") != baseline_key(baseline):
        raise BadInput(
            f"cannot continue {name}: it was checked against another baseline than "
            f"{baseline.manifest.name} (or its records changed)"
        )
    if state.get("policy") != fingerprint(policy.to_dict()):
        raise BadInput(f"cannot continue {name}: it was checked under another policy")
    if not state.get("open"):
        raise BadInput(
            f"cannot continue {name}: its check ended (decided, or every look taken and its "
            "alpha spent)"
        )
    return int(state["taken"])


def refuse_other_model(resume: Run, sha256: str) -> None:
    """Refuse (BadInput) a continuation run on another model file than `resume`'s."""
    stored = (resume.manifest.sequential or {}).get("model_sha256")
    if stored != sha256:
        raise BadInput(
            f"cannot continue {resume.manifest.name}: its candidate model was "
            f"{str(stored)[:12]}, this one is {sha256[:12]}"
        )
