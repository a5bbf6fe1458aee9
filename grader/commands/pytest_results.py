"""`pytest curriculum/checks --submission PATH --results-json FILE`: the grading session's result,
scored and written at the end (options and session set up by `grader.checking.plugin`; this
plugin is the pytest11 entry point `torchgrade-results`)."""

from __future__ import annotations

import pytest

from grader.checking.plugin import SESSION_KEY
from grader.models import CheckRun
from grader.outputs.writing import write_json
from grader.scoring.results import result_of


def pytest_sessionfinish(session: pytest.Session) -> None:
    collector = session.config.pluginmanager.get_plugin("torchgrade-collector")
    grading = session.config.stash.get(SESSION_KEY, None)
    if collector is None or grading is None or collector.results_json is None:
        return
    exercises = list(dict.fromkeys(c.exercise for c in collector.results))
    run = CheckRun(submission=grading.submission, exercises=exercises, checks=collector.results,
                   modules=grading.module_runs(), isolation=grading.isolation)
    write_json(result_of(run), collector.results_json)
