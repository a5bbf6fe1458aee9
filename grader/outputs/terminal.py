"""The terminal summary of `torchgrade check`: one line per check, why it failed, what runs later.

Plain ANSI codes, only when asked for or when stdout is a terminal (and `NO_COLOR` is unset):
eight codes do not justify a dependency students must install, and a status word in brackets
(`[ FAILED  ]`) says the same without colour, for screen readers, logs and pipes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

from grader.models import CheckResult, PendingCheck, SubmissionResult, state_of
from grader.outputs.color import ColorMode, use_color  # noqa: F401 - re-exported
from grader.outputs.outcomes import OUTCOMES, PENDING_WORD

MAX_MESSAGE_LINES = 14  # the rest is in the HTML report
INDENT = " " * 14
# Styles: one per outcome (grader.outputs.outcomes), and a few for the text around them.
_CODES = {**{state: outcome.colour for state, outcome in OUTCOMES.items()},
          "bold": "1", "dim": "2", "heading": "1;36"}


# Control characters but newline and tab (C0, DEL, C1): text from student code or files (an
# exception's message, a file name) must not drive the terminal (clear it, retitle it, move the
# cursor over the verdict lines); shown escaped instead. So are the bidirectional overrides and
# isolates, which reorder what a line shows ("Trojan source": a verdict read backwards).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e"
                      r"\u2066-\u2069]")


def plain(text: str) -> str:
    """`text` with every control character but newline and tab shown as an escape (\\x1b,
    \\u202e)."""
    return _CONTROL.sub(lambda m: (f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                                   else f"\\u{ord(m.group()):04x}"), text)


class Painter:
    def __init__(self, color: bool):
        self.color = color

    def __call__(self, text: str, style: str) -> str:
        return f"\033[{_CODES[style]}m{text}\033[0m" if self.color else text


def summary(result: SubmissionResult, *, pending: Iterable[PendingCheck] = (),
            report: str | list[str] | None = None, color: bool = False) -> str:
    """The whole summary: per exercise its score and each check, then the hidden checks that
    run at grading (by title only; a bug hunt's as one line, `bughunt_line`), then the total
    and where the report is (or the reports, one per exercise)."""
    paint = Painter(color)
    pending = list(pending)
    lines: list[str] = []
    for note in result.notes:
        lines.append(f"note: {plain(note)}")
    for part in result.exercises:
        checks = [c for c in result.checks if c.exercise == part.exercise]
        later = [p for p in pending if p.exercise == part.exercise]
        where = f"  ({plain(part.path)})" if part.path else ""
        passed = sum(c.status == "passed" for c in checks)
        lines.append("")
        lines.append(paint(f"{part.exercise}: {part.score:g} / {part.max_score:g} points, "
                           f"{passed} of {len(checks)} checks passed", "heading") + where)
        for note in part.notes:
            lines.append(f"  note: {plain(note)}")
        # A failure many checks share (a file that does not import: every check meets the same
        # ImportError) is shown in full once; after that, "the same error as above".
        shown = {plain(note).rstrip() for note in part.notes}
        lines += [line for c in checks for line in _check_lines(c, paint, shown)]
        if later and is_bughunt(part.exercise):
            lines.append(paint(f"  {bughunt_line(later)}", "bold"))
        elif later:
            counted = ("" if all(p.counted for p in later) else
                       "; those for the faults your copy holds count, any other only if it "
                       "fails")
            lines.append(paint(f"  {hidden_line(later)}{counted}:", "bold"))
            lines += [f"  [{PENDING_WORD:^9}] {p.title}  ({_points(p.points)}"
                      f"{'' if p.counted else ' if it fails'})" for p in later]
    lines.append("")
    lines.append(total_line(result, pending, paint) + _reports(report))
    return "\n".join(lines)


def _reports(report: str | list[str] | None) -> str:
    reports = [report] if isinstance(report, str) else list(report or [])
    if len(reports) > 1:
        return " Reports: " + ", ".join(str(r) for r in reports)
    return f" Report: {reports[0]}" if reports else ""


def is_bughunt(exercise: str) -> bool:
    from grader.course.bughunt import is_bughunt as hunt

    return hunt(exercise)


def bughunt_line(later: list[PendingCheck]) -> str:
    """What a bug hunt's hidden checks are, in one line that names none of them: each counted
    one looks for one fault of the copy (a copy's other checks count only if they fail)."""
    faults = sum(p.counted for p in later)
    return (f"{faults} fault{'' if faults == 1 else 's'} to find, "
            f"{_points(pending_points(later))}, graded when you hand in (breaking what works "
            "costs points too).")


# What a bug hunt's visible checks passing says, in the terminal and in its report.
BUGHUNT_VISIBLE = ("a bug hunt's visible checks look for none of its faults, which are judged "
                   "when you hand in")


def hunt_faults(pending: list[PendingCheck]) -> str:
    """The faults the bug hunts among `pending` hold, counted, with their points."""
    later = [p for p in pending if is_bughunt(p.exercise)]
    faults = sum(p.counted for p in later)
    return f"{faults} fault{'' if faults == 1 else 's'}, {_points(pending_points(later))}"


def hidden_line(later: list[PendingCheck]) -> str:
    """What a module's hidden checks add, in one line (no full stop)."""
    return (f"Hidden checks: {len(later)} more ({_points(pending_points(later))}) run when your "
            "work is graded")


def pending_points(pending: list[PendingCheck]) -> float:
    """What hidden checks are worth at grading: a bug hunt's check for a fault the copy does not
    hold counts only if it fails, so it adds nothing here."""
    return sum(p.points for p in pending if p.counted)


def _points(n: float) -> str:
    return f"{n:g} point" + ("" if n == 1 else "s")


def total_line(result: SubmissionResult, pending: list[PendingCheck], paint: Painter) -> str:
    ran = len(result.checks)
    failing = sum(c.status != "passed" for c in result.checks)
    if ran and not failing and any(is_bughunt(p.exercise) for p in pending):
        # A bug hunt's visible checks pass on the untouched script: "every check passed", in
        # green, read as "no fault left". Which faults remain is the hunt, so not said either.
        verdict = paint(f"The {ran} visible check{'' if ran == 1 else 's'} that ran passed",
                        "bold") + (f"; {BUGHUNT_VISIBLE} ({hunt_faults(pending)}).")
    else:
        verdict = (paint("Every check passed.", "passed") if ran and not failing
                   else paint(f"{failing} of {ran} checks not passed.", "failed") if ran
                   else paint("No check ran.", "error"))
    hidden = (f" Hidden checks, {_points(pending_points(pending))}, run at grading."
              if pending else "")
    return f"Score: {result.score:g} / {result.max_score:g}. {verdict}{hidden}"


def _check_lines(c: CheckResult, paint: Painter, shown: set[str] | None = None) -> list[str]:
    """A check's lines; a message of several lines already in `shown` (added to it) is not
    repeated."""
    state = state_of(c)
    label = f"[{OUTCOMES[state].word:^9}]"
    head = f"  {paint(label, state)} {c.title}  ({c.points:g}/{c.max_points:g})"
    if c.status == "passed":
        return [head]
    if state == "todo":
        return [f"{head}  {paint(OUTCOMES['todo'].label, 'dim')}"]
    message = plain(c.message).rstrip()
    body = message.splitlines() or ["(no message)"]
    if shown is not None and len(body) > 1 and message in shown:
        return [head, INDENT + paint("the same error as above", "dim")]
    if shown is not None:
        shown.add(message)
    if c.stopped_at:
        body.append(f"It was stopped in {plain(c.stopped_at)}.")
    if c.hint and c.hint not in c.message:
        body.append(f"Hint: {c.hint}")
    if len(body) > MAX_MESSAGE_LINES:
        body = body[:MAX_MESSAGE_LINES] + [f"... ({len(body) - MAX_MESSAGE_LINES} more lines "
                                           "in the report)"]
    lines = [head]
    for line in body:
        style = "dim" if line.startswith("Hint:") else None
        lines.append(INDENT + (paint(line, style) if style else line))
    for title in _diagnosis_titles(c):
        lines.append(INDENT + paint(f"Likely cause: {title} (see the report)", "bold"))
    if c.output.strip():
        # (the output kept is its head and tail: a count of its lines alone read as all of it)
        omitted = OMITTED.search(c.output)
        printed = len(OMITTED.sub("\n", c.output).strip().splitlines())
        lines.append(INDENT + paint(
            f"your code printed {printed} line(s)" + (
                f" and {int(omitted['bytes']):,} more bytes left out" if omitted else "")
            + "; see the report", "dim"))
    return lines


# What grader.worker.client.OutputBuffer puts where it cut a long output.
OMITTED = re.compile(r"\n?\[\.\.\. (?P<bytes>\d+) bytes of output omitted \.\.\.\]\n?")


def _diagnosis_titles(c: CheckResult) -> list[str]:
    """Titles of the diagnosed faults the check may name (as in the report: a check revealing
    symptoms only, a bug hunt's, names none; an id the catalogue lacks is named by its id)."""
    if not c.diagnoses:
        return []
    from grader.outputs.report import diagnosis_views

    try:
        views = diagnosis_views(c)
    except Exception:  # noqa: BLE001 - a summary line is not worth failing a check run over
        return []
    return [d.title for d in views if d.cause or not d.known]


def checks_text(result: SubmissionResult) -> str:
    """Every check of `result` per exercise, with its message and diagnoses when it did not
    pass (what `torchgrade gradescope-run` prints into Gradescope's log)."""
    from grader.outputs.report import diagnosis_views

    lines: list[str] = []
    for part in result.exercises:
        lines.append(f"\n{part.exercise}: {part.score:g} / {part.max_score:g}"
                     + (f"  ({plain(part.path)})" if part.path else ""))
        lines += [f"  note: {plain(note)}" for note in part.notes]
        for c in (c for c in result.checks if c.exercise == part.exercise):
            label = OUTCOMES[c.status].word
            lines.append(f"  [{label:^9}] {c.title}  ({c.points:g}/{c.max_points:g}, "
                         f"{c.visibility})")
            if c.status == "passed":
                continue
            lines += [f"              {line}" for line in plain(c.message).splitlines()]
            if c.stopped_at:
                lines.append(f"              It was stopped in {plain(c.stopped_at)}.")
            for d in diagnosis_views(c):
                if not d.known:
                    continue
                said = "likely cause: " + d.title if d.cause else "known symptom"
                lines.append(f"              {said}: {d.symptom}")
                if d.fix:
                    lines.append(f"              fix: {d.fix}")
    return "\n".join(lines)


class ReaderGone:
    """A text stream (the program's stdout) that outlives its reader: `torchgrade grade ... |
    head` closes the pipe after a few lines, and the next write raised BrokenPipeError out of
    a progress line, which ended the run half-way (and Python printed a traceback at exit).
    Once the reader is gone, the stream's descriptor points at /dev/null and the run goes on:
    its work is in its files, not on the screen."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._to_nowhere()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._to_nowhere()

    def _to_nowhere(self) -> None:
        nowhere = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(nowhere, self._stream.fileno())  # what is still buffered goes there too
        finally:
            os.close(nowhere)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)
