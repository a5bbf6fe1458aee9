"""OUT across runs: the results an earlier run left there (read, reused when current, kept in
the class files when their student is not graded now), the locks a run takes on OUT, and the
folders set aside when a student is now graded under another id."""

from __future__ import annotations

import logging
import time
from pathlib import Path

from grader.errors import UsageError
from grader.intake.shards import Shard
from grader.models import SubmissionResult
from grader.outputs.exports import remark_kinds
from grader.outputs.folder import read_results
from grader.outputs.writing import OutLock, read_json

log = logging.getLogger("torchgrade")

RENAMED = ".renamed"  # OUT/.renamed/<folder>/: results of a folder now graded under a roster id


def earlier_result(folder: Path) -> SubmissionResult | None:
    """The student's result in OUT, if there is one that can be read."""
    try:
        return read_json(folder / "results.json")
    except (OSError, ValueError):
        return None


def is_current(result: SubmissionResult, folder: Path, mark: str | None) -> bool:
    """Graded exactly as this run would grade it (its report is written before it, so it
    exists too)."""
    return result.fingerprint == mark and (folder / "report.html").is_file()


def previous_result(folder: Path, mark: str | None) -> SubmissionResult | None:
    """The student's earlier result if it `is_current`."""
    result = earlier_result(folder)
    return result if result is not None and is_current(result, folder, mark) else None


def handed_in_before(folder: Path) -> bool:
    """Whether OUT's result in `folder` grades a submission (not an empty one of a roster
    student who had handed in nothing): a later download without the student (an export of
    new submissions only) must not replace it with a 0."""
    earlier = earlier_result(folder)
    return earlier is not None and "nothing_handed_in" not in remark_kinds(earlier)


def earlier_results(out: Path, students: set[str]) -> list[SubmissionResult]:
    """The results in OUT of students who are not among `students` (this run's: the folder's
    and the roster's), said in a warning: a student missing from this download (a withdrawal,
    or an LMS export of new submissions only) keeps the grade OUT holds, in the class files
    too, as `torchgrade index` would list it; never silently dropped from grades.csv."""
    earlier = read_results(out, besides=students)
    if earlier:
        names = [r.student for r in earlier]
        log.warning("torchgrade: warning: %d earlier result(s) in %s have no submission in "
                    "this run: %s. They stay in index.html and the CSVs as graded before; "
                    "remove their folders from %s to leave them out.", len(names), out,
                    ", ".join(names[:10]) + (" ..." if len(names) > 10 else ""), out)
    return earlier


def out_locks(out: Path, shard: Shard | None) -> list[OutLock]:
    """Take OUT's locks: exclusively for a whole run; for a shard, OUT shared with the other
    shards and its own shard's lock exclusively (the same shard twice would grade the same
    students at once). UsageError, one line, when a run in the way holds them."""
    if shard is None:
        wanted = [OutLock(out)]
    else:
        wanted = [OutLock(out, shared=True),
                  OutLock(out, name=f".torchgrade.shard-{shard.name}.lock")]
    taken: list[OutLock] = []
    try:
        for lock in wanted:
            taken.append(lock.__enter__())
    except BlockingIOError:
        for lock in reversed(taken):
            lock.__exit__(None, None, None)
        what = (f"shard {shard} of another `torchgrade grade` run" if shard is not None and taken
                else "another `torchgrade grade` run (or `torchgrade index`)")
        raise UsageError(f"{out} is being written by {what}") from None
    return taken


def release(locks: list[OutLock]) -> None:
    """Give back the locks `out_locks` took, the last taken first."""
    for lock in reversed(locks):
        lock.__exit__(None, None, None)


def set_aside_renamed(out: Path, renamed: dict[str, str]) -> None:
    """Move OUT/<folder> of each class folder now graded under a roster row's id (`renamed`:
    id -> folder; the roster was added, or got an lms_id, since) to OUT/.renamed/: kept, never
    listed beside the same student's new results (`torchgrade index` skips dot-folders)."""
    moved = []
    for key, folder in renamed.items():
        old = out / folder
        if folder == key or not (old / "results.json").is_file() or old.is_symlink():
            continue
        target = out / RENAMED / folder
        if target.exists():
            target = target.with_name(f"{folder}.{time.strftime('%Y%m%dT%H%M%S')}")
        target.parent.mkdir(exist_ok=True)
        old.rename(target)
        moved.append(f"{folder} -> {key}")
    if moved:
        log.warning("torchgrade: warning: %d student(s) are now graded under their roster id, "
                    "not their folder's name: %s. Their earlier results were moved to %s.",
                    len(moved), ", ".join(moved[:10]) + (" ..." if len(moved) > 10 else ""),
                    out / RENAMED)
