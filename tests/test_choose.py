"""The model choice under constraints (pure logic, synthetic figures)."""

from __future__ import annotations

import pytest

from regress.bench.choose import Constraints, Contender, choose, parse_bytes
from regress.core.errors import BadInput


def _c(model, acc, tg, rss_mib, low=None, high=None, ttft=100.0):
    return Contender(
        model=model,
        sha256=model * 4,
        quantization="Q4_1",
        accuracy=acc,
        accuracy_low=low if low is not None else acc and acc - 0.01,
        accuracy_high=high if high is not None else acc and acc + 0.01,
        accuracy_from="run" if acc is not None else "",
        tg_tps=tg,
        pp_tps=3 * tg,
        ttft_p50_ms=ttft,
        peak_rss_bytes=rss_mib * 2**20,
    )


def test_most_accurate_model_that_fits_wins_with_reason():
    big, small = _c("big", 0.60, 20.0, 1500), _c("small", 0.40, 90.0, 300)
    choice = choose([big, small], Constraints())
    assert choice.chosen is big and "most accurate" in choice.reason
    limited = choose([big, small], Constraints(max_memory_bytes=parse_bytes("1GB")))
    assert limited.chosen is small
    assert limited.rejected == {"big": "peak RSS 1500 MiB > 954 MiB"}
    assert "excluded: big (peak RSS 1500 MiB > 954 MiB)" in limited.reason


def test_speed_and_ttft_limits_and_no_fit():
    slow, fast = _c("slow", 0.6, 20.0, 300, ttft=900.0), _c("fast", 0.5, 80.0, 300)
    assert choose([slow, fast], Constraints(min_tps=50)).chosen is fast
    assert choose([slow, fast], Constraints(max_ttft_ms=500)).chosen is fast
    none = choose([slow, fast], Constraints(min_tps=500))
    assert none.chosen is None and set(none.rejected) == {"slow", "fast"}


def test_indistinguishable_accuracy_prefers_the_faster_model():
    a = _c("a", 0.52, 20.0, 300, low=0.45, high=0.59)
    b = _c("b", 0.50, 60.0, 300, low=0.43, high=0.57)  # its interval reaches 0.52
    choice = choose([a, b], Constraints())
    assert choice.chosen is b
    assert choice.reason == (
        "the fastest generation (60.0 tok/s) of the models whose accuracy is within the 95% "
        "interval of the best (a 0.520, b 0.500)"
    )


def test_without_accuracy_the_fastest_fitting_model():
    choice = choose([_c("x", None, 30.0, 300), _c("y", None, 40.0, 300)], Constraints())
    assert choice.chosen.model == "y" and "no accuracy measured" in choice.reason


def test_parse_bytes():
    assert parse_bytes("1GB") == 10**9 and parse_bytes("512MiB") == 512 * 2**20
    assert parse_bytes("1.5 GiB") == int(1.5 * 2**30)
    with pytest.raises(BadInput, match="--max-memory"):
        parse_bytes("lots")
