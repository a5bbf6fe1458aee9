"""The class files of OUT: index.html, grades.csv and the LMS gradebooks, from every result of
the class (this run's and those kept from earlier ones). Written by a whole run, and by
`torchgrade index` (a job array's shards write none)."""

from __future__ import annotations

import logging

from grader.grading.summary import GradeSummary
from grader.intake.lms import staged_names
from grader.intake.submission import CANVAS_GRADES, GRADES, INDEX, MOODLE_GRADES, SIMILARITY_PAGE
from grader.models import SubmissionResult
from grader.outputs.exports import canvas_csv, grades_csv, moodle_csv
from grader.outputs.report import render_index
from grader.outputs.writing import escaped, write_atomic

log = logging.getLogger("torchgrade")


def write_class_outputs(summary: GradeSummary, *, roster: dict | None = None) -> None:
    """index.html, grades.csv and the LMS gradebooks; only index.html, saying so, when the run
    left students `not_graded` (a gradebook uploaded then would miss their grades, or carry
    grades OUT no longer holds: the earlier files are left as they were). A result whose text
    cannot be written as it is (it should not happen: each was written once already) is escaped
    rather than lose the class files (the results in OUT are left as they are)."""
    results = sorted(summary.results + summary.earlier, key=lambda r: r.student)
    try:
        write_class_files(summary, results, roster)
    except (ValueError, UnicodeError):
        log.exception("torchgrade: writing the class outputs failed; retrying with escaped text")
        write_class_files(summary, [escaped(r) for r in results], roster)


def write_class_files(summary: GradeSummary, results: list[SubmissionResult],
                      roster: dict | None) -> None:
    """The class files of `results` (see `write_class_outputs`), each atomically."""
    plan = summary.assignment
    name = plan.name if plan else ""
    # Who each id is, for the index and Moodle's worksheet: the roster's names, else the LMS's
    # (a download's folder names).
    names = staged_names(summary.out) | {sid: person.full_name for sid, person in
                                         (roster or {}).items() if person.full_name}
    write_atomic(summary.out / INDEX,
                 render_index(results, summary.exercises, assignment=name,
                              names=names, not_graded=summary.not_graded,
                              similarity=(summary.out / SIMILARITY_PAGE).is_file(),
                              title=(f"torchgrade results: {name}" if name
                                     else "torchgrade results")))
    if summary.not_graded:
        return
    write_atomic(summary.out / GRADES,
                 grades_csv(results, summary.exercises, assignment=name,
                            duedate=plan.due if plan else None, roster=roster))
    write_atomic(summary.out / CANVAS_GRADES,
                 canvas_csv(results, assignment=name or "torchgrade", roster=roster))
    write_atomic(summary.out / MOODLE_GRADES, moodle_csv(results, roster=roster, names=names))
