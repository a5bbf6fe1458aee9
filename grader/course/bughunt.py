"""Bug hunts: faulty copies of fixed training scripts, per-student variants, what is scored.

A bug hunt (`[[bughunt]]` in `faults.toml`) is a fixed script, `solutions/bughunt/<name>.py`,
and the faults its exercise file holds. Each fault that can be seeded into it carries its wrong
code as textual replacements of the fixed script (`[[fault.inject]]`), and names the check
that scores it there. So:

- the exercise file `exercises/bughunt/<name>.py` is `render(exercise)`: the fixed script with
  its seeded faults injected (a test keeps the file equal to it; `python -m grader.course.bughunt`
  rewrites it);
- a student's variant is `render(exercise, faults)` for a subset of the faults applicable to
  the script, drawn by `draw_variant(exercise, student, seed)` (same student and seed, same
  faults) and recorded in a manifest the instructor keeps (`VariantManifest`);
- grading scores the checks of the faults a copy holds (`scored_checks`); every other check of
  the script still runs as a guard, and counts only if it fails (the student broke something
  that worked): `select_scored` applies that to a submission's check results.

Everything here is plain functions of the catalogue and the fixed scripts, without I/O except
reading those (writing variants is `grader.commands.variants`).
"""

from __future__ import annotations

import hashlib
import random
import sys
from collections.abc import Set as AbstractSet
from pathlib import Path, PurePosixPath

from pydantic import BaseModel, Field

from grader.course.folder import BUGHUNT_PREFIX, active_course
from grader.course.faults import BugHunt, bughunts, catalogue, load
from grader.models import CheckResult, Submission

PREFIX = BUGHUNT_PREFIX
FOLDER = "bughunt"
HOLDS_FIXED = "This copy holds no faults: it is the reference solution."


def is_bughunt(exercise: str) -> bool:
    return exercise.startswith(PREFIX)


def hunt(exercise: str) -> BugHunt:
    try:
        return bughunts()[exercise]
    except KeyError:
        raise ValueError(f"{exercise} is not a bug hunt") from None


def student_path(exercise: str) -> str:
    """Where the student's file lives in a submission, e.g. "bughunt/mnist.py"."""
    return hunt(exercise).path


def exercise_for(relpath: str, wanted: list[str]) -> str | None:
    """The exercise a file of a submission is for: its stem, or `bughunt_<stem>` for a file in
    a folder named `bughunt` (e.g. hw1/bughunt/mnist.py)."""
    path = PurePosixPath(relpath)
    if path.stem in wanted:
        return path.stem
    if path.parent.name == FOLDER and PREFIX + path.stem in wanted:
        return PREFIX + path.stem
    return None


def fixed_source(exercise: str) -> str:
    return (active_course().solutions_dir / hunt(exercise).path).read_text(encoding="utf-8")


def slots(exercise: str) -> dict[str, list[str]]:
    """check name -> the faults it scores in this bug hunt (alternatives of one another), in
    catalogue order."""
    out: dict[str, list[str]] = {}
    for fault in load().fault:
        for inj in fault.inject:
            if inj.exercise == exercise:
                out.setdefault(inj.check, []).append(fault.id)
    return out


def scores_seeded_fault(exercise: str, check_name: str) -> bool:
    """Whether a bug hunt's check looks for a fault seeded in the exercise file."""
    return any(f in hunt(exercise).seeded for f in slots(exercise).get(check_name, []))


def applicable(exercise: str) -> list[str]:
    """Every fault that can be seeded into this bug hunt."""
    return [fid for faults in slots(exercise).values() for fid in faults]


def holds_line(n: int) -> str:
    return (f"This copy holds {n} fault{'' if n == 1 else 's'}: find and fix "
            f"{'it' if n == 1 else 'them'}.")


def inject(source: str, exercise: str, faults: list[str]) -> str:
    """`source` (the fixed script) with `faults` injected, and its docstring saying how many it
    holds. Every replacement must find its text exactly once; two faults scored by the same
    check cannot be combined."""
    by_id = catalogue()
    chosen = slots_of(exercise, faults)
    if len(set(chosen.values())) != len(chosen):
        raise ValueError(f"{exercise}: {sorted(faults)} holds two alternatives of one check")
    masked = masked_pairs(faults)
    if masked:
        raise ValueError(f"{exercise}: {masked[0][1]} would hide {masked[0][0]}")
    if source.count(HOLDS_FIXED) != 1:
        raise ValueError(f"{exercise}: the fixed script must say {HOLDS_FIXED!r} once")
    source = source.replace(HOLDS_FIXED, holds_line(len(faults)))
    for fid in faults:
        injection = next(i for i in by_id[fid].inject if i.exercise == exercise)
        for old, new in injection.replace:
            found = source.count(old)
            if found != 1:
                raise ValueError(f"{exercise}: {fid} replaces text found {found} times "
                                 f"(expected once): {old!r}")
            source = source.replace(old, new)
    return source


