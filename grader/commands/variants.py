"""`torchgrade variants`: each student's own bug-hunt files and the instructor's manifest."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from grader.commands.common import UsageError
from grader.intake.assignment import AssignmentError, read_roster
from grader.outputs.writing import write_atomic

if TYPE_CHECKING:
    from grader.course.bughunt import VariantManifest

log = logging.getLogger("torchgrade")


def variants(*, roster: Path, seed: int, out: Path) -> Path:
    """Write every student of `roster` (a CSV with a student_id column) their own bug-hunt
    files, `out/<student>/bughunt/<name>.py`, each the fixed script with a deterministic subset
    of the faults applicable to it (same student and seed: same files), and the instructor's
    key `out/manifest.json` (which faults each copy holds). Returns the manifest's path; grade
    with `grade(..., variants=that path)`."""
    from grader.course import bughunt

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


def read_variants(path: Path) -> VariantManifest:
    """The variants manifest at `path` (UsageError if it is missing or not one)."""
    from pydantic import ValidationError

    from grader.course.bughunt import VariantManifest, catalogue_digest, slots_of

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



def main(args: argparse.Namespace) -> int:
    manifest = variants(roster=args.roster, seed=args.seed, out=args.out)
    students = len(read_variants(manifest).students)
    print(f"Bug-hunt copies for {students} student{'' if students == 1 else 's'} in "
          f"{args.out}/<student>/ (hand each their folder); keep the key (do not hand it "
          f"out): {manifest}")
    return 0
