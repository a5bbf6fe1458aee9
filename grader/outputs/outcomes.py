"""One table: how each outcome of a check is shown, in the terminal, the reports and the class
summary (as pytest's terminal.py maps an outcome to its display in one place).

An outcome is what a check shows (`grader.models.state_of`): its status, or "todo" for code not
implemented yet (an `error` in results.json, with reason `not_implemented`, but nothing went
wrong: nothing is done yet), or "missing" for a file not submitted (reason `not_submitted`).
The report's CSS (`templates/style.css`) styles a badge by its `css` class. Rows are in
display order: counts ("12 passed, 3 failed") follow it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Outcome:
    """How one outcome is shown."""

    label: str  # report badge and text: "timed out"
    word: str  # terminal, in brackets `[ PASSED  ]` (9 columns)
    colour: str  # terminal: ANSI SGR code
    mark: str  # report badge: a glyph (hidden from screen readers; the label says it)
    count: str  # "3 raised an error": how the report counts it
    broken: bool  # the class summary's "broken": the code raised, timed out or crashed
    css: str  # the report's CSS class


OUTCOMES: dict[str, Outcome] = {
    "passed": Outcome("passed", "PASSED", "32", "\u2714", "passed", False, "passed"),
    "failed": Outcome("failed", "FAILED", "31", "\u2718", "failed", False, "failed"),
    "error": Outcome("error", "ERROR", "33", "\u26a0", "raised an error", True, "error"),
    "timeout": Outcome("timed out", "TIMED OUT", "33", "\u25f7", "timed out", True, "timeout"),
    "crashed": Outcome("crashed", "CRASHED", "35", "\u2620", "crashed", True, "crashed"),
    "todo": Outcome("not implemented yet", "TODO", "36", "\u270e", "not implemented yet", False,
                    "todo"),
    "missing": Outcome("not submitted", "MISSING", "36", "\u2205", "not submitted", False,
                       "missing"),
}

# Not an outcome: a hidden check listed in the terminal before it runs (at grading).
PENDING_WORD = "HIDDEN"
