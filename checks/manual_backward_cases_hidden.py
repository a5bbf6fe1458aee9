"""Sizes only the hidden `manual_backward` checks use. Never shipped (a `_hidden` module:
`checks/README.md`)."""


VJP_SIZE = 200_000
VJP_DEADLINE = 5.0
