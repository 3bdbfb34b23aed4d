"""Print docs/gate.md's recovery table: P(REGRESSION) and P(PASS) of a unit's recovery test
(`max_relative_drop` 5%, alpha 0.05), exactly (regress.stats.recovery), at a true recovery of
exactly 95% (its size, both sides) and at 100% and 90% (its power).

    .venv/bin/python experiments/recovery_oc.py
"""

from __future__ import annotations

from regress.stats import recovery_point

SIZE = [
    (n, baseline, discordance)
    for n in (100, 300)
    for baseline in (0.3, 0.6, 0.85)
    for discordance in (0.10, 0.20)
]
POWER = [(300, 0.6, 0.10, 1.0), (300, 0.6, 0.10, 0.90), (300, 0.6, 0.20, 1.0)]


def main() -> None:
    print("| n | baseline accuracy | discordance | true recovery | P(REGRESSION) | P(PASS) |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    rows = [(n, b, d, 0.95) for n, b, d in SIZE] + POWER
    for n, baseline, discordance, recovery in rows:
        point = recovery_point(n, baseline, discordance, recovery, 0.05)
        print(
            f"| {n} | {baseline:.0%} | {discordance:.0%} | {recovery:.0%} | "
            f"{point.regression:.3f} | {point.passed:.3f} |"
        )


if __name__ == "__main__":
    main()
