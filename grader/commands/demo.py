"""`torchgrade demo`: the bundled sample class, assembled and graded (`grader.grading.run`)."""

from __future__ import annotations

import argparse
import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path

import nbformat

from grader.commands.common import full_package_only
from grader.grading.run import grade_class
from grader.grading.summary import GradeSummary
from grader.course.folder import active_course
from grader.course.registry import known_exercises
from grader.models import SubmissionResult
from grader.outputs.progress import Progress
from grader.worker.limits import WorkerLimits


def demo(*, out: Path, limits: WorkerLimits | None = None, jobs: int | None = None,
         on_start: Callable[[int, int], None] | None = None,
         on_result: Callable[[SubmissionResult], None] | None = None,
         on_begin: Callable[[], None] | None = None) -> GradeSummary:
    """Assemble the bundled sample class under `out/submissions` and grade it into `out/results`
    (`on_begin`, `on_start`, `on_result`: as for `grade`)."""
    full_package_only("demo")  # the sample class holds solutions
    out = Path(out)
    submissions = out / "submissions"
    if submissions.exists():
        shutil.rmtree(submissions)
    build_demo_class(submissions)
    return grade_class(submissions, out=out / "results", limits=limits, jobs=jobs,
                       on_start=on_start, on_result=on_result, on_begin=on_begin)


DEMO_DATE = (2024, 1, 1, 0, 0, 0)  # the zipped student's files' date: the same at every run


def build_demo_class(target: Path) -> None:
    """The correct sample is the solution and the stub sample the exercise, copied at run time so
    that they never drift; the other samples show typical mistakes."""
    target.mkdir(parents=True)
    course = active_course()
    for student, root in (("ada_correct", course.solutions_dir),
                          ("ben_stub", course.exercises_dir)):
        folder = target / student
        folder.mkdir()
        for exercise in known_exercises():
            file = root / f"{exercise}.py"
            if file.is_file():
                (folder / f"{exercise}.py").write_text(file.read_text(encoding="utf-8"),
                                                        encoding="utf-8")
    samples = course.samples_dir
    for entry in sorted(samples.iterdir() if samples.is_dir() else [], key=lambda e: e.name):
        if entry.is_dir() and not entry.name.startswith(("_", ".")):
            copy_tree(entry, target / entry.name)
    files = {e: course.solutions_dir / f"{e}.py" for e in known_exercises()}
    solutions = {e: f.read_text(encoding="utf-8") for e, f in files.items() if f.is_file()}
    # One student hands in a zip, as a learning platform would export it ...
    zipped = target / "gus_zipped"
    zipped.mkdir()
    # Members of a fixed date: stamped with the time the zip is made, it would differ at every
    # run and every rerun of the demo would grade this student again (so would random cell ids
    # the notebook's student).
    with zipfile.ZipFile(zipped / "submission.zip", "w") as z:
        for exercise, source in solutions.items():
            z.writestr(zipfile.ZipInfo(f"hw/{exercise}.py", date_time=DEMO_DATE), source)
    # ... and one works in Jupyter: magics, shell lines and a scratch cell that raises.
    for exercise, source in solutions.items():
        path = target / "eve_notebook" / "hw1" / f"{exercise}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(demo_notebook(source), encoding="utf-8")


def demo_notebook(source: str) -> str:
    """A notebook holding `source` one top-level block per cell, as students write them."""
    blocks = [b for b in source.split("\n\n\n") if b.strip()]
    cells = [nbformat.v4.new_markdown_cell("# Homework\nMy solutions, one function per cell."),
             nbformat.v4.new_code_cell("%matplotlib inline\n!pip install numpy")]
    cells += [nbformat.v4.new_code_cell(b.strip()) for b in blocks]
    cells.append(nbformat.v4.new_code_cell(
        "# scratch: trying things out\nprint('checking my work')\n"
        "raise RuntimeError('this scratch cell is unfinished')"))
    for number, cell in enumerate(cells):  # nbformat draws random ids: see DEMO_DATE
        cell.id = f"cell-{number}"
    return nbformat.writes(nbformat.v4.new_notebook(cells=cells))


def copy_tree(source, target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    for entry in source.iterdir():
        if entry.name.startswith((".", "__")):
            continue
        if entry.is_dir():
            copy_tree(entry, target / entry.name)
        else:
            (target / entry.name).write_bytes(entry.read_bytes())



def main(args: argparse.Namespace) -> int:
    progress = Progress()
    try:
        summary = demo(out=args.out, jobs=args.jobs, on_start=progress.start,
                       on_result=progress.result,
                       on_begin=lambda: print(f"Grading the sample class in {args.out} ...",
                                              flush=True))
    finally:
        progress.close()
    print(f"Done. Open the class index: {summary.index}")
    return 1 if summary.failures else 0
