#!/usr/bin/env python3
"""Benchmark `torchgrade grade` against the naive way: a fresh Python per submission.

    python benchmarks/bench_grade.py [-n 40] [-j CORES] [--baseline check|pytest]
                                     [--baseline-sample K] [--workdir DIR] [--keep]
                                     [--bytecode as-installed|as-is]

1. Generates N submissions (default 40): for every exercise, each student gets the reference
   solution, one of the wrong implementations in mutants/<exercise>/, or
   the stub, in a fixed mix (about 40% solutions, 50% mutants,
   10% stubs; seeded).
2. Grades them all with `torchgrade grade SUBS --out OUT -j J` (a fresh OUT, so nothing is
   skipped), sampling the memory of every process of its tree (/proc, every 20 ms).
3. In the same run, grades them one after another the naive way: a fresh Python per submission
   running the same checks (by default `torchgrade check --no-server --hidden SUB --exercises
   ...`, or `python -m pytest checks --submission SUB`).
4. Prints seconds per submission for both and their ratio; the per-submission overhead beyond
   the checks' own compute (from each results.json: the grading process's wall time for the
   submission minus the sum of its checks' durations), the whole run's fixed start-up cost
   (and its ratio to a bare `python -c "import torch"` timed in the same run), and
   peak memory: RSS, PSS and USS (private pages, what one more process really costs) per kind of
   process, and the whole tree's PSS at its peak.

First, by default, the grader's and the course's modules are compiled to bytecode as pip
compiles what it installs (as in bench_check.py; `--bytecode as-is` skips it): both sides then
import them as an installation does. Run it from the repository with the virtual environment's
Python. The machine may be shared:
run it more than once and report the spread.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # the mutants

from grader.course import bughunt  # noqa: E402
from grader.release.notebooks import solution_path, stub_path  # noqa: E402
from grader.worker.client import children  # noqa: E402
from grader.course.registry import check_files, known_exercises  # noqa: E402
from as_installed import add_bytecode_option, prepare_bytecode  # noqa: E402
from mutants import mutants_of  # noqa: E402


# --------------------------------------------------------------------------- submissions


def generate(target: Path, n: int, exercises: list[str], seed: int = 5) -> dict[str, str]:
    """N student folders under `target`; returns {student: what they hold}."""
    rng = random.Random(seed)
    kinds = {}
    for i in range(n):
        student = f"student{i:03d}"
        folder = target / student
        folder.mkdir(parents=True)
        labels = []
        for exercise in exercises:
            solution = solution_path(exercise).read_text()
            roll = rng.random()
            mutants = mutants_of(exercise)
            if roll < 0.1:
                source, label = stub_path(exercise).read_text(), "stub"
            elif roll < 0.5 or not mutants:
                source, label = solution, "solution"
            else:
                mutant = rng.choice(mutants)
                source, label = mutant.source(), mutant.name
            relpath = (bughunt.student_path(exercise) if exercise.startswith(bughunt.PREFIX)
                       else f"{exercise}.py")
            (folder / relpath).parent.mkdir(parents=True, exist_ok=True)
            (folder / relpath).write_text(source)
            labels.append(f"{exercise}:{label}")
        kinds[student] = ", ".join(labels)
    return kinds


def checks_compute(result: dict) -> float:
    """The checks' own compute in a results.json: `checks_s` counts the bug hunts' checks that
    did not count for the student's copy too (they ran all the same); older results lack it."""
    return result.get("checks_s") or sum(c["duration_s"] for c in result["checks"])


# --------------------------------------------------------------------------- memory


@dataclass
class ProcessPeak:
    role: str
    rss_kb: int = 0
    pss_kb: int = 0
    uss_kb: int = 0


