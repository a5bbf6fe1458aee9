"""One function per command, with keyword arguments; `grader.cli` only parses and prints.

Problems with the *user's* request (no such path, nothing to grade) raise `UsageError`; problems
with a *submission* never raise: they end up in that submission's results.
"""

from __future__ import annotations

import importlib
import logging
import os
import shutil
import threading
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import nbformat

import grader
from grader.assignment import (Assignment, AssignmentError, apply_assignment, from_exercises,
                               load_assignment, read_roster, read_timestamp)
from grader.exports import (OUT_MARKER, OutLock, grades_csv, read_json, remove_stale_temp_files,
                            write_atomic, write_submission_outputs)
from grader.files import Inode, class_hard_links, own_links
from grader.fingerprint import fingerprint, grading_digest, submission_digest
from grader.models import NOT_STARTED, Submission, SubmissionResult
from grader.registry import known_exercises
from grader.report import render_index
from grader.submission import (CLASS_FILES, exercises_in, load_quietly, load_submission,
                               safe_id, student_id_for)
from grader.summary import is_grader_failure
from grader.worker.limits import WorkerLimits

if TYPE_CHECKING:
    from grader.bughunt import VariantManifest
    from grader.pool import GradeTask
    from grader.selection import CheckSelection

# Nothing here imports torch at module level: the parent of a bulk run only dispatches, and
# torch's import (~1.5 s of CPU) is paid by the grading processes' fork server instead.

log = logging.getLogger("torchgrade")


class UsageError(Exception):
    """The command cannot run as asked; the message is one line for the user."""


class GraderUnavailable(Exception):
    """The grader itself cannot run (the sandbox does not start): an installation problem."""


@dataclass
class GradeSummary:
    out: Path
    results: list[SubmissionResult] = field(default_factory=list)
    exercises: list[str] = field(default_factory=list)
    assignment: Assignment | None = None
    graded: int = 0          # graded by this run
    up_to_date: int = 0      # skipped: their results.json already had the same fingerprint
    failures: int = 0        # the grader could not grade them (recorded, retried next run)
    seconds: float = 0.0

    @property
    def index(self) -> Path:
        return self.out / "index.html"

    @property
    def full_marks(self) -> int:
        return sum(r.max_score > 0 and r.score == r.max_score for r in self.results)


def find_students(submissions: Path) -> list[tuple[str, Path]]:
    """(student id, path) for each student folder or .zip directly inside `submissions`.

    Ids are `grader.submission.safe_id`s (printable, never a class output's name) and unique:
    a second submission with the same id (alice/ and alice.zip) gets its full name, then `~2`,
    `~3`..."""
    if not submissions.exists():
        raise UsageError(f"{submissions}: no such folder")
    if not submissions.is_dir():
        raise UsageError(f"{submissions} is not a folder (use `torchgrade check` for one file)")
    students: dict[str, Path] = {}
    for entry in sorted(submissions.iterdir()):
        if entry.name in ("__MACOSX", "__pycache__", OUT_MARKER):
            continue
        if entry.name.startswith("."):
            log.warning("torchgrade: warning: %s is not graded (a hidden name: rename it if it "
                        "is a student's)", safe_id(entry.name))
            continue
        if entry.is_symlink():
            # A link would put a folder from outside the class (the solutions, another course)
            # among the students, and make the class's hard-link ownership unsound.
            log.warning("torchgrade: warning: %s is not graded: it is a symbolic link (copy "
                        "the student's folder into %s)", safe_id(entry.name), submissions.name)
            continue
        if entry.is_dir() or entry.suffix == ".zip":
            sid = student_id_for(entry)
            if sid in students:
                sid = safe_id(entry.name)
            base, n = sid, 2
            while sid in students or sid.lower() in CLASS_FILES:
                sid, n = f"{base}~{n}", n + 1
            students[sid] = entry
    if not students:
        raise UsageError(f"{submissions} holds no student folders (one folder or .zip per student)")
    return list(students.items())


