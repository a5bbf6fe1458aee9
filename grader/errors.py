"""The ways a command fails that are not about a submission (a submission's problems never
raise: they end up in its results)."""


class UsageError(Exception):
    """The command cannot run as asked; the message is one line for the user (exit 2)."""


class GraderUnavailable(Exception):
    """The grader itself cannot run (the sandbox does not start): an installation problem."""


class InterruptedBeforeGrading(KeyboardInterrupt):
    """Ctrl-C while `grade` read the class or started, before it graded anything or wrote a
    class file: said apart from an interrupted grading (whose index names who is not graded)."""
