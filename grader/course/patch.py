"""A mutant written as a patch (`mutants/<exercise>/<name>.diff`): a unified diff against the
exercise's solution, read and applied here, and made from a whole wrong copy (`make_patch`).

    # must fail: rows_sum_to_one
    --- solutions/softmax_rows.py
    +++ solutions/softmax_rows.py
    @@ -6,3 +6,3 @@ def softmax_rows(x):
         shifted = x - x.max(axis=1, keepdims=True)
    -    e = np.exp(shifted)
    +    e = np.exp(x)
         return e / e.sum(axis=1, keepdims=True)

What `diff -u solutions/x.py wrong_copy.py` writes, under the mutant's own `# must fail:` (and
`# diagnoses:`) lines. Before the first hunk, `---`/`+++` lines, `#` lines, `diff`/`index` lines
(of `git diff`) and blank lines are commentary; the file names they give are not read: a patch
always applies to its exercise's solution.

Applied strictly, as `git apply` does: every context and removed line must be in the solution as
written (no fuzz), at the line the hunk's header gives or, when the solution has gained or lost
lines elsewhere, at the nearest place it matches. A hunk that matches nowhere is a `PatchError`
naming the hunk and the first line that differs: the solution was edited under the mutant, and
the patch has to be made again. A line that is empty in the patch is a blank context line (an
editor that strips trailing spaces removed its space). Lines are split at "\\n" only (not at the
form feeds or Unicode separators `str.splitlines` also splits at), so a patch made here and
applied here gives back the wrong copy byte for byte.

Why not a library: `whatthepatch` (the one that applies) splits with `str.splitlines`, drops
whether the file ends in a newline and matches positions only; `unidiff` only parses;
`patch-ng` patches files on disk. Reading one file's hunks and applying them exactly is the
little below.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
NO_NEWLINE = "\\ No newline at end of file"
# What may stand before the first hunk (commentary: the header lines, `diff -u`'s and
# `git diff`'s file lines).
PREAMBLE = ("#", "--- ", "+++ ", "diff ", "index ", "new file mode", "old mode", "new mode")


class PatchError(ValueError):
    """A patch that cannot be read, or does not apply: one line saying where and why (the
    caller names the file)."""


@dataclass(frozen=True)
class Hunk:
    number: int              # 1, 2, ... in the file
    header: str              # `@@ -20,3 +20,3 @@`, as written (for messages)
    old_start: int           # the header's line numbers (1-based; 0 for an empty side)
    old: tuple[str, ...]     # the context and removed lines, with their line ends
    new: tuple[str, ...]     # the context and added lines, with their line ends


def split_lines(text: str) -> list[str]:
    """`text`'s lines with their "\\n", the last without one when `text` does not end in one."""
    lines = text.split("\n")
    return [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])


