"""What the experiment scripts share: a resumable step and the CPU flags every figure names."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def step(
    name: str,
    output: Path,
    command: list[str],
    ok: tuple[int, ...] = (0,),
    show_output: bool = False,
) -> float:
    """Run `command` from the repository unless `output` exists (a rerun resumes); return its
    wall time, 0 when skipped. An exit code outside `ok` stops the script."""
    if output.exists():
        print(f"{name}: {output} exists, skipped", file=sys.stderr)
        return 0.0
    start = time.perf_counter()
    stdout = None if show_output else subprocess.DEVNULL
    done = subprocess.run(command, cwd=REPO, check=False, stdout=stdout)
    if done.returncode not in ok:
        raise SystemExit(f"{name}: exit {done.returncode}: {' '.join(command)}")
    seconds = time.perf_counter() - start
    print(f"{name}: {seconds:.0f} s (exit {done.returncode})", file=sys.stderr)
    return seconds


def cpu_flags() -> str:
    """llama.cpp's system info: the instruction sets the figures were measured with."""
    import llama_cpp

    return " ".join(re.findall(r"(\w+) = 1", llama_cpp.llama_print_system_info().decode()))
