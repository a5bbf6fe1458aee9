"""Stage 3, running: the checks of one submission, a batch of them in one pytest session, the pool
of grading processes."""
