"""HTML renderings of results: one report per submission and the class index.

Templates live in the top-level `templates/` folder, installed as the `grader.templates` package;
autoescaping is on because student tracebacks and output land in the page. The only markup not
escaped is the SVG of `grader.outputs.plots`, drawn here from numbers.

A report is one self-contained file (styles, script and pictures inline; a Content-Security-
Policy forbids loading anything), readable on a phone, printable (every section expanded) and
usable with a keyboard alone (sections are <details>, sortable headings take Enter).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any
from urllib.parse import quote

import jinja2
import markupsafe

from grader.evidence import KEYS
from grader.models import CheckResult, SubmissionResult, state_of
from grader.outputs.outcomes import OUTCOMES

# How much of a diagnosis a check lets students read: each level includes the ones before it.
REVEAL_LEVELS = ("symptom", "cause", "fix")
FIX_FIRST = 3  # failing checks listed (and opened) at the top of a report
PICTURES_PER_CHECK = 4
# Pictures per report: enough for every failure worth a look, and a bound on the time a report
# costs in a bulk run (50-150 ms per picture) and on its size (2-30 KB per picture).
PICTURES_PER_REPORT = 12
SUMMARY_CHARS = 180
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    root = resources.files("grader.templates")
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(root)),
                             autoescape=jinja2.select_autoescape(default=True),
                             undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True)
    env.globals.update(outcomes=OUTCOMES)  # badges and counts (grader.outputs.outcomes)
    # Student output and messages may hold NUL and other control characters, which HTML
    # forbids: each becomes U+FFFD. Markup (the pictures' SVG) is the grader's own.
    env.finalize = lambda v: (CONTROL.sub("\ufffd", v) if isinstance(v, str)
                              and not isinstance(v, markupsafe.Markup) else v)
    env.filters["code"] = code_spans
    env.filters["num"] = lambda x: f"{x:g}"
    env.filters["when"] = lambda t: t.strftime("%Y-%m-%d %H:%M %Z").strip() if t else ""
    env.filters["url"] = lambda s: quote(str(s))
    env.filters["anchor"] = anchor
    env.filters["wbr"] = breakable
    return env


def breakable(text: Any) -> markupsafe.Markup:
    """Escaped text that may break into lines after its underscores (`<wbr>`): a long
    exercise name in a narrow column heading wraps at its words, never into letters."""
    return markupsafe.Markup("_<wbr>").join(
        markupsafe.escape(part) for part in CONTROL.sub("\ufffd", str(text)).split("_"))


def code_spans(text: Any) -> markupsafe.Markup:
    """Escaped text in which `name` (titles and messages quote code so) becomes
    <code>name</code>; an odd backtick leaves the text as it is."""
    parts = CONTROL.sub("\ufffd", str(text)).split("`")
    if len(parts) % 2 == 0:
        return markupsafe.escape("`".join(parts))
    return markupsafe.Markup("").join(
        markupsafe.escape(p) if i % 2 == 0 else markupsafe.Markup("<code>%s</code>") % p
        for i, p in enumerate(parts))


def anchor(text: str) -> str:
    """An id/fragment from a check id or student name (ids of checks are already plain)."""
    return quote(str(text), safe="")


# --------------------------------------------------------------------------- diagnoses


@dataclass(frozen=True)
class DiagnosisView:
    """A catalogued fault as one check's reader may see it (None: not revealed)."""

    id: str
    title: str
    symptom: str | None
    cause: str | None = None
    fix: str | None = None
    known: bool = True


def reveal_level(check: CheckResult) -> str:
    """The check's `reveal` setting when it has one (the bug-hunt work adds it), else all."""
    level = getattr(check, "reveal", None)
    return level if level in REVEAL_LEVELS else "fix"


def diagnosis_views(check: CheckResult) -> list[DiagnosisView]:
    """The check's diagnoses, looked up in the fault catalogue, cut to what it reveals."""
    if not check.diagnoses:
        return []
    from grader.course.faults import catalogue

    try:
        faults = catalogue()
    except Exception:  # noqa: BLE001 - a broken catalogue must not cost a student the report
        faults = {}
    shown = REVEAL_LEVELS.index(reveal_level(check))
    views = []
    for fault_id in dict.fromkeys(check.diagnoses):
        fault = faults.get(fault_id)
        if fault is None and shown == 0:
            continue  # a check that reveals symptoms only must not name a fault by its id
        if fault is None:
            views.append(DiagnosisView(id=fault_id, title=fault_id, symptom=None, known=False))
            continue
        views.append(DiagnosisView(id=fault.id, title=fault.title, symptom=fault.symptom,
                                   cause=fault.cause if shown >= 1 else None,
                                   fix=fault.fix if shown >= 2 else None))
    return views