def check_folders(submissions: Path, out: Path) -> None:
    """Refuse (UsageError) an OUT that is SUBMISSIONS, lies inside it or holds it (symbolic links
    resolved), and a SUBMISSIONS that is itself a torchgrade output folder: grading result
    folders as students would overwrite every real grade."""
    subs, dest = Path(submissions).resolve(), Path(out).resolve()
    if dest.exists() and not dest.is_dir():
        raise UsageError(f"OUT {out} is a file, not a folder: give a folder for the results")
    if dest == subs:
        raise UsageError(f"OUT {out} is the submissions folder: give another folder for the "
                         "results (e.g. --out results)")
    if subs in dest.parents:
        raise UsageError(f"OUT {out} is inside the submissions folder {submissions}: its result "
                         "folders would be graded as students; put it elsewhere")
    if dest in subs.parents:
        raise UsageError(f"OUT {out} holds the submissions folder {submissions}: put the results "
                         "in a folder of their own")
    if is_output_folder(subs):
        raise UsageError(f"{submissions} is a torchgrade output folder (results of an earlier "
                         "run), not a folder of submissions")


def is_output_folder(folder: Path) -> bool:
    """Whether `folder` was written by `torchgrade grade`: it holds the marker every run writes
    (or, from versions before the marker, both class outputs)."""
    folder = Path(folder)
    return (folder / OUT_MARKER).is_file() or all((folder / name).is_file()
                                                   for name in CLASS_FILES)


def default_jobs() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def grade(submissions: Path, *, out: Path, exercises: list[str] | None = None,
          assignment: Path | None = None, jobs: int | None = None, force: bool = False,
          limits: WorkerLimits | None = None,
          on_start: Callable[[int, int], None] | None = None,
          on_result: Callable[[SubmissionResult], None] | None = None,
          variants: Path | None = None) -> GradeSummary:
    """Grade every student in `submissions` with `jobs` grading processes; write each student's
    results.json, report.html and gradescope.json the moment they are graded, then the class
    index and the CSV gradebook into `out`.

    The exercises are those of `assignment` (a TOML file), else `exercises`, else every exercise
    found in the submissions. A student whose `out/<student>/results.json` already carries this
    grading's fingerprint is not graded again unless `force`. `on_start(total, up_to_date)` is
    called once before grading, `on_result` with every result as it arrives. KeyboardInterrupt
    stops every grading process, writes the class outputs of what was graded, and propagates.
    With `variants` (the manifest `variants()` wrote), each student's bug hunts are scored on
    the faults their own copy holds.
    """
    started = time.monotonic()
    submissions, out = Path(submissions), Path(out)
    check_folders(submissions, out)
    students = find_students(submissions)
    plan = _plan(assignment, exercises)
    if jobs is not None and jobs < 1:
        raise UsageError("-j must be at least 1")
    if plan is None:  # the exercises found in the submissions, by file names only
        known = known_exercises()
        found = set().union(*(exercises_in(path, known) for _, path in students))
        plan = from_exercises([e for e in known if e in found] or known, name=submissions.name)
    chosen = plan.exercise_names
    roster = _roster(plan)
    manifest = read_variants(variants) if variants is not None else None
    scoring = plan.scoring_key()
    if manifest is not None:  # another key, another grading: results are not reused
        scoring += "\nvariants " + manifest.model_dump_json()
    grading = grading_digest(exercises=chosen, scoring=scoring,
                             limits=(limits or WorkerLimits()).model_dump_json())
    summary = GradeSummary(out=out, exercises=chosen, assignment=plan)
    try:
        lock = OutLock(out).__enter__()
    except BlockingIOError:
        raise UsageError(f"{out} is being written by another `torchgrade grade` run") from None
    try:
        remove_stale_temp_files(out)  # left by a run that was killed mid-write
        write_atomic(out / OUT_MARKER, "This folder holds the results of `torchgrade grade`.\n")
        tasks = []
        links = class_hard_links(students)
        for sid, path in students:
            # The parent reads no student file beyond fingerprints (bounded, regular files
            # only): the grading processes load the submissions, in parallel.
            with own_links(links.get(sid, ())):
                mark = fingerprint(submission_digest(path), grading)
            previous = None if force else _previous(out / sid, mark)
            if previous is not None:
                summary.results.append(previous)
                continue
            tasks.append(_task(sid, mark, path, links.get(sid, set())))
        summary.up_to_date = len(summary.results)
        if on_start is not None:
            on_start(len(students), summary.up_to_date)

        def collect(result: SubmissionResult) -> None:
            summary.results.append(result)
            summary.graded += 1
            summary.failures += is_grader_failure(result)
            if on_result is not None:
                on_result(result)

        from grader.pool import PoolBroken, PoolSettings, grade_in_pool

        settings = PoolSettings(out=out, exercises=chosen, assignment=plan, limits=limits,
                                variants=manifest, submissions=submissions)
        try:
            grade_in_pool(tasks, settings=settings, jobs=min(jobs or default_jobs(), 64),
                          on_result=collect, on_isolation=isolation_warning)
        except PoolBroken as exc:
            raise GraderUnavailable(str(exc)) from None
        finally:
            remove_stale_temp_files(out)
            summary.seconds = time.monotonic() - started
            # On Ctrl-C a grading process may have written a result whose message never
            # reached us: what is on disk with this grading's fingerprint counts too.
            collected = {r.student for r in summary.results}
            summary.results += [done for t in tasks if t.student not in collected
                                and (done := _previous(out / t.student,
                                                       t.fingerprint)) is not None]
            if summary.results:  # also on Ctrl-C: the index of what is graded so far
                write_class_outputs(summary, roster=roster)
    finally:
        lock.__exit__(None, None, None)
    return summary