@dataclass
class MemorySampler:
    """Samples every process under `root` (by /proc) until stopped; keeps each one's peaks."""

    root: int
    interval: float = 0.02
    peaks: dict[int, ProcessPeak] = field(default_factory=dict)
    tree_pss_peak_kb: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self._stop.set()
        self.thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            total = 0
            for pid, role in self._tree():
                numbers = _memory(pid)
                if numbers is None:
                    continue
                rss, pss, uss = numbers
                peak = self.peaks.setdefault(pid, ProcessPeak(role))
                peak.role = role  # bwrap execs the zygote: the last role seen is the right one
                peak.rss_kb, peak.pss_kb = max(peak.rss_kb, rss), max(peak.pss_kb, pss)
                peak.uss_kb = max(peak.uss_kb, uss)
                total += pss
            self.tree_pss_peak_kb = max(self.tree_pss_peak_kb, total)
            time.sleep(self.interval)

    def _tree(self) -> list[tuple[int, str]]:
        out, stack = [], [(self.root, "parent (torchgrade)")]
        while stack:
            pid, role = stack.pop()
            out.append((pid, role))
            for child in children(pid):
                cmd = _cmdline(child)
                if role in ("zygote", "worker"):  # forked by it: same command line
                    kind = "worker"
                elif role == "zygote template":  # forked by it: same command line
                    kind = "zygote"
                elif "grader.worker." in cmd and "bwrap" in cmd.split()[0]:
                    kind = "sandbox (bwrap)"
                elif "grader.worker.template" in cmd:
                    kind = "zygote template"
                elif "grader.worker.zygote" in cmd:
                    kind = "zygote"
                elif "forkserver" in cmd and role.startswith("parent"):
                    kind = "forkserver"
                elif role == "forkserver":
                    kind = "grading process"
                else:
                    kind = "other"
                stack.append((child, kind))
        return out


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _memory(pid: int) -> tuple[int, int, int] | None:
    """(peak RSS, PSS, USS) in kB: VmHWM from status, the rest from smaps_rollup."""
    try:
        with open(f"/proc/{pid}/status") as f:
            hwm = next((int(line.split()[1]) for line in f if line.startswith("VmHWM:")), 0)
        fields = {}
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 2 and parts[0].endswith(":") and parts[1].isdigit():
                    fields[parts[0][:-1]] = int(parts[1])
    except (OSError, StopIteration, ValueError):
        return None
    if not fields:
        return None
    private = fields.get("Private_Clean", 0) + fields.get("Private_Dirty", 0)
    return hwm, fields.get("Pss", 0), private


# --------------------------------------------------------------------------- runs


@dataclass
class GraderRun:
    seconds: float
    started: float      # time.time() at start
    ended: float
    sampler: MemorySampler
    last_line: str


def run_grader(subs: Path, out: Path, jobs: int, exercises: list[str],
               sample_every: float) -> GraderRun:
    command = [sys.executable, "-m", "grader.cli", "grade", str(subs), "--out", str(out),
               "-j", str(jobs), "--exercises", ",".join(exercises)]
    wall_start = time.time()
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            cwd=REPO)
    sampler = MemorySampler(proc.pid, interval=sample_every)
    sampler.start()
    output, _ = proc.communicate()
    seconds = time.perf_counter() - started
    sampler.stop()
    if proc.returncode != 0:
        sys.exit(f"torchgrade grade failed ({proc.returncode}):\n{output}")
    return GraderRun(seconds, wall_start, wall_start + seconds, sampler,
                     output.strip().splitlines()[-1])


