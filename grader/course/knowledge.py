"""What a course knows beyond its checks: the evidence keys its checks record and the diagnosis
rules that read them, declared in its `checks/diagnoses.py` (docs/AUTHORING.md).

A course's rules are its own: a rule is written for the evidence its course's checks record, and
another course's rule would fire on checks it was never written for. Its keys are its own, the
grader's (`grader.evidence.E`) and the default course's (the shipped curriculum, or a release's
own course), whose faults it inherits (`grader.course.faults`): a check of any course may record
what the shipped checks record, and name one of those faults (`fail(..., fault=ID)`). Every rule
names a fault of the course's catalogue: `torchgrade verify` refuses one that does not
(`refuse_unknown_faults`: a typo would never diagnose); at grading it is only inert, since a
student release's catalogue holds the faults its visible checks detect and no more.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import types
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from grader.course import faults
from grader.course.folder import Course, CourseError, active_course, default_root
from grader.evidence import KEYS, Key, Keys, Rule, keys_of

DIAGNOSES = "diagnoses.py"  # in a course's checks/: its evidence keys (class E) and rules


@dataclass(frozen=True)
class Knowledge:
    keys: Mapping[str, Key]               # every evidence key its checks may record
    rules: tuple[tuple[str, Rule], ...]   # (fault id, rule), in the order they are tried


def knowledge(course: Course | None = None) -> Knowledge:
    """The keys and rules of `course` (default: the active one); see the module docstring."""
    course = course or active_course()
    own = _stamped(course.checks_dir / DIAGNOSES)
    base = _stamped(default_root().resolve() / "checks" / DIAGNOSES)
    return Knowledge(keys={**KEYS, **base.keys, **own.keys}, rules=own.rules)


def refuse_unknown_faults(course: Course) -> None:
    """CourseError (one line) for a rule of `course` whose fault its catalogue does not list
    (nor the faults it inherits)."""
    known = {f.id for f in faults.load(course).fault}
    unknown = [fault for fault, _ in knowledge(course).rules if fault not in known]
    if unknown:
        raise CourseError(f"{course.checks_dir / DIAGNOSES}: a rule for the fault {unknown[0]}, "
                          "which the course's faults.toml does not list (nor the faults it "
                          "inherits)")


def diagnoses_module(course: Course) -> types.ModuleType | None:
    """The course's own `checks/diagnoses.py`, imported (None: it has none)."""
    path = (course.checks_dir / DIAGNOSES).resolve()
    return _load(path) if path.is_file() else None


def _stamped(path: Path) -> Knowledge:
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:
        stamp = 0
    return _read(path.resolve(), stamp)


@lru_cache(maxsize=16)
def _read(path: Path, stamp: int) -> Knowledge:
    """The keys (every `Keys` class of the module: its `E`) and rules (`@rule` functions, in the
    order declared) of one course's diagnoses module; nothing when it has none."""
    if not stamp:
        return Knowledge(keys={}, rules=())
    module = _load(path)
    keys: dict[str, Key] = {}
    for value in vars(module).values():
        if isinstance(value, type) and issubclass(value, Keys):
            keys.update(keys_of(value))
    rules: dict[str, Rule] = {}
    for value in vars(module).values():
        fault = getattr(value, "fault_id", None)
        if isinstance(value, types.FunctionType) and isinstance(fault, str):
            if fault in rules:
                raise CourseError(f"{path}: two rules for the fault {fault}")
            rules[fault] = value
    return Knowledge(keys=keys, rules=tuple(rules.items()))


def _load(path: Path) -> types.ModuleType:
    """The module at `path`, under a name of its own (two courses' diagnoses never mix);
    CourseError (one line naming the file) when it cannot be imported."""
    name = "torchgrade_diagnoses_" + hashlib.sha256(str(path).encode()).hexdigest()[:16]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise CourseError(f"{path}: cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - an author's module: one line, not a traceback
        del sys.modules[name]
        raise CourseError(f"{path}: cannot be imported ({type(exc).__name__}: "
                          f"{str(exc)[:300]})") from None
    return module
