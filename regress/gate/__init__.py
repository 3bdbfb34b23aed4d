"""Judging a candidate against its baseline: pairing, statistics, policy, verdicts, `check`."""
