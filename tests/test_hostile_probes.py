"""Records made in the worker (issue 15, class 7): a submission must not be able to fake them.

Three routes, each tried written several ways:

- **Replacing probe code** from the student's module: a probe function swapped through the
  module, `sys.modules`, the `grader` package, its `__code__` or its `__globals__`; the line
  counter's trusted `sys.settrace` swapped; the tracer's own counter reset through
  `sys.gettrace()`.
- **Patching a probe class** (a hook recorder, the recording loss), imported or reached through
  the objects a probe hands to student code, and the library function a recorder measures with
  (`torch.is_grad_enabled`).
- **A row loop run by C code** (`map`, `itertools.starmap`, `sum` or `functools.reduce` over
  numpy ufuncs) that runs no Python line: the grader times it itself.

Every attack below got full marks on the check it targets before the fix. Then: honest
vectorised solutions in other styles still pass, and a check that rests on a record made in the
worker says so in its result and report.
"""

from __future__ import annotations

import pytest

from conftest import REPO, SOLUTIONS
from grader.outputs.report import render_report
from conftest import run_and_score
from grader.checking.selection import CheckSelection
from grader.intake.submission import load_submission

STRIDES = "strides_broadcasting"
LOOPS = "training_loops"
VECTORISED = "strides_broadcasting.pairwise_sq_dists_is_vectorised"
NO_GRAD = "training_loops.evaluate_eval_mode_without_grad"

# A loop over the rows of `a`, the kind the line counter exists to catch.
ROW_LOOP = """

def pairwise_sq_dists(a, b):
    out = np.empty((len(a), len(b)))
    for i in range(len(a)):
        out[i] = ((a[i] - b) ** 2).sum(axis=1)
    return out
"""

# What a forged line count returns: the student's value, no steps, nothing tampered with.
FAKE_COUNT = """

def _fake_count(module, name, *args, **kwargs):
    return {"value": getattr(module, name)(*args, **kwargs), "steps": 0, "threads": 0,
            "tampered": []}
"""

# Each patch is wrapped so that an import the grader refuses leaves the rest of the module
# working: only the target check's verdict tells whether the patch reached the probe.
TRACING_ATTACKS = {
    "module_attribute": """
try:
    import grader.probes.tracing as _t
    _t.count_steps = _fake_count
except Exception:
    pass
""",
    "sys_modules_entry": """
import sys as _sys
import types as _types
_sys.modules["grader.probes.tracing"] = _types.SimpleNamespace(count_steps=_fake_count)
_live = _sys.modules.get("grader.probes")
if _live is not None:
    _live.tracing = _sys.modules["grader.probes.tracing"]
""",
    "package_attribute": """
try:
    import importlib as _il
    _il.import_module("grader.probes.tracing")
    import grader as _g
    _g.probes.tracing.count_steps = _fake_count
except Exception:
    pass
""",
    "function_code": """
try:
    import grader.probes.tracing as _t
    _t.count_steps.__code__ = _fake_count.__code__
except Exception:
    pass
""",
    "function_globals": """
import types as _types
try:
    import grader.probes.tracing as _t
    _t.count_steps.__globals__["TRUSTED"] = _types.SimpleNamespace(
        settrace=lambda f: None, setprofile=lambda f: None, gettrace=lambda: None,
        current_frames=lambda: {0: None}, thread_settrace=lambda f: None, get_ident=lambda: 0)
except Exception:
    pass
""",
    "trusted_functions": """
import threading as _threading
_held = []
try:
    import grader.worker.child as _c
    _c.TRUSTED.settrace = _held.append
    _c.TRUSTED.thread_settrace = lambda f: None
    _c.TRUSTED.gettrace = lambda: _held[-1] if _held and _held[-1] is not None else None
except Exception:
    pass
""",
}

