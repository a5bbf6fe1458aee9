"""Diagnoses: which catalogued faults the evidence of a failing check points to.

A pipeline step between the checks and the outputs, for every exercise: `diagnose(result)`
fills `CheckResult.diagnoses` of every check that did not pass with the ids of the faults whose
rule matches it. The rules are the course's (its `checks/diagnoses.py`, over the default
course's: `grader.course.knowledge`); the faults its catalogue (`grader.course.faults`).
"""

from __future__ import annotations

from grader.course.faults import catalogue
from grader.course.knowledge import knowledge
from grader.evidence import Rule
from grader.models import CheckResult, SubmissionResult


def diagnose(result: SubmissionResult) -> SubmissionResult:
    """`result` with the diagnoses of every check that did not pass filled in (in place; the
    same object is returned). Passed checks get none."""
    known = catalogue()
    rules = knowledge().rules
    for check in result.checks:
        # A check may name the fault it found itself (`fail(..., fault=ID)`): kept when the
        # course's catalogue has it, before what the rules find.
        named = [f for f in check.diagnoses if f in known]
        check.diagnoses = [] if check.status == "passed" else \
            list(dict.fromkeys(named + diagnose_check(check, rules)))
    return result


def diagnose_check(check: CheckResult,
                   rules: tuple[tuple[str, Rule], ...] | None = None) -> list[str]:
    """The ids of the faults whose rules match `check`, in the order the rules are declared
    (default: the active course's)."""
    rules = knowledge().rules if rules is None else rules
    return [fid for fid, matches in rules if _safe(matches, check)]


def _safe(matches: Rule, check: CheckResult) -> bool:
    try:
        return bool(matches(check))
    except (TypeError, ValueError, KeyError, AttributeError, ZeroDivisionError):
        return False  # evidence of another shape than the rule expects: no diagnosis
