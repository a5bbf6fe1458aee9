"""The pool's fork server, started first thing (`grader.running.prestart`), exits at once when
the run is over (`grader.running.fork_server_exit`): its interpreter's teardown (~0.5 s with
torch loaded) held the run's stdout open, so `torchgrade grade | tee log` and anything reading
the output to its end waited for it after the run had ended. Timing is not asserted; what the
handler skips is: the teardown itself, in the process that imported it and not in its forks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import cmdline
from grader.running.prestart import PRELOAD
from grader.worker.client import children

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


def test_ctrl_c_while_the_fork_server_imports_says_interrupted_and_nothing_more(tmp_path):
    """The fork server starts first thing and imports for a second or more: a Ctrl-C then (the
    terminal sends it to the whole process group) must read as every other interrupt does, with
    no traceback of the fork server's (it starts deaf to SIGINT) nor a grading process's."""
    subs = tmp_path / "subs"
    for i in range(2):
        (subs / f"s{i}").mkdir(parents=True)
        (subs / f"s{i}" / "strides_broadcasting.py").write_text("def c_strides(shape, n):\n"
                                                                 "    return ()\n")
    proc = subprocess.Popen([sys.executable, "-m", "grader.cli", "grade", str(subs), "--out",
                             str(tmp_path / "out"), "-j", "2"], cwd=tmp_path,
                            start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 60
        while not any("multiprocessing.forkserver" in cmdline(p) for p in children(proc.pid)):
            assert time.monotonic() < deadline and proc.poll() is None, "no fork server"
            time.sleep(0.01)
        # Past the few milliseconds in which the command spawns it (deaf to Ctrl-C itself
        # then), well within its imports (over a second).
        time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole group
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, (out, err)
    assert "interrupted" in err, err
    assert "Traceback" not in err and "INTERNALERROR" not in err, err