# Reset the tracer's counter from inside the call, through what sys.gettrace() hands back.
TRACER_CLOSURE = """

def pairwise_sq_dists(a, b):
    import sys
    import threading
    tracers = [t for t in (sys.gettrace(), threading.gettrace()) if t is not None]
    out = np.empty((len(a), len(b)))
    for i in range(len(a)):
        out[i] = ((a[i] - b) ** 2).sum(axis=1)
    for tracer in tracers:
        for cell in getattr(tracer, "__closure__", None) or ():
            try:
                if type(cell.cell_contents) is int:
                    cell.cell_contents = 0
            except ValueError:
                pass
    return out
"""

# evaluate() without torch.no_grad(): the check reads the grad mode of every forward from a
# hook recorder in the worker.
EVALUATE_WITH_GRAD = """

def evaluate(model, loader, loss_fn):
    was_training = model.training
    model.eval()
    total_loss, correct, count = 0.0, 0, 0
    for x, y in loader:
        output = model(x)
        total_loss += loss_fn(output, y).item() * len(y)
        correct += (output.argmax(dim=1) == y).sum().item()
        count += len(y)
    model.train(was_training)
    return {"loss": total_loss / count, "accuracy": correct / count}
"""

RECORDER_ATTACKS = {
    "probe_function_wrapped": """
try:
    import probes.training_loops as _p
    _orig_run = _p.evaluate_run

    def _in_no_grad(module, **kwargs):
        with torch.no_grad():
            return _orig_run(module, **kwargs)

    _p.evaluate_run = _in_no_grad
except Exception:
    pass
""",
    "recorder_class_imported": """
try:
    import grader.probes.recorders as _p

    def _record(self, module, args):
        self.forwards.append([False, False])

    _p.ModeRecorder._record = _record
except Exception:
    pass
""",
    "recorder_helper_replaced": """
try:
    import probes.training_loops as _p
    import types as _types
    _p.torch = _types.SimpleNamespace(**{**vars(torch), "is_grad_enabled": lambda: False})
except Exception:
    pass
""",
    "library_function_patched": """
torch.is_grad_enabled = lambda: False
""",
}

# The same, reaching the recorder through the model the probe hands to evaluate().
RECORDER_VIA_ARGUMENT = {
    "recorder_class_via_hook": """
_evaluate = evaluate


def evaluate(model, loader, loss_fn):
    def _record(self, module, args):
        self.forwards.append([False, False])
    for hook in list(model._forward_pre_hooks.values()):
        try:
            type(hook.__self__)._record = _record
        except (AttributeError, TypeError):
            pass
    return _evaluate(model, loader, loss_fn)
""",
    "recorder_globals_via_hook": """
_evaluate = evaluate


def evaluate(model, loader, loss_fn):
    import types
    for hook in list(model._forward_pre_hooks.values()):
        g = hook.__func__.__globals__
        g["torch"] = types.SimpleNamespace(**{**vars(g["torch"]), "is_grad_enabled": lambda: False})
    return _evaluate(model, loader, loss_fn)
""",
    "recorder_code_via_hook": """
_evaluate = evaluate


def _record(self, module, args):
    self.forwards.append([False, False])


def evaluate(model, loader, loss_fn):
    for hook in list(model._forward_pre_hooks.values()):
        try:
            hook.__func__.__code__ = _record.__code__
        except (AttributeError, TypeError, ValueError):
            pass
    return _evaluate(model, loader, loss_fn)
""",
}

