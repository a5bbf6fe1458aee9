"""The fast tier (`pytest -m fast`): tests that need no sandbox, and a guard that keeps them so.

A test is in the tier when it, or its module (`pytestmark = pytest.mark.fast`), carries the
`fast` marker (declared in pyproject.toml). While a fast test sets up and runs, starting any of
the grader's machinery fails it at once with a message naming what it started:

- a fixture that starts a sandbox or runs torchgrade (`SANDBOX_FIXTURES`, also when asked for
  through another fixture), refused before it is set up;
- `grader.worker.client.Zygote` (the sandbox's warm parent), refused before it reserves uids or
  creates cgroups;
- a subprocess running Python, torchgrade, bubblewrap or Chromium (a library asking `ldconfig`
  or `fc-list` something is not the grader's machinery);
- `os.fork` and `multiprocessing` processes (the grading pool, the zygote's own children).

The refusal raises `pytest.fail.Exception`, which `except Exception` in the code under test does
not swallow. tests/conftest.py installs the two hooks below; tests/test_fast_tier.py proves the
guard fails a fast test that breaks the rule and leaves other tests alone.
"""

from __future__ import annotations

import multiprocessing.process
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

MARKER = "fast"
# Fixtures of tests/conftest.py that start a sandbox or run torchgrade in a subprocess.
SANDBOX_FIXTURES = frozenset({"zygote", "grade_files", "student_release", "installed_release"})
# argv[0] names of programs a fast test may not start: the grader's own machinery.
_PROGRAMS = ("python", "torchgrade", "bwrap", "chromium")


def is_fast(item: pytest.Item) -> bool:
    return item.get_closest_marker(MARKER) is not None


def refuse(what: str) -> None:
    pytest.fail(f"a test of the fast tier (marked `{MARKER}`) {what}; the fast tier runs "
                "without any sandbox, worker or torchgrade process: drop the marker, or test "
                "the code without it", pytrace=False)


def check_fixtures(item: pytest.Item) -> None:
    """Fail `item` if it is fast and asks (even indirectly) for a fixture that starts a sandbox."""
    used = SANDBOX_FIXTURES & set(getattr(item, "fixturenames", ()))
    if is_fast(item) and used:
        refuse(f"uses the fixture{'s' if len(used) > 1 else ''} {', '.join(sorted(used))}")


def _is_machinery(args) -> bool:
    argv = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args or ())
    if not argv:
        return False
    first = os.fsdecode(argv[0]) if not isinstance(argv[0], str) else argv[0]
    name = Path(first.split()[0] if first.strip() else first).name
    return first == sys.executable or name.startswith(_PROGRAMS)


@contextmanager
def no_machinery() -> Iterator[None]:
    """While inside: a zygote, a subprocess of the grader's kind, a fork or a multiprocessing
    process fails the current test (see the module docstring)."""
    real_popen_init = subprocess.Popen.__init__

    def popen_init(self, args, *rest, **kwargs):
        if _is_machinery(args):
            refuse(f"started a subprocess: {args!r}")
        real_popen_init(self, args, *rest, **kwargs)

    def zygote_init(self, *args, **kwargs):
        refuse("started a sandbox (grader.worker.client.Zygote)")

    def fork():
        refuse("forked the test process (os.fork)")

    def process_start(self):
        refuse(f"started a multiprocessing process ({type(self).__name__})")

    from grader.worker.client import Zygote

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(subprocess.Popen, "__init__", popen_init)
        mp.setattr(Zygote, "__init__", zygote_init)
        mp.setattr(os, "fork", fork)
        mp.setattr(multiprocessing.process.BaseProcess, "start", process_start)
        yield


def guarded(item: pytest.Item):
    """The guard for one phase of `item` (a no-op for tests outside the tier)."""
    if not is_fast(item):
        return _nothing()
    return no_machinery()


@contextmanager
def _nothing() -> Iterator[None]:
    yield


# --------------------------------------------------------------------------- hooks
# Imported by tests/conftest.py (and by the conftest test_fast_tier.py writes for its own runs).


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_setup(item: pytest.Item):
    check_fixtures(item)
    with guarded(item):  # fixtures are set up in this phase, session ones included
        return (yield)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_call(item: pytest.Item):
    with guarded(item):
        return (yield)
