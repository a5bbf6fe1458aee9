"""Graded checks, one layout per exercise `m` (a bug hunt `bughunt_<name>` is an exercise too):

    test_m.py              the visible checks: imports, then @check functions, nothing else
    test_m_hidden.py       the hidden checks: the same
    m_cases.py             inputs the checks send (case definitions, seeded generators)
    m_verify.py            verifiers: how a check reads what comes back and judges it, hints,
                           tolerances, evidence helpers (also recomputations from what the
                           student's code produced, which must run wherever the checks run)
    m_reference.py         answers fixed by a case (the exercise's work done by the grader):
                           never shipped; a release ships the values the visible checks got
                           from it, recorded (`grader/release/replay.py`)
    m_cases_hidden.py      inputs and verifiers that only hidden checks use: any module whose
    m_verify_hidden.py     name ends in `_hidden` never ships, a visible check may not import
                           it (the release refuses), and the leak scan treats its text as a
                           hidden check's (`grader/release/leaks.py`)

A helper without `test_` is not collected. A release ships a visible check file with the helper
modules it imports, so `m_cases.py` and `m_verify.py` must hold nothing a hidden check keeps
secret. Check files never import each other; what several share lives in a helper. Shared by
every bug hunt: `bughunt_visible.py` (their visible verifiers and `Contract`) and
`bughunt_common.py` (their hidden verifiers and `TrainCase`, imported by hidden checks only).
`tests/test_checks_catch_mutants.py` enforces the check files' layout.

Run by `grader.running.runner` or directly: `pytest grader/checks --submission PATH`.
"""