def parse_patch(text: str) -> list[Hunk]:
    """The hunks of a unified diff of one file. PatchError (naming the line) for anything else:
    a line that is no hunk where one must begin, a hunk shorter or longer than its header says."""
    lines = split_lines(text)
    hunks: list[Hunk] = []
    i = 0
    while i < len(lines):
        line = lines[i].rstrip("\n")
        match = HUNK.match(line)
        if not match:
            if not line.strip() or (not hunks and line.startswith(PREAMBLE)):
                i += 1
                continue
            expected = ("a hunk (`@@ -LINE,COUNT +LINE,COUNT @@`)" if hunks else
                        "a unified diff: `---`/`+++` lines, then hunks (`@@ -LINE,COUNT "
                        "+LINE,COUNT @@`)")
            raise PatchError(f"line {i + 1}: expected {expected}, found {_show(line)}")
        old_start, old_count = int(match[1]), int(match[2] or 1)
        new_count = int(match[4] or 1)
        old: list[str] = []
        new: list[str] = []
        header, start = match[0], i + 1
        i += 1
        while len(old) < old_count or len(new) < new_count:
            if i >= len(lines):
                raise PatchError(f"hunk {len(hunks) + 1} ({header}, line {start}) ends early: "
                                 f"its header counts {old_count} old and {new_count} new lines")
            body = lines[i]
            kind, rest = body[:1], body[1:]
            if body in ("\n", ""):  # a blank context line whose space an editor stripped
                kind, rest = " ", body
            fits = {" ": len(old) < old_count and len(new) < new_count,
                    "-": len(old) < old_count, "+": len(new) < new_count}.get(kind, False)
            if not fits:
                raise PatchError(f"hunk {len(hunks) + 1} ({header}, line {start}): line {i + 1} "
                                 f"({_show(body)}) does not fit its header's counts "
                                 f"({old_count} old, {new_count} new lines)")
            if kind in (" ", "-"):
                old.append(rest)
            if kind in (" ", "+"):
                new.append(rest)
            i += 1
            if i < len(lines) and lines[i].startswith("\\"):  # \ No newline at end of file
                for side in ((old,) if kind == "-" else (new,) if kind == "+" else (old, new)):
                    side[-1] = side[-1].removesuffix("\n")
                i += 1
        hunks.append(Hunk(len(hunks) + 1, header, old_start, tuple(old), tuple(new)))
    if not hunks:
        raise PatchError("holds no hunk (`@@ -LINE,COUNT +LINE,COUNT @@`): a mutant that is "
                         "the solution unchanged proves nothing")
    return hunks


def apply_patch(hunks: list[Hunk], text: str, *, target: str = "the solution") -> str:
    """`text` with `hunks` applied, each where its old lines are, exactly: at its header's line
    or the nearest other place after the previous hunk. PatchError (naming the hunk and the
    first line of `target` that differs) when a hunk's old lines are nowhere."""
    lines = split_lines(text)
    out: list[str] = []
    done = 0  # lines of `text` consumed
    for hunk in hunks:
        want = list(hunk.old)
        # 0-based: a hunk with old lines starts at old_start - 1; one that only inserts comes
        # after line old_start.
        stated = hunk.old_start - 1 if want else hunk.old_start
        at = _find(lines, want, stated, done)
        if at is None:
            raise PatchError(f"hunk {hunk.number} ({hunk.header}) does not apply to {target}: "
                             f"{_difference(lines, want, stated)}; was the solution edited? "
                             "make the patch again")
        out += lines[done:at] + list(hunk.new)
        done = at + len(want)
    return "".join(out + lines[done:])


def _find(lines: list[str], want: list[str], stated: int, done: int) -> int | None:
    last = len(lines) - len(want)  # the last place `want` fits
    if last < done:
        return None
    stated = min(max(stated, done), last)
    for offset in range(max(stated - done, last - stated) + 1):
        for at in (stated - offset, stated + offset):
            if done <= at <= last and lines[at:at + len(want)] == want:
                return at
    return None


def _difference(lines: list[str], want: list[str], stated: int) -> str:
    """Where the solution and the hunk part, at the hunk's own line: one clause."""
    for k, expected in enumerate(want):
        index = stated + k
        if index >= len(lines):
            return (f"it expects line {index + 1} to read {_show(expected)}, but the solution "
                    f"has {len(lines)} lines")
        if lines[index] != expected:
            return (f"line {index + 1} reads {_show(lines[index])}, the hunk expects "
                    f"{_show(expected)}")
    return f"its lines are there (line {stated + 1}) but overlap the hunk before"


def _show(line: str, limit: int = 60) -> str:
    line = line.removesuffix("\n")
    return repr(line if len(line) <= limit else line[:limit] + "...")


def make_patch(solution: str, wrong: str, *, label: str, context: int = 2) -> str:
    """The unified diff (`context` lines around each change) that turns `solution` into `wrong`,
    both files named `label` (the solution's path in the course): what `parse_patch` and
    `apply_patch` read back into `wrong` exactly. Empty when the two are the same."""
    diff = difflib.unified_diff(split_lines(solution), split_lines(wrong), fromfile=label,
                                tofile=label, n=context)
    out = []
    for line in diff:
        out.append(line if line.endswith("\n") else f"{line}\n{NO_NEWLINE}\n")
    return "".join(out)
