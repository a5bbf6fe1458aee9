"""How a student's module failed to load: in words for people (the note intake writes, the
message every check of the module carries) and as a typed state, what code branches on.

The words are made here and in intake (`grader.intake.submission.syntax_problem`) and read back
only here, by `load_state`, from a result as written: results.json holds no field of its own for
it (it stays as earlier versions wrote it), and every later stage branches on the `LoadState`.
Imports only the standard library and the models: the class index reads it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

from grader.intake.submission import says_syntax_error
from grader.models import CheckResult

LoadState = Literal["loaded", "syntax_error", "import_failed"]

_IMPORT_FAILED = re.compile(r"^importing .+ failed \(")


def import_failed(filename: str, where: str, description: str) -> str:
    """What every check of a module whose top level raised (an ImportError, a NameError, ...)
    says: `where` is the file (and line) the error was raised at."""
    return f"importing {filename} failed ({where}): {description}"


def load_state(notes: Sequence[str], checks: Sequence[CheckResult]) -> LoadState:
    """How the module of one exercise loaded, from its result: `notes` the exercise's, `checks`
    its checks. "syntax_error": it (or a notebook cell of it) does not compile; "import_failed":
    its top level raised, so every check failed with `import_failed`'s words."""
    if any(says_syntax_error(n) for n in notes):
        return "syntax_error"
    if checks and all(c.status == "error" and _IMPORT_FAILED.match(c.message) for c in checks):
        return "import_failed"
    return "loaded"
