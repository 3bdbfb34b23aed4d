"""Proxy strata are checked one by one, not by their sum (issue 47, item 7): moving 400
examples between four strata, the sum kept, once passed `baseline verify` and `check`, and the
same records then reported a drop of 9.1 points, a rise of 1.7 or a drop of 1.0 (the full
parent: 0.8).

A design is signed by a digest when it is written, and each stratum's population must be its
cut of the unit's margin ranking; with the parent in the store, `verify` recomputes every
stratum from the parent's margins."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_proxy import _flipped, _parent, _run

from regress.checks import CheckOptions, check
from regress.cli import cli
from regress.core.errors import BadInput, ExitCode
from regress.core.manifest import Run
from regress.core.proxy_design import ProxyDesign
from regress.core.store import Store
from regress.gate.integrity import strata_problems
from regress.proxy.build import ProxyOptions, build_proxy


@pytest.fixture
def stored(tmp_path: Path) -> tuple[Store, Run]:
    """A store holding the parent `full` and its proxy `proxy` (300 of 8,000 examples)."""
    store = Store(tmp_path / "store")
    store.save(_parent(n=4000))
    store.save(build_proxy(store.load("full"), "proxy", ProxyOptions(budget=300)))
    return store, store.load("proxy")


def _edit(store: Store, change, resign: bool) -> None:
    """Edit the stored proxy's design as a file, and recompute its digest as a careful editor
    would when `resign`."""
    path = store.path("proxy") / "manifest.json"
    data = json.loads(path.read_text())
    change(data["proxy"])
    if resign:
        body = {k: v for k, v in data["proxy"].items() if k != "digest"}
        text = json.dumps(body, sort_keys=True, ensure_ascii=False)
        data["proxy"]["digest"] = hashlib.sha256(text.encode()).hexdigest()
    path.write_text(json.dumps(data, indent=2, sort_keys=True))


def _move_400(design: dict) -> None:
    """The probe: 400 examples moved between four strata of arc_easy, the sum kept."""
    strata = {s["index"]: s for s in design["strata"] if s["unit"] == "arc_easy"}
    for index, change in ((0, 200), (1, 200), (8, -200), (9, -200)):
        strata[index]["population"] += change


def _verify(store: Store) -> tuple[int, str]:
    done = CliRunner().invoke(cli, ["baseline", "verify", "proxy", "--store", str(store.root)])
    return done.exit_code, done.output


def _checked(store: Store, candidate: Run) -> None:
    check(store.load("proxy"), candidate, CheckOptions())


@pytest.mark.parametrize("resign", [False, True], ids=["edited", "edited-and-resigned"])
def test_moved_populations_are_refused_without_the_parent(stored, resign) -> None:
    store, proxy = stored
    candidate = _flipped(_run("cand", proxy.records), set())
    _edit(store, _move_400, resign)
    _remove(store, "full")
    message = "digest does not match" if not resign else "stratum arc_easy/0 holds 600"
    code, output = _verify(store)
    assert code == ExitCode.BAD_INPUT and message in output
    assert len(output.strip().splitlines()) == 1
    with pytest.raises(BadInput, match=message):
        _checked(store, candidate)


def _remove(store: Store, name: str) -> None:
    shutil.rmtree(store.path(name))
    assert name not in store.names()


def test_a_design_without_a_digest_is_refused(stored) -> None:
    store, _ = stored
    _edit(store, lambda design: design.pop("digest"), resign=False)
    code, output = _verify(store)
    assert code == ExitCode.BAD_INPUT
    assert "proxy design: no digest" in output and "regress proxy build" in output


def test_a_sample_moved_between_strata_is_caught_against_the_parent(stored) -> None:
    """Populations kept, digest recomputed, margin ranges widened so every sampled record
    fits: the design still contradicts the parent's margins, which `verify` recomputes."""
    store, proxy = stored
    first, second = proxy.manifest.proxy.unit_strata("arc_easy")[:2]
    doc = first.docs["arc_easy"][0]

    def move(design: dict) -> None:
        zero, one = design["strata"][first_at(design, 0)], design["strata"][first_at(design, 1)]
        zero["docs"]["arc_easy"].remove(doc)
        one["docs"]["arc_easy"] = sorted([*one["docs"]["arc_easy"], doc])
        one["margin_low"] = zero["margin_low"]

    _edit(store, move, resign=True)
    assert store.load("proxy").manifest.proxy is not None  # reads: the design is signed
    code, output = _verify(store)
    assert code == ExitCode.BAD_INPUT
    assert "stratum arc_easy/1" in output and "not the parent's" in output
    found = strata_problems(store.load("proxy"), store.load("full"))
    assert any(f"arc_easy doc {doc}" in p for p in found)
    assert strata_problems(proxy, store.load("full")) == []


def first_at(design: dict, index: int) -> int:
    return next(
        i for i, s in enumerate(design["strata"]) if s["unit"] == "arc_easy" and s["index"] == index
    )


def test_an_untouched_proxy_verifies_with_and_without_its_parent(stored) -> None:
    store, proxy = stored
    assert _verify(store)[0] == 0
    assert proxy.manifest.proxy == ProxyDesign.from_dict(proxy.manifest.proxy.to_dict())
    _remove(store, "full")
    assert _verify(store)[0] == 0