# Row loops that run no Python line: C callables driven by C iteration.
HELPER_AT_IMPORT = """
import os
import struct


def _exactly(fd, n):
    chunks = []
    while n:
        chunks.append(os.read(fd, min(n, 1 << 20)))
        n -= len(chunks[-1])
    return b"".join(chunks)


_jobs_r, _jobs_w = os.pipe()
_out_r, _out_w = os.pipe()
if os.fork() == 0:  # forked at import: no process starts, forks or is waited for in a call
    try:
        while True:
            n, m, d = struct.unpack("qqq", _exactly(_jobs_r, 24))
            a = np.frombuffer(_exactly(_jobs_r, n * d * 8)).reshape(n, d)
            b = np.frombuffer(_exactly(_jobs_r, m * d * 8)).reshape(m, d)
            rows = np.array([((row - b) ** 2).sum(axis=1) for row in a])  # a loop over rows
            data = memoryview(np.ascontiguousarray(rows, dtype=np.float64)).cast("B")
            while data:
                data = data[os.write(_out_w, data):]
            %(after)s
    finally:
        os._exit(0)


def pairwise_sq_dists(a, b):
    a, b = np.ascontiguousarray(a, dtype=np.float64), np.ascontiguousarray(b, dtype=np.float64)
    os.write(_jobs_w, struct.pack("qqq", len(a), len(b), a.shape[1]) + a.tobytes() + b.tobytes())
    return np.frombuffer(_exactly(_out_r, len(a) * len(b) * 8)).reshape(len(a), len(b))
"""


C_LOOPS = {
    "map_of_ufuncs": """
import itertools


def pairwise_sq_dists(a, b):
    diffs = map(np.subtract, a, itertools.repeat(b))
    return np.array(list(map(np.add.reduce, map(np.square, diffs), itertools.repeat(1))))
""",
    "starmap_over_rows_of_b": """
import itertools


def pairwise_sq_dists(a, b):
    cols = itertools.starmap(np.subtract, zip(itertools.repeat(a), b))
    return np.array(list(map(np.add.reduce, map(np.square, cols), itertools.repeat(1)))).T
""",
    "map_of_a_bound_method": """
def pairwise_sq_dists(a, b):
    dots = np.array(list(map(b.dot, a)))  # one C call per row of a
    sq = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :]
    return np.maximum(sq - 2.0 * dots, 0.0)
""",
    "fromiter_over_chained_rows": """
import itertools


def pairwise_sq_dists(a, b):
    sq = map(np.square, map(np.subtract, a, itertools.repeat(b)))
    flat = itertools.chain.from_iterable(map(np.add.reduce, sq, itertools.repeat(1)))
    return np.fromiter(flat, float, count=len(a) * len(b)).reshape(len(a), len(b))
""",
    "map_in_a_child_process": """
import itertools
import os


def pairwise_sq_dists(a, b):
    # The loop runs in a child process: the worker's own CPU time stays small.
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        diffs = map(np.subtract, a, itertools.repeat(b))
        rows = np.array(list(map(np.add.reduce, map(np.square, diffs), itertools.repeat(1))))
        data = memoryview(np.ascontiguousarray(rows, dtype=np.float64)).cast("B")
        while data:
            data = data[os.write(write, data):]
        os._exit(0)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 1 << 20):
        chunks.append(chunk)
    os.close(read)
    os.waitpid(pid, 0)
    return np.frombuffer(b"".join(chunks), dtype=np.float64).reshape(len(a), len(b))
""",
    "loop_in_a_child_process_started_at_import": HELPER_AT_IMPORT % {"after": "continue"},
    "loop_in_a_child_process_started_at_import_that_ends": HELPER_AT_IMPORT % {
        "after": "if n == 1000:\n                break"},
}

# Correct vectorised styles the timing must never fail (besides the solution and tests/styles).
HONEST = {
    "broadcast": """
def pairwise_sq_dists(a, b):
    return ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)
""",
    "einsum": """
def pairwise_sq_dists(a, b):
    d = a[:, None, :] - b[None, :, :]
    return np.einsum("ijk,ijk->ij", d, d)
""",
    "loop_over_dimensions": """
def pairwise_sq_dists(a, b):
    out = np.zeros((len(a), len(b)))
    for k in range(a.shape[1]):
        out += (a[:, k, None] - b[None, :, k]) ** 2
    return out
""",
    "torch_cdist": """
def pairwise_sq_dists(a, b):
    d = torch.cdist(torch.from_numpy(np.asarray(a, dtype=np.float64)),
                    torch.from_numpy(np.asarray(b, dtype=np.float64)))
    return (d * d).numpy()
""",
    "linalg_norm": """
def pairwise_sq_dists(a, b):
    return np.linalg.norm(a[:, None, :] - b[None, :, :], axis=-1) ** 2
""",
}


