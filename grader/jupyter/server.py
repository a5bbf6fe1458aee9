"""A grader process that stays warm for one Jupyter kernel: `python -m grader.jupyter.server`.

Starting a grader costs seconds (importing torch, starting the sandbox's worker parent, which
imports torch too); a notebook has a "check your work" cell per function. So the first check
of a kernel starts this process, and every later one reuses it: it keeps its imports and its
worker parent (`Zygote`), and runs `commands.check_work` once per request, each in a fresh
pytest session with fresh workers, exactly as `torchgrade check` would.

It is a separate process, never the kernel: the notebook's code runs only in the sandboxed
workers, the verdicts are computed here. Protocol: one JSON request per line on stdin
(`CheckRequest`); the summary's lines on stdout, then `DONE <exit code>`. It exits when stdin
closes (the kernel is gone) or after `IDLE_SECONDS` without a request.
"""

from __future__ import annotations

import logging
import select
import sys
import traceback
from pathlib import Path

from pydantic import BaseModel

DONE = "\x1etorchgrade-check-done"
IDLE_SECONDS = 30 * 60


class CheckRequest(BaseModel):
    path: str
    out: str
    exercise: str
    only: list[str] = []
    color: bool = True


def handle(request: CheckRequest, zygote) -> int:
    """Check one notebook and print the summary; returns what `torchgrade check` would exit
    with."""
    from grader.commands.check import check_work
    from grader.errors import UsageError
    from grader.outputs import terminal

    try:
        work = check_work(Path(request.path), out=Path(request.out), exercises=[request.exercise],
                                   only=request.only or None, zygote=zygote)
    except UsageError as exc:
        print(f"torchgrade: error: {exc}")
        return 2
    print(terminal.summary(work.result, pending=work.pending, report=str(work.report),
                           color=request.color))
    return 0 if work.result.all_passed else 1


def serve() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(message)s", stream=sys.stdout)
    from grader.commands.common import sandbox

    zygote = None
    try:
        while True:
            ready, _, _ = select.select([sys.stdin], [], [], IDLE_SECONDS)
            if not ready:
                return
            line = sys.stdin.readline()
            if not line:
                return
            try:
                request = CheckRequest.model_validate_json(line)
                if zygote is None:
                    zygote = sandbox()
                code = handle(request, zygote)
            except Exception:  # noqa: BLE001 - say what broke, stay available
                traceback.print_exc(file=sys.stdout)
                code = 1
            print(f"{DONE} {code}", flush=True)
    finally:
        if zygote is not None:
            zygote.close()


if __name__ == "__main__":
    serve()
