"""`torchgrade similarity CLASS --out OUT`: which students handed in the same work, per
exercise, with the course's starter code left out (`grader.similarity`); OUT/similarity.csv
and OUT/similarity.html, linked from OUT/index.html when OUT holds a graded class.

CLASS is read by `grade`'s intake (the same student ids, the same file per exercise, the same
refusals); no student code runs. Bug hunts are out of scope (said, not compared): their script
is the starter code and most fixes are the same few lines.
"""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from grader.commands.common import UsageError
from grader.intake.plan import plan_of
from grader.running.pool import default_jobs
from grader.course.bughunt import is_bughunt
from grader.course.folder import active_course, course_text
from grader.course.registry import known_exercises
from grader.intake.files import class_hard_links, own_links
from grader.intake.lms import STAGING
from grader.intake.students import (check_folders, class_students, download_layout,
                                   is_output_folder, read_class)
from grader.intake.submission import (INDEX, OUT_MARKER, SIMILARITY_CSV, SIMILARITY_PAGE,
                                     exercises_in, load_quietly)
from grader.models import ModuleSource
from grader.outputs.similarity import (MAX_PAGE_PAIRS, Page, PairView, file_view,
                                       render_similarity, similarity_csv)
from grader.outputs.writing import OutLock, write_atomic
from grader.similarity.fingerprints import INSTALL, LIBRARY, library_missing
from grader.similarity.compare import (MANY_SHARED, MIN_SHARED, THRESHOLD, Own, Pair, Starter,
                                       compare_class, own_work, sides)

log = logging.getLogger("torchgrade")


@dataclass
class SimilaritySummary:
    out: Path
    students: int = 0
    exercises: list[str] = field(default_factory=list)
    out_of_scope: list[str] = field(default_factory=list)  # bug hunts asked for or found
    pairs: list[Pair] = field(default_factory=list)         # as in the CSV
    notes: list[str] = field(default_factory=list)          # files not compared, and why
    indexed: bool = False   # index.html was rebuilt to link the page
    seconds: float = 0.0

    @property
    def flagged(self) -> list[Pair]:
        return [p for p in self.pairs if p.flagged]


def similarity(submissions: Path, *, out: Path, exercises: list[str] | None = None,
               lms: str | None = None, jobs: int | None = None) -> SimilaritySummary:
    """Compare every pair of students' files of each exercise (see `grader.similarity`) and
    write OUT/similarity.csv and OUT/similarity.html; rebuild OUT/index.html to link the page
    when OUT holds a graded class. UsageError for a CLASS `grade` would refuse, an unknown
    exercise, or an OUT a `torchgrade grade` run is writing into. A file that cannot be read or
    parsed is a note, never a failure. Memory: the class's fingerprints (a few kB per file)
    plus one row of counts at a time (`grader.similarity.compare`). `jobs`: processes that
    read and fingerprint the files (default: one per core)."""
    started = time.monotonic()
    if library_missing():
        raise UsageError(f"torchgrade similarity needs {LIBRARY}, which the `similarity` extra "
                         f"installs: {INSTALL}")
    submissions, out = Path(submissions), Path(out)
    check_folders(submissions, out)
    layout = download_layout(submissions, lms)
    plan = plan_of(None, exercises)
    found = read_class(submissions, layout)
    summary = SimilaritySummary(out=out)
    try:
        lock = OutLock(out).__enter__()
    except BlockingIOError:
        raise UsageError(f"{out} is being written by a `torchgrade grade` run: run "
                         "`torchgrade similarity` once it has finished") from None
    try:
        # (OUT is torchgrade's from now on: a `grade` into it later takes it as its own)
        write_atomic(out / OUT_MARKER, "This folder holds the results of `torchgrade`.\n")
        students = class_students(found, out / STAGING)
        links = class_hard_links(students)
        if plan is not None:
            wanted = plan.exercise_names
        else:  # those handed in, by file names only (as `grade` finds them)
            known = known_exercises()
            present = set().union(*(_holds(sid, path, known, links) for sid, path in students))
            wanted = [e for e in known if e in present]
        summary.out_of_scope = [e for e in wanted if is_bughunt(e)]
        chosen = [e for e in wanted if not is_bughunt(e)]
        summary.exercises, summary.students = chosen, len(students)
        starters = {e: Starter.of(e, course_text(active_course().stub(e))) for e in chosen}
        prints: dict[str, dict[str, np.ndarray]] = {e: {} for e in chosen}
        where: dict[tuple[str, str], Path] = {}
        tasks = [(sid, path, sorted(links.get(sid, set()))) for sid, path in students]
        for (sid, path, _), read in zip(tasks, _read_all(tasks, chosen, starters, jobs)):
            summary.notes += read.notes
            for exercise, fingerprints in read.prints.items():
                prints[exercise][sid] = fingerprints
                where[sid, exercise] = path
        for exercise in chosen:
            summary.pairs += compare_class(exercise, prints.pop(exercise))
        summary.pairs.sort(key=lambda p: (-p.similarity, -p.shared, p.exercise, p.a, p.b))
        write_atomic(out / SIMILARITY_CSV, similarity_csv(summary.pairs))
        views = [_view(p, where, starters[p.exercise], links)
                 for p in summary.flagged[:MAX_PAGE_PAIRS]]
        write_atomic(out / SIMILARITY_PAGE, render_similarity(Page(
            title=f"torchgrade similarity: {submissions.name}", views=views,
            flagged=len(summary.flagged), exercises=chosen, students=len(students),
            threshold=THRESHOLD, min_shared=MIN_SHARED, many_shared=MANY_SHARED,
            notes=summary.notes,
            out_of_scope=summary.out_of_scope)))
    finally:
        lock.__exit__(None, None, None)
    summary.indexed = _link_from_index(out)
    summary.seconds = time.monotonic() - started
    return summary


