"""Grade many submissions in one pytest session: collect the checks once, run them per submission.

`grader.running.runner.run_checks` starts a pytest session per submission; about half of its cost
beyond the checks themselves is pytest configuring itself and collecting the check modules again
(~25 ms of ~50 ms per submission with one exercise, growing with every exercise added). A grading
process of a bulk run instead runs one session whose run loop (`BatchRunner`, a pytest plugin)
takes submissions one after another and runs the same collected items for each, through pytest's
own `pytest_runtest_protocol` hook: fixtures, marks, reports and `grader.checking.plugin` behave
exactly as in a fresh session (pytest supports re-running an item; `pytest-rerunfailures` relies on
it), and every submission gets its own `GradingSession` and its own workers. The last item of each
submission is torn down with `nextitem=None`, so no fixture outlives a submission.
`tests/test_bulk.py` checks that results equal those of `run_checks`, check by check.
"""

from __future__ import annotations

import contextlib
import gc
import inspect
import io
import logging
import time
from concurrent.futures import Executor, ThreadPoolExecutor
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest
import torch


from grader.models import CheckResult, CheckRun, ModuleRun, Submission
from grader.checking import plugin
from grader.checking.plugin import (EVIDENCE_KEY, SESSION_KEY, GradingSession, ResultCollector,
                                    Zygotes, prepare_checks, session_args)
from grader.checking.student import StudentModule
from grader.course.registry import MARK, info_of
from grader.course.folder import active_course
from grader.course.registry import check_files
from grader.worker.client import Zygote
from grader.worker.deferred_dynamo import defer as defer_dynamo
from grader.worker.limits import WorkerLimits


log = logging.getLogger("torchgrade")
# Receives each submission's run as soon as it is over (or the exception the grader itself
# raised on it); the caller scores and writes it.
Finish = Callable[[Submission, "CheckRun | BaseException"], None]


class BatchRunner:
    """pytest plugin: the session's run loop, grading each submission of `submissions` and
    handing its result to `finish` before taking the next one."""

    def __init__(self, submissions: Iterable[Submission], finish: Finish, *,
                 exercises: list[str], limits: WorkerLimits | None,
                 zygote: Zygote | Zygotes | Callable[[], Zygote], collector: ResultCollector):
        self.submissions = submissions
        self.finish = finish
        self.exercises = exercises
        self.limits = limits
        self.zygote = zygote
        self.collector = collector
        self.graded = 0
        self.modules: dict[str, ModuleRun] = {}  # what the last submission's modules showed
        self.direct: bool | None = None  # whether the checks run without pytest's protocol
        self.isolation = "none"  # and how contained its workers were

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool:
        # Checks that could not be collected are reported once by the collector; every
        # submission carries them.
        collection_errors = list(self.collector.results)
        items = list(session.items)
        # torch, pytest and the checks are loaded for good: keep the garbage collector's passes
        # off their ~200,000 objects (and off the pages this process shares with its fork
        # server). Measured: 20 ms less collection per submission.
        gc.freeze()
        # Stopping a submission's workers (kill, and removing their scratch folders, which
        # costs ~8 ms each under the sandbox's mount namespaces) happens in the background
        # while the next submission is graded: nothing of it changes a result.
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="torchgrade-close") as closer:
            for submission in self.submissions:
                started = time.perf_counter()
                outcome: CheckRun | BaseException
                try:
                    checks = collection_errors + self.run_items(session, items, submission,
                                                                closer)
                    outcome = CheckRun(submission=submission, exercises=self.exercises,
                                       checks=checks, modules=self.modules,
                                       isolation=self.isolation,
                                       grading_s=time.perf_counter() - started)
                except Exception as exc:  # noqa: BLE001 - costs this submission, not the batch
                    log.exception("torchgrade: grading %s failed", submission.student)
                    outcome = exc
                self.graded += 1
                self.finish(submission, outcome)
        return True

    def run_items(self, session: pytest.Session, items: list[pytest.Item],
                  submission: Submission, closer: Executor | None = None) -> list[CheckResult]:
        zygote = (self.zygote if isinstance(self.zygote, (Zygote, Zygotes))
                  else self.zygote())
        grading = GradingSession(submission, limits=self.limits, zygote=zygote)
        session.config.stash[SESSION_KEY] = grading
        self.collector.results = []
        if self.direct is None:
            self.direct = callable_directly(session, items)
        try:
            for i, item in enumerate(items):
                # What a check measured belongs to the submission it measured.
                if EVIDENCE_KEY in item.stash:
                    del item.stash[EVIDENCE_KEY]
                item.user_properties.clear()
                if self.direct:
                    call_directly(item, grading, self.collector)
                    continue
                nextitem = items[i + 1] if i + 1 < len(items) else None
                item.ihook.pytest_runtest_protocol(item=item, nextitem=nextitem)
        finally:
            self.modules = grading.module_runs()
            self.isolation = grading.isolation
            if closer is not None:
                closer.submit(_close_quietly, grading)
            else:
                grading.close()
        return self.collector.results


