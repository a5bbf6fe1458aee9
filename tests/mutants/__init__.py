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
    # Catalogued faults (grader/course/faults.toml) the mutant holds: a failing check must name each
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
    catalogued faults a mutant holds, and `VISIBLE_FAILS` (mutant name -> check names) the
    visible checks of a bug hunt it also fails (`RUN_RAISES` or `NOT_FINITE`)."""
    try:
        module = importlib.import_module(f"mutants.{exercise}")
    except ModuleNotFoundError:
        return []
    extra = getattr(module, "DIAGNOSES", {})
    visible = getattr(module, "VISIBLE_FAILS", {})
    for table, name in ((extra, "DIAGNOSES"), (visible, "VISIBLE_FAILS")):
        unknown = set(table) - {m.name for m in module.MUTANTS}
        if unknown:
            raise ValueError(f"mutants.{exercise}.{name} names no mutant: {sorted(unknown)}")
    return [replace(m, diagnoses=m.diagnoses | frozenset(extra.get(m.name, ())),
                    fails=m.fails | {f"{exercise}.{c}" for c in visible.get(m.name, ())})
            for m in module.MUTANTS]


# A bug hunt's visible checks (0 points; grader/checks/bughunt_visible.py) say nothing about a
# fault unless it makes run(seed=0) raise (each of them then says what it raised) or its history
# stop being finite: a mutant doing either fails these too (its `VISIBLE_FAILS`).
RUN_RAISES = ("run_finishes", "run_returns_its_contract", "history_is_finite",
              "model_outputs_have_their_shapes")
NOT_FINITE = ("history_is_finite",)


def visible_mutants(exercise: str, returned: str, *, raises_also: tuple[str, ...] = ()
                    ) -> list[Mutant]:
    """Mutants of what `run` returns (its `return` line is `returned`), each failing visible
    checks of the bug hunt and, when `run` raises, the hidden checks `raises_also`."""
    M = mutant_factory(exercise)
    return [
        M("visible_run_raises", "", *RUN_RAISES, *raises_also, replace=[(
            returned, '    raise RuntimeError("the summary is not written yet")\n')]),
        M("visible_returns_the_history_alone", "", "run_returns_its_contract",
          "history_is_finite", "model_outputs_have_their_shapes",
          replace=[(returned, "    return history\n")]),
        M("visible_history_one_short", "", "run_returns_its_contract", replace=[(
            returned, '    history["val_loss"] = history["val_loss"][:-1]\n' + returned)]),
        M("visible_history_ends_in_nan", "", "history_is_finite", replace=[(
            returned, '    history["train_loss"][-1] = float("nan")\n' + returned)]),
        M("visible_returns_another_model", "", "model_outputs_have_their_shapes", replace=[(
            returned, "    model = nn.Identity()\n" + returned)]),
    ]


def catalogue_mutants(exercise: str) -> list[Mutant]:
    """A bug hunt's fixed script with one catalogued fault injected the catalogue's way
    (grader/course/faults.toml `[[fault.inject]]`): it fails exactly the check that scores the fault
    there, and that check diagnoses it."""
    from grader.course.faults import catalogue

    return [Mutant(exercise, f"catalogue_{fault.id}", frozenset({f"{exercise}.{inj.check}"}),
                   replace=tuple(tuple(pair) for pair in inj.replace),
                   diagnoses=frozenset({fault.id}))
            for fault in catalogue().values() for inj in fault.inject if inj.exercise == exercise]