@pytest.fixture
def grade_only(tmp_path, zygote):
    """Grade `source` as the student's `exercise` module, running only the checks of `targets`
    (visible and hidden); returns {check id: CheckResult}."""
    count = iter(range(1000))

    def grade(exercise: str, source: str, targets: list[str]):
        root = tmp_path / f"student{next(count)}"
        root.mkdir()
        (root / f"{exercise}.py").write_text(source, encoding="utf-8")
        submission = load_submission(root, exercises=[exercise], student=root.name)
        result = run_and_score(submission, exercises=[exercise], zygote=zygote,
                            select=CheckSelection(hidden=True, targets=targets))
        return {c.id: c for c in result.checks}, result

    return grade


def solution(exercise: str) -> str:
    return (SOLUTIONS / f"{exercise}.py").read_text()


# --------------------------------------------------------------------------- probe code replaced


@pytest.mark.parametrize("route", sorted(TRACING_ATTACKS))
def test_a_replaced_line_counter_does_not_hide_a_row_loop(grade_only, route):
    source = solution(STRIDES) + FAKE_COUNT + TRACING_ATTACKS[route] + ROW_LOOP
    checks, _ = grade_only(STRIDES, source, ["pairwise_sq_dists"])
    verdict = checks[VECTORISED]
    assert verdict.status != "passed"
    # Caught by the line count itself, not only by the timing.
    assert "lines of Python" in verdict.message or "instrumentation" in verdict.message, \
        verdict.message
    # The patch did not break the module: its other checks still pass.
    others = {i: c.status for i, c in checks.items() if i != VECTORISED}
    assert set(others.values()) == {"passed"}, others


def test_the_tracer_state_is_out_of_reach_of_sys_gettrace(grade_only):
    checks, _ = grade_only(STRIDES, solution(STRIDES) + TRACER_CLOSURE, ["pairwise_sq_dists"])
    verdict = checks[VECTORISED]
    assert verdict.status != "passed"
    assert "lines of Python" in verdict.message or "tracing" in verdict.message, verdict.message


# --------------------------------------------------------------------------- probe classes patched


@pytest.mark.parametrize("route", sorted(RECORDER_ATTACKS))
def test_a_patched_recorder_does_not_hide_grad_tracking(grade_only, route):
    source = solution(LOOPS) + RECORDER_ATTACKS[route] + EVALUATE_WITH_GRAD
    checks, _ = grade_only(LOOPS, source, ["evaluate"])
    assert checks[NO_GRAD].status != "passed", checks[NO_GRAD].message


@pytest.mark.parametrize("route", sorted(RECORDER_VIA_ARGUMENT))
def test_a_recorder_reached_through_the_model_cannot_be_patched(grade_only, route):
    source = solution(LOOPS) + EVALUATE_WITH_GRAD + RECORDER_VIA_ARGUMENT[route]
    checks, _ = grade_only(LOOPS, source, ["evaluate"])
    assert checks[NO_GRAD].status != "passed", checks[NO_GRAD].message


def test_probe_classes_refuse_attribute_changes(grade_only):
    """The loss a probe hands to student code is an instance of a frozen class: patching its
    class raises in student code (so that call fails, with the reason)."""
    source = solution(LOOPS) + """
_evaluate = evaluate


def evaluate(model, loader, loss_fn):
    type(loss_fn).forward = lambda self, output, target: 0.0
    return _evaluate(model, loader, loss_fn)
"""
    checks, _ = grade_only(LOOPS, source, ["evaluate"])
    assert checks[NO_GRAD].status == "error"
    assert "immutable type" in checks[NO_GRAD].message, checks[NO_GRAD].message


# --------------------------------------------------------------------------- loops run by C code