# ---------------------------------------------------------------- checks called directly
#
# pytest's per-check protocol (fixture requests, setup and teardown state, hook calls, reports)
# cost ~0.5 ms for each of ~200 checks per submission, more than the grader's other per-
# submission work together. A check that asks pytest for nothing but `sub`, `evidence` and its
# own parameters, in a session where nothing else hooks into running checks, is called here the
# way pytest calls it (`pytest_pyfunc_call`: the function with those arguments, timed and caught
# by `pytest.CallInfo`), and recorded by the same `ResultCollector.record`. Anything else (a
# course's conftest fixture or runtest hook, a mark, an xunit setup) runs every check through
# pytest as before. `tests/test_bulk.py` checks the verdicts equal a fresh pytest session's,
# check by check, for every exercise.

OWN_ARGUMENTS = {"sub": plugin.sub, "evidence": plugin.evidence}
# The runtest hooks of pytest's own plugins that remain in a grading session: each only reports,
# times or tracks state (PYTEST_CURRENT_TEST, the setup stack, a node's own `runtest`).
RUNTEST_HOOKS = ("pytest_runtest_protocol", "pytest_runtest_setup", "pytest_runtest_call",
                 "pytest_runtest_teardown", "pytest_runtest_makereport", "pytest_pyfunc_call",
                 "pytest_runtest_logstart", "pytest_runtest_logfinish", "pytest_runtest_logreport",
                 "pytest_fixture_setup", "pytest_fixture_post_finalizer")


def callable_directly(session: pytest.Session, items: list[pytest.Item]) -> bool:
    """Whether every check of `items` can be called without pytest's protocol (see above)."""
    for name in RUNTEST_HOOKS:
        for hook in getattr(session.config.hook, name).get_hookimpls():
            module = getattr(hook.plugin, "__name__", "") or type(hook.plugin).__module__
            if hook.plugin is not plugin and not module.startswith("_pytest.") \
                    and not isinstance(hook.plugin, (BatchRunner, ResultCollector)):
                return False
    return all(_plain_check(item) for item in items)


def _plain_check(item: pytest.Item) -> bool:
    if not isinstance(item, pytest.Function) or info_of(item) is None:
        return False
    if inspect.iscoroutinefunction(item.obj) or inspect.isasyncgenfunction(item.obj):
        return False  # pytest fails those itself; called here, one would pass unrun
    if {mark.name for mark in item.iter_markers()} - {MARK, "parametrize"}:
        return False
    params = item.callspec.params if hasattr(item, "callspec") else {}
    definitions = item._fixtureinfo.name2fixturedefs
    for name in item.fixturenames:
        if name == "request" or (name in params and name not in definitions):
            continue  # what `sub` and `evidence` ask for; a check's own parameters
        fixture = OWN_ARGUMENTS.get(name)
        defs = definitions.get(name)
        if fixture is None or not defs or getattr(defs[-1].func, "__wrapped__", defs[-1].func) \
                is not getattr(fixture, "__wrapped__", fixture):
            return False
    return True


def call_directly(item: pytest.Item, grading: GradingSession, collector: ResultCollector) -> None:
    """Run check `item` as pytest's protocol would, and record its result (see above)."""
    assert isinstance(item, pytest.Function)
    module: StudentModule | None = None
    arguments: dict[str, object] = {}
    params = item.callspec.params if hasattr(item, "callspec") else {}
    for name in item._fixtureinfo.argnames:
        if name == "sub":
            module = arguments[name] = plugin.module_for(grading, item)
        elif name == "evidence":
            arguments[name] = plugin.evidence_of(item)
        else:
            arguments[name] = params[name]
    function = item.obj
    call = pytest.CallInfo.from_call(lambda: function(**arguments), when="call",
                                     reraise=(pytest.exit.Exception, KeyboardInterrupt))
    collector.record(item, call, module)


def _close_quietly(grading: GradingSession) -> None:
    try:
        grading.close()
    except Exception:  # noqa: BLE001 - a worker that will not close must not stop the batch
        log.exception("torchgrade: closing the workers of %s failed", grading.submission.student)


def grade_batch(submissions: Iterable[Submission], finish: Finish, *, exercises: list[str],
                limits: WorkerLimits | None, zygote: Zygote | Zygotes | Callable[[], Zygote],
                checks_dir: Path | None = None) -> int:
    """Grade every submission `submissions` yields in one pytest session (student code only in
    workers forked by `zygote`, by the one `Zygotes` gives each exercise, or by the one it
    returns when it is a callable: asked for each submission, once `submissions` yielded it, so
    that a zygote still starting can be awaited there while pytest collects);
    `finish(submission, run)` receives each run as soon as it is over. Returns how many were
    graded. Never raises for anything a submission does."""
    torch.set_num_threads(1)  # references single-threaded, like the workers (see runner)
    defer_dynamo()
    collector = ResultCollector()
    runner = BatchRunner(submissions, finish, exercises=exercises, limits=limits,
                         zygote=zygote, collector=collector)
    checks_dir = checks_dir or active_course().checks_dir
    prepare_checks(checks_dir)
    args = session_args(check_files(exercises, checks_dir=checks_dir), checks_dir)
    with contextlib.redirect_stdout(io.StringIO()):
        pytest.main(args, plugins=[runner, collector])
    return runner.graded
