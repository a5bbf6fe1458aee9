"""Imported by the pool's fork server only, first of its preloads (`prestart.PRELOAD`): when a
run ends, the fork server exits at once, skipping the interpreter's teardown of torch and
pytest (~0.5 s), during which it held the run's stdout and stderr open: `torchgrade grade | tee
log`, a CI job, anything reading its output to the end waited for it after the run had ended.
The grading processes forked from it inherit the handler and are not touched by it (another
pid; they end with `os._exit` anyway)."""

from __future__ import annotations

import atexit
import os

_FORK_SERVER = os.getpid()


def _exit_now() -> None:
    # Registered before the preloads' own handlers, so it runs after them (last in, first out).
    if os.getpid() == _FORK_SERVER:
        os._exit(0)


atexit.register(_exit_now)
