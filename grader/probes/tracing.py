"""Count the Python-level work student code does during one call."""

from __future__ import annotations

import sys

from grader.worker import child


def count_steps(module, name: str, *args, **kwargs) -> dict:
    """Call `module.name(*args, **kwargs)` and count the 'call' and 'line' trace events in code
    from the student's own files: a loop over N rows costs at least N of them, vectorised code a
    few dozen. Returns {"value": result, "steps": count}."""
    files = child.student_files()
    steps = 0

    def tracer(frame, event, arg):
        nonlocal steps
        if frame.f_code.co_filename not in files:
            return None  # library code (numpy, torch) is neither traced nor counted
        steps += 1
        return local

    def local(frame, event, arg):
        nonlocal steps
        if event == "line":
            steps += 1
        return local

    fn = getattr(module, name)
    sys.settrace(tracer)
    try:
        value = fn(*args, **kwargs)
    finally:
        sys.settrace(None)
    return {"value": value, "steps": steps}
