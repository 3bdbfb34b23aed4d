"""Print docs/gate.md's PASS-family table: P(gate PASS) of an unchanged candidate whose
gated units are alike and independent, with Holm on the units' within-margin tests (the gate
before issue 50) and as the intersection-union test the gate now is, exactly
(regress.stats.operating.gate_pass; `max_drop` 2 points, alpha 0.05).

    .venv/bin/python experiments/pass_family.py
"""

from __future__ import annotations

from regress.stats.operating import GATE_PASS_CELLS, gate_pass


def main() -> None:
    print("| units | n per unit | flips | P(gate PASS): Holm | intersection-union |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for units, n, discordance in GATE_PASS_CELLS:
        point = gate_pass(units, n, 0.0, discordance)
        print(
            f"| {units} | {n:,} | {discordance:.0%} | {point.holm:.3f} | {point.intersection:.3f} |"
        )


if __name__ == "__main__":
    main()