def _plan(assignment: Path | None, exercises: list[str] | None) -> Assignment | None:
    """The assignment asked for: a file, a list of exercises, or None (those found)."""
    if assignment is not None and exercises is not None:
        raise UsageError("give either --assignment or --exercises, not both")
    if assignment is not None:
        try:
            plan = load_assignment(assignment)
        except AssignmentError as exc:
            raise UsageError(str(exc)) from None
        _chosen_exercises(plan.exercise_names)
        return plan
    if exercises is not None:
        return from_exercises(_chosen_exercises(exercises))
    return None


def _roster(plan: Assignment) -> dict:
    if plan.roster is None:
        return {}
    try:
        return read_roster(plan.roster)
    except AssignmentError as exc:
        raise UsageError(str(exc)) from None


def _previous(folder: Path, mark: str) -> SubmissionResult | None:
    """The student's earlier result if it was graded exactly as this run would grade it (its
    report is written before it, so it exists too)."""
    try:
        result = read_json(folder / "results.json")
    except (OSError, ValueError):
        return None
    return result if result.fingerprint == mark and (folder / "report.html").is_file() else None


def _task(student: str, mark: str, path: Path, links: set[Inode]) -> "GradeTask":
    from grader.pool import GradeTask

    return GradeTask(student=student, path=path, fingerprint=mark, own_links=sorted(links),
                     submitted_at=read_timestamp(path) if path.is_dir() else None)


def _chosen_exercises(exercises: list[str] | None) -> list[str]:
    known = known_exercises()
    if exercises is None:
        return known
    if not exercises:
        raise UsageError("no exercise named")
    unknown = [e for e in exercises if e not in known]
    if unknown:
        raise UsageError(f"unknown exercise {unknown[0]!r}; known: {', '.join(known)}")
    return list(exercises)


def _load(path: Path, student: str, exercises: list[str]) -> Submission:
    return load_quietly(path, student, exercises)


