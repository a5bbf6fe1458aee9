"""A class folder: which entries are students (and their ids), and the folders a run may use."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Mapping
from datetime import tzinfo
from pathlib import Path

from grader.errors import UsageError
from grader.intake.assignment import StudentInfo
from grader.intake.submission import (CLASS_FILES, GRADES, INDEX, NOTHING_HANDED_IN, OUT_MARKER,
                                     safe_id, student_id_for, suffix_of)

log = logging.getLogger("torchgrade")


def find_students(submissions: Path) -> list[tuple[str, Path]]:
    """(student id, path) for each student folder or .zip directly inside `submissions`.

    Ids are `grader.intake.submission.safe_id`s (printable, never a class output's name) and unique:
    a second submission with the same id (alice/ and alice.zip) gets its full name, then `~2`,
    `~3`..."""
    if not submissions.exists():
        raise UsageError(f"{submissions}: no such folder")
    if not submissions.is_dir():
        raise UsageError(f"{submissions} is not a folder (use `torchgrade check` for one file)")
    students: dict[str, Path] = {}
    for entry in sorted(submissions.iterdir()):
        if entry.name in ("__MACOSX", "__pycache__") or (entry.name == OUT_MARKER
                                                         and not entry.is_dir()):
            continue  # a folder named as the outputs' marker file is said below, as hidden
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
        if entry.is_dir() or suffix_of(entry) == ".zip":
            sid = wanted = student_id_for(entry)
            if sid in students:
                sid = safe_id(entry.name)
            base, n = sid, 2
            while sid in students or sid.lower() in CLASS_FILES:
                sid, n = f"{base}~{n}", n + 1
            if sid != wanted and wanted in students:
                log.warning("torchgrade: warning: %s and %s both name the student %s: graded "
                            "apart, the second as %s (its results are not %s's). Keep one "
                            "submission per student.", safe_id(students[wanted].name),
                            safe_id(entry.name), wanted, sid, wanted)
            students[sid] = entry
    if not students:
        raise UsageError(f"{submissions} holds no student folders (one folder or .zip per student)")
    return list(students.items())


def download_layout(submissions: Path, lms: str | None = None) -> str:
    """How the class at `submissions` (a folder or a zip) is laid out: `lms` when given (one
    of `grader.intake.lms.LAYOUTS`), else detected from its names; UsageError for a path that
    is neither."""
    from grader.intake.lms import LAYOUTS, detect

    submissions = Path(submissions)
    if lms is not None and lms not in LAYOUTS:
        raise UsageError(f"--lms must be one of {', '.join(LAYOUTS)}")
    if not submissions.exists():
        raise UsageError(f"{submissions}: no such folder")
    if not submissions.is_dir() and submissions.suffix.lower() != ".zip":
        raise UsageError(f"{submissions} is not a folder nor a .zip of the class (use "
                         "`torchgrade check` for one file)")
    return lms or detect(submissions)


def read_class(submissions: Path, layout: str, zone: tzinfo | None = None) -> list:
    """The students of a class, read but not staged (nothing is written; UsageError when there
    is none): `find_students`' (id, path) pairs for a class folder, else the
    `grader.intake.lms.LmsStudent`s of an LMS download or a class zip."""
    from grader.intake.lms import list_download, parse

    if layout == "folders" and Path(submissions).is_dir():
        return find_students(submissions)
    return parse(list_download(submissions), layout, zone)


def by_roster_ids(found: list, roster: Mapping[str, StudentInfo]
                  ) -> tuple[list, dict[str, str], dict[str, str]]:
    """`found` with each class folder named by another id of a roster row (its `student_id`,
    else its `email`, in any case) under that row's id, the outputs' (its `lms_id` when it has
    one), so that the folder is that roster student's submission, with their extension and
    overrides, not a stranger beside an empty "nothing handed in" row. Also: new id -> the
    folder's name; and folder -> row id of each folder that names a row which has a folder of
    its own (left as it is: graded apart, not in the roster). A row has one folder: one named
    by its own id, else by its student_id, else by its email; an id that is one row's own is
    never another's alias. An LMS download's students come by the LMS's own ids."""
    folders = {s[0] for s in found if isinstance(s, tuple)}
    by_lower = {f.lower(): f for f in folders}
    renamed: dict[str, str] = {}
    clashes: dict[str, str] = {}
    for field in ("student_id", "email"):
        for key, info in roster.items():
            other = getattr(info, field)
            folder = (by_lower.get(other.lower()) if field == "email" and other
                      else other if other in folders else None)
            if not folder or folder == key or folder in roster or folder in renamed.values():
                continue
            if key in folders or key in renamed:
                clashes.setdefault(folder, key)
            else:
                renamed[key] = folder
    named = {folder: key for key, folder in renamed.items()}
    clashes = {f: k for f, k in clashes.items() if f not in named}
    return ([(named[s[0]], s[1]) if isinstance(s, tuple) and s[0] in named else s
             for s in found], renamed, clashes)


def class_students(found: list, staging: Path, roster: Iterable[str] = (),
                   keep: Callable[[str], bool] | None = None,
                   handed_in_before: Callable[[str], bool] = lambda sid: False,
                   ) -> list[tuple[str, Path]]:
    """(student id, path) of every student `read_class` found: a class folder's folders and
    .zips are read where they are; an LMS download's students are staged into
    `staging/<id>/` (`grader.intake.lms.stage`; nothing is written into the download). Every
    id of `roster` without a submission gets an empty folder there, whose sidecar says
    "nothing handed in": it is graded (0 points) like any other, so that every roster student
    is in every output; unless `handed_in_before(id)` (OUT holds a grade of a submission of
    theirs): then they are left out, as any student missing from a later download (an export
    of new submissions only), and keep that grade. With `keep` (a shard), only the staged and
    roster-only students it keeps are written and returned; a class folder's students are all
    returned (who owns a hard-linked file is decided over the whole class: the caller filters
    them)."""
    from grader.intake.lms import LmsStudent, clear_home, stage, write_sidecar

    lms = [s for s in found if isinstance(s, LmsStudent)]
    # Only an LMS download is staged: a class folder's students are read where they are.
    students = stage(lms, staging, keep) if lms else list(found)
    have = {sid for sid, _ in students}
    missing = []
    for sid in roster:
        # (read_roster's ids are safe_ids: one name, never a dot-name or a class output's)
        if keep is not None and not keep(sid):
            continue
        if sid not in have and "/" not in sid and not sid.startswith(".") \
                and sid.lower() not in CLASS_FILES and not handed_in_before(sid):
            home = staging / sid
            if keep is not None:  # (unsharded, `stage` emptied the whole staging folder)
                clear_home(home)
            home.mkdir(parents=True, exist_ok=True)
            write_sidecar(home, notes=[NOTHING_HANDED_IN])
            missing.append((sid, home))
            have.add(sid)
    return [*students, *missing]


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
    refuse_foreign_out(out)


# The dot-folders of OUT a run stages into, replaces or removes whole (grader.intake.lms.STAGING,
# grader.grading.summary.SHARDS, grader.grading.out.RENAMED): a folder of these names that
# torchgrade did not write is the owner's, and refused like any other file.
OURS = (".lms", ".shards", ".renamed")


def refuse_foreign_out(out: Path) -> None:
    """Refuse (UsageError, one line naming what it holds) an OUT that exists, holds something
    and has no `OUT_MARKER`: a folder torchgrade did not write (the instructor's own
    index.html, grades.csv or alice/results.json would be replaced). Names starting with "."
    are not counted (a lock left by a run stopped before it wrote the marker; a folder's
    `.git`), but for the folders a run writes into or removes (`OURS`)."""
    out = Path(out)
    if not out.is_dir() or (out / OUT_MARKER).is_file():
        return
    held = []
    with os.scandir(out) as entries:
        for entry in entries:
            if not entry.name.startswith(".") or entry.name in OURS:
                held.append(entry.name + ("/" if entry.is_dir(follow_symlinks=False) else ""))
            if len(held) > 5:
                break
    if held:
        shown = ", ".join(sorted(held)[:5]) + (" ..." if len(held) > 5 else "")
        raise UsageError(f"OUT {out} is not a torchgrade output folder (it has no "
                         f"{OUT_MARKER}) and holds {shown}, which grading would replace: give "
                         "a new or empty folder (results of an older torchgrade, written before "
                         f"the marker: create {out / OUT_MARKER} to grade into them)")


def is_output_folder(folder: Path) -> bool:
    """Whether `folder` was written by `torchgrade grade`: it holds the marker every run writes
    (or, from versions before the marker, both class outputs they wrote)."""
    folder = Path(folder)
    return (folder / OUT_MARKER).is_file() or all((folder / name).is_file()
                                                   for name in (INDEX, GRADES))

