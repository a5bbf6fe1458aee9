"""The ways a command fails that are not about a submission (a submission's problems never
raise: they end up in its results)."""


class UsageError(Exception):
    """The command cannot run as asked; the message is one line for the user (exit 2)."""


class GraderUnavailable(Exception):
    """The grader itself cannot run (the sandbox does not start): an installation problem."""


class InterruptedGrading(KeyboardInterrupt):
    """Ctrl-C once `grade` had begun grading (its class read): said apart from one before,
    when nothing is graded nor written yet (this one's index names who is not graded)."""