def grade_one(submission: Submission, *, exercises: list[str], limits: WorkerLimits | None,
              zygote, select: CheckSelection | None = None) -> SubmissionResult:
    """Run the checks in a fresh pytest session; if the grader itself fails, the result says
    so instead of vanishing. `select` runs only some checks (see `grader.selection`)."""
    from grader.runner import run_checks

    try:
        return run_checks(submission, exercises=exercises, limits=limits, zygote=zygote,
                          select=select)
    except Exception as exc:  # noqa: BLE001
        log.exception("torchgrade: grading %s failed", submission.student)
        return SubmissionResult(
            student=submission.student, grader_version=grader.__version__,
            notes=[f"the grader failed on this submission ({type(exc).__name__}); this is not "
                   "the student's fault: please report it"])


def write_outputs(result: SubmissionResult, out: Path) -> Path:
    return write_submission_outputs(result, out)


def write_class_outputs(summary: GradeSummary, *, roster: dict | None = None) -> None:
    """index.html and grades.csv; a result whose text cannot be written as it is (it should
    not happen: each was written once already) is escaped rather than lose the class files."""
    try:
        _write_class_outputs(summary, summary.results, roster)
    except (ValueError, UnicodeError):
        from grader.pool import escaped

        log.exception("torchgrade: writing the class outputs failed; retrying with escaped text")
        _write_class_outputs(summary, [escaped(r) for r in summary.results], roster)


def _write_class_outputs(summary: GradeSummary, results: list[SubmissionResult],
                         roster: dict | None) -> None:
    plan = summary.assignment
    name = plan.name if plan else ""
    write_atomic(summary.out / "index.html",
                 render_index(results, summary.exercises, assignment=name,
                              title=f"torchgrade results: {name}" if name else "torchgrade results"))
    write_atomic(summary.out / "grades.csv",
                 grades_csv(results, summary.exercises, assignment=name,
                            duedate=plan.due if plan else None, roster=roster))


def _sandbox():
    """A started worker parent, as a context manager (GraderUnavailable if it cannot start)."""
    from grader.worker.client import Zygote, ZygoteError

    try:
        return Zygote()
    except ZygoteError as exc:
        raise GraderUnavailable(str(exc)) from None


def check(path: Path, *, out: Path, exercises: list[str] | None = None,
          limits: WorkerLimits | None = None) -> tuple[SubmissionResult, Path]:
    """Grade one submission (a file or a folder); returns its result and report path."""
    submission, chosen = _one_submission(path, exercises)
    with _sandbox() as zygote:
        warn_isolation(zygote)
        result = grade_one(submission, exercises=chosen, limits=limits, zygote=zygote)
    return result, write_outputs(result, Path(out))


def _one_submission(path: Path, exercises: list[str] | None) -> tuple[Submission, list[str]]:
    """The submission at `path` and the exercises to grade in it: `exercises`, or those found."""
    path = Path(path)
    if not path.exists():
        raise UsageError(f"{path}: no such file or folder")
    chosen = _chosen_exercises(exercises)
    with own_links(None):  # a student's own files, on their own machine
        submission = load_submission(path, exercises=chosen)
    if exercises is None:
        chosen = [e for e in chosen if e in submission.modules]
        if not chosen:
            names = ", ".join(f"{e}.py" for e in known_exercises())
            raise UsageError(f"no exercise file found in {path} (expected one of {names}, "
                             "or the same names as .ipynb)")
    return submission, chosen


def warn_isolation(zygote) -> None:
    isolation_warning(zygote.isolation, zygote.missing)


def isolation_warning(isolation: str, missing) -> None:
    if isolation != "full":
        log.warning("torchgrade: warning: worker isolation is %s on this machine; missing: %s. "
                    "See 'Isolation levels' in the README.", isolation, missing)


# --------------------------------------------------------------------------- Gradescope


def gradescope_bundle(*, out: Path, assignment: Path | None = None,
                      exercises: list[str] | None = None) -> Path:
    """Build a Gradescope autograder zip for the assignment (default: every exercise)."""
    from grader.gradescope import build_bundle

    _full_package_only("gradescope-bundle")
    plan = _plan(assignment, exercises) or from_exercises(known_exercises())
    return build_bundle(Path(out), name=plan.name or "torchgrade",
                        exercises=[(e.name, e.points) for e in plan.exercises])


