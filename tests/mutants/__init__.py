"""Wrong implementations of every exercise, each naming exactly the checks it must fail.

`tests/mutants/<exercise>.py` defines `MUTANTS`. A mutant is the reference solution with either a
block of code appended (redefining a function or class: the later definition wins) or textual
replacements applied, or both. `test_checks_catch_mutants.py` grades every mutant and requires
its failing checks to be exactly `fails`, and every check of the exercise to be failed by some
mutant.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class Mutant:
    exercise: str
    name: str
    fails: frozenset[str]
    code: str = ""
    replace: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    # Catalogued faults (grader/faults.toml) the mutant holds: a failing check must name each
    # in its diagnoses (test_checks_catch_mutants); empty for mutants that are no catalogued
    # fault.
    diagnoses: frozenset[str] = frozenset()

    def apply(self, solution: str) -> str:
        source = solution
        for old, new in self.replace:
            if old not in source:
                raise ValueError(f"mutant {self.name}: {old!r} is not in the solution")
            source = source.replace(old, new)
        return source + ("\n\n" + self.code if self.code else "")


def mutant_factory(exercise: str):
    """`M(name, code, *fails, replace=((old, new), ...))` with check ids relative to `exercise`."""

    def make(name: str, code: str, *fails: str, replace=(), diagnoses=()) -> Mutant:
        return Mutant(exercise, name, frozenset(f"{exercise}.{f}" for f in fails), code,
                      tuple(replace), frozenset(diagnoses))

    return make


def mutants_of(exercise: str) -> list[Mutant]:
    """The module's `MUTANTS`; its optional `DIAGNOSES` (mutant name -> fault ids) adds the
    catalogued faults a mutant holds."""
    try:
        module = importlib.import_module(f"mutants.{exercise}")
    except ModuleNotFoundError:
        return []
    extra = getattr(module, "DIAGNOSES", {})
    unknown = set(extra) - {m.name for m in module.MUTANTS}
    if unknown:
        raise ValueError(f"mutants.{exercise}.DIAGNOSES names no mutant: {sorted(unknown)}")
    return [replace(m, diagnoses=m.diagnoses | frozenset(extra.get(m.name, ())))
            for m in module.MUTANTS]


def catalogue_mutants(exercise: str) -> list[Mutant]:
    """A bug hunt's fixed script with one catalogued fault injected the catalogue's way
    (grader/faults.toml `[[fault.inject]]`): it fails exactly the check that scores the fault
    there, and that check diagnoses it."""
    from grader.faults import catalogue

    return [Mutant(exercise, f"catalogue_{fault.id}", frozenset({f"{exercise}.{inj.check}"}),
                   replace=tuple(tuple(pair) for pair in inj.replace),
                   diagnoses=frozenset({fault.id}))
            for fault in catalogue().values() for inj in fault.inject if inj.exercise == exercise]
