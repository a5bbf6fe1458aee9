"""Sizes only the hidden `manual_backward` checks use. Never shipped (a `_hidden` module:
`grader/checks/__init__.py`)."""


VJP_SIZE = 200_000
VJP_DEADLINE = 5.0