def gradescope_run(*, root: Path | None = None, assignment: Path | None = None,
                   limits: WorkerLimits | None = None) -> tuple[SubmissionResult, Path]:
    """Inside a Gradescope container: grade ROOT/submission, write ROOT/results/results.json
    in Gradescope's format (and the torchgrade result and report beside it)."""
    from grader.gradescope import autograder_root, to_gradescope, write_results

    root = autograder_root(root)
    folder = root / "submission"
    if not folder.is_dir():
        raise UsageError(f"{folder}: no such folder (is this a Gradescope autograder?)")
    plan = (_plan(assignment, None) if assignment is not None and Path(assignment).exists()
            else from_exercises(known_exercises()))
    started = time.monotonic()
    submission = _load(folder, "submission", plan.exercise_names)
    with _sandbox() as zygote:
        warn_isolation(zygote)
        result = grade_one(submission, exercises=plan.exercise_names, limits=limits,
                           zygote=zygote)
    result = apply_assignment(result, plan)
    result.grading_s = round(time.monotonic() - started, 3)
    path = write_results(to_gradescope(result), root)
    write_json_quietly(result, root / "results")
    return result, path


def write_json_quietly(result: SubmissionResult, folder: Path) -> None:
    """The torchgrade result and report next to Gradescope's file, for staff debugging."""
    try:
        from grader.exports import write_json
        from grader.report import render_report

        write_json(result, folder / "torchgrade-results.json")
        write_atomic(folder / "torchgrade-report.html", render_report(result))
    except OSError:
        log.warning("torchgrade: could not write the torchgrade report next to results.json")


# --------------------------------------------------------------------------- demo

def demo(*, out: Path, limits: WorkerLimits | None = None, jobs: int | None = None,
         on_start: Callable[[int, int], None] | None = None,
         on_result: Callable[[SubmissionResult], None] | None = None) -> GradeSummary:
    """Assemble the bundled sample class under `out/submissions` and grade it into `out/results`."""
    _full_package_only("demo")  # the sample class holds solutions
    out = Path(out)
    submissions = out / "submissions"
    if submissions.exists():
        shutil.rmtree(submissions)
    build_demo_class(submissions)
    return grade(submissions, out=out / "results", limits=limits, jobs=jobs, on_start=on_start,
                 on_result=on_result)


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


# --------------------------------------------------------------------------- bug-hunt variants


def variants(*, roster: Path, seed: int, out: Path) -> Path:
    """Write every student of `roster` (a CSV with a student_id column) their own bug-hunt
    files, `out/<student>/bughunt/<name>.py`, each the fixed script with a deterministic subset
    of the faults applicable to it (same student and seed: same files), and the instructor's
    key `out/manifest.json` (which faults each copy holds). Returns the manifest's path; grade
    with `grade(..., variants=that path)`."""
    from grader import bughunt

    try:
        students = sorted(read_roster(Path(roster)))
    except AssignmentError as exc:
        raise UsageError(str(exc)) from None
    if not students:
        raise UsageError(f"roster {roster}: no student ids")
    bad = [s for s in students if s in (".", "..") or "/" in s or "\\" in s]
    if bad:
        raise UsageError(f"roster {roster}: {bad[0]!r} cannot be a folder name")
    manifest = bughunt.make_manifest(students, seed)
    out = Path(out)
    for student, draws in manifest.students.items():
        for exercise, faults in draws.items():
            path = out / student / manifest.files[exercise]
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, bughunt.render(exercise, faults))
    path = out / "manifest.json"
    write_atomic(path, manifest.model_dump_json(indent=2))
    return path


