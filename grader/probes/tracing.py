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

    Returns {"value": result, "steps": count, "threads": how many threads besides the calling
    one ran during the call (work there may escape the count; a thread that only waited, one
    started at import to sleep, say, is not counted), "processes": how many processes the call
    forked or ran (their work escapes the count), "tampered": what the call did to the
    tracing, empty when nothing, "stopped": whether the step limit stopped it}.
    The count is made in the worker, where a submission
    bent on cheating can still reach the tracer through the object graph (frames, gc); this closes
    the doors a student finds by accident or in a forum answer: sys.settrace(None), patching
    sys.settrace, threads, renamed code, and the tracer's own state through sys.gettrace() (which
    answers None during the count)."""
    steps = 0
    tampered: list[str] = []
    main = TRUSTED.get_ident()
    # CPU time of the other threads, and the processes, before the call: what changed is the
    # call's doing.
    before = {ident: TRUSTED.thread_cpu(ident) for ident in TRUSTED.current_frames()
              if ident != main}
    children_before = TRUSTED.children()

    stopped = False

    def over() -> None:
        # Raising here unsets this thread's tracing (as settrace(None) would): the call is
        # over, whatever it does with the exception.
        nonlocal stopped
        if step_limit is not None and steps > step_limit:
            stopped = True
            raise StepLimit

    def tracer(frame, event, arg):
        nonlocal steps
        steps += 1
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
    threads = _threads_that_ran(before, main)
    processes = _processes_run(children_before)
    if stopped:  # the limit, not the call, switched the tracing off; its value is not kept
        return {"value": None, "steps": steps, "threads": threads, "processes": processes,
                "tampered": tampered, "stopped": True}
    if not still:
        tampered.append("switched the tracing off")
    return {"value": value, "steps": steps, "threads": threads, "processes": processes,
            "tampered": tampered, "stopped": False}


# CPU seconds a thread may use during a call and still count as waiting: a sleeping thread
# uses microseconds; a loop over a thousand rows, milliseconds.
IDLE_CPU = 0.0002


def _threads_that_ran(before: dict[int, float | None], main: int) -> int:
    """How many threads but `main` ran during the call: started during it, or used CPU in it
    (`before`: each thread's CPU seconds before the call; one that ended since counts)."""
    ran = 0
    for ident in set(before) | set(TRUSTED.current_frames()):
        if ident == main:
            continue
        if ident not in before:
            ran += 1
            continue
        now, then = TRUSTED.thread_cpu(ident), before[ident]
        if now is None or then is None or now - then > IDLE_CPU:
            ran += 1
    return ran


def _processes_run(before: tuple[frozenset[int], float, int, dict[int, int]]) -> int:
    """How many processes the call forked or ran (`before`: `TRUSTED.children()` then): forks
    made, children started or waited for, and processes made earlier (at import, say) that
    used CPU during the call, started during it, or ended in it; one that only waited is not
    counted, as for threads."""
    pids, cpu, forks, others = TRUSTED.children()
    then = before[3]
    worked = sum(1 for pid, ns in then.items()
                 if pid not in others or others[pid] - ns > IDLE_CPU * 1e9)
    started = len(others.keys() - then.keys())
    return max(forks - before[2], len(pids - before[0]), int(cpu > before[1]),
               worked + started)
