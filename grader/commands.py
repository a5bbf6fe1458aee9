"""One function per command, with keyword arguments; `grader.cli` only parses and prints.

Problems with the *user's* request (no such path, nothing to grade) raise `UsageError`; problems
with a *submission* never raise: they end up in that submission's results.
"""

from __future__ import annotations

import logging
import shutil
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import nbformat

import grader
from grader.exports import grades_csv, write_atomic, write_json
from grader.models import Submission, SubmissionResult
from grader.registry import known_exercises
from grader.report import render_index, render_report
from grader.runner import run_checks
from grader.submission import load_submission, student_id_for
from grader.worker.client import Zygote
from grader.worker.limits import WorkerLimits

log = logging.getLogger("torchgrade")


class UsageError(Exception):
    """The command cannot run as asked; the message is one line for the user."""


@dataclass
class GradeSummary:
    out: Path
    results: list[SubmissionResult] = field(default_factory=list)
    exercises: list[str] = field(default_factory=list)

    @property
    def index(self) -> Path:
        return self.out / "index.html"


def find_students(submissions: Path) -> list[tuple[str, Path]]:
    """(student id, path) for each student folder or .zip directly inside `submissions`."""
    if not submissions.exists():
        raise UsageError(f"{submissions}: no such folder")
    if not submissions.is_dir():
        raise UsageError(f"{submissions} is not a folder (use `torchgrade check` for one file)")
    students: dict[str, Path] = {}
    for entry in sorted(submissions.iterdir()):
        if entry.name.startswith(".") or entry.name in ("__MACOSX", "__pycache__"):
            continue
        if entry.is_dir() or entry.suffix == ".zip":
            sid = student_id_for(entry)
            if sid in students:
                sid = entry.name
            students[sid] = entry
    if not students:
        raise UsageError(f"{submissions} holds no student folders (one folder or .zip per student)")
    return list(students.items())


def grade(submissions: Path, *, out: Path, exercises: list[str] | None = None,
          limits: WorkerLimits | None = None,
          on_result: Callable[[SubmissionResult], None] | None = None) -> GradeSummary:
    """Grade every student in `submissions`; write per-student results and reports, the class
    index and the CSV gradebook into `out`."""
    submissions, out = Path(submissions), Path(out)
    students = find_students(submissions)
    chosen = _chosen_exercises(exercises)
    loaded = [_load(path, sid, known_exercises()) for sid, path in students]
    if exercises is None:
        found = {name for sub in loaded for name in sub.modules}
        chosen = [e for e in chosen if e in found] or chosen
    summary = GradeSummary(out=out, exercises=chosen)
    out.mkdir(parents=True, exist_ok=True)
    with Zygote() as zygote:
        warn_isolation(zygote)
        for sub in loaded:
            result = grade_one(sub, exercises=chosen, limits=limits, zygote=zygote)
            write_outputs(result, out)
            summary.results.append(result)
            if on_result is not None:
                on_result(result)
    write_class_outputs(summary)
    return summary


def _chosen_exercises(exercises: list[str] | None) -> list[str]:
    known = known_exercises()
    if exercises is None:
        return known
    unknown = [e for e in exercises if e not in known]
    if unknown:
        raise UsageError(f"unknown exercise {unknown[0]!r}; known: {', '.join(known)}")
    return list(exercises)


def _load(path: Path, student: str, exercises: list[str]) -> Submission:
    try:
        return load_submission(path, exercises=exercises, student=student)
    except Exception as exc:  # noqa: BLE001 - a submission must never stop the batch
        log.exception("torchgrade: could not read %s", path)
        return Submission(student=student, root=str(path),
                          notes=[f"the submission could not be read: {type(exc).__name__}: {exc}"])


def grade_one(submission: Submission, *, exercises: list[str], limits: WorkerLimits | None,
              zygote: Zygote) -> SubmissionResult:
    """Run the checks; if the grader itself fails, the result says so instead of vanishing."""
    try:
        return run_checks(submission, exercises=exercises, limits=limits, zygote=zygote)
    except Exception as exc:  # noqa: BLE001
        log.exception("torchgrade: grading %s failed", submission.student)
        return SubmissionResult(
            student=submission.student, grader_version=grader.__version__,
            notes=[f"the grader failed on this submission ({type(exc).__name__}); this is not "
                   "the student's fault: please report it"])