def run_baseline(subs: Path, students: list[str], kind: str, scratch: Path,
                 exercises: list[str]) -> tuple[list[float], list[float]]:
    """Wall time of each fresh-process grading, and the sum of its checks' durations."""
    times, compute = [], []
    for student in students:
        report = scratch / student / student / "results.json"  # pytest: one for the submission
        if kind == "pytest":
            command = [sys.executable, "-m", "pytest",
                       *(str(f) for f in check_files(exercises)),
                       "--submission", str(subs / student), "-q", "-p", "no:cacheprovider",
                       "--results-json", str(report)]
            cwd = scratch
        else:
            # A fresh Python per submission running the same checks as `grade`: the hidden
            # ones too (--hidden), and --no-server (no warm check server answers it).
            command = [sys.executable, "-m", "grader.cli", "check", "--no-server", "--hidden",
                       str(subs / student), "--exercises", ",".join(exercises),
                       "--out", str(scratch / student)]
            cwd = REPO
        started = time.perf_counter()
        proc = subprocess.run(command, capture_output=True, text=True, cwd=cwd)
        times.append(time.perf_counter() - started)
        if proc.returncode not in (0, 1):
            sys.exit(f"baseline failed on {student} ({proc.returncode}):\n"
                     f"{proc.stdout}{proc.stderr}")
        # `torchgrade check` writes one results.json per exercise (OUT/<exercise>/), each with
        # its own exercise's checks and the whole run's `checks_s`.
        reports = ([report] if kind == "pytest"
                   else sorted((scratch / student).glob("*/results.json")))
        results = [json.loads(r.read_text()) for r in reports if r.exists()]
        whole = {r["checks_s"] for r in results if r.get("checks_s")}
        compute.append(whole.pop() if len(whole) == 1 and all(r.get("checks_s") for r in results)
                       else sum(checks_compute(r) for r in results))
    return times, compute


def bare_import_torch(times: int = 3) -> float:
    """Median wall time of a fresh `python -c "import torch"` (the yardstick of issue 21's
    start-up target), measured in this run, next to the grader's."""
    seconds = []
    for _ in range(times):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import torch"], check=True, cwd=REPO)
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds)