@dataclass
class StudentPrints:
    """One student's files, as the comparison keeps them: each exercise's own fingerprints,
    and a note for each file that could not be compared."""

    prints: dict[str, np.ndarray] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


# What a pool's processes read each student with (set before they fork: never pickled).
_work: tuple[list[str], dict[str, Starter]] = ([], {})
POOL_MIN = 64  # students: a smaller class is read in this process (a pool costs more)


def _read_all(tasks: list[tuple[str, Path, list]], chosen: list[str],
              starters: dict[str, Starter], jobs: int | None) -> Iterator[StudentPrints]:
    """Each task's student read and fingerprinted, in order: with `jobs` processes (default:
    one per core) for a class of POOL_MIN students or more. No student code runs in them:
    they parse and hash, so the parallelism is only for speed."""
    global _work
    _work = (chosen, starters)
    jobs = min(jobs or default_jobs(), 64)
    if jobs < 2 or len(tasks) < POOL_MIN:
        yield from map(_read_student, tasks)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("fork")) as pool:
        yield from pool.map(_read_student, tasks, chunksize=8)


def _read_student(task: tuple[str, Path, list]) -> StudentPrints:
    sid, path, links = task
    chosen, starters = _work
    read = StudentPrints()
    for exercise, module in _modules(sid, path, chosen, {sid: links}).items():
        own, note = _own(module, starters[exercise])
        if note is not None:
            read.notes.append(f"{sid}, {exercise}: {note}")
        if own is not None:
            read.prints[exercise] = own.fingerprints()
    return read


def _holds(sid: str, path: Path, wanted: list[str], links: dict) -> set[str]:
    with own_links(links.get(sid, set())):
        return exercises_in(path, wanted)


def _modules(sid: str, path: Path, exercises: list[str], links: dict
             ) -> dict[str, ModuleSource]:
    """The file `grade` would grade for each exercise, read as `grade` reads it."""
    with own_links(links.get(sid, set())):
        return load_quietly(path, sid, exercises).modules


def _source(module: ModuleSource) -> str:
    """The code compared: a .py file's text, a notebook's graded code cells in order."""
    return "\n".join(chunk.code for chunk in module.chunks)


def _own(module: ModuleSource, starter: Starter) -> tuple[Own | None, str | None]:
    if not module.chunks:
        return None, (module.fatal or f"{module.path} holds no code") + " (not compared)"
    own = own_work(_source(module), starter)
    if own.tokens.problem is not None:
        return None, f"{module.path} {own.tokens.problem}"
    return own, None


def _view(pair: Pair, where: dict[tuple[str, str], Path], starter: Starter,
          links: dict) -> PairView:
    """A flagged pair side by side: both files read again (only the flagged pairs' files are
    ever held whole, and only while their view is made)."""
    files = []
    for sid in (pair.a, pair.b):
        module = _modules(sid, where[sid, pair.exercise], [pair.exercise], links)[pair.exercise]
        files.append((module, own_work(_source(module), starter)))
    (left_module, left), (right_module, right) = files
    left_side, right_side = sides(left, right)
    return PairView(pair, file_view(pair.a, left_module.path, _source(left_module), left_side),
                    file_view(pair.b, right_module.path, _source(right_module), right_side))


def _link_from_index(out: Path) -> bool:
    """Rebuild OUT/index.html (it links similarity.html when OUT holds it) when OUT holds a
    graded class; a class being graded right now links it when that run ends."""
    if not (out / INDEX).is_file() or not is_output_folder(out):
        return False
    from grader.commands.index import index

    try:
        index(out)
    except Exception as exc:  # noqa: BLE001 - the page is written: say so, never fail on it
        log.warning("torchgrade: warning: index.html was not rebuilt to link %s (%s: %s); "
                    "`torchgrade index %s` links it", SIMILARITY_PAGE, type(exc).__name__,
                    exc, out)
        return False
    return True


def main(args: argparse.Namespace) -> int:
    summary = similarity(args.submissions, out=args.out, exercises=args.exercises, lms=args.lms,
                         jobs=args.jobs)
    n = len(summary.flagged)
    print(f"Compared {summary.students} students on {', '.join(summary.exercises) or 'nothing'}"
          f" in {summary.seconds:.1f} s: {n} flagged pair{'' if n == 1 else 's'}. "
          f"{summary.out / SIMILARITY_PAGE}")
    for pair in summary.flagged[:10]:
        print(f"  {pair.exercise}: {pair.a} and {pair.b} ({100 * pair.similarity:.0f}%)")
    if n > 10:
        print(f"  ... and {n - 10} more: {summary.out / SIMILARITY_CSV}")
    if summary.out_of_scope:
        print(f"Not compared (bug hunts: the script is everyone's starting point and the fixes "
              f"are the same few lines): {', '.join(summary.out_of_scope)}")
    if summary.notes:
        print(f"{len(summary.notes)} file(s) not compared (listed in the page):")
        for note in summary.notes[:5]:
            print(f"  {note}")
    return 0
