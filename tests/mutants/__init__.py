"""Wrong implementations of every exercise, each naming exactly the checks it must fail.

`tests/mutants/<exercise>.py` defines `MUTANTS`. A mutant is the reference solution with either a
block of code appended (redefining a function or class: the later definition wins) or textual
replacements applied, or both. `test_checks_catch_mutants.py` grades every mutant and requires
its failing checks to be exactly `fails`, and every check of the exercise to be failed by some
mutant.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Mutant:
    exercise: str
    name: str
    fails: frozenset[str]
    code: str = ""
    replace: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    def apply(self, solution: str) -> str:
        source = solution
        for old, new in self.replace:
            if old not in source:
                raise ValueError(f"mutant {self.name}: {old!r} is not in the solution")
            source = source.replace(old, new)
        return source + ("\n\n" + self.code if self.code else "")


def mutant_factory(exercise: str):
    """`M(name, code, *fails, replace=((old, new), ...))` with check ids relative to `exercise`."""

    def make(name: str, code: str, *fails: str, replace=()) -> Mutant:
        return Mutant(exercise, name, frozenset(f"{exercise}.{f}" for f in fails), code,
                      tuple(replace))

    return make


def mutants_of(exercise: str) -> list[Mutant]:
    try:
        module = importlib.import_module(f"mutants.{exercise}")
    except ModuleNotFoundError:
        return []
    return list(module.MUTANTS)
