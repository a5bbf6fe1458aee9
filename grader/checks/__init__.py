"""Graded checks: `test_<exercise>.py` (visible to students) and `test_<exercise>_hidden.py`.

Run by `grader.running.runner` or directly: `pytest grader/checks --submission PATH`.
"""
