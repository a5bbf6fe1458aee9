"""What the trusted side may spend on one submission's bytes before any sandbox sees them.

The grader parses and compiles student code in its own processes (the grading process, or a
Dask run's client): to say a syntax error with its line, to tell a notebook's "check your work"
cells from the work, to choose the most finished of several files. `ast.parse` and `compile`
cost up to ~900 bytes of memory and ~10 ms of CPU per byte of source (a file of short names),
so each is allowed only within `AnalysisBudget`: a piece of at most `PIECE_CHARS`, and at most
`SUBMISSION_CHARS` for one submission's reading. A syntax tree has at most about one node per
character of its source, so the same bound holds its nodes. Past the budget, the caller takes
its cheaper path (the worker's import says the syntax error; a cell is graded as work) and the
submission's notes say so once.

`memory_budget` is the backstop under all of it: while a submission is read, the process may
grow by `READ_MEMORY` at most (RLIMIT_DATA, which the kernel enforces as a MemoryError in this
process), so that anything not bounded here costs a note on that submission, never a process
the kernel kills for memory, nor an honest neighbour it kills instead.
"""

from __future__ import annotations

import ast
import resource
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

PIECE_CHARS = 256 << 10        # one parse or compile: ~230 MB and ~2.5 s at worst
SUBMISSION_CHARS = 2 << 20     # all of one submission's: honest ones use well under 200 KB
READ_MEMORY = 1 << 30          # how much reading one submission may grow a process by


@dataclass
class AnalysisBudget:
    """Characters of student source the grader may still parse or compile itself while it
    reads one submission, and the labels of the pieces it refused."""

    left: int = SUBMISSION_CHARS
    refused: list[str] = field(default_factory=list)  # labels of the pieces not analysed

    def allows(self, code: str, label: str = "") -> bool:
        """Whether `code` may be analysed here (and charge it): within `PIECE_CHARS` and what
        is left; a refused piece is remembered by `label` for the note."""
        size = len(code)
        if size > PIECE_CHARS or size > self.left:
            if label:
                self.refused.append(label)
            return False
        self.left -= size
        return True

    def note(self) -> str | None:
        """The submission's note on the pieces left to the worker, or None."""
        if not self.refused:
            return None
        shown = ", ".join(self.refused[:5]) + (" ..." if len(self.refused) > 5 else "")
        return (f"{len(self.refused)} piece(s) of code too large for the grader to analyse "
                f"before running them (over {PIECE_CHARS >> 10} KB each, or "
                f"{SUBMISSION_CHARS >> 20} MB in all): {shown}; they are graded as they run")


def parse(code: str, budget: AnalysisBudget, label: str = "") -> ast.Module | None:
    """`code`'s syntax tree, or None when it does not parse or is over `budget`."""
    if not budget.allows(code, label):
        return None
    try:
        with warnings.catch_warnings():  # (SyntaxWarnings of odd code: not the grader's)
            warnings.simplefilter("ignore")
            return ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return None


def _data_limit() -> tuple[int, int]:
    return resource.getrlimit(resource.RLIMIT_DATA)


def data_in_use() -> int:
    """This process's private writable memory (VmData: what RLIMIT_DATA counts), in bytes."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmData:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


@contextmanager
def memory_budget(extra: int = READ_MEMORY) -> Iterator[None]:
    """Within the block this process may grow by `extra` bytes at most: allocations past it
    raise MemoryError here (the caller's to catch) instead of growing until the kernel kills
    some process. The limit before is restored after; a tighter one already set is kept. Where
    the kernel has no VmData (not Linux), nothing is limited."""
    used = data_in_use()
    if not used:
        yield
        return
    soft, hard = _data_limit()
    wanted = used + extra
    if soft != resource.RLIM_INFINITY and soft <= wanted:
        yield
        return
    if hard != resource.RLIM_INFINITY:
        wanted = min(wanted, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (wanted, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))
