"""Count the Python-level work student code does during one call."""

from __future__ import annotations

import sys
import threading

from grader.worker.child import TRUSTED


def count_steps(module, name: str, *args, **kwargs) -> dict:
    """Call `module.name(*args, **kwargs)` and count the 'call' and 'line' trace events of all
    Python code it runs, library code included (a loop can hide in code compiled under any file
    name), on the calling thread and on threads it starts. A loop over N rows costs at least N
    events; vectorised code a few dozen, numpy's own Python wrappers a few hundred at most.

    Returns {"value": result, "steps": count, "threads": how many Python threads besides the
    calling one ran during the call (work there may escape the count), "tampered": what the call
    did to the tracing, empty when nothing}. The count is made in the worker, where a submission
    bent on cheating can still reach the tracer through the object graph (frames, gc); this closes
    the doors a student finds by accident or in a forum answer: sys.settrace(None), patching
    sys.settrace, threads, renamed code, and the tracer's own state through sys.gettrace() (which
    answers None during the count)."""
    steps = 0
    threads = 0
    tampered: list[str] = []
    main = TRUSTED.get_ident()

    def tracer(frame, event, arg):
        nonlocal steps, threads
        steps += 1
        if not threads and TRUSTED.get_ident() == main:
            threads = len(TRUSTED.current_frames()) - 1
        return local

    def local(frame, event, arg):
        nonlocal steps
        if event == "line":
            steps += 1
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
    try:
        value = fn(*args, **kwargs)
    finally:
        still = TRUSTED.gettrace() is tracer
        TRUSTED.settrace(None)
        TRUSTED.thread_settrace(None)
        (sys.settrace, sys.setprofile, sys.gettrace, sys.getprofile,
         threading.gettrace) = saved
    if not still:
        tampered.append("switched the tracing off")
    threads = max(threads, len(TRUSTED.current_frames()) - 1)
    return {"value": value, "steps": steps, "threads": threads, "tampered": tampered}
