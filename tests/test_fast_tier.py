"""The fast tier's guard (tests/fast_tier.py) catches a fast test that starts the grader's
machinery, and leaves the rest of the suite alone."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grader.worker.client import Zygote

pytestmark = pytest.mark.fast
pytest_plugins = ["pytester"]

TESTS = Path(__file__).resolve().parent


def test_this_test_is_guarded():
    """Inside a fast test every way to start the machinery fails the test, never runs."""
    with pytest.raises(pytest.fail.Exception, match="fast tier.*Zygote"):
        z = Zygote(isolate=False)
        z.close()  # only reached when the guard is broken: leave no zygote behind
    with pytest.raises(pytest.fail.Exception, match="subprocess"):
        subprocess.run([sys.executable, "-c", "pass"], timeout=60)
    with pytest.raises(pytest.fail.Exception, match="subprocess"):
        subprocess.run(["torchgrade", "--help"], timeout=60)
    with pytest.raises(pytest.fail.Exception, match="os.fork"):
        if os.fork() == 0:  # only when the guard is broken: the child leaves at once
            os._exit(0)
    with pytest.raises(pytest.fail.Exception, match="multiprocessing"):
        multiprocessing.get_context("fork").Process(target=int).start()


def test_a_refusal_is_not_swallowed_by_except_exception():
    """The code under test catches errors around a sandbox's start-up; the guard's refusal
    must still reach pytest."""
    with pytest.raises(pytest.fail.Exception):
        try:
            Zygote(isolate=False)
        except Exception:  # noqa: BLE001 - what grader code does around a zygote
            pass


def test_other_programs_may_run():
    """A library asking a system tool (ldconfig, fc-list) is no sandbox: not refused."""
    assert subprocess.run(["true"], timeout=60).returncode == 0


INNER = """
import subprocess, sys
import pytest

@pytest.fixture(scope="session")
def zygote():  # stands for conftest's: it would start a sandbox
    yield "a sandbox"

@pytest.fixture
def grade_files(zygote):
    return zygote

@pytest.mark.fast
def test_fast_asks_for_the_zygote(zygote):
    pass

@pytest.mark.fast
def test_fast_asks_for_it_through_another_fixture(grade_files):
    pass

@pytest.mark.fast
def test_fast_runs_torchgrade():
    subprocess.run([sys.executable, "-m", "grader.cli", "--help"])

@pytest.mark.fast
def test_fast_and_plain():
    assert 1 + 1 == 2

def test_slow_may_use_the_zygote(zygote):
    assert zygote == "a sandbox"
"""


def test_a_fast_test_using_a_sandbox_fails_and_others_pass(pytester):
    """A run of a test file with the guard installed as tests/conftest.py installs it."""
    pytester.syspathinsert(TESTS)
    pytester.makeconftest("from fast_tier import pytest_runtest_call, pytest_runtest_setup\n")
    pytester.makeini("[pytest]\nmarkers =\n    fast: the fast tier\n")
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-rA")
    outcomes = {r.nodeid.split("::")[-1]: r.outcome for r in result.reprec.getreports(
        "pytest_runtest_logreport") if r.when == "call" or r.outcome != "passed"}
    assert outcomes == {
        "test_fast_asks_for_the_zygote": "failed",
        "test_fast_asks_for_it_through_another_fixture": "failed",
        "test_fast_runs_torchgrade": "failed",
        "test_fast_and_plain": "passed",
        "test_slow_may_use_the_zygote": "passed",
    }, result.stdout.str()
    text = result.stdout.str()
    assert "uses the fixture zygote" in text and "uses the fixtures grade_files, zygote" in text
    assert "started a subprocess" in text


def test_pytest_m_fast_selects_the_marked_tests_only(pytester):
    pytester.syspathinsert(TESTS)
    pytester.makeconftest("from fast_tier import pytest_runtest_call, pytest_runtest_setup\n")
    pytester.makeini("[pytest]\nmarkers =\n    fast: the fast tier\n")
    pytester.makepyfile(test_a="import pytest\npytestmark = pytest.mark.fast\n"
                               "def test_one():\n    pass\n",
                        test_b="import pytest\n@pytest.mark.fast\ndef test_two():\n    pass\n"
                               "def test_three():\n    pass\n")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-m", "fast")
    result.assert_outcomes(passed=2, deselected=1)
