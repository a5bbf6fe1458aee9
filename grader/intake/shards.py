"""Job arrays: `torchgrade grade --shard K/N` grades the K-th of N disjoint, stable shards.

A student's shard depends only on their id and N (a hash of the id, modulo N), never on who
else is in the class: a student added to or removed from the folder moves nobody else, and
every shard of one class computes the same split without talking to the others. K is 1-based
(1..N), as Slurm's `--array=1-N` gives it in `$SLURM_ARRAY_TASK_ID`; a Kubernetes Indexed
Job's `$JOB_COMPLETION_INDEX` is 0-based, so it is passed as `$((JOB_COMPLETION_INDEX + 1))/N`.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from grader.errors import UsageError

MAX_SHARDS = 100_000
SHARD = re.compile(r"^\s*(\d{1,6})\s*/\s*(\d{1,6})\s*$")


@dataclass(frozen=True)
class Shard:
    """The K-th (1-based) of N shards of a class."""

    k: int
    n: int

    def __post_init__(self) -> None:
        if not (1 <= self.n <= MAX_SHARDS and 1 <= self.k <= self.n):
            raise UsageError(f"{self.k}/{self.n}: K must be 1..N (1-based, as Slurm's "
                             f"--array=1-N), N at most {MAX_SHARDS}")

    def holds(self, student: str) -> bool:
        return shard_of(student, self.n) == self.k

    @property
    def name(self) -> str:
        """A file-name-safe label, e.g. `2-of-8`."""
        return f"{self.k}-of-{self.n}"

    def __str__(self) -> str:
        return f"{self.k}/{self.n}"


def shard_of(student: str, n: int) -> int:
    """The shard (1..n) of a student id: the first 8 bytes of sha256(id), modulo n (stable
    across machines, Python versions and runs, unlike `hash()`)."""
    digest = hashlib.sha256(student.encode("utf-8", "surrogateescape")).digest()
    return int.from_bytes(digest[:8], "big") % n + 1


def parse_shard(text: str) -> Shard:
    """`K/N` (1 <= K <= N) as a Shard; UsageError (one line) for anything else."""
    match = SHARD.match(text or "")
    if match is None:
        raise UsageError(f"{text!r}: expected K/N with whole numbers, e.g. --shard 1/4 "
                         "(K is 1-based: 1..N)")
    return Shard(int(match.group(1)), int(match.group(2)))
