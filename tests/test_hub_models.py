"""Models on the Hugging Face Hub: `hf://owner/repo/file.gguf` and `owner/repo:file.gguf`,
fetched through huggingface_hub's cache and recorded pinned to a commit.

The network is not reachable here, so the Hub cache is filled by hand the way
`hf_hub_download` leaves it (refs/main naming a commit, the file under snapshots/<commit>/),
holding the packaged SmolLM2 under a made-up repository id, and every run is offline.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from regress.backends.models import HubFile, file_sha256, hub_file, pinned_ref
from regress.core.errors import BadInput

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def test_hub_references_parse_and_pin() -> None:
    assert hub_file("hf://owner/repo/model.Q4_0.gguf") == HubFile("owner/repo", "model.Q4_0.gguf")
    assert hub_file("hf://owner/repo/sub/m.gguf@v1.0") == HubFile(
        "owner/repo", "sub/m.gguf", "v1.0"
    )
    assert hub_file("owner/repo:m.gguf@main") == HubFile("owner/repo", "m.gguf", "main")
    for local in ("smollm2-135m", "models/m.gguf", "m.gguf"):
        assert hub_file(local) is None
    with pytest.raises(BadInput, match="expected hf://owner/repo/file.gguf"):
        hub_file("hf://just-a-name")
    cached = Path(f"/c/models--owner--repo/snapshots/{COMMIT}/sub/m.gguf")
    assert pinned_ref("owner/repo:sub/m.gguf", cached) == f"hf://owner/repo/sub/m.gguf@{COMMIT}"
    assert pinned_ref("models/m.gguf", cached) == "models/m.gguf"


def _hub_cache(root: Path, model: Path) -> Path:
    """A Hub cache holding `model` as regress-test/smollm2's smollm2.gguf at COMMIT."""
    repo = root / "models--regress-test--smollm2"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMIT)
    snapshot = repo / "snapshots" / COMMIT
    snapshot.mkdir(parents=True)
    (snapshot / "smollm2.gguf").symlink_to(model)
    return root


def _regress(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "regress.cli", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd)


def test_a_hub_model_runs_offline_and_is_recorded_pinned(
    smollm2_path: Path, tmp_path: Path
) -> None:
    env = {
        **os.environ,
        "HF_HUB_CACHE": str(_hub_cache(tmp_path / "hub", smollm2_path)),
        "HF_HUB_OFFLINE": "1",
        "REGRESS_CACHE_DIR": str(tmp_path / "cache"),
    }
    store = str(tmp_path / "baselines")
    made = _regress(
        "baseline", "create", "--name", "hub", "-m", "regress-test/smollm2:smollm2.gguf",
        "-t", "builtin_dates", "--limit", "5", "--store", store, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    model = json.loads((tmp_path / "baselines/hub/manifest.json").read_text())["model"]
    assert model["ref"] == f"hf://regress-test/smollm2/smollm2.gguf@{COMMIT}"
    assert model["sha256"] == file_sha256(smollm2_path)
    # The pinned reference is what a check (or a rerun of the baseline's model) resolves.
    checked = _regress(
        "check", "--baseline", "hub", "-m", model["ref"], "--store", store, env=env, cwd=tmp_path
    )
    assert checked.returncode == 0, checked.stderr
    missing = _regress("models", "hf://regress-test/smollm2/other.gguf", env=env, cwd=tmp_path)
    assert missing.returncode == 2
    assert missing.stderr.count("\n") == 1 and "cannot fetch it from the Hugging Face Hub" in (
        missing.stderr
    )


def test_a_pinned_file_is_checked_by_its_sha256(tmp_path: Path) -> None:
    """The one check `baseline verify` and the baseline rerun share."""
    import hashlib

    from regress.backends.models import pinned_file_problem

    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF weights")
    pinned = hashlib.sha256(b"GGUF weights").hexdigest()
    assert pinned_file_problem(model, pinned) == ""
    assert pinned_file_problem(model, "") == ""  # nothing pinned: nothing to hold it to
    assert pinned_file_problem(tmp_path / "absent.gguf", pinned) == ""
    model.write_bytes(b"other weights")
    assert pinned_file_problem(model, pinned) == f"sha256 differs from the pinned {pinned[:12]}"
