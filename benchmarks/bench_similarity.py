#!/usr/bin/env python3
"""Benchmark `torchgrade similarity` on a generated class (default 500 students).

    python benchmarks/bench_similarity.py [-n 500] [--seed 0] [--runs 1] [--workdir DIR]

1. Generates N students deterministically (no download), five exercises each
   (tests/similarity_class.py's: strides_broadcasting, training_loops, parameters,
   data_pipeline, autograd_graph), from the reference solution and the independent styles of
   tests/styles/: 85% of the students hand in, per exercise, each function taken from a
   seeded choice of style, a few of its statements dropped, swapped or added, and every name
   renamed (files differ, as a class's do, while much of each function recurs across the
   class: the hard case for the inverted index); 10% a disguised copy (renamed, reordered,
   reformatted, re-commented) of an earlier student's file; 5% the untouched stub.
2. Times, in the same run, `torchgrade similarity CLASS --out OUT` and a baseline: a Python
   that only reads the class as the command does (the same intake: ids, the file chosen per
   exercise, decoding), so the ratio is what comparing costs on top of reading.
3. Prints both times (wall and CPU), their ratio, the command's peak RSS (from the kernel's
   rusage: its largest process), how many pairs it flagged and how many of the planted copies
   it found (a copy of a file whose every fingerprint is common in this generated class, where
   each function recurs in a fifth of the students or more, can share fewer than MIN_SHARED
   rare ones: listed at similarity 1 and not flagged).

Run it from the repository with the virtual environment's Python. The machine may be shared:
run it more than once (--runs) and report the spread.
"""

from __future__ import annotations

import argparse
import ast
import copy
import csv
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from similarity_class import (EXERCISES, contract, disguised,  # noqa: E402
                              independent_solutions, renamed, stub)

READ_ONLY = """
import sys
from pathlib import Path
from grader.intake.students import find_students
from grader.intake.submission import load_quietly
exercises = sys.argv[2].split(",")
for sid, path in find_students(Path(sys.argv[1])):
    load_quietly(path, sid, exercises)
"""


def mixed(sources: list[str], rng: random.Random) -> str:
    """Each top-level definition from a seeded choice of `sources` (imports from all)."""
    trees = [ast.parse(s) for s in sources]
    names = [n.name for n in trees[0].body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    body: list[ast.stmt] = []
    for tree in trees:
        body += [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
                 and not (isinstance(n, ast.ImportFrom) and n.module == "__future__")]
    for name in names:
        tree = trees[rng.randrange(len(trees))]
        found = [n for n in tree.body if getattr(n, "name", None) == name] or \
            [n for n in trees[0].body if getattr(n, "name", None) == name]
        body += [edited(copy.deepcopy(n), rng) for n in found]
    other = [n for n in trees[0].body if isinstance(n, (ast.Assign, ast.AnnAssign))]
    return ast.unparse(ast.Module(body=other + body, type_ignores=[])) + "\n"


def edited(node: ast.stmt, rng: random.Random) -> ast.stmt:
    """`node` with a few statements of each of its blocks dropped, swapped or added: a
    student's own variations on a style (no file here runs; it need only parse)."""
    for block in [n for n in ast.walk(node) if isinstance(getattr(n, "body", None), list)]:
        out: list[ast.stmt] = []
        for statement in block.body:
            draw = rng.random()
            if draw < 0.1 and len(block.body) > 1:
                continue
            if draw < 0.25:
                out.append(ast.parse(f"_note{rng.randrange(1000)} = {rng.randrange(100)}")
                           .body[0])
            out.append(statement)
            if 0.25 <= draw < 0.35 and len(out) > 1:
                out[-1], out[-2] = out[-2], out[-1]
        block.body = out or [ast.Pass()]
    return node


def generate(root: Path, n: int, seed: int) -> set[tuple[str, str, str]]:
    """Write the class; return the planted copies (exercise, copier, source)."""
    rng = random.Random(seed)
    styles = {e: list(independent_solutions(e).values()) for e in EXERCISES}
    keep = {e: contract(e) for e in EXERCISES}
    written: dict[str, dict[str, str]] = {}
    planted = set()
    for i in range(n):
        sid = f"s{i:04d}"
        draw = rng.random()
        files = {}
        for e in EXERCISES:
            if draw < 0.05:
                files[e] = stub(e)
            elif draw < 0.15 and written:
                source = rng.choice(sorted(written))
                files[e] = disguised(written[source][e], keep[e], seed=i)
                planted.add((e, sid, source))
            else:
                files[e] = renamed(mixed(styles[e], rng), keep[e], seed=i)
        if draw >= 0.15:
            written[sid] = files
        home = root / sid
        home.mkdir(parents=True)
        for e, text in files.items():
            (home / f"{e}.py").write_text(text, encoding="utf-8")
    return planted


def run(cmd: list[str]) -> tuple[float, float, int, int]:
    """Wall seconds, CPU seconds (user + system, its processes' included), peak RSS (kB, of
    its largest process) and exit status of `cmd`, its output discarded."""
    started = time.perf_counter()
    child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - started
    if status:
        sys.stderr.write(child.stderr.read().decode(errors="replace") if child.stderr else "")
    return (seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss,
            os.waitstatus_to_exitcode(status))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-n", type=int, default=500, help="students (default 500)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runs", type=int, default=1, help="timed runs of each (median)")
    parser.add_argument("--workdir", type=Path, help="keep the class and OUT here")
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-similarity-"))
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    planted = generate(work / "class", args.n, args.seed)
    print(f"generated {args.n} students x {len(EXERCISES)} exercises in "
          f"{time.perf_counter() - started:.1f} s ({work / 'class'})", flush=True)
    torchgrade = str(Path(sys.executable).with_name("torchgrade"))
    times, cpus, reads, peaks = [], [], [], []
    for i in range(args.runs):
        seconds, cpu, peak, code = run([torchgrade, "similarity", str(work / "class"),
                                        "--out", str(work / f"out{i}")])
        assert code == 0, f"torchgrade similarity exited {code}"
        times.append(seconds)
        cpus.append(cpu)
        peaks.append(peak)
        read, read_cpu, _, code = run([sys.executable, "-c", READ_ONLY, str(work / "class"),
                                       ",".join(EXERCISES)])
        assert code == 0, f"the baseline exited {code}"
        reads.append(read)
        print(f"  run {i + 1}: similarity {seconds:.2f} s ({cpu:.1f} s of CPU, peak RSS "
              f"{peak / 1024:.0f} MB), reading the class {read:.2f} s ({read_cpu:.1f} s of CPU)",
              flush=True)
    with open(work / "out0" / "similarity.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    flagged = {(r["exercise"], r["student_a"], r["student_b"]) for r in rows
               if r["flagged"] == "true"}
    found = sum((e, *sorted((a, b))) in flagged for e, a, b in planted)
    similarity, read = statistics.median(times), statistics.median(reads)
    print(f"torchgrade similarity, {args.n} students: {similarity:.2f} s "
          f"(median of {args.runs}; {statistics.median(cpus):.1f} s of CPU), peak RSS "
          f"{max(peaks) / 1024:.0f} MB; reading the class alone: {read:.2f} s; ratio "
          f"{similarity / read:.2f}")
    print(f"{len(rows)} rows in similarity.csv, {len(flagged)} flagged pairs; planted copies "
          f"found: {found} of {len(planted)}")


if __name__ == "__main__":
    main()
