"""The public API for check authors: everything a course's checks import, from one place.

    from grader import check, fail, expect_array

`grader/__init__.py` re-exports these names lazily (PEP 562), so `import grader` stays cheap
(the worker parent imports it before forking student workers) and `from grader import check`
loads this module, and with it pytest, numpy and torch, only in a process that runs checks.
The names and their contracts are documented in docs/AUTHORING.md; a test keeps the two in step.

The fixtures a check asks for by parameter name are not imported: `sub` (the student's module,
a `StudentModule`) and `evidence` (a dict of facts kept in the result) are served by the
torchgrade pytest plugin (`grader.checking.plugin`) to every check the grader runs.
"""

from __future__ import annotations

from grader.checking.compare import (CheckFailure, as_bool, as_int_tuple, expect_array,
                                     expect_equal, expect_no_view, expect_type, expect_unchanged,
                                     expect_view, fail, format_call, short)
from grader.checking.student import StudentError, StudentModule
from grader.course.folder import solution_module
from grader.course.registry import check

# The public names, in the order the author's guide documents them.
__all__ = [
    "check",
    "fail", "CheckFailure",
    "expect_equal", "expect_array", "expect_type", "expect_view", "expect_no_view",
    "expect_unchanged", "as_int_tuple", "as_bool",
    "format_call", "short",
    "StudentError", "StudentModule",
    "solution_module",
]