def fault_titles() -> dict[str, str]:
    """Title of every catalogued fault by id (empty if the catalogue cannot be read)."""
    from grader.course.faults import catalogue

    try:
        return {f.id: f.title for f in catalogue().values()}
    except Exception:  # noqa: BLE001
        return {}


# --------------------------------------------------------------------------- per check


@dataclass
class CheckView:
    """What the report shows of one check, beyond its `CheckResult`."""

    check: CheckResult
    state: str = ""  # an OUTCOMES key: the status, or "todo" (not implemented yet)
    summary: str = ""
    details: str = ""
    pictures: list = field(default_factory=list)
    diagnoses: list[DiagnosisView] = field(default_factory=list)
    facts: list[tuple[str, str]] = field(default_factory=list)
    open: bool = False
    fix_rank: int | None = None


# Evidence the pictures draw (not repeated as text facts).
DRAWN = frozenset(key.name for key in KEYS.values() if key.drawn)


def evidence_facts(evidence: dict[str, Any]) -> list[tuple[str, str]]:
    """Evidence no picture shows, as short text: numbers, strings, short lists."""
    facts = []
    for key, value in evidence.items():
        if key in DRAWN:
            continue
        if isinstance(value, float):
            text = f"{value:.6g}"
        elif isinstance(value, (bool, int, str)):
            text = str(value)
        elif isinstance(value, (list, tuple)) and len(value) <= 12:
            text = ", ".join(f"{v:.4g}" if isinstance(v, float) else str(v) for v in value)
        elif isinstance(value, (list, tuple)):
            text = f"{len(value)} values"
        else:
            continue
        facts.append((key.replace("_", " "), text if len(text) <= 300 else text[:297] + "..."))
    return facts


def message_parts(check: CheckResult) -> tuple[str, str]:
    """(one line for the collapsed row, the rest of the message), without the hint line the
    message ends with (the report shows the hint on its own)."""
    message = check.message or ""
    if check.hint:
        message = message.removesuffix(f"\nHint: {check.hint}")
    first, _, rest = message.strip().partition("\n")
    # Messages start with the call, which the expanded check shows on its own: the collapsed
    # row keeps what happened.
    if check.call and first.startswith(check.call) and first[len(check.call):].strip(" :"):
        first = first[len(check.call):].strip(" :")
        # "...call  # X of shape (30, 3): losses[1] is ...": the call's comment goes too
        first = re.sub(r"^#[^:]*:\s+(?=\S)", "", first)
        first = first[0].upper() + first[1:]
    details = message.strip()
    if check.call and details.startswith(check.call):
        details = details[len(check.call):].strip(" :")
        details = details[:1].upper() + details[1:]
    if len(first) > SUMMARY_CHARS:
        return first[:SUMMARY_CHARS].rstrip() + "\u2026", details
    return first, details if rest.strip() else ""


def check_view(check: CheckResult, *, draw: bool = True) -> CheckView:
    view = CheckView(check=check, state=state_of(check))
    if check.status == "passed":
        return view
    view.summary, view.details = message_parts(check)
    view.diagnoses = diagnosis_views(check)
    # Evidence describes a wrong answer: code that raised, timed out or crashed gave none (a
    # stub's "not implemented" needs no picture of the case it never ran).
    if check.status != "failed":
        return view
    view.facts = evidence_facts(check.evidence)
    if draw and check.evidence:
        from grader.outputs.plots import pictures_for

        view.pictures = pictures_for(check, limit=PICTURES_PER_CHECK)
    return view


@dataclass
class FixItem:
    """One thing to fix: failing checks of one exercise that failed with the same message
    (a file not submitted, a function not implemented) count as one."""

    first: CheckView
    checks: list[CheckResult]

    @property
    def points(self) -> float:
        return sum(c.max_points for c in self.checks)


def fix_groups(checks: list[CheckResult]) -> list[list[CheckResult]]:
    """Failing checks grouped by exercise and the first line of their message, in check order;
    wrong values (status "failed") only when they also test the same functions (a file not
    submitted fails every check of its exercise with one message; "returned values that differ"
    says nothing about which function)."""
    groups: dict[tuple, list[CheckResult]] = {}
    for c in checks:
        if c.status != "passed":
            key = (c.exercise, message_parts(c)[0],
                   tuple(c.targets) if c.status == "failed" else ())
            groups.setdefault(key, []).append(c)
    return list(groups.values())


