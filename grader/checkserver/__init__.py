"""The warm local check: `torchgrade check` answered by a grader process that stays up.

A cold `torchgrade check` imports torch twice (the grader, the sandbox's worker parent) before
its first verdict. So the first check of a user leaves a server behind (`server`), and later
checks, from any terminal, send it their command line (`client`) instead of starting a grader:
the server runs exactly what `torchgrade check` runs, with its warm worker parent; the student's
code is still loaded fresh in a new sandboxed worker for every check.

One server per user, Python and course folder (`address`): it listens on a Unix socket in a
folder only its user can open, answers only its own user (the peer's uid), exits after
`IDLE_ENV` seconds without a request, and answers a client whose installation differs from its
own (torchgrade's files, the course's, the dependencies, TORCHGRADE_* settings) by exiting, so
that client checks in its own process and leaves a fresh server.
"""
