"""Authoring: what proves a course's checks (`torchgrade verify`): generated mutants of the
solutions (mutation.py) and the verification of every exercise (verify.py)."""