def write_outputs(result: SubmissionResult, out: Path) -> Path:
    folder = out / result.student
    write_json(result, folder / "results.json")
    write_atomic(folder / "report.html", render_report(result))
    return folder / "report.html"


def write_class_outputs(summary: GradeSummary) -> None:
    write_atomic(summary.out / "index.html", render_index(summary.results, summary.exercises))
    write_atomic(summary.out / "grades.csv", grades_csv(summary.results, summary.exercises))


def check(path: Path, *, out: Path, exercises: list[str] | None = None,
          limits: WorkerLimits | None = None) -> tuple[SubmissionResult, Path]:
    """Grade one submission (a file or a folder); returns its result and report path."""
    path = Path(path)
    if not path.exists():
        raise UsageError(f"{path}: no such file or folder")
    chosen = _chosen_exercises(exercises)
    submission = load_submission(path, exercises=chosen)
    if exercises is None:
        chosen = [e for e in chosen if e in submission.modules]
        if not chosen:
            names = ", ".join(f"{e}.py" for e in known_exercises())
            raise UsageError(f"no exercise file found in {path} (expected one of {names}, "
                             "or the same names as .ipynb)")
    with Zygote() as zygote:
        warn_isolation(zygote)
        result = grade_one(submission, exercises=chosen, limits=limits, zygote=zygote)
    return result, write_outputs(result, Path(out))


def warn_isolation(zygote: Zygote) -> None:
    if zygote.isolation != "full":
        log.warning("torchgrade: warning: worker isolation is %s on this machine; missing: %s. "
                    "See 'Isolation levels' in the README.", zygote.isolation, zygote.missing)


# --------------------------------------------------------------------------- demo

def demo(*, out: Path, limits: WorkerLimits | None = None,
         on_result: Callable[[SubmissionResult], None] | None = None) -> GradeSummary:
    """Assemble the bundled sample class under `out/submissions` and grade it into `out/results`."""
    out = Path(out)
    submissions = out / "submissions"
    if submissions.exists():
        shutil.rmtree(submissions)
    build_demo_class(submissions)
    return grade(submissions, out=out / "results", limits=limits, on_result=on_result)


def build_demo_class(target: Path) -> None:
    """The correct sample is the solution and the stub sample the exercise, copied at run time so
    that they never drift; the other samples show typical mistakes."""
    target.mkdir(parents=True)
    for student, package in (("ada_correct", "grader.solutions"), ("ben_stub", "grader.exercises")):
        folder = target / student
        folder.mkdir()
        for exercise in known_exercises():
            source = resources.files(package) / f"{exercise}.py"
            if source.is_file():
                (folder / f"{exercise}.py").write_text(source.read_text(encoding="utf-8"),
                                                        encoding="utf-8")
    samples = resources.files("grader.samples")
    for entry in sorted(samples.iterdir(), key=lambda e: e.name):
        if entry.is_dir() and not entry.name.startswith(("_", ".")):
            _copy_tree(entry, target / entry.name)
    solutions = {e: (resources.files("grader.solutions") / f"{e}.py") for e in known_exercises()}
    solutions = {e: f.read_text(encoding="utf-8") for e, f in solutions.items() if f.is_file()}
    # One student hands in a zip, as a learning platform would export it ...
    zipped = target / "gus_zipped"
    zipped.mkdir()
    with zipfile.ZipFile(zipped / "submission.zip", "w") as z:
        for exercise, source in solutions.items():
            z.writestr(f"hw/{exercise}.py", source)
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
    return nbformat.writes(nbformat.v4.new_notebook(cells=cells))


def _copy_tree(source, target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    for entry in source.iterdir():
        if entry.name.startswith((".", "__")):
            continue
        if entry.is_dir():
            _copy_tree(entry, target / entry.name)
        else:
            (target / entry.name).write_bytes(entry.read_bytes())
