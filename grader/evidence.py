"""Evidence: the facts a check may record, declared once (name, type, meaning, writers), and
the diagnosis rules that read them.

Checks record evidence (`fail(..., evidence={...})`, or the `evidence` fixture dict) that the
grader reads after them: diagnosis rules, report pictures (`grader.outputs.plots`) and report
facts (`grader.outputs.report`). This module is the contract between those steps:

- a key is a class attribute of a `Keys` class, so its name is written once: `E.loss_curve` is
  the key "loss_curve", and `E.loss_curve.get(evidence)` reads it (its value as recorded, never
  converted: a reader still copes with any shape, evidence is no verdict);
- `E` here holds the keys the grader itself reads or writes (its pictures, its generic
  instrumentation): any course's checks may write them. A course declares its own keys in its
  `checks/diagnoses.py`, as a subclass of `E` (`class E(grader.evidence.E)`), beside the rules
  that read them (`rule`); `grader.course.knowledge` gathers both (docs/AUTHORING.md);
- readers go through a `Keys` class (an attribute that is not declared is an AttributeError),
  never through a string, so an undeclared key cannot be read silently;
- `problems(evidence, keys)` names the keys of a recorded dict that are undeclared or of another
  type than declared; `grader.checking.plugin` calls it where a check's evidence is recorded.

Types describe what the check's own code records. Values a check copies from student code or
from a worker's record (`returned`, curves returned by the student) are declared loosely:
such a value may be anything, and it must never turn a check's verdict.

Imports only the standard library and pydantic: this module describes data and reads it, it
runs nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter, ValidationError

if TYPE_CHECKING:
    from grader.models import CheckResult

# Shapes of evidence values (JSON as results.json holds them: tuples are lists there).
Number = float  # an int is a number too
Count = int
Flag = bool
Text = str
Series = list[float | str | None]  # numbers; None or "nan"/"inf" text where not finite
Steps = list[int]  # 1-based step (update) numbers
Names = list[str]
Shape = list[int]
Json = Any  # plain data of any shape (often copied from student code or a worker's record)


class Key:
    """One evidence key. Its name is the attribute it is bound to in `E`.

    `writers`: the modules that record it: the grader's (for a key of `E`) or the course's
    check modules (`checks/<name>.py`, for a key of the course's own).
    `drawn`: a report picture (`grader.outputs.plots`) shows it, so the report does not repeat it
    as a
    text fact. `shown_only`: no rule or picture reads it; the report shows it as a fact."""

    def __init__(self, type_: Any, meaning: str, *writers: str, drawn: bool = False,
                 shown_only: bool = False):
        self.type = type_
        self.meaning = meaning
        self.writers = writers
        self.drawn = drawn
        self.shown_only = shown_only
        self.name = ""
        self._adapter: TypeAdapter | None = None

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Key({self.name!r})"

    def get(self, evidence: Mapping[str, Any], default: Any = None) -> Any:
        """The value recorded under this key (as recorded), or `default`."""
        return evidence.get(self.name, default)

    def problem(self, value: Any) -> str | None:
        """Why `value` is not of this key's type, or None when it is."""
        if self._adapter is None:
            self._adapter = TypeAdapter(self.type)
        try:
            self._adapter.validate_python(_as_json(value), strict=True)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            return (f"evidence {self.name!r} is not {_type_name(self.type)}"
                    f"{f' (at {where})' if where else ''}: {first['msg']}")
        return None


def _as_json(value: Any) -> Any:
    """`value` as results.json will hold it: tuples become lists."""
    if isinstance(value, (list, tuple)):
        return [_as_json(v) for v in value]
    if isinstance(value, dict):
        return {k: _as_json(v) for k, v in value.items()}
    return value


def _type_name(t: Any) -> str:
    return getattr(t, "__name__", None) or str(t).replace("typing.", "")


class Keys:
    """A class whose `Key` attributes declare evidence keys (`keys_of` lists them)."""


class E(Keys):
    """The keys the grader reads or writes itself, by theme: meaning first, then the grader's
    modules that write it (none: only courses' checks do). A course extends it."""

    # ----------------------------------------------------------- training steps and gradients
    grad_ratio = Key(float | str | None | Series | list[Series],
                     "p.grad at each update over the newest batch's gradient (1 right, 2 for "
                     "two batches summed); for a gradient computed by hand, the constant factor "
                     "between the gradient returned and the right one", drawn=True)
    params_without_grad = Key(Count | Names, "trainable parameters no backward pass reached "
                              "(a count, or their names)", "bughunt_e2e")
    grad_histograms = Key(dict[str, Json], "per parameter tensor (at most 8), the distribution of "
                          "log10|grad| at the first and the last optimizer step, yours and the "
                          "reference's on the same data: {steps, reference_steps, layers: [{name, "
                          "yours_first, yours_last, reference_first, reference_last}]}, each a "
                          "grader.checking.compare.grad_histogram", drawn=True)

    # ----------------------------------------------------------- losses and learning rates
    loss_curve = Key(list[Json], "the loss at each step or batch, as the student's code gave "
                     "it", drawn=True)
    reference_loss_curve = Key(Series, "the reference's loss at each step or batch", drawn=True)
    val_loss_curve = Key(list[Json], "the validation loss per epoch (the training's history)",
                         drawn=True)
    reference_val_loss_curve = Key(Series, "the reference's validation loss per epoch", drawn=True)
    lr_per_step = Key(list[Json], "the learning rate at each update", drawn=True)
    reference_lr_per_step = Key(Series, "the reference's learning rate at each update", drawn=True)

    # ----------------------------------------------------------- losses and outputs
    error = Key(Text, "the error student code raised (torch's text, read by rules)")

    # ----------------------------------------------------------- the data
    shares_memory_with_input = Key(Flag, "the result is a view of the input", "compare")
    changed_inputs = Key(Names, "inputs (shared arrays) the call wrote into", "student",
                         shown_only=True)

    # ----------------------------------------------------------- gradients, descents, sweeps
    grad_errors = Key(list[dict[str, Json]], "per gradient: its name, worst error and the "
                      "tolerance there (grader.checking.compare.error_evidence)", drawn=True)
    descent_path = Key(list[list[Number] | None], "(w, b) after each step of the student's "
                       "gradient descent", drawn=True)
    reference_descent_path = Key(list[list[Number]], "(w, b) after each reference step", drawn=True)
    loss_surface = Key(dict[str, Number], "the five moments that fix L(w, b) of the descent "
                       "picture", drawn=True)
    lr_sweep = Key(dict[str, Json], "the student's gradient descent at three learning rates on "
                   "a one-feature problem: {surface: the five moments of its loss, steps, runs: "
                   "[{lr, yours: (w, b) per step or None, reference: the same, problem: why "
                   "yours is missing}]}", drawn=True)

    # ----------------------------------------------------------- shapes and strides
    shapes = Key(list[Shape], "the shapes broadcast (or the shape and the target)", drawn=True)
    shape_labels = Key(Names, "labels of those shapes", drawn=True)
    expected_shape = Key(Shape | None, "the broadcast shape (None: incompatible)", drawn=True)
    got_shape = Key(list[Json], "the shape the student's function returned", drawn=True)
    expected_strides = Key(list[Json], "the strides of the broadcast view", drawn=True)
    got_strides = Key(list[Json], "the strides the student's function returned", drawn=True)

    # ----------------------------------------------------------- bug hunts' end-to-end runs
    params_unchanged = Key(Names, "parameter tensors run() left at their initial values "
                           "(beyond those with negligible gradients)", "bughunt_e2e",
                           shown_only=True)
    unchanged_elements = Key(Count, "parameter elements run() left at their initial values",
                             "bughunt_e2e", shown_only=True)
    frozen_elements = Key(Count, "parameter elements the contract freezes", "bughunt_e2e",
                          shown_only=True)
    learnable_elements = Key(Count, "elements of the parameters (and tensors that require grad) "
                             "of the model run() trains", "bughunt_e2e", shown_only=True)
    expected_elements = Key(Count, "elements of the parameters of the contract's network",
                            "bughunt_e2e", shown_only=True)
    distinct_train_samples = Key(Count, "distinct samples the training loader yields in two "
                                 "passes", "bughunt_e2e", shown_only=True)
    distinct_val_samples = Key(Count, "distinct samples the validation loader yields",
                               "bughunt_e2e", shown_only=True)
    val_samples_in_training = Key(Count, "validation samples the training loader yields",
                                  "bughunt_e2e")
    training_samples_in_validation = Key(Count, "training samples the validation loader yields",
                                         "bughunt_e2e")
    unrecognised_rows = Key(Count, "rows the loaders yield that are no sample of the data",
                            "bughunt_e2e", shown_only=True)
    train_wrong_labels = Key(Count, "training samples yielded with another sample's label",
                             "bughunt_e2e")
    val_wrong_labels = Key(Count, "validation samples yielded with another sample's label",
                           "bughunt_e2e")
    outcome = Key(Number | None, "accuracy (or mean squared error) of the model run() returned "
                  "on the validation samples", "bughunt_e2e", shown_only=True)
    reference_outcome = Key(Number, "the same of the fixed script's run", "bughunt_e2e",
                            shown_only=True)
    outcome_metric = Key(Text, "accuracy or mse", "bughunt_e2e", shown_only=True)
    script_data_differs = Key(Flag, "the script's data function gave other samples than the "
                              "contract's: its outcome is not compared", "bughunt_e2e",
                              shown_only=True)

    # ----------------------------------------------------------- written by the grader itself
    omitted = Key(Text, "evidence too large for its result, dropped whole", "models",
                  shown_only=True)


def keys_of(cls: type) -> dict[str, Key]:
    """name -> Key, for every key `cls` declares or inherits."""
    return {k.name: k for klass in reversed(cls.__mro__) for k in vars(klass).values()
            if isinstance(k, Key)}


KEYS: dict[str, Key] = keys_of(E)


def undeclared(evidence: Mapping[str, Any], keys: Mapping[str, Key] = KEYS) -> list[str]:
    """The keys of `evidence` not declared among `keys` (default: the grader's own)."""
    return [name for name in evidence if name not in keys]


def problems(evidence: Mapping[str, Any], keys: Mapping[str, Key] = KEYS) -> list[str]:
    """What is wrong with a check's recorded evidence: keys not declared among `keys` (the
    course's: `grader.course.knowledge`), values not of their key's type. Empty when all is
    declared."""
    out = []
    for name, value in evidence.items():
        key = keys.get(name)
        if key is None:
            out.append(f"evidence key {name!r} is not declared (grader.evidence.E or the "
                       "course's checks/diagnoses.py)")
            continue
        problem = key.problem(value)
        if problem:
            out.append(problem)
    return out


# --------------------------------------------------------------------------- diagnosis rules

Rule = Callable[["CheckResult"], bool]


def rule(fault_id: str) -> Callable[[Rule], Rule]:
    """Declare a diagnosis rule: a function of one `CheckResult` (its evidence, status, message
    and targets) that says whether the catalogued fault `fault_id` (the course's faults.toml)
    explains why the check did not pass. A course's `checks/diagnoses.py` declares its rules so;
    they run in the order they are declared."""
    def declare(fn: Rule) -> Rule:
        fn.fault_id = fault_id  # type: ignore[attr-defined]
        return fn
    return declare


def ev(check: CheckResult, key: Key, default: Any = None) -> Any:
    """The evidence `check` recorded under `key`, as recorded; rules cope with any shape (a
    wrong one is a TypeError, hence no diagnosis)."""
    return key.get(check.evidence, default)


def says(check: CheckResult, *phrases: str) -> bool:
    """The check's message or recorded error contains one of `phrases` (torch's own error
    texts, which are stable)."""
    text = f"{check.message}\n{ev(check, E.error, '')}"
    return any(p in text for p in phrases)


def numbers(values: Any) -> list[float]:
    """The numbers of a flat evidence list (non-numbers skipped)."""
    if not isinstance(values, Iterable) or isinstance(values, (str, bytes, dict)):
        return []
    return [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]


def targets(check: CheckResult, name: str) -> bool:
    return name in check.targets


def flags(values: Any) -> list:
    return list(values) if isinstance(values, list) else []