STARTUP_TARGET = 1.5  # issue 21: bulk start-up <= 1.5 x a bare `import torch`


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=40, help="submissions (default 40)")
    parser.add_argument("-j", type=int, default=len(os.sched_getaffinity(0)),
                        help="grading processes (default: the cores)")
    parser.add_argument("--exercises", type=lambda t: t.split(","), default=known_exercises(),
                        metavar="A,B", help="exercise modules (default: all)")
    parser.add_argument("--baseline", choices=["check", "pytest"], default="check")
    parser.add_argument("--baseline-sample", type=int, default=0, metavar="K",
                        help="run the baseline on K submissions only (default: all)")
    parser.add_argument("--sample-every", type=float, default=0.2, metavar="SECONDS",
                        help="memory sampling interval (default 0.2; reading every process's "
                             "smaps_rollup costs CPU the grader then lacks)")
    parser.add_argument("--workdir", type=Path, help="default: a temporary folder")
    parser.add_argument("--keep", action="store_true", help="keep the workdir")
    add_bytecode_option(parser)
    args = parser.parse_args()
    prepare_bytecode(args.bytecode)

    work = args.workdir or Path(tempfile.mkdtemp(prefix="torchgrade-bench-"))
    if work.exists() and args.workdir:
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    subs, out, scratch = work / "submissions", work / "out", work / "baseline"
    scratch.mkdir()
    kinds = generate(subs, args.n, args.exercises)
    students = sorted(kinds)
    print(f"{args.n} submissions ({', '.join(args.exercises)}); {args.j} grading processes; "
          f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f} before")

    import_torch_s = bare_import_torch()
    run = run_grader(subs, out, args.j, args.exercises, args.sample_every)
    grader_s, sampler = run.seconds, run.sampler
    results = [json.loads((out / s / "results.json").read_text()) for s in students]
    check_s = [checks_compute(r) for r in results]
    in_process = [r["grading_s"] for r in results]
    overhead = [g - c for g, c in zip(in_process, check_s)]
    full = sum(r["score"] == r["max_score"] for r in results)
    # When each submission was done: its results.json is written last, the moment it is done.
    done = [(out / s / "results.json").stat().st_mtime for s in students]
    # When each started grading: its result is made (`graded_at`) the moment its checks are
    # over, `grading_s` after they began; the first start ends the run's start-up (its outputs,
    # written after `graded_at`, are not start-up).
    began = [datetime.fromisoformat(r["graded_at"]).timestamp() - g
             for r, g in zip(results, in_process)]
    startup = min(began) - run.started
    tail = run.ended - max(done)
    busy = args.j * (grader_s - startup - tail)  # grading-process seconds between first and last
    whole_overhead = (busy - sum(check_s)) / args.n

    sample = students if not args.baseline_sample else students[:args.baseline_sample]
    base, base_compute = run_baseline(subs, sample, args.baseline, scratch, args.exercises)
    base_per = statistics.fmean(base)
    grader_per = grader_s / args.n

    print(f"\ntorchgrade grade -j {args.j}: {run.last_line}")
    print(f"\n{'':46}{'torchgrade grade':>18}{'fresh process':>16}")
    print(f"{'seconds per submission (wall)':46}{grader_per:18.3f}{base_per:16.3f}")
    print(f"{'whole run, seconds':46}{grader_s:18.2f}{sum(base):16.2f}"
          + (f"  (baseline on {len(sample)}: extrapolated {base_per * args.n:.1f})"
             if len(sample) < args.n else ""))
    print(f"\nratio grader / fresh-process baseline: {grader_per / base_per:.3f} "
          f"(target <= 0.1); speed-up x{base_per / grader_per:.1f}")
    print(f"checks' own compute per submission (sum of their durations): mean "
          f"{statistics.fmean(check_s):.3f} s in torchgrade grade, "
          f"{statistics.fmean(base_compute):.3f} s in the fresh processes (one at a time); "
          f"{args.j} cores cannot make the wall time per submission less than "
          f"{statistics.fmean(check_s) / args.j:.3f} s")
    print(f"overhead per submission beyond the checks' compute, in the grading process: mean "
          f"{statistics.fmean(overhead):.4f} s, median {statistics.median(overhead):.4f} s, "
          f"max {max(overhead):.4f} s (target <= 0.05)")
    print(f"  the same from outside, with every wait: (J x the wall time between the first "
          f"start and the last result - the checks' compute) / N = {whole_overhead:.4f} s")
    print(f"fixed costs: start-up until the first submission starts grading (parent, fork "
          f"server, grading processes, zygotes) {startup:.2f} s; after the last result (class "
          f"index, CSV, stopping) {tail:.2f} s; together {(startup + tail) / args.n:.3f} s per "
          f"submission over {args.n}")
    print(f"bulk start-up / a bare python -c \"import torch\" (median of 3, "
          f"{import_torch_s:.2f} s): {startup / import_torch_s:.2f} (target <= {STARTUP_TARGET})")
    print(f"full marks: {full} of {args.n}")

    print("\nmemory (peak over the run, MB)     processes   RSS max   PSS max   USS max")
    by_role: dict[str, list[ProcessPeak]] = {}
    for peak in sampler.peaks.values():
        by_role.setdefault(peak.role, []).append(peak)
    for role in ("parent (torchgrade)", "forkserver", "grading process", "sandbox (bwrap)",
                 "zygote template", "zygote", "worker", "other"):
        peaks = by_role.get(role)
        if not peaks:
            continue
        print(f"  {role:32} {len(peaks):9d} {max(p.rss_kb for p in peaks) / 1024:9.0f}"
              f" {max(p.pss_kb for p in peaks) / 1024:9.0f}"
              f" {max(p.uss_kb for p in peaks) / 1024:9.0f}")
    print(f"  whole tree, PSS at its peak: {sampler.tree_pss_peak_kb / 1024:.0f} MB")
    workers = by_role.get("worker", [])
    if workers:
        print(f"  extra memory per worker (USS, private pages; the rest is shared with its "
              f"zygote): median {statistics.median(p.uss_kb for p in workers) / 1024:.1f} MB, "
              f"max {max(p.uss_kb for p in workers) / 1024:.1f} MB over {len(workers)} sampled")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    if args.keep or args.workdir:
        print(f"\nkept: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
