"""The pool's fork server, started first thing (`grader.running.prestart`), exits at once when
the run is over (`grader.running.fork_server_exit`): its interpreter's teardown (~0.5 s with
torch loaded) held the run's stdout open, so `torchgrade grade | tee log` and anything reading
the output to its end waited for it after the run had ended. Timing is not asserted; what the
handler skips is: the teardown itself, in the process that imported it and not in its forks."""

from __future__ import annotations

import subprocess
import sys

import pytest

from grader.running.prestart import PRELOAD

PROGRAM = """
import atexit, os, sys
import grader.running.fork_server_exit

class Teardown:
    name = sys.argv[1].encode()

    def __del__(self, write=os.write):
        write(1, b"teardown %s\\n" % self.name)

kept = Teardown()  # collected only by the interpreter's teardown
atexit.register(lambda: os.write(1, b"atexit %s\\n" % kept.name))
if os.fork() == 0:  # a grading process: forked after the import, its exit is its own
    kept.name = b"child"
    sys.exit(0)
os.wait()
"""


def test_the_fork_server_skips_its_teardown_and_its_forks_do_not():
    done = subprocess.run([sys.executable, "-c", PROGRAM, "server"], capture_output=True,
                          text=True, timeout=60)
    lines = done.stdout.split()
    assert done.returncode == 0, done.stderr
    # The fork server runs the other exit handlers (registered after it), then ends.
    assert "atexit server" in done.stdout and "teardown server" not in done.stdout, lines
    # A process forked from it exits as any other would, teardown and all.
    assert "atexit child" in done.stdout and "teardown child" in done.stdout, lines


@pytest.mark.fast
def test_it_is_the_fork_servers_first_import():
    assert PRELOAD[0] == "grader.running.fork_server_exit"