def to_fix_first(checks: list[CheckResult], n: int = FIX_FIRST) -> list[list[CheckResult]]:
    """What a student should look at first, as groups of checks failing for one reason: what
    is wrong in the files handed in, most points first (visible before hidden, then in
    curriculum order, among equals), then files not handed in (most points first)."""
    order = {id(c): i for i, c in enumerate(checks)}
    groups = fix_groups(checks)
    # A mistake in a file handed in is what the student worked on and can act on from the
    # report: ranked by what it costs. A missing file only asks for the file (its section
    # says so), whatever its points: ranked by them, missing files would crowd out of the list
    # the one file the student did hand in.
    return sorted(groups, key=lambda g: (any(c.reason == "not_submitted" for c in g),
                                         -sum(c.max_points for c in g),
                                         all(c.visibility != "visible" for c in g),
                                         order[id(g[0])]))[:n]


# --------------------------------------------------------------------------- a report


@dataclass
class ExerciseView:
    part: Any  # ExerciseResult
    checks: list[CheckView]
    counts: dict[str, int]

    @property
    def failing(self) -> list[CheckView]:
        return [v for v in self.checks if v.check.status != "passed"]


def render_report(result: SubmissionResult, *, draw: bool = True,
                  faults_later: str = "") -> str:
    """The student's report. `draw=False` leaves the pictures out (faster, for tests).
    `faults_later`: a local check of a bug hunt, whose faults only hidden checks judge: what
    its visible checks passing says instead of "every check passed"."""
    views = {id(c): check_view(c, draw=False) for c in result.checks}
    fix_first = []
    for rank, group in enumerate(to_fix_first(result.checks), start=1):
        first = views[id(group[0])]
        first.fix_rank, first.open = rank, True
        fix_first.append(FixItem(first=first, checks=group))
    if draw:
        draw_pictures(result.checks, views, [item.first.check for item in fix_first])
    sections = []
    for part in result.exercises:
        checks = [views[id(c)] for c in result.checks if c.exercise == part.exercise]
        counts = {s: sum(v.state == s for v in checks) for s in OUTCOMES}
        sections.append(ExerciseView(part=part, checks=checks, counts=counts))
    totals = {s: sum(state_of(c) == s for c in result.checks) for s in OUTCOMES}
    return environment().get_template("report.html.j2").render(
        result=result, sections=sections, totals=totals, fix_first=fix_first,
        faults_later=faults_later)


def draw_pictures(checks: list[CheckResult], views: dict[int, CheckView],
                  first: list[CheckResult], budget: int = PICTURES_PER_REPORT) -> None:
    """Pictures for the failed checks, the ones to fix first, then visible ones, then the rest
    (each in check order), until `budget` pictures are drawn."""
    from grader.outputs.plots import pictures_for

    order = {id(c): i for i, c in enumerate(checks)}
    ranked = sorted((c for c in checks if c.status == "failed" and c.evidence),
                    key=lambda c: (c not in first, c.visibility != "visible", order[id(c)]))
    for check in ranked:
        if budget <= 0:
            break
        pictures = pictures_for(check, limit=min(PICTURES_PER_CHECK, budget))
        views[id(check)].pictures = pictures
        budget -= len(pictures)


def render_index(results: list[SubmissionResult], exercises: list[str], *,
                 title: str = "torchgrade results", assignment: str = "",
                 names: Mapping[str, str] | None = None, not_graded: Sequence[str] = (),
                 similarity: bool = False) -> str:
    """The class index: every student first (who needs help at the top; sortable, searchable),
    then the exercises, the score distribution, the most frequent diagnoses and the pass rate
    of every check (collapsed per exercise), links to the reports. Self-contained. `names`:
    student id -> the name shown (and found by the filter) beside it; `not_graded`: the
    students a run stopped before grading, named at the top (the index is then incomplete);
    `similarity`: link similarity.html (`torchgrade similarity`), which lies beside it."""
    from grader.outputs.summary import SHORT_STATES, summarize

    return environment().get_template("index.html.j2").render(short_states=SHORT_STATES,
        s=summarize(results, exercises, title=title, assignment=assignment, names=names,
                    not_graded=not_graded),
        fault_titles=fault_titles(), similarity=similarity)
