#!/usr/bin/env python3
"""Benchmark a cold `torchgrade check FILE` against a bare `python -c "import torch"`.

    python benchmarks/bench_check.py [--file curriculum/solutions/strides_broadcasting.py]
                                     [--runs 3]

In one run, side by side, each timed `--runs` times (wall clock of the whole process, as a
student waits for it) and reported by its median:

1. `python -c "import torch"` with this interpreter: the floor a cold check cannot go below
   by much (the grader and its sandboxed worker parent both need torch);
2. `torchgrade check FILE --out TMP` (a fresh TMP each time, so no report is reused), the
   console script of this interpreter's environment: cold, nothing warm from a previous run.

Prints each median (and every run) and the ratio check / import torch. No assertions: the
machine may be shared, so run it more than once and report the spread.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def timed(cmd: list[str], cwd: Path) -> tuple[float, int]:
    """Wall-clock seconds and exit status of one run of `cmd` (its output discarded)."""
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started, done.returncode


def median_of(label: str, make_cmd, runs: int, cwd: Path) -> float:
    """Run `make_cmd(i)` `runs` times; print every time and the median; return the median."""
    times = []
    for i in range(runs):
        seconds, code = timed(make_cmd(i), cwd)
        times.append(seconds)
        note = "" if code in (0, 1) else f" (exit status {code})"
        print(f"  {label} run {i + 1}: {seconds:.2f} s{note}", flush=True)
    middle = statistics.median(times)
    print(f"{label}: median {middle:.2f} s of {runs}", flush=True)
    return middle


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", type=Path,
                        default=REPO / "curriculum" / "solutions" / "strides_broadcasting.py",
                        help="the module to check (default: strides_broadcasting's solution)")
    parser.add_argument("--runs", type=int, default=3, help="runs of each (default 3)")
    args = parser.parse_args(argv)
    torchgrade = Path(sys.executable).with_name("torchgrade")
    if not torchgrade.exists():
        print(f"no torchgrade next to {sys.executable}: run with the environment's Python",
              file=sys.stderr)
        return 2
    target = args.file.resolve()
    with tempfile.TemporaryDirectory(prefix="bench-check-") as tmp:
        work = Path(tmp)
        bare = median_of('python -c "import torch"',
                         lambda i: [sys.executable, "-c", "import torch"], args.runs, work)
        check = median_of(f"torchgrade check {target.name} (cold)",
                          lambda i: [str(torchgrade), "check", str(target),
                                     "--out", str(work / f"out{i}")], args.runs, work)
    print(f"\nimport torch      {bare:6.2f} s")
    print(f"check cold        {check:6.2f} s")
    print(f"ratio check/torch {check / bare:6.2f}   (issue 21's target: <= 1.5)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
