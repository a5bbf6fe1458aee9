"""The pytest plugin: hidden checks are ordinary pytest tests run against a submission.

Two plugin objects take part in a grading session:

- `GradingSession` owns the student's modules (and the workers behind them) and serves the
  `sub` fixture, so a check reads `sub.call("scale", x, 2.0)`.
- `ResultCollector` turns each check's report into a `CheckResult` (status from the exception
  the check ended with); like pytest's junitxml, it writes only once, at the end.

`pytest COURSE/checks --submission PATH` registers both from the command line (this module is a
`pytest11` entry point; `grader.commands.pytest_results` writes `--results-json` at the end);
`grader.running.runner.run_checks` passes them in directly.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import pytest

from grader.checking.compare import CheckFailure
from grader.checking.student import StudentError, StudentModule, TimeBudget
from grader.checking.recorded import install as install_recorded
from grader.course.folder import import_checks_from
from grader.course.knowledge import knowledge
from grader.course.registry import MARK, check_id, exercise_of, info_of
from grader.evidence import problems as evidence_problems
from grader.evidence import undeclared
from grader.models import CheckResult, ModuleRun, Submission
from grader.worker.client import Zygote
from grader.worker.deferred_dynamo import defer as defer_dynamo
from grader.worker.limits import WorkerLimits

log = logging.getLogger("torchgrade")
SESSION_KEY = pytest.StashKey["GradingSession"]()
EVIDENCE_KEY = pytest.StashKey[dict[str, Any]]()
STRICT_EVIDENCE = "TORCHGRADE_STRICT_EVIDENCE"  # set: an undeclared evidence key is an error
INTERNAL_ERROR = ("the grader itself failed on this check ({}); this is not your fault, please "
                  "tell your instructor")


# pytest as a check runner: only the plugins grading needs. Each one left out saves work on
# every check (warnings, skipping, debugging wrap every test), or at session end
# (unraisableexception and threadexception collect garbage: 0.1 s each with torch loaded).
# `-s`: the grader's own stdout is not the student's (theirs is captured by the worker).
PYTEST_OPTIONS = [
    "--disable-plugin-autoload", "-p", "grader.checking.plugin", "-s",
    *[arg for plugin in ("terminal", "cacheprovider", "faulthandler", "pastebin", "junitxml",
                         "doctest", "legacypath", "logging", "unraisableexception",
                         "threadexception", "warnings", "skipping", "debugging", "stepwise",
                         "setuponly", "setupplan", "python_path")
      for arg in ("-p", f"no:{plugin}")],
]


# Settings for running checks whatever the caller's configuration (a course folder needs none).
CHECKS_INI = Path(__file__).resolve().parent / "checks.ini"


def session_args(files: list[Path], checks_dir: Path, *, collect_only: bool = False) -> list[str]:
    """The arguments of every pytest session over check files (grading one submission, a batch,
    collecting checks): torchgrade's settings for checks, `checks_dir` as the rootdir, and only
    this plugin. Call `prepare_checks(checks_dir)` first. Raises ValueError for no files:
    pytest given no path collects the working directory (a grader started in a source
    checkout would run the project's own test suite)."""
    if not files:
        raise ValueError(f"no check files to run in {checks_dir}")
    return [str(f) for f in files] + (["--collect-only"] if collect_only else []) + [
        "-c", str(CHECKS_INI), "--rootdir", str(checks_dir), *PYTEST_OPTIONS]


def prepare_checks(checks_dir: Path) -> None:
    """Make the checks of `checks_dir` importable as they expect: their helpers by plain name,
    and a student release's recorded references in place of the reference modules it lacks."""
    import_checks_from(checks_dir)
    install_recorded(checks_dir)


class Zygotes:
    """A grading process's two zygotes: `trainer` forks the workers of the exercises in
    `training` (which may build torch.optim optimizers: torch._dynamo imported once, in it),
    `plain` those of the others (torch._dynamo deferred). Each is a callable that awaits its
    zygote (starting in a thread), so that the first submission's first exercises need not
    wait for the trainer. A trainer that failed to start leaves its exercises to `plain`, whose
    workers import torch._dynamo themselves if they need it: slower, never another result."""

    def __init__(self, plain: Callable[[], Zygote], trainer: Callable[[], Zygote],
                 training: Collection[str]):
        self._plain = plain
        self._trainer: Callable[[], Zygote] | None = trainer
        self.training = frozenset(training)

    def for_exercise(self, exercise: str) -> Zygote:
        if exercise in self.training and self._trainer is not None:
            try:
                return self._trainer()
            except Exception as exc:  # noqa: BLE001 - the plain zygote serves instead
                log.warning("torchgrade: the worker parent for exercises that train did not "
                            "start (%s); the other one serves them", exc)
                self._trainer = None
        return self._plain()

    @property
    def isolation(self) -> str:
        return self._plain().isolation


class GradingSession:
    """The submission under test and its workers, for one pytest session. `zygote` forks the
    workers (one per exercise by `Zygotes`); one is started when none is given."""

    def __init__(self, submission: Submission, *, limits: WorkerLimits | None = None,
                 zygote: Zygote | Zygotes | None = None):
        self.submission = submission
        self.limits = limits or WorkerLimits()
        self._zygote = zygote
        self._own_zygote = zygote is None
        self.modules: dict[str, StudentModule] = {}
        self._current: str | None = None  # the exercise whose worker may run (see `module`)
        self.budget = TimeBudget(self.limits.submission_budget)  # shared by its modules

    def pytest_configure(self, config: pytest.Config) -> None:
        config.stash[SESSION_KEY] = self

    def zygote(self, exercise: str) -> Zygote:
        """The zygote that forks `exercise`'s workers."""
        if self._zygote is None:
            from grader.course.folder import active_course

            self._zygote = Zygote(course=active_course().root)
        if isinstance(self._zygote, Zygotes):
            return self._zygote.for_exercise(exercise)
        return self._zygote

    def module(self, exercise: str) -> StudentModule:
        # One exercise's worker at a time (the checks come exercise by exercise): each may hold
        # memory up to its limit, and kept to the end of the submission, those of ten exercises
        # held ten times that (a submission that allocates at import holds 13 GB). Stopped, a
        # module's worker is started again (its import repeated) if a check needs it again.
        if exercise != self._current:
            for other, module in self.modules.items():
                if other != exercise:
                    module.stop_worker()
            self._current = exercise
        if exercise not in self.modules:
            self.modules[exercise] = StudentModule(
                exercise, self.submission.modules.get(exercise),
                spawn=lambda limits: self.zygote(exercise).spawn(limits), limits=self.limits,
                budget=self.budget)
        return self.modules[exercise]

    def module_runs(self) -> dict[str, ModuleRun]:
        """What loading each student module showed, as plain data for scoring."""
        return {exercise: ModuleRun(notes=list(m.notes), import_output=m.import_output,
                                    unavailable=m.unavailable)
                for exercise, m in self.modules.items()}

    @property
    def isolation(self) -> str:
        """How contained this session's workers were (none started: nothing to contain)."""
        return self._zygote.isolation if self._zygote is not None else "none"

    def close(self) -> None:
        for module in self.modules.values():
            module.close()
        if self._own_zygote and isinstance(self._zygote, Zygote):
            self._zygote.close()
            self._zygote = None


class ResultCollector:
    """Receives check reports; `results` holds one `CheckResult` per check, in run order."""

    def __init__(self, results_json: Path | None = None):
        self.results: list[CheckResult] = []
        self.results_json = results_json
        self.interrupted = False  # a KeyboardInterrupt ended the session: its results are partial

    def pytest_keyboard_interrupt(self, excinfo) -> None:
        self.interrupted = True

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        """The report of a check, built here: its text is the student's message, never a
        traceback of the check (which would show hidden source, and costs ~30 ms to format)."""
        if (info_of(item) is None or call.when == "teardown"
                or (call.when == "setup" and call.excinfo is None)):
            return None  # pytest's own report
        module = item.funcargs.get("sub") if hasattr(item, "funcargs") else None
        result = self.record(item, call, module)
        if result is None:
            return None
        passed = result.status == "passed"
        return pytest.TestReport(
            item.nodeid, item.location, dict.fromkeys(item.keywords, 1),
            "passed" if passed else "failed",
            None if passed else f"[{result.status}] {result.message}",
            # A runtest call is never "collect" (pytest's CallInfo type covers collection too).
            call.when,  # type: ignore[arg-type]
            duration=call.duration, start=call.start, stop=call.stop,
            user_properties=item.user_properties)

    def record(self, item: pytest.Item, call: pytest.CallInfo, module: Any) -> CheckResult | None:
        """The result of check `item`'s `call` (its setup's, or the call itself), added to
        `results`; None for a skipped check. `module` is the `sub` it was given, if any."""
        if call.excinfo is not None and call.excinfo.errisinstance(pytest.skip.Exception):
            return None
        records = list(module.worker_records) if isinstance(module, StudentModule) else []
        output = module.end_check() if isinstance(module, StudentModule) else ""
        # Built and validated once (assigning a field of a result validates it again: ~0.1 ms
        # for each of ~200 checks per submission).
        result = check_evidence(make_result(item, call, output, worker_records=records,
                                            evidence=item.stash.get(EVIDENCE_KEY, {})))
        self.results.append(result)
        return result

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            log.error("torchgrade: could not collect %s:\n%s", report.nodeid, report.longreprtext)
            exercise = exercise_of(Path(report.nodeid.split("::")[0]))
            self.results.append(CheckResult(
                id=f"{exercise}.collection", exercise=exercise, targets=["*"],
                visibility="visible", points=0, max_points=0, status="error",
                reason="grader_error",
                message=INTERNAL_ERROR.format("the checks could not be loaded")))


_SAID: set[tuple[str, str]] = set()  # (check id, problems) logged by check_evidence


def check_evidence(result: CheckResult) -> CheckResult:
    """`result`, its evidence checked against the declared keys (`grader.evidence.E` and the
    course's, `grader.course.knowledge`) where it is recorded. A key not declared or a value of
    another type is the grader's own bug (or the course's): logged, and the result kept as it is
    (evidence is never part of a verdict, and values copied from a worker's record may be
    anything). With TORCHGRADE_STRICT_EVIDENCE set (the grader's own
    tests set it) an undeclared key makes the check an internal error, so that it cannot pass
    unnoticed; a value's type is only logged there too, since student code may supply it."""
    if not result.evidence:
        return result
    keys = knowledge().keys  # the grader's, the default course's and the active course's
    found = evidence_problems(result.evidence, keys)
    if not found:
        return result
    said = (result.id, "; ".join(found))
    if said not in _SAID:  # once a process: verify grades the same checks many times over
        _SAID.add(said)
        log.warning("torchgrade: %s recorded evidence not as declared: %s", *said)
    missing = undeclared(result.evidence, keys)
    if not missing or not os.environ.get(STRICT_EVIDENCE):
        return result
    return result.model_copy(update=dict(
        status="error", reason="grader_error", points=0.0,
        message=INTERNAL_ERROR.format(f"undeclared evidence {', '.join(missing)}")))


def make_result(item: pytest.Item, call: pytest.CallInfo, output: str, *,
                worker_records: list[str] | None = None,
                evidence: dict | None = None) -> CheckResult:
    """The result of a check's `call`: `evidence` is what the check recorded as it ran, to
    which a failure's own evidence is added (it wins on a shared key)."""
    info = info_of(item)
    assert info is not None  # pytest_runtest_makereport hands over checks' items only
    fields = dict(id=check_id(item), exercise=exercise_of(item.path), title=info.title,
                  targets=info.targets, visibility=info.visibility, reveal=info.reveal,
                  max_points=info.points,
                  points=0.0, duration_s=round(call.duration, 4), output=output,
                  worker_records=worker_records or [], evidence=dict(evidence or {}))
    exc = call.excinfo.value if call.excinfo is not None else None
    if exc is None:
        return CheckResult(status="passed", **{**fields, "points": info.points})
    if isinstance(exc, CheckFailure):
        return CheckResult(status="failed", message=str(exc), call=exc.call,
                           expected=exc.expected, got=exc.got, hint=exc.hint,
                           diagnoses=[exc.fault] if exc.fault else [],
                           **{**fields, "evidence": {**(evidence or {}), **exc.evidence}})
    if isinstance(exc, StudentError):
        return CheckResult(status=exc.status, reason=exc.reason, message=str(exc),
                           call=exc.call, stopped_at=exc.stopped_at, **fields)
    if isinstance(exc, AssertionError):  # a bare assert in a check: its message only
        return CheckResult(status="failed", message=str(exc) or "the check failed", **fields)
    log_internal_error(item.nodeid, exc, call.excinfo.tb if call.excinfo else None)
    return CheckResult(status="error", reason="grader_error",
                       message=INTERNAL_ERROR.format(type(exc).__name__), **fields)


# A check that fails itself fails the same way for every submission: in a run of grading
# processes its traceback is logged once (each result says the check failed itself, the run's
# summary counts them). Within a process, by what it logged; across the run's processes, by a
# file per traceback made (O_EXCL) in a folder they share (`share_logged_errors`): the first
# process to make it logs the traceback. Elsewhere (a check, a check server's many checks)
# every time.
_logged: set[str] = set()
_shared: Path | None = None


def share_logged_errors(folder: Path | None) -> None:
    """Log each internal error's traceback once among the processes given the same `folder`
    (None: every time)."""
    global _shared
    _shared = folder


def log_internal_error(nodeid: str, exc: BaseException, tb) -> None:
    """A check's own failure (a bug of the course's): its traceback the first time this run
    meets it (at debug level after that)."""
    import hashlib
    import traceback

    text = "".join(traceback.format_exception(type(exc), exc, tb))
    key = hashlib.sha256(f"{nodeid}\0{text}".encode()).hexdigest()[:32]
    first = _shared is None or key not in _logged
    _logged.add(key)
    if first and _shared is not None:
        try:
            os.close(os.open(_shared / key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except FileExistsError:
            first = False
        except OSError:  # no shared folder after all: once in this process
            pass
    if first:
        log.error("torchgrade: internal error in %s", nodeid, exc_info=(type(exc), exc, tb))
    else:  # (each result names the check; the run's summary counts them)
        log.debug("torchgrade: internal error in %s again (%s)", nodeid, type(exc).__name__)


# --------------------------------------------------------------------------- hooks and fixtures


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("torchgrade", "torchgrade grading")
    group.addoption("--submission", metavar="PATH",
                    help="grade this submission (a student folder, .py, .ipynb or .zip)")
    group.addoption("--student", metavar="ID", help="student id (default: from the path)")
    group.addoption("--results-json", metavar="FILE",
                    help="write the submission's results.json here at the end")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARK}(info): a graded torchgrade check")
    path = config.getoption("submission", None)
    if not path or SESSION_KEY in config.stash:
        return
    # References single-threaded, like the workers (and like grader.running.runner.run_checks): a
    # multi-threaded reduction differs in the last bits, which a training check can amplify.
    import torch

    torch.set_num_threads(1)
    defer_dynamo()  # as the workers do (see grader.running.runner)
    # Imported here: only a grading run needs them.
    from grader.course.registry import known_exercises
    from grader.intake.submission import load_submission

    if not Path(path).exists():
        raise pytest.UsageError(f"--submission {path}: no such file or folder")
    from grader.course.folder import active_course

    prepare_checks(active_course().checks_dir)
    submission = load_submission(Path(path), exercises=known_exercises(),
                                 student=config.getoption("student"))
    session = GradingSession(submission)
    results_json = config.getoption("results_json")
    collector = ResultCollector(Path(results_json) if results_json else None)
    config.pluginmanager.register(session, "torchgrade-session")
    config.pluginmanager.register(collector, "torchgrade-collector")
    config.stash[SESSION_KEY] = session
    config.add_cleanup(session.close)


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    collector = config.pluginmanager.get_plugin("torchgrade-collector")
    if collector is None or not collector.results:
        return
    score = sum(r.points for r in collector.results)
    total = sum(r.max_points for r in collector.results)
    terminalreporter.write_sep("=", f"torchgrade: {score:g} / {total:g} points")


@pytest.fixture
def evidence(request: pytest.FixtureRequest) -> dict:
    """A dict for facts a check measured, kept in its result even when it passes (a loss
    curve for the report, say). Keys are declared in `grader.evidence.E` (name, type, meaning,
    writers); values must be JSON-able: numbers, strings, short lists."""
    return evidence_of(request.node)


def evidence_of(item: pytest.Item) -> dict:
    """What the `evidence` fixture gives check `item`: its own dict, kept in its stash."""
    return item.stash.setdefault(EVIDENCE_KEY, {})


@pytest.fixture
def sub(request: pytest.FixtureRequest) -> StudentModule:
    """The student's module for the exercise of the check file using it."""
    grading = request.config.stash.get(SESSION_KEY, None)
    if grading is None:
        pytest.fail("torchgrade checks need a submission: run pytest with --submission PATH",
                    pytrace=False)
    return module_for(grading, request.node)


def module_for(grading: GradingSession, item: pytest.Item) -> StudentModule:
    """What the `sub` fixture gives check `item`: the student's module of its exercise, its
    calls' deadline the check's own (or the limits')."""
    module = grading.module(exercise_of(item.path))
    info = info_of(item)
    module.default_timeout = (info.timeout if info and info.timeout else
                              grading.limits.call_timeout)
    module.autograd = info.autograd if info else True
    module.forbid = list(info.forbid) if info else []
    return module

