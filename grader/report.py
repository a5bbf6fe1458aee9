"""HTML renderings of results: one report per submission and the class index.

Templates live in the top-level `templates/` folder, installed as the `grader.templates` package;
autoescaping is on because student tracebacks and output land in the page.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from urllib.parse import quote

import jinja2

from grader.models import CheckResult, SubmissionResult

STATUS_LABEL = {"passed": "passed", "failed": "failed", "error": "error", "timeout": "timed out",
                "crashed": "crashed"}
STATUS_MARK = {"passed": "\u2714", "failed": "\u2718", "error": "!", "timeout": "\u231b",
               "crashed": "\u2620"}


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    root = resources.files("grader.templates")
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(root)),
                             autoescape=jinja2.select_autoescape(default=True),
                             undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True)
    env.globals.update(status_label=STATUS_LABEL, status_mark=STATUS_MARK)
    env.filters["num"] = lambda x: f"{x:g}"
    env.filters["url"] = lambda s: quote(str(s))
    return env


def render_report(result: SubmissionResult) -> str:
    sections = []
    for part in result.exercises:
        checks = [c for c in result.checks if c.exercise == part.exercise]
        sections.append({"part": part, "checks": checks,
                         "failing": [c for c in checks if c.status != "passed"]})
    return environment().get_template("report.html.j2").render(
        result=result, sections=sections, first_fix=first_to_fix(result.checks))


def first_to_fix(checks: list[CheckResult]) -> CheckResult | None:
    """The failing check a student should look at first: the one worth most points, visible
    checks before hidden ones, then in curriculum order."""
    failing = [c for c in checks if c.status != "passed"]
    if not failing:
        return None
    return min(failing, key=lambda c: (c.visibility != "visible", -c.max_points,
                                       checks.index(c)))


def render_index(results: list[SubmissionResult], exercises: list[str], *,
                 title: str = "torchgrade results", assignment: str = "") -> str:
    """The class index: every student (sortable), the score distribution, the pass rate of
    every check, the most frequent diagnoses, links to the reports. Self-contained."""
    from grader.summary import summarize

    return environment().get_template("index.html.j2").render(
        s=summarize(results, exercises, title=title, assignment=assignment))