def read_variants(path: Path) -> "VariantManifest":
    """The variants manifest at `path` (UsageError if it is missing or not one)."""
    from pydantic import ValidationError

    from grader.bughunt import VariantManifest, catalogue_digest, slots_of

    try:
        manifest = VariantManifest.model_validate_json(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError, ValidationError) as exc:
        raise UsageError(f"variants manifest {path}: cannot be read ({str(exc)[:200]})") from None
    for student, draws in manifest.students.items():
        for exercise, faults in draws.items():
            try:
                slots_of(exercise, faults)
            except ValueError as exc:
                raise UsageError(f"variants manifest {path}: {student}: {exc}") from None
    if manifest.catalogue != catalogue_digest():
        log.warning("torchgrade: warning: %s was made from another version of the bug hunts or "
                    "the fault catalogue; the students' copies may not match what is graded", path)
    return manifest


def apply_variants(submission: Submission, manifest: "VariantManifest") -> Submission:
    """Tell each bug-hunt module of `submission` which faults the student's copy holds (a
    student missing from the manifest is graded against the exercise files, with a note)."""
    from grader.bughunt import is_bughunt

    hunts = [e for e in submission.modules if is_bughunt(e)]
    draws = manifest.students.get(submission.student)
    if draws is None:
        if hunts:
            submission.notes.append(f"{submission.student} is not in the bug-hunt variants "
                                    "manifest: graded against the exercise files' faults")
        return submission
    for exercise in hunts:
        if exercise in draws:
            submission.modules[exercise].faults = list(draws[exercise])
    return submission


# --------------------------------------------------------------------------- a student's own check


@dataclass
class CheckedWork:
    """What `torchgrade check` shows: the result of the checks that ran, the reports (one per
    exercise checked; `report` is the first), and the hidden checks that run at grading
    (title, points and targets only)."""

    result: SubmissionResult
    report: Path
    pending: list = field(default_factory=list)
    reports: list[Path] = field(default_factory=list)


def check_work(path: Path, *, out: Path, exercises: list[str] | None = None,
               hidden: bool = False, only: list[str] | None = None,
               limits: WorkerLimits | None = None, zygote=None) -> CheckedWork:
    """A student's (or self-learner's) local check: the visible checks of the exercises found
    in `path` (with `only`: the checks about those functions/classes), and, with `hidden` (the
    full package only), the hidden checks too. Hidden checks left out are listed as pending.
    `zygote`: a running worker parent to use (a notebook's check server keeps one warm)."""
    from grader.edition import hidden_in_release, student_release
    from grader.selection import CheckSelection

    release = student_release()
    if hidden and release is not None:
        raise UsageError("the hidden checks are not part of the student release: they run when "
                         "your work is graded")
    submission, chosen = _one_submission(path, exercises)
    select = CheckSelection(hidden=hidden, targets=only)
    if zygote is not None:
        result = grade_one(submission, exercises=chosen, limits=limits, zygote=zygote,
                           select=select)
    else:
        # The grader's own `import torch` (in grader.runner) overlaps the zygote's start-up.
        warm = threading.Thread(target=importlib.import_module, args=("grader.runner",),
                                daemon=True)
        warm.start()
        with _sandbox() as own:
            if release is None:  # on a student's own machine the warning is only noise
                warn_isolation(own)
            warm.join()
            result = grade_one(submission, exercises=chosen, limits=limits, zygote=own,
                               select=select)
    if only and select.selected == 0:
        graded = ", ".join(chosen)
        raise UsageError(f"no visible check of {graded} is about {', '.join(only)} (give the "
                         "name of a function or class of the exercise)")
    pending = select.pending + hidden_in_release(chosen, set(only) if only else None)
    reports = write_check_reports(result, Path(out), pending)
    return CheckedWork(result=result, report=reports[0], pending=pending, reports=reports)


