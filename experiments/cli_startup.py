"""How fast the command line starts: the median of 5 runs of `regress --help`,
`regress tasks --help` and `regress check --help` (wall time of a fresh interpreter each), and
how many regress modules each imports. Prints a Markdown table for
docs/results/cli-startup.md; with `--before DIR` (another checkout, e.g. from
`git worktree add /tmp/old ae556a9`) its figures too, measured in the same run.

    .venv/bin/python experiments/cli_startup.py [--before DIR]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

RUNS = 5
COMMANDS = (["--help"], ["tasks", "--help"], ["check", "--help"])
COUNT = (
    "import sys, runpy; sys.argv = ['regress', *sys.argv[1:]]\n"
    "try:\n    runpy.run_module('regress.cli', run_name='__main__')\nexcept SystemExit:\n    pass\n"
    "print(sum(m.split('.')[0] == 'regress' for m in sys.modules), file=sys.stderr)"
)


def seconds(args: list[str], checkout: str | None) -> float:
    """Median wall time of RUNS runs of `python -m regress.cli ARGS`; `-m` imports the package
    of the working folder first: `checkout`, or this one."""
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "regress.cli", *args],
            check=True,
            capture_output=True,
            cwd=checkout,
        )
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def modules(args: list[str], checkout: str | None) -> int:
    """How many regress modules the command imports."""
    done = subprocess.run(
        [sys.executable, "-c", COUNT, *args],
        check=True,
        capture_output=True,
        text=True,
        cwd=checkout,
    )
    return int(done.stderr.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", help="another checkout, measured beside this one")
    before = parser.parse_args().before
    checkouts = ([before] if before else []) + [None]
    names = (["before"] if before else []) + ["now"]
    header = ["command"] + [f"{n}: {what}" for n in names for what in ("median (s)", "modules")]
    print("| " + " | ".join(header) + " |")
    print("|---|" + "---:|" * (len(header) - 1))
    for args in COMMANDS:
        cells = [f"`regress {' '.join(args)}`"]
        for checkout in checkouts:
            cells += [f"{seconds(args, checkout):.2f}", str(modules(args, checkout))]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
