#!/usr/bin/env python3
"""Benchmark `torchgrade grade --dask` against a local run, on one machine.

    python benchmarks/bench_dask.py [-n 20] [--exercises strides_broadcasting] [--workdir DIR]
                                    [--keep]

1. Generates N submissions (as benchmarks/bench_grade.py does: solutions, mutants, stubs).
2. Grades them locally: `torchgrade grade SUBS --out OUT -j 2`.
3. Starts a local Dask cluster (`dask scheduler` and `dask worker --nworkers 1 --nthreads 1`
   processes on 127.0.0.1) with one worker, grades them with `--dask` twice: cold (the worker's
   grading process starts: torch, pytest, the zygote) and warm (`--force` on the same workers:
   what a course's long-lived cluster gives every run after its first); then adds a second
   worker and does the same with two.
4. Prints, side by side: wall seconds per submission of each run, its start-up (until its first
   result) and its steady rate (seconds between consecutive results, from the results.json
   write times: (last - first) / (N - 1)); the Dask path's overhead per submission against the
   local run at the same parallelism (2 workers vs -j 2, steady rates); and the scaling from
   1 to 2 workers (steady rates).

Every process it starts is killed (its process group) at the end. The machine may be shared:
run it more than once and report the spread.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_grade import generate  # noqa: E402

DASK = Path(sys.executable).parent / "dask"
TIMEOUT = 3600


@dataclass
class Run:
    name: str
    wall: float
    first: float       # seconds from the command's start to its first result
    steady: float      # seconds per submission between the first result and the last
    graded: int

    @property
    def per_submission(self) -> float:
        return self.wall / max(self.graded, 1)


def grade(name: str, subs: Path, out: Path, exercises: list[str], *args: str) -> Run:
    started = time.time()
    proc = subprocess.run([sys.executable, "-m", "grader.cli", "grade", str(subs), "--out",
                           str(out), "--exercises", ",".join(exercises), *args],
                          capture_output=True, text=True, timeout=TIMEOUT)
    wall = time.time() - started
    if proc.returncode != 0:
        sys.exit(f"{name}: torchgrade grade failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    times = sorted(p.stat().st_mtime for p in out.glob("*/results.json")
                   if p.stat().st_mtime >= started)
    steady = (times[-1] - times[0]) / (len(times) - 1) if len(times) > 1 else float("nan")
    run = Run(name, wall, times[0] - started if times else float("nan"), steady, len(times))
    print(f"  {name}: {run.wall:.1f} s for {run.graded} ({run.per_submission:.2f} s each; "
          f"first result after {run.first:.1f} s, then {run.steady:.2f} s each)", flush=True)
    return run


class Cluster:
    """`dask scheduler` and `dask worker` processes on 127.0.0.1, each in its own group."""

    def __init__(self, root: Path):
        self.root = root
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.address = f"tcp://127.0.0.1:{self.port}"
        self.processes: list[subprocess.Popen] = []

    def start(self, name: str, *args: str) -> None:
        with open(self.root / f"{name}.log", "w") as log:
            self.processes.append(subprocess.Popen(
                [str(DASK), *args], stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, cwd=self.root, start_new_session=True,
                env={**os.environ, "TMPDIR": str(self.root)}))

    def scheduler(self) -> None:
        self.start("scheduler", "scheduler", "--host", "127.0.0.1", "--port", str(self.port),
                   "--no-dashboard")
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.2)
        sys.exit("the Dask scheduler did not start")

    def workers(self, n: int) -> None:
        """Start workers until there are `n`, and wait for them."""
        from distributed import Client

        have = len(self.processes) - 1
        for i in range(have, n):
            self.start(f"worker{i}", "worker", self.address, "--nworkers", "1", "--nthreads",
                       "1", "--no-dashboard", "--host", "127.0.0.1")
        with Client(self.address, timeout=30, set_as_default=False) as client:
            client.wait_for_workers(n, timeout=120)

    def stop(self) -> None:
        for process in self.processes:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-n", type=int, default=20, help="submissions (default 20)")
    parser.add_argument("--exercises", default="strides_broadcasting",
                        help="comma-separated (default: strides_broadcasting)")
    parser.add_argument("--workdir", type=Path, help="default: a temporary folder")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    args = parser.parse_args()
    if not DASK.is_file():
        sys.exit(f"no {DASK}: pip install -c constraints.txt -e '.[dask]'")
    exercises = args.exercises.split(",")
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-dask-"))
    work.mkdir(parents=True, exist_ok=True)
    subs = work / "subs"
    if subs.exists():
        shutil.rmtree(subs)
    generate(subs, args.n, exercises)
    print(f"{args.n} submissions of {', '.join(exercises)} in {subs}", flush=True)
    runs: dict[str, Run] = {}
    cluster = Cluster(work)
    try:
        runs["local"] = grade("local -j 2", subs, work / "out-local", exercises, "-j", "2")
        cluster.scheduler()
        for n in (1, 2):
            cluster.workers(n)
            out = work / f"out-dask{n}"
            runs[f"cold{n}"] = grade(f"dask, {n} worker(s), cold", subs, out, exercises,
                                     "--dask", cluster.address, "--force")
            runs[f"warm{n}"] = grade(f"dask, {n} worker(s), warm", subs, out, exercises,
                                     "--dask", cluster.address, "--force")
    finally:
        cluster.stop()
        if not args.keep and args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    report(runs, args.n)


def report(runs: dict[str, Run], n: int) -> None:
    print()
    print(f"{'run':<28}{'wall s':>8}{'s/submission':>14}{'start-up s':>12}{'steady s/sub':>14}")
    for key, label in [("local", "local -j 2"), ("cold1", "dask 1 worker, cold"),
                       ("warm1", "dask 1 worker, warm"), ("cold2", "dask 2 workers, cold"),
                       ("warm2", "dask 2 workers, warm")]:
        r = runs[key]
        print(f"{label:<28}{r.wall:>8.1f}{r.per_submission:>14.2f}{r.first:>12.1f}"
              f"{r.steady:>14.2f}")
    local, warm1, warm2 = runs["local"], runs["warm1"], runs["warm2"]
    print()
    print(f"Dask overhead per submission vs local (steady, 2 workers vs -j 2): "
          f"{warm2.steady - local.steady:+.3f} s ({warm2.steady / local.steady:.2f}x)")
    print(f"Dask overhead per submission vs local (whole run, warm 2 workers vs -j 2): "
          f"{warm2.per_submission - local.per_submission:+.3f} s")
    print(f"Scaling 1 -> 2 workers (steady): {warm1.steady / warm2.steady:.2f}x "
          f"(whole warm run: {warm1.wall / warm2.wall:.2f}x)")


if __name__ == "__main__":
    main()
