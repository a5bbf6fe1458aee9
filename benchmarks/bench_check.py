#!/usr/bin/env python3
"""Benchmark `torchgrade check FILE`, cold and warm, against a bare `python -c "import torch"`.

    python benchmarks/bench_check.py [--file solutions/strides_broadcasting.py]
                                     [--runs 3] [--bytecode as-installed|as-is]

In one run, side by side, each timed `--runs` times (wall clock of the whole process, as a
student waits for it) and reported by its median:

1. `python -c "import torch"` with this interpreter: the floor a cold check cannot go below
   by much (the grader and its sandboxed worker parent both need torch);
2. `torchgrade check FILE --no-server`: cold, in its own process, nothing warm from a
   previous run, and no check server used or left (what every check was before the server);
3. `torchgrade check FILE` answered by this user's check server (`grader.checkserver`), in a
   servers' folder of this run's own: one untimed check leaves the server, the benchmark waits
   until it answers, then times the warm checks; the server is stopped at the end.

1 and 2 alternate, run by run, so that a change in the machine's load moves both. First, by
default, the grader's and the course's modules are compiled to bytecode as pip compiles what it
installs (`--bytecode as-is` skips it): an editable install under PYTHONDONTWRITEBYTECODE=1 has
none and would compile them at every cold check, which no student's installation does.
Every check writes to a fresh OUT, so no report is reused. Prints each median (and every run)
and the ratios check / import torch against issue 21's targets (cold <= 1.5, warm <= 0.5).
No assertions: the machine may be shared, so run it more than once and report the spread.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from as_installed import add_bytecode_option, prepare_bytecode

REPO = Path(__file__).resolve().parents[1]


def timed(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, int]:
    """Wall-clock seconds and exit status of one run of `cmd` (its output discarded)."""
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
    return time.perf_counter() - started, done.returncode


def median_of(label: str, make_cmd, runs: int, cwd: Path, env: dict[str, str]) -> float:
    """Run `make_cmd(i)` `runs` times; print every time and the median; return the median."""
    times = []
    for i in range(runs):
        seconds, code = timed(make_cmd(i), cwd, env)
        times.append(seconds)
        note = "" if code in (0, 1) else f" (exit status {code})"
        print(f"  {label} run {i + 1}: {seconds:.2f} s{note}", flush=True)
    middle = statistics.median(times)
    print(f"{label}: median {middle:.2f} s of {runs}", flush=True)
    return middle


def medians_alternating(first, second, runs: int, cwd: Path, env: dict[str, str]
                        ) -> tuple[float, float]:
    """Run `first` and `second` ((label, make_cmd) each) in turn, `runs` times each; print every
    time and both medians; return them."""
    times: dict[str, list[float]] = {first[0]: [], second[0]: []}
    for i in range(runs):
        for label, make_cmd in (first, second):
            seconds, code = timed(make_cmd(i), cwd, env)
            times[label].append(seconds)
            note = "" if code in (0, 1) else f" (exit status {code})"
            print(f"  {label} run {i + 1}: {seconds:.2f} s{note}", flush=True)
    medians = []
    for label, _ in (first, second):
        medians.append(statistics.median(times[label]))
        print(f"{label}: median {medians[-1]:.2f} s of {runs}", flush=True)
    return medians[0], medians[1]


def wait_until_served(cmd: list[str], cwd: Path, env: dict[str, str], folder: Path) -> None:
    """Return once the server left in `folder` answers: its socket is there and its lock names
    a live process; a check sent then waits for the server's warm-up to finish."""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if any(p.suffix == ".sock" for p in folder.iterdir()) and _server_pids(folder):
            subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)  # blocks until its warm-up is done
            return
        time.sleep(0.2)
    sys.exit("the check server did not start (see its log in the servers' folder)")


def _server_pids(folder: Path) -> list[int]:
    pids = []
    for lock in folder.glob("*.lock"):
        text = lock.read_text().strip()
        if text.isdigit() and Path(f"/proc/{text}").exists():
            pids.append(int(text))
    return pids


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", type=Path,
                        default=REPO / "solutions" / "strides_broadcasting.py",
                        help="the module to check (default: strides_broadcasting's solution)")
    parser.add_argument("--runs", type=int, default=3, help="runs of each (default 3)")
    add_bytecode_option(parser)
    args = parser.parse_args(argv)
    torchgrade = Path(sys.executable).with_name("torchgrade")
    if not torchgrade.exists():
        print(f"no torchgrade next to {sys.executable}: run with the environment's Python",
              file=sys.stderr)
        return 2
    target = args.file.resolve()
    prepare_bytecode(args.bytecode)
    with tempfile.TemporaryDirectory(prefix="bench-check-") as tmp:
        work = Path(tmp)
        servers = work / "servers"
        servers.mkdir(mode=0o700)
        env = {**os.environ, "TORCHGRADE_CHECK_SERVER": "1",
               "TORCHGRADE_CHECK_SERVER_DIR": str(servers)}
        # Side by side: a bare import and a cold check alternate, so that a change in the
        # machine's load moves both.
        bare, cold = medians_alternating(
            ('python -c "import torch"', lambda i: [sys.executable, "-c", "import torch"]),
            (f"torchgrade check {target.name} --no-server (cold)",
             lambda i: [str(torchgrade), "check", "--no-server", str(target),
                        "--out", str(work / f"cold{i}")]), args.runs, work, env)
        first = [str(torchgrade), "check", str(target), "--out", str(work / "first")]
        try:
            subprocess.run(first, cwd=work, env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            wait_until_served(first, work, env, servers)
            warm = median_of(f"torchgrade check {target.name} (warm: the check server)",
                             lambda i: [str(torchgrade), "check", str(target),
                                        "--out", str(work / f"warm{i}")], args.runs, work, env)
        finally:
            for pid in _server_pids(servers):
                os.kill(pid, signal.SIGTERM)
    print(f"\nimport torch       {bare:6.2f} s")
    print(f"check cold         {cold:6.2f} s   ratio {cold / bare:5.2f}   (target <= 1.5)")
    print(f"check warm         {warm:6.2f} s   ratio {warm / bare:5.2f}   (target <= 0.5)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
