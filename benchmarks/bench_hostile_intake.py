#!/usr/bin/env python3
"""What reading a hostile submission costs the trusted side: peak memory and time of the intake.

    python benchmarks/bench_hostile_intake.py [--only NAME,NAME] [--workdir DIR] [--grade]

Each attack (built here, deterministically, each within the size limits a submission may have)
is read by `grader.intake.submission.load_submission` in a fresh process of its own, as a
grading process (or a Dask run's client) reads it; so is an honest submission, the baseline of
the same run. Prints each one's peak resident memory (the process's maximum RSS, from the
kernel) and wall time, and both as ratios to the honest one's. The process reads no torch: what
is measured is the intake alone (a grading process adds ~0.25 GiB of its own).
With `--grade`, each one is also graded whole (`torchgrade grade FOLDER --out ... -j 1`, in a
class of its own beside an honest student), and the largest resident memory of any trusted
process of the run (the parent, the fork server, the grading processes: every descendant that
is not inside a bubblewrap sandbox, sampled every 20 ms) is printed, with the run's wall time.
No assertions: tests/test_hostile_trusted.py holds the bounds as tests.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXERCISES = ["strides_broadcasting", "parameters", "bughunt_regression"]
CHECK_IMPORT = "from grader.jupyter import check\n"


def _notebook(cells: list[str]) -> str:
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "code", "id": f"c{i}", "metadata": {}, "execution_count": None,
         "outputs": [], "source": source} for i, source in enumerate(cells)]})


def honest(folder: Path) -> None:
    solutions = ROOT / "solutions"
    (folder / "strides_broadcasting.py").write_text(
        (solutions / "strides_broadcasting.py").read_text())
    (folder / "parameters.ipynb").write_text(_notebook(
        [(solutions / "parameters.py").read_text(), CHECK_IMPORT + "check('parameters')\n"]))


def long_member_name(folder: Path) -> None:
    """A zip whose member names are 60 KB, mostly spaces, ending in decorations."""
    with zipfile.ZipFile(folder / "work.zip", "w") as z:
        for i in range(20):
            z.writestr("strides_broadcasting" + " " * 60_000 + f"_{i}" + " (2)" * 50 + ".py",
                       "x = 1\n")


def huge_check_cell(folder: Path) -> None:
    """A "check your work" cell of 3 MB of names, then cells after it of 200 KB each."""
    after = ["x = (" + "a," * 100_000 + ")\n" for _ in range(40)]
    (folder / "parameters.ipynb").write_text(_notebook(
        [CHECK_IMPORT + "a," * 1_500_000 + "\n", *after]))


def parsed_candidates(folder: Path) -> None:
    """Eight 1.9 MB files for one exercise (each read and compared for the most finished)."""
    body = "x = (" + "a," * 950_000 + ")\n"
    for i in range(8):
        (folder / f"strides_broadcasting ({i + 1}).py").write_text(body)


def many_compiled_cells(folder: Path) -> None:
    """A 50 MB notebook of 200 cells of 250 KB each (every cell is compiled to say its syntax
    error, before the budget)."""
    cell = "x = (" + "a," * 125_000 + ")\n"
    (folder / "parameters.ipynb").write_text(_notebook([cell] * 190))


def json_containers(folder: Path) -> None:
    """A notebook with 490,000 tiny JSON objects (under the container limit) in its outputs."""
    nb = json.loads(_notebook(["x = 1\n"]))
    nb["cells"][0]["outputs"] = [{"output_type": "stream", "name": "stdout",
                                  "text": [{} for _ in range(490_000)]}]
    (folder / "parameters.ipynb").write_text(json.dumps(nb))


def odd_codecs(folder: Path) -> None:
    """Coding cookies of codecs that are no text codecs, beside a correct file."""
    (folder / "strides_broadcasting.py").write_text("# -*- coding: rot13 -*-\nk = 1\n")
    (folder / "parameters.py").write_bytes(b"# coding: punycode\nx = 1\n")


ATTACKS: dict[str, Callable[[Path], None]] = {
    "honest": honest, "long_member_name": long_member_name, "huge_check_cell": huge_check_cell,
    "parsed_candidates": parsed_candidates, "many_compiled_cells": many_compiled_cells,
    "json_containers": json_containers, "odd_codecs": odd_codecs,
}

READER = """
import json, resource, sys, time
from pathlib import Path
from grader.intake.submission import load_submission
started = time.perf_counter()
sub = load_submission(Path(sys.argv[1]), exercises=json.loads(sys.argv[2]))
print(json.dumps({"seconds": time.perf_counter() - started,
                  "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "modules": sorted(sub.modules), "notes": len(sub.notes)}))
"""


def measure(folder: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", READER, str(folder), json.dumps(EXERCISES)],
                          capture_output=True, text=True, cwd=ROOT, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            tree.setdefault(ppid, []).append(int(entry))
    return tree


def _rss_and_name(pid: int) -> tuple[int, str]:
    try:
        with open(f"/proc/{pid}/status") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
        return int(fields.get("VmRSS", "0 kB").split()[0]) * 1024, fields["Name"].strip()
    except (OSError, ValueError, KeyError):
        return 0, ""


def grade_peak(folder: Path, work: Path) -> tuple[float, float, int]:
    """Grade `folder` (with an honest classmate) and sample the trusted processes' memory:
    (largest RSS in MiB, seconds, exit status)."""
    cls = work / f"class-{folder.name}"
    shutil.rmtree(cls, ignore_errors=True)
    shutil.copytree(folder, cls / "eve")
    (cls / "ann").mkdir()
    honest(cls / "ann")
    out = work / f"out-{folder.name}"
    shutil.rmtree(out, ignore_errors=True)
    started = time.perf_counter()
    run = subprocess.Popen([sys.executable, "-m", "grader", "grade", str(cls), "--out", str(out),
                            "--exercises", ",".join(EXERCISES), "-j", "1"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    peak = 0
    while run.poll() is None:
        tree, stack = _children(), [run.pid]
        while stack:
            pid = stack.pop()
            rss, name = _rss_and_name(pid)
            if name == "bwrap":
                continue  # a sandbox and everything in it: the student's side
            peak = max(peak, rss)
            stack += tree.get(pid, [])
        time.sleep(0.02)
    return peak / 2**20, time.perf_counter() - started, run.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", help="attacks to run, comma-separated (the honest baseline "
                        "always runs)")
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--grade", action="store_true", help="grade each one too, and print "
                        "the trusted processes' largest memory")
    args = parser.parse_args()
    names = ["honest"] + [n for n in ATTACKS if n != "honest"
                          and (not args.only or n in args.only.split(","))]
    work = args.workdir or Path(tempfile.mkdtemp(prefix="torchgrade-hostile-"))
    rows = {}
    for name in names:
        folder = work / name
        folder.mkdir(parents=True, exist_ok=True)
        ATTACKS[name](folder)
        size = sum(f.stat().st_size for f in folder.iterdir())
        started = time.perf_counter()
        rows[name] = measure(folder) | {"bytes": size,
                                        "wall": time.perf_counter() - started}
        if args.grade:
            rows[name]["grade"] = grade_peak(folder, work)
    base = rows["honest"]
    print(f"{'submission':22} {'size MB':>8} {'peak MiB':>9} {'x honest':>9} {'intake s':>9} "
          f"{'x honest':>9}")
    for name, row in rows.items():
        print(f"{name:22} {row['bytes'] / 2**20:8.1f} {row['peak_mib']:9.0f} "
              f"{row['peak_mib'] / base['peak_mib']:9.2f} {row['seconds']:9.2f} "
              f"{row['seconds'] / max(base['seconds'], 1e-3):9.1f}")
    if args.grade:
        print(f"\n{'graded as a class':22} {'trusted peak MiB':>17} {'x honest':>9} "
              f"{'run s':>7} {'exit':>5}")
        for name, row in rows.items():
            mib, seconds, code = row["grade"]
            print(f"{name:22} {mib:17.0f} {mib / base['grade'][0]:9.2f} {seconds:7.1f} "
                  f"{code:5d}")
    print(f"(files in {work})", file=sys.stderr)


if __name__ == "__main__":
    main()
