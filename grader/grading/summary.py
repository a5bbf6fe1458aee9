"""What a run of `torchgrade grade` (or a shard of it) did: `GradeSummary` in memory, and the
record it leaves in OUT for `torchgrade index` (`ShardSummary`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from pydantic import BaseModel

from grader.intake.assignment import Assignment
from grader.intake.shards import Shard
from grader.intake.submission import INDEX
from grader.models import SubmissionResult
from grader.outputs.writing import write_atomic


@dataclass
class GradeSummary:
    out: Path
    results: list[SubmissionResult] = field(default_factory=list)
    exercises: list[str] = field(default_factory=list)
    assignment: Assignment | None = None
    graded: int = 0          # graded by this run
    up_to_date: int = 0      # skipped: their results.json already had the same fingerprint
    failures: int = 0        # the grader could not grade them (recorded, retried next run)
    check_errors: int = 0    # graded, but some check failed itself (not final, retried too)
    # graded, but some check was lost to the machine (its worker killed for memory another
    # process held): not final, graded again by the next run
    lost: list[str] = field(default_factory=list)
    seconds: float = 0.0
    shard: Shard | None = None  # a job array's shard: no class files (`torchgrade index`)
    # Results already in OUT of students with no submission in this run: in the class files
    # (as `torchgrade index` lists them), never counted as graded by this run.
    earlier: list[SubmissionResult] = field(default_factory=list)
    # Students this run grades again who had a grade in OUT (their files, the grading or the
    # assignment changed, or --force): their earlier final score and maximum. The earlier
    # results.json is kept as results.previous.json.
    replaced: dict[str, tuple[float, float]] = field(default_factory=dict)
    # Students this run was to grade and did not (Ctrl-C, or the sandbox failed): their grade
    # is what OUT held before, if anything, and the class files say the run is incomplete.
    not_graded: list[str] = field(default_factory=list)

    @property
    def index(self) -> Path:
        return self.out / INDEX

    @property
    def full_marks(self) -> int:
        # (the grade's, after any late penalty: as the class index counts them)
        return sum(r.max_score > 0 and r.final_score == r.max_score for r in self.results)


SHARDS = ".shards"  # OUT/.shards/K-of-N.json: what each shard of a job array graded
# The record of the last whole run (a ShardSummary of shard "all"): `torchgrade index` finds the
# assignment file in it (the roster's names and ids, the due date), and the students the run
# stopped before grading (then it writes no gradebook either: one would read as complete).
RUN_RECORD = ".torchgrade-run.json"


class ShardSummary(BaseModel):
    """What one shard graded (OUT/.shards/K-of-N.json), or a whole run (OUT/RUN_RECORD, shard
    "all"): `torchgrade index` reads these for the exercises and the assignment file of the
    class (when not given them again), and for the students a run stopped before grading."""

    shard: str
    students: list[str]
    graded: int
    up_to_date: int
    failures: int
    seconds: float
    exercises: list[str]
    assignment_name: str = ""
    assignment_file: str | None = None
    finished_at: datetime
    not_graded: list[str] = []  # its students it stopped before grading (Ctrl-C, the sandbox)


def write_shard_summary(summary: GradeSummary, *, assignment: Path | None) -> None:
    """OUT/.shards/K-of-N.json for a shard (only it writes that name), else OUT/RUN_RECORD;
    atomically."""
    plan = summary.assignment
    path = (summary.out / SHARDS / f"{summary.shard.name}.json" if summary.shard is not None
            else summary.out / RUN_RECORD)
    record = ShardSummary(
        shard=str(summary.shard or "all"), students=sorted(r.student for r in summary.results),
        graded=summary.graded, up_to_date=summary.up_to_date, failures=summary.failures,
        seconds=round(summary.seconds, 3), exercises=list(summary.exercises),
        assignment_name=plan.name if plan else "",
        assignment_file=str(Path(assignment).resolve()) if assignment is not None else None,
        finished_at=datetime.now(timezone.utc), not_graded=sorted(summary.not_graded))
    write_atomic(path, record.model_dump_json(indent=2))
