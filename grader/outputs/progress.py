"""What `torchgrade grade` shows while it runs.

On a terminal: a tqdm progress bar with rate, ETA and running counts (graded, full marks, code
errors, and grader failures if any). Otherwise (a log file, CI): one plain line per submission,
nothing redrawn. The CLI prints the summary line at the end.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

from grader.models import SubmissionResult
from grader.outputs.summary import is_grader_failure


class Progress:
    def __init__(self, stream: TextIO | None = None, *, interactive: bool | None = None):
        self.stream = stream or sys.stdout
        self.interactive = self.stream.isatty() if interactive is None else interactive
        self.bar: Any = None  # a tqdm bar while one is shown (tqdm has no types)
        self.graded = self.full = self.errors = self.failures = 0
        self.started = False  # grading began (the class is read, its grading processes start)

    def start(self, total: int, up_to_date: int) -> None:
        self.started = True
        if up_to_date:
            self.line(f"{up_to_date} of {total} submissions are already graded (same files, same "
                      "grader): kept. --force grades them again.")
        if self.interactive and total > up_to_date:
            from tqdm import tqdm

            self.bar = tqdm(total=total - up_to_date, file=self.stream, unit="sub",
                            desc="grading", dynamic_ncols=True, smoothing=0.05,
                            bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} "
                                       "[{elapsed}<{remaining}, {rate_fmt}] {postfix}")
            self.bar.set_postfix_str(self.counts(), refresh=False)

    def result(self, result: SubmissionResult) -> None:
        self.graded += 1
        self.full += bool(result.checks) and result.final_score == result.max_score > 0
        broken = sum(c.status in ("error", "timeout", "crashed") for c in result.checks)
        self.errors += broken > 0
        self.failures += is_grader_failure(result)
        if self.bar is not None:
            self.bar.set_postfix_str(self.counts(), refresh=False)
            self.bar.update(1)
            return
        if is_grader_failure(result):
            flag = "  NOT GRADED: " + "; ".join(result.notes)
        else:
            not_passed = sum(c.status != "passed" for c in result.checks)
            flag = f"  ({not_passed} not passed)" if not_passed else ""
        if result.late_penalty:  # the final grade, the penalty spelled out
            flag = f"  (late: -{result.late_penalty:g} from {result.score:g})" + flag
        self.line(f"  {result.student:<24} {result.final_score:g} / {result.max_score:g}{flag}")

    def counts(self) -> str:
        # "code errors": the students' (a check's code raised, timed out or crashed), never
        # the grader's, which are the failures counted apart
        text = f"full marks {self.full}, code errors {self.errors}"
        return text + (f", GRADER FAILURES {self.failures}" if self.failures else "")

    def line(self, text: str) -> None:
        if self.bar is not None:
            self.bar.write(text, file=self.stream)
        else:
            print(text, file=self.stream, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