def slots_of(exercise: str, faults: list[str]) -> dict[str, str]:
    """fault id -> the check that scores it in `exercise` (ValueError for a fault that cannot
    be seeded there)."""
    out = {}
    for fid in faults:
        fault = catalogue().get(fid)
        injection = next((i for i in fault.inject if i.exercise == exercise), None) \
            if fault else None
        if injection is None:
            raise ValueError(f"{fid} cannot be seeded into {exercise}")
        out[fid] = injection.check
    return out


def masked_pairs(faults: list[str]) -> list[tuple[str, str]]:
    """(fault, fault hiding it) pairs among `faults`: a copy must not hold both."""
    by_id = catalogue()
    return [(f, m) for f in faults for m in by_id[f].masked_by if m in faults]


def render(exercise: str, faults: list[str] | None = None) -> str:
    """The student's copy: the fixed script with `faults` (default: the seeded ones)."""
    return inject(fixed_source(exercise), exercise,
                  hunt(exercise).seeded if faults is None else faults)


def scored_checks(exercise: str, faults: list[str]) -> set[str]:
    """Ids of the checks that carry the points of `faults` in `exercise`."""
    return {f"{exercise}.{check}" for check in slots_of(exercise, faults).values()}


def draw_variant(exercise: str, student: str, seed: int) -> list[str]:
    """A deterministic subset of the faults applicable to `exercise` for `student`: as many as
    the exercise file holds, from different checks, one alternative each. The same student and
    seed always draw the same faults; faults are listed in catalogue order."""
    digest = hashlib.sha256(f"{seed}\0{student}\0{exercise}".encode()).digest()
    rng = random.Random(int.from_bytes(digest[:8], "big"))
    table = slots(exercise)
    while True:  # draws where one fault hides another are drawn again (rare)
        checks = rng.sample(sorted(table), k=min(len(hunt(exercise).seeded), len(table)))
        chosen = {rng.choice(table[check]) for check in checks}
        if not masked_pairs(list(chosen)):
            return [fid for fid in applicable(exercise) if fid in chosen]


class VariantManifest(BaseModel):
    """Which faults each student's bug-hunt copies hold (the instructor's key)."""

    seed: int
    catalogue: str = Field(description="digest of the fixed scripts and the catalogue the "
                           "copies were made from")
    files: dict[str, str] = Field(description="exercise -> the student's file path")
    students: dict[str, dict[str, list[str]]] = Field(description="student -> exercise -> "
                                                      "fault ids")


def apply_variants(submission: Submission, manifest: VariantManifest) -> Submission:
    """Tell each bug-hunt module of `submission` which faults the student's copy holds (a
    student missing from the manifest is graded against the exercise files, with a note)."""
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


def catalogue_digest() -> str:
    faults = active_course().faults_file
    h = hashlib.sha256(faults.read_bytes() if faults.is_file() else b"")
    for exercise in sorted(bughunts()):
        h.update(fixed_source(exercise).encode())
    return h.hexdigest()[:16]


def make_manifest(students: list[str], seed: int) -> VariantManifest:
    """Every student's draw for every bug hunt."""
    exercises = sorted(bughunts())
    return VariantManifest(
        seed=seed, catalogue=catalogue_digest(),
        files={e: student_path(e) for e in exercises},
        students={s: {e: draw_variant(e, s, seed) for e in exercises} for s in students})


def select_scored(checks: list[CheckResult], faults_of: dict[str, list[str] | None],
                  broken: AbstractSet[str] = frozenset()) -> list[CheckResult]:
    """The check results that count. For each bug hunt in `faults_of` (exercise -> the faults
    the student's copy holds; None for the exercise file's seeded faults): the checks scoring
    those faults, plus any other check of the script that failed, unless the script could not
    run at all (exercise in `broken`: then its guards say nothing); and its visible checks
    (0 points: what the script's contract promises, shown whether they pass or fail). Other
    exercises: all."""
    keep_all = {e for e in faults_of}
    scored: set[str] = set()
    for exercise, faults in faults_of.items():
        scored |= scored_checks(exercise, hunt(exercise).seeded if faults is None else faults)
    out = []
    for c in checks:
        # Visible checks are what a student ran before handing in: always shown.
        if (c.exercise not in keep_all or c.id in scored or c.id.endswith(".collection")
                or c.visibility == "visible"):
            out.append(c)
        elif c.status != "passed" and c.exercise not in broken:
            out.append(c)
    return out


def write_exercise_files(root: Path) -> list[Path]:
    """Rewrite the course's `root/exercises/bughunt/*.py` from the fixed scripts (for
    developers)."""
    written = []
    for exercise in sorted(bughunts()):
        path = root / "exercises" / hunt(exercise).path
        path.write_text(render(exercise), encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":  # python -m grader.course.bughunt [COURSE]: regenerate the stubs
    for p in write_exercise_files(Path(sys.argv[1]) if len(sys.argv) > 1
                                  else active_course().root):
        print(f"wrote {p}")