def write_check_reports(result: SubmissionResult, out: Path, pending: list) -> list[Path]:
    """One report per exercise checked, `out/<exercise>/report.html` titled by the exercise
    (with its results.json and gradescope.json), so that checking one file never overwrites
    the report of another. A bug hunt's report says in a note what its hidden checks are worth
    (the terminal's `bughunt_line`). A result without exercises (the grader failed) is written
    whole, under the submission's name."""
    from grader.bughunt import is_bughunt
    from grader.terminal import bughunt_line

    if not result.exercises:
        return [write_outputs(result, out)]
    reports = []
    for part in result.exercises:
        later = [p for p in pending if p.exercise == part.exercise]
        notes = list(part.notes)
        if later and is_bughunt(part.exercise):
            notes.append(bughunt_line(later))
        one = result.model_copy(update={
            "student": part.exercise,
            "exercises": [part.model_copy(update={"notes": notes})],
            "checks": [c for c in result.checks if c.exercise == part.exercise]})
        reports.append(write_outputs(one, out))
    return reports


# --------------------------------------------------------------------------- release, notebooks


def release(*, out: Path, exercises: list[str] | None = None, force: bool = False):
    """Build the student release into `out` (see `grader.release`); a leak is an error."""
    from grader.release import ReleaseError, build_release

    _full_package_only("release")
    try:
        return build_release(Path(out), exercises=_chosen_exercises(exercises), force=force)
    except ReleaseError as exc:
        raise UsageError(str(exc)) from None


def notebooks(*, out: Path, exercises: list[str] | None = None,
              solutions: bool = False) -> list[Path]:
    """Write one student notebook per exercise into `out`; with `solutions`, answer keys (the
    same notebooks with the reference solutions in the stub cells), for instructors."""
    from grader.notebooks import (exercise_notebook, fill_solutions, solution_path,
                                  visible_targets, write_notebooks)

    _full_package_only("notebooks --solutions" if solutions else "notebooks")  # (release: notebooks/)
    chosen = _chosen_exercises(exercises)
    if not solutions:
        return write_notebooks(Path(out), chosen)
    targets = visible_targets(chosen)
    paths = []
    for exercise in chosen:
        source = solution_path(exercise)
        if source is None:
            raise UsageError(f"no reference solution for {exercise}")
        nb = fill_solutions(exercise_notebook(exercise, checks=targets[exercise]),
                            source.read_text(encoding="utf-8"))
        path = Path(out) / f"{exercise}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(nbformat.writes(nb) + "\n", encoding="utf-8")
        paths.append(path)
    return paths


def _full_package_only(what: str) -> None:
    from grader.edition import student_release

    if student_release() is not None:
        raise UsageError(f"`torchgrade {what}` is not part of the student release")


# --------------------------------------------------------------------------- solutions


def solution(exercise: str, *, attempts: Path = Path("torchgrade-check"),
             i_have_tried: bool = False) -> str:
    """The reference solution of `exercise`, for a self-learner who has tried it: refused
    unless `attempts` (where `torchgrade check` writes) holds a graded attempt at it, one in
    which some check got further than "not implemented yet", or `i_have_tried`."""
    from grader.notebooks import solution_path

    _full_package_only("solution")
    exercise = _chosen_exercises([exercise])[0]
    path = solution_path(exercise)
    if path is None:
        raise UsageError(f"there is no reference solution of {exercise}")
    if not i_have_tried and not tried(exercise, Path(attempts)):
        raise UsageError(f"try {exercise} first: fill in its stub and run `torchgrade check "
                         f"{exercise}.py` (its results in {attempts} unlock the solution), or "
                         "say --i-have-tried")
    return path.read_text(encoding="utf-8")


def tried(exercise: str, attempts: Path) -> bool:
    """Whether `attempts` holds a result in which some check of `exercise` ran real code (for
    a bug hunt, a hidden check: its visible checks pass on the untouched script too)."""
    from grader.bughunt import is_bughunt
    from grader.exports import read_json

    for path in sorted(Path(attempts).glob("*/results.json")):
        try:
            result = read_json(path)
        except (OSError, ValueError):
            continue
        for c in result.checks:
            if is_bughunt(exercise) and c.visibility == "visible":
                continue
            if c.exercise == exercise and (c.status == "passed" or c.reason not in NOT_STARTED):
                return True
    return False
