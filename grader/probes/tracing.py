"""Count the Python-level work student code does during one call."""

from __future__ import annotations

import sys
import threading

from grader.worker.child import TRUSTED


class StepLimit(BaseException):
    """Raised into the traced call once it has run more steps than its limit: a BaseException,
    so that the `except Exception` of student code does not swallow it."""


def count_steps(module, name: str, *args, step_limit: int | None = None, **kwargs) -> dict:
    """Call `module.name(*args, **kwargs)` and count the 'call' and 'line' trace events of all
    Python code it runs, library code included (a loop can hide in code compiled under any file
    name), on the calling thread and on threads it starts. A loop over N rows costs at least N
    events; vectorised code a few dozen, numpy's own Python wrappers a few hundred at most.

    With `step_limit`, the call is stopped once it has run more steps than that (a loop over
    a million elements, traced, would otherwise run into its deadline): "stopped" is then True,
    "steps" is more than step_limit and "value" None.

    Returns {"value": result, "steps": count, "threads": how many Python threads besides the
    calling one ran during the call (work there may escape the count), "tampered": what the call
    did to the tracing, empty when nothing, "stopped": whether the step limit stopped it}.
    The count is made in the worker, where a submission
    bent on cheating can still reach the tracer through the object graph (frames, gc); this closes
    the doors a student finds by accident or in a forum answer: sys.settrace(None), patching
    sys.settrace, threads, renamed code, and the tracer's own state through sys.gettrace() (which
    answers None during the count)."""
    steps = 0
    threads = 0
    tampered: list[str] = []
    main = TRUSTED.get_ident()

    stopped = False

    def over() -> None:
        # Raising here unsets this thread's tracing (as settrace(None) would): the call is
        # over, whatever it does with the exception.
        nonlocal stopped
        if step_limit is not None and steps > step_limit:
            stopped = True
            raise StepLimit

    def tracer(frame, event, arg):
        nonlocal steps, threads
        steps += 1
        if not threads and TRUSTED.get_ident() == main:
            threads = len(TRUSTED.current_frames()) - 1
        over()
        return local

    def local(frame, event, arg):
        nonlocal steps
        if event == "line":
            steps += 1
            over()
        return local

    def hidden():
        return None

    def guard(what: str):
        def refuse(function=None, *_args, **_kwargs):
            if function is tracer:  # a thread the call started, set up by threading
                return TRUSTED.settrace(tracer)
            tampered.append(f"called {what}")
        return refuse

    fn = getattr(module, name)
    saved = sys.settrace, sys.setprofile, sys.gettrace, sys.getprofile, threading.gettrace
    sys.settrace, sys.setprofile = guard("sys.settrace"), guard("sys.setprofile")
    sys.gettrace = sys.getprofile = threading.gettrace = hidden
    TRUSTED.thread_settrace(tracer)
    TRUSTED.settrace(tracer)
    value = None
    try:
        value = fn(*args, **kwargs)
    except StepLimit:
        if not stopped:  # raised by the student's own code: not ours to answer for
            raise
    finally:
        still = TRUSTED.gettrace() is tracer
        TRUSTED.settrace(None)
        TRUSTED.thread_settrace(None)
        (sys.settrace, sys.setprofile, sys.gettrace, sys.getprofile,
         threading.gettrace) = saved
    if stopped:  # the limit, not the call, switched the tracing off; its value is not kept
        return {"value": None, "steps": steps, "threads": threads, "tampered": tampered,
                "stopped": True}
    if not still:
        tampered.append("switched the tracing off")
    threads = max(threads, len(TRUSTED.current_frames()) - 1)
    return {"value": value, "steps": steps, "threads": threads, "tampered": tampered,
            "stopped": False}
