"""What a pool of grading processes (`grader.running.pool`) starts before anything else: its
fork server and its zygote template.

multiprocessing keeps one fork server per process, started by the first grading process (or
here), with the imports it was given then; every grading process is a fork of it, sharing those
imports copy-on-write. The zygote template imports torch once for every worker parent of the
run (`grader.worker.client.ZygoteTemplate`). Their imports (~1.3 s each) are the longest steps
before a run's first submission is graded, so `torchgrade grade` starts both first thing
(`start_early`), before its own imports and the class's intake (~0.3 s, more for a large
class), which then overlap them. Started that early, neither knows the course or the
exercises: the fork server imports no check (each grading process imports its exercises'
checks itself, ~0.06 s for the whole curriculum), and the template forks its trainer (which
imports torch._dynamo) only if a grading process asks for a zygote of exercises that train.
"""

from __future__ import annotations

import atexit
import multiprocessing
import os
import signal
import threading
from multiprocessing import forkserver
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from grader.worker.client import ZygoteTemplate

# Imported once in the fork server, shared copy-on-write by every grading process (the first
# makes the fork server exit at once when the run is over).
PRELOAD = ["grader.running.fork_server_exit", "grader.running.batch", "grader.grading.steps"]
CONTEXT: Final = "forkserver"
TEMPLATE_ENV = "TORCHGRADE_ZYGOTE_TEMPLATE"  # "0": every grading process launches its zygote

_template: ZygoteTemplate | None = None  # started early, not yet taken by a pool


def start_early() -> None:
    """Start the fork server (with PRELOAD only, see the module's doc; nothing if it runs) and,
    where the machine allows one and TEMPLATE_ENV does not say "0", a zygote template for the
    next pool to take (`take_template`; ended at exit if none does). Needs what any
    multiprocessing program needs: a main module guarded by `if __name__ == "__main__":`."""
    global _template
    start_fork_server(PRELOAD)
    if _template is None and os.environ.get(TEMPLATE_ENV, "1") != "0":
        from grader.worker.client import ZygoteTemplate

        _template = ZygoteTemplate.start()
        if _template is not None:
            atexit.register(_close_untaken)


def start_fork_server(preload: list[str]) -> None:
    """Start the fork server, importing `preload`, unless it runs. It starts deaf to Ctrl-C:
    it imports for a second or more before multiprocessing makes it ignore SIGINT itself, and a
    Ctrl-C then (which the terminal sends to the whole process group) printed its traceback
    beside the command's own "interrupted". The command handles Ctrl-C; the grading
    processes ignore it anyway, and the fork server dies with the command."""
    multiprocessing.get_context(CONTEXT).set_forkserver_preload(preload)
    if threading.current_thread() is not threading.main_thread():
        forkserver.ensure_running()  # (only the main thread may change a signal's handler)
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # inherited through its exec
    try:
        forkserver.ensure_running()
    finally:
        signal.signal(signal.SIGINT, previous)


def take_template() -> ZygoteTemplate | None:
    """The template `start_early` started, now the caller's to close; None if there is none."""
    global _template
    template, _template = _template, None
    return template


def _close_untaken() -> None:
    template = take_template()
    if template is not None:
        template.close()
