"""`torchgrade variants`: each student's own bug-hunt files and the instructor's manifest."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from grader.commands.common import UsageError
from grader.intake.assignment import AssignmentError, read_roster
from grader.intake.variants import read_variants
from grader.outputs.writing import write_atomic

if TYPE_CHECKING:
    pass

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



def main(args: argparse.Namespace) -> int:
    manifest = variants(roster=args.roster, seed=args.seed, out=args.out)
    students = len(read_variants(manifest).students)
    print(f"Bug-hunt copies for {students} student{'' if students == 1 else 's'} in "
          f"{args.out}/<student>/ (hand each their folder); keep the key (do not hand it "
          f"out): {manifest}")
    return 0