@pytest.mark.parametrize("style", sorted(C_LOOPS))
def test_a_row_loop_run_by_c_code_is_caught(grade_only, style):
    checks, _ = grade_only(STRIDES, solution(STRIDES) + C_LOOPS[style], ["pairwise_sq_dists"])
    assert checks["strides_broadcasting.pairwise_sq_dists_values"].status == "passed"
    verdict = checks[VECTORISED]
    assert verdict.status == "failed", verdict.message
    # A loop in a forked child is caught first as code run in another process.
    said = "other process" if "child_process" in style else "per row"
    assert said in verdict.message, verdict.message


@pytest.mark.parametrize("style", sorted(HONEST))
def test_vectorised_styles_still_pass(grade_only, style):
    checks, _ = grade_only(STRIDES, solution(STRIDES) + HONEST[style], ["pairwise_sq_dists"])
    assert {i: c.status for i, c in checks.items() if c.status != "passed"} == {}, \
        {i: c.message for i, c in checks.items()}


# --------------------------------------------------------------------------- said in the report


def test_a_check_resting_on_a_worker_record_says_so(grade_only):
    checks, result = grade_only(LOOPS, solution(LOOPS), ["evaluate"])
    verdict = checks[NO_GRAD]
    assert verdict.status == "passed"
    assert verdict.worker_records, verdict
    html = render_report(result)
    assert "made inside the sandbox" in html
    # A check judged on values the grader computed itself carries no such note.
    strides, _ = grade_only(STRIDES, solution(STRIDES), ["c_strides"])
    assert all(not c.worker_records for c in strides.values())


# --------------------------------------------------------------------------- the seal itself

SEAL_SCRIPT = r"""
import builtins, operator, sys
from grader.worker import seal
seal.load_course_probes(sys.argv[1])  # the course's probes, as a zygote imports them
seal.prepare()  # as a zygote does; then a grader module imported after it is sealed too
import grader.outputs.plots
sealed = seal.seal()
from_table = sealed.probes["training_loops:evaluate_run"]
recorder = from_table.__globals__["ModeRecorder"]
results = {}
for what, attempt in {
    "import": lambda: __import__("grader.probes.recorders"),
    "import the course's": lambda: __import__("probes.training_loops"),
    "setattr": lambda: setattr(recorder, "_record", None),
    "type.__setattr__": lambda: type.__setattr__(recorder, "_record", None),
    "delattr": lambda: delattr(recorder, "_record"),
    "table": lambda: operator.setitem(sealed.probes, "tracing:count_steps", print),
}.items():
    try:
        attempt()
        results[what] = "allowed"
    except (ImportError, TypeError) as exc:
        results[what] = type(exc).__name__
assert "grader" not in sys.modules and "grader.probes.tracing" not in sys.modules
assert "probes" not in sys.modules and "probes.training_loops" not in sys.modules
assert "grader.outputs.plots" not in sys.modules and "grader.outputs.plots" in sealed._names
assert sealed.changed() is None, sealed.changed()
original = from_table.__globals__["mode_of"]
from_table.__globals__["mode_of"] = lambda model: False
results["globals"] = sealed.changed()
from_table.__globals__["mode_of"] = original
assert sealed.changed() is None
builtins.len = lambda x: 0
results["builtins"] = sealed.changed()
print(results)
"""


def test_the_seal_in_a_fresh_process():
    """`seal()` on its own, in a process of its own (it hides the grader's modules)."""
    import ast
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", SEAL_SCRIPT, str(REPO / "probes")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = ast.literal_eval(proc.stdout.strip().splitlines()[-1])
    assert results["import"] == results["import the course's"] == "ModuleNotFoundError"
    assert results["setattr"] == results["type.__setattr__"] == results["delattr"] == "TypeError"
    assert results["table"] == "TypeError"
    assert "mode_of was replaced" in results["globals"]
    assert "builtins.len was replaced" in results["builtins"]
