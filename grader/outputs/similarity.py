"""`torchgrade similarity`'s files: OUT/similarity.csv (every pair it reports) and
OUT/similarity.html (the flagged pairs side by side). Student text reaches the page only
through jinja2's autoescape, and is bounded: at most `MAX_PAGE_PAIRS` pairs, `MAX_LINES` lines
of each file, `MAX_LINE` characters of a line."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Literal

import grader
from grader.outputs.exports import csv_cell
from grader.similarity.compare import Pair, Side

HEADER = ("exercise", "student_a", "student_b", "similarity", "flagged")
MAX_PAGE_PAIRS = 100
MAX_LINES = 3000
MAX_LINE = 400


def similarity_csv(pairs: list[Pair]) -> str:
    """The CSV: `HEADER`, then `pairs` in the order given (most similar first)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(HEADER)
    for p in pairs:
        writer.writerow([csv_cell(p.exercise), csv_cell(p.a), csv_cell(p.b), f"{p.similarity:.4f}",
                         "true" if p.flagged else "false"])
    return buffer.getvalue()


# How a line is shown: shared with the other file, starter code, not compared at all (a
# comment, a docstring), or the file's own code that the other does not share.
Kind = Literal["match", "starter", "ignored", ""]


@dataclass(frozen=True)
class Line:
    number: int
    text: str
    kind: Kind


@dataclass(frozen=True)
class FileView:
    student: str
    path: str
    lines: list[Line]
    clipped: bool = False  # more lines than shown


@dataclass(frozen=True)
class PairView:
    pair: Pair
    left: FileView
    right: FileView


def file_view(student: str, path: str, source: str, side: Side) -> FileView:
    """A file as the page shows it: each line marked as matching the other file, starter
    code, or neither."""
    lines = []
    raw = source.splitlines()
    for number, text in enumerate(raw[:MAX_LINES], start=1):
        kind: Kind = ("match" if number in side.matched else
                      "starter" if number in side.starter else
                      "ignored" if number not in side.compared and text.strip() else "")
        lines.append(Line(number, text[:MAX_LINE] + ("…" if len(text) > MAX_LINE else ""), kind))
    return FileView(student, path, lines, clipped=len(raw) > MAX_LINES)


@dataclass
class Page:
    """What similarity.html shows."""

    title: str
    views: list[PairView]
    flagged: int                      # flagged pairs in all (the page shows MAX_PAGE_PAIRS)
    exercises: list[str]
    students: int
    threshold: float
    min_shared: int
    many_shared: int
    notes: list[str] = field(default_factory=list)   # files not compared, and why
    out_of_scope: list[str] = field(default_factory=list)
    generated_at: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    version: str = grader.__version__


def render_similarity(page: Page) -> str:
    from grader.outputs.report import environment

    return environment().get_template("similarity.html.j2").render(p=page)
